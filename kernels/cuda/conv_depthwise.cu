// Depthwise convolution (group == C; M = C * mult output channels, output
// channel m reads input channel m / mult) as a direct loop over NCDHW data:
//   out[img, m, o] = bias[m] + sum over taps of w[m, tap] * x[img, m / mult, window(o, tap)]
// Memory-bound: each thread computes OPT consecutive outputs of one output
// row, so neighbouring taps reuse what the L1 cache holds.
//
// Float layers accumulate like the CPU reference, bit for bit: start from the
// bias (or 0), then add each in-bounds tap in order (kz, ky, kx), a rounded
// product then a rounded sum (no FMA), skipping taps that fall in padding.
// Int8 layers accumulate exactly in int32 and go through the int8 epilogue.
//
// Defines (besides those of conv_common.cuh): OPT outputs per thread, BLOCK
// threads per block, CONV3D (else the depth axis is compiled out), IDX64
// (64-bit work indices; otherwise they are unsigned 32-bit, which keeps the
// per-item index arithmetic cheap).

#if IDX64
typedef unsigned long long work_t;
#else
typedef unsigned work_t;
#endif

// At most 64 registers (1024 / BLOCK blocks of BLOCK threads resident):
// without a minimum, ptxas aims lower and spills.
extern "C" __global__ void __launch_bounds__(BLOCK, 1024 / BLOCK)
trtc_conv_depthwise(const XT* __restrict__ x, const XT* __restrict__ w, const BT* __restrict__ bias,
                    const RT* __restrict__ residual, const float* __restrict__ wscale, OT* __restrict__ out,
                    int has_bias, int has_res, float x_scale, float out_scale, int N, int C, int D_, int H, int W,
                    int M, int OD_, int OH, int OW, int KD_, int KH, int KW, int sd_, int sh, int sw, int pd_, int ph,
                    int pw, int dd_, int dh, int dw, long long total) {
#if CONV3D
    const int D = D_, OD = OD_, KD = KD_, sd = sd_, pd = pd_, dd = dd_;
#else
    const int D = 1, OD = 1, KD = 1, sd = 1, pd = 0, dd = 1;
#endif
    const int mult = M / C;
    const int chunks = (OW + OPT - 1) / OPT;
    const long long in_plane = (long long)D * H * W;
    const long long out_plane = (long long)OD * OH * OW;
    for (work_t i = (work_t)blockIdx.x * BLOCK + threadIdx.x; i < (work_t)total; i += (work_t)gridDim.x * BLOCK) {
        work_t r = i;
        const int chunk = (int)(r % (unsigned)chunks);
        r /= (unsigned)chunks;
        const int oy = (int)(r % (unsigned)OH);
        r /= (unsigned)OH;
        const int oz = (int)(r % (unsigned)OD);
        r /= (unsigned)OD;
        const int m = (int)(r % (unsigned)M);
        const long long img = (long long)(r / (unsigned)M);
        const XT* xp = x + (img * C + m / mult) * in_plane;
        const XT* wp = w + (long long)m * KD * KH * KW;
        const int ox0 = chunk * OPT;
        acc_t acc[OPT];
#pragma unroll
        for (int o = 0; o < OPT; ++o) {
#if QUANT
            acc[o] = 0;
#else
            acc[o] = has_bias ? ld(bias + m) : 0.0f;
#endif
        }
        for (int kz = 0; kz < KD; ++kz) {
            const int iz = oz * sd - pd + kz * dd;
            if ((unsigned)iz >= (unsigned)D) continue;
            for (int ky = 0; ky < KH; ++ky) {
                const int iy = oy * sh - ph + ky * dh;
                if ((unsigned)iy >= (unsigned)H) continue;
                const XT* row = xp + ((long long)iz * H + iy) * W;
                for (int kx = 0; kx < KW; ++kx) {
                    const acc_t wv = conv_ld(wp + (kz * KH + ky) * KW + kx);
#pragma unroll
                    for (int o = 0; o < OPT; ++o) {
                        const int ix = (ox0 + o) * sw - pw + kx * dw;
                        if (ox0 + o < OW && (unsigned)ix < (unsigned)W) {
#if ACC_INT
                            acc[o] += wv * conv_ld(row + ix);
#else
                            acc[o] = __fadd_rn(acc[o], __fmul_rn(wv, conv_ld(row + ix)));
#endif
                        }
                    }
                }
            }
        }
        const long long obase = (img * M + m) * out_plane + ((long long)oz * OH + oy) * OW;
#pragma unroll
        for (int o = 0; o < OPT; ++o) {
            if (ox0 + o >= OW) continue;
#if QUANT
            const float v = conv_product(acc[o], m, bias, has_bias, wscale, x_scale);
#else
            const float v = acc[o];
#endif
            conv_finish(out, residual, has_res, obase + ox0 + o, v, out_scale);
        }
    }
}
