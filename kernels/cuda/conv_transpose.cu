// Transposed convolution in gather form over NCDHW data, one output element
// per thread (grid-stride):
//   out[img, m, o] = bias[m] + sum over taps and the group's input channels c
//                    of x[img, c, i] * w[c, m % Mg, tap]
// where o = i * stride + tap * dilation - pad_begin along every axis, i.e.
// i = (o + pad_begin - tap * dilation) / stride when that divides exactly
// and lands inside the input. Accumulates in f32 (FMA); loads widen and the
// store rounds once, so f16 storage computes in f32 like the CPU's HalfIo.
//
// Defines: XT, BT, OT storage types of x and w, bias, output; BLOCK threads
// per block; CONV3D (else the depth axis is compiled out); IDX64 (64-bit
// output indices; otherwise unsigned 32-bit, cheaper to decompose).

#if IDX64
typedef unsigned long long work_t;
#else
typedef unsigned work_t;
#endif

// At most 128 registers (512 / BLOCK blocks of BLOCK threads resident):
// without a minimum, ptxas aims lower and spills.
extern "C" __global__ void __launch_bounds__(BLOCK, 512 / BLOCK)
trtc_conv_transpose(const XT* __restrict__ x, const XT* __restrict__ w, const BT* __restrict__ bias,
                    OT* __restrict__ out, int has_bias, int N, int C, int D_, int H, int W, int M, int OD_, int OH,
                    int OW, int KD_, int KH, int KW, int sd_, int sh, int sw, int pd_, int ph, int pw, int dd_, int dh,
                    int dw, int groups, long long total) {
#if CONV3D
    const int D = D_, OD = OD_, KD = KD_, sd = sd_, pd = pd_, dd = dd_;
#else
    const int D = 1, OD = 1, KD = 1, sd = 1, pd = 0, dd = 1;
#endif
    const int Cg = C / groups, Mg = M / groups;
    const int KK = KD * KH * KW;
    const long long in_plane = (long long)D * H * W;
    const long long w_channel = (long long)Mg * KK;
    for (work_t i = (work_t)blockIdx.x * BLOCK + threadIdx.x; i < (work_t)total; i += (work_t)gridDim.x * BLOCK) {
        work_t r = i;
        const int ox = (int)(r % (unsigned)OW);
        r /= (unsigned)OW;
        const int oy = (int)(r % (unsigned)OH);
        r /= (unsigned)OH;
        const int oz = (int)(r % (unsigned)OD);
        r /= (unsigned)OD;
        const int m = (int)(r % (unsigned)M);
        const long long img = (long long)(r / (unsigned)M);
        const int grp = m / Mg;
        const XT* xg = x + (img * C + (long long)grp * Cg) * in_plane;
        const XT* wg = w + ((long long)grp * Cg * Mg + (m - grp * Mg)) * KK;
        float acc = 0.0f;
        for (int kz = 0; kz < KD; ++kz) {
            const int nz = oz + pd - kz * dd;
            if (nz < 0 || nz % sd != 0 || nz / sd >= D) continue;
            for (int ky = 0; ky < KH; ++ky) {
                const int ny = oy + ph - ky * dh;
                if (ny < 0 || ny % sh != 0 || ny / sh >= H) continue;
                for (int kx = 0; kx < KW; ++kx) {
                    const int nx = ox + pw - kx * dw;
                    if (nx < 0 || nx % sw != 0 || nx / sw >= W) continue;
                    const XT* xp = xg + ((long long)(nz / sd) * H + ny / sh) * W + nx / sw;
                    const XT* wp = wg + (kz * KH + ky) * KW + kx;
                    for (int c = 0; c < Cg; ++c) acc = fmaf(ld(xp + c * in_plane), ld(wp + c * w_channel), acc);
                }
            }
        }
        if (has_bias) acc = __fadd_rn(acc, ld(bias + m));
        st(out + i, acc);
    }
}
