// DeformConv (2-D): one thread per output element (n, m, oy, ox) of
// Y [N, M, OH, OW] sums, over its group's input channels and the kernel
// taps, weight x mask x X sampled bilinearly at the tap's position plus its
// learned offset (corners outside the image read zero), in f64, plus the
// bias; rounded once to T (f32 or f16). As the CPU reference: offset
// channel ((g_off * KH + ky) * KW + kx) * 2 holds dy, the next dx; mask
// channel (g_off * KH + ky) * KW + kx.
//
// Defines: T; BIAS_ARG and MASK_ARG, whether the kernel takes those
// pointers (the layer has that many inputs); HAS_BIAS and HAS_MASK, whether
// they are given.

__device__ __forceinline__ double trtc_deform_sample(const T* plane, long long h, long long w, double y, double x) {
    const double y0 = floor(y), x0 = floor(x);
    const double ly = y - y0, lx = x - x0;
    double v = 0.0;
    for (int a = 0; a < 2; ++a) {
        const double yy = y0 + (double)a;
        if (!(yy >= 0.0 && yy < (double)h)) continue;
        const double wy = a == 0 ? 1.0 - ly : ly;
        for (int c = 0; c < 2; ++c) {
            const double xx = x0 + (double)c;
            if (!(xx >= 0.0 && xx < (double)w)) continue;
            const double wx = c == 0 ? 1.0 - lx : lx;
            v += __dmul_rn(__dmul_rn(wy, wx), (double)ld(plane + (long long)yy * w + (long long)xx));
        }
    }
    return v;
}

extern "C" __global__ void trtc_conv_deform(T* __restrict__ y, const T* __restrict__ x, const T* __restrict__ weight,
                                           const T* __restrict__ offset,
#if BIAS_ARG
                                           const T* __restrict__ bias,
#endif
#if MASK_ARG
                                           const T* __restrict__ mask,
#endif
                                           long long total, long long channels,
                                           long long h, long long w, long long m_out, long long oh, long long ow,
                                           long long kh, long long kw, long long sy, long long sx, long long dy,
                                           long long dx, long long top, long long left, long long groups,
                                           long long offset_groups) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        const long long ox = i % ow;
        const long long oy = (i / ow) % oh;
        const long long m = (i / (ow * oh)) % m_out;
        const long long n = i / (ow * oh * m_out);
        const long long cg = channels / groups, mg = m_out / groups;
        const long long grp = m / mg;
        const long long per_offset_group = channels / offset_groups;
        const long long taps = kh * kw, positions = oh * ow, p = oy * ow + ox;
        double acc = 0.0;
        for (long long ci = 0; ci < cg; ++ci) {
            const long long c = grp * cg + ci;
            const long long og = c / per_offset_group;
            const T* plane = x + (n * channels + c) * h * w;
            const T* offs = offset + (n * offset_groups + og) * 2 * taps * positions;
            for (long long ky = 0; ky < kh; ++ky) {
                for (long long kx = 0; kx < kw; ++kx) {
                    const long long tap = ky * kw + kx;
                    const double at_y = (double)(oy * sy - top + ky * dy) + (double)ld(offs + 2 * tap * positions + p);
                    const double at_x = (double)(ox * sx - left + kx * dx) + (double)ld(offs + (2 * tap + 1) * positions + p);
                    double v = trtc_deform_sample(plane, h, w, at_y, at_x);
#if HAS_MASK
                    v = __dmul_rn(v, (double)ld(mask + ((n * offset_groups + og) * taps + tap) * positions + p));
#endif
                    acc += __dmul_rn((double)ld(weight + (m * cg + ci) * taps + tap), v);
                }
            }
        }
#if HAS_BIAS
        acc += (double)ld(bias + m);
#endif
        st(y + i, (float)acc);
    }
}
