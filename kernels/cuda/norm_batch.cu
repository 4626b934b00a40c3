// BatchNormalization (inference) over [N, C, spatial]: per channel
// a = scale / sqrt(var + eps), b = bias - mean * a, y = x * a + b. Planes
// (one (n, c) pair each) go along grid y, their elements along x.
//
// Defines: TX (x, y), TS, TB, TM, TV (scale, bias, mean, var).

extern "C" __global__ void trtc_norm_batch(const TX* __restrict__ x, const TS* __restrict__ scale,
                                           const TB* __restrict__ bias, const TM* __restrict__ mean,
                                           const TV* __restrict__ var, TX* __restrict__ y, long long planes,
                                           int channels, long long spatial, float eps) {
    for (long long plane = blockIdx.y; plane < planes; plane += gridDim.y) {
        const int c = (int)(plane % channels);
        const float a = ld(scale + c) / sqrtf(ld(var + c) + eps);
        const float b = ld(bias + c) - ld(mean + c) * a;
        const TX* xp = x + plane * spatial;
        TX* yp = y + plane * spatial;
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < spatial; i += (long long)gridDim.x * blockDim.x)
            st(yp + i, ld(xp + i) * a + b);
    }
}
