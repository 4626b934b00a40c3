// LRN across channels of [N, C, spatial]: y = x / (bias + k * sum x'^2)^beta
// with k = alpha / size and x' over channels [c - before, c + after]
// clipped to [0, C). One element per thread, grid-stride loop.
//
// Defines: TX (x, y).

extern "C" __global__ void trtc_norm_lrn(const TX* __restrict__ x, TX* __restrict__ y, long long total, int channels,
                                         long long spatial, int before, int after, float k, float bias, float beta) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        const int c = (int)((i / spatial) % channels);
        const long long channel0 = i - (long long)c * spatial;
        const int lo = c - before < 0 ? 0 : c - before;
        const int hi = c + after + 1 < channels ? c + after + 1 : channels;
        float s = 0.0f;
        for (int w = lo; w < hi; ++w) {
            const float v = ld(x + channel0 + (long long)w * spatial);
            s += v * v;
        }
        st(y + i, ld(x + i) / powf(bias + k * s, beta));
    }
}
