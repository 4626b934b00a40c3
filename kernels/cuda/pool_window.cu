// MaxPool, AveragePool and LpPool over [N, C, D, H, W] (1-D and 2-D pools
// are given leading spatial dims of size 1, which change no index), one
// output element per thread, grid-stride loop. Taps are visited in the CPU
// op's order (row-major over the kernel window):
//   Max: the first tap inside the input always wins when it is the window's
//     first tap, later ones only when strictly greater; -inf when no tap is
//     inside. With INDICES, also the flat input index of the maximum
//     (row-major within the plane, or column-major with COLMAJOR) plus the
//     plane's offset.
//   Average: sum over taps inside the input, divided by the number of taps
//     inside the input (include_pad 0) or inside the padded input
//     (include_pad 1), at least 1.
//   Lp: (sum |x|^p)^(1/p) over taps inside the input.
//
// Defines: TX (x, y: float, f16, or for Max signed/unsigned char), KIND
// (POOL_MAX, POOL_AVG, POOL_LP), INDICES, COLMAJOR.

#define POOL_MAX 0
#define POOL_AVG 1
#define POOL_LP 2

__device__ __forceinline__ float pool_ld(const float* p) { return ld(p); }
__device__ __forceinline__ float pool_ld(const f16* p) { return ld(p); }
__device__ __forceinline__ float pool_ld(const signed char* p) { return (float)*p; }
__device__ __forceinline__ float pool_ld(const unsigned char* p) { return (float)*p; }
__device__ __forceinline__ void pool_st(float* p, float v) { st(p, v); }
__device__ __forceinline__ void pool_st(f16* p, float v) { st(p, v); }
// Saturating like Rust's `as` (only -inf, from a window with no tap inside,
// is ever out of range).
__device__ __forceinline__ void pool_st(signed char* p, float v) {
    *p = (signed char)(v != v ? 0.0f : fminf(fmaxf(v, -128.0f), 127.0f));
}
__device__ __forceinline__ void pool_st(unsigned char* p, float v) {
    *p = (unsigned char)(v != v ? 0.0f : fminf(fmaxf(v, 0.0f), 255.0f));
}

extern "C" __global__ void trtc_pool_window(const TX* __restrict__ x, TX* __restrict__ y,
#if INDICES
                                            long long* __restrict__ indices,
#endif
                                            long long total, int id, int ih, int iw, int od, int oh, int ow, int kd,
                                            int kh, int kw, int sd, int sh, int sw, int pd, int ph, int pw, int dd,
                                            int dh, int dw, int ped, int peh, int pew, int include_pad, float p) {
    const long long in_plane = (long long)id * ih * iw;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        const int ox = (int)(i % ow);
        long long t = i / ow;
        const int oy = (int)(t % oh);
        t /= oh;
        const int oz = (int)(t % od);
        const long long plane = t / od;
        const TX* xp = x + plane * in_plane;
#if KIND == POOL_MAX
        float best = -__int_as_float(0x7f800000);
        int arg = 0;
#else
        float acc = 0.0f;
        int count = 0;
#endif
        for (int kz = 0; kz < kd; ++kz) {
            const int z = oz * sd + kz * dd - pd;
            const bool zin = z >= 0 && z < id;
#if KIND == POOL_AVG
            const bool zc = include_pad ? (z >= -pd && z < id + ped) : zin;
#endif
            for (int ky = 0; ky < kh; ++ky) {
                const int yy = oy * sh + ky * dh - ph;
                const bool yin = yy >= 0 && yy < ih;
#if KIND == POOL_AVG
                const bool yc = include_pad ? (yy >= -ph && yy < ih + peh) : yin;
#endif
                for (int kx = 0; kx < kw; ++kx) {
                    const int xx = ox * sw + kx * dw - pw;
                    const bool xin = xx >= 0 && xx < iw;
#if KIND == POOL_AVG
                    const bool xc = include_pad ? (xx >= -pw && xx < iw + pew) : xin;
                    if (zc && yc && xc) ++count;
#endif
                    if (!(zin && yin && xin)) continue;
                    const int at = (z * ih + yy) * iw + xx;
                    const float v = pool_ld(xp + at);
#if KIND == POOL_MAX
                    if ((kz == 0 && ky == 0 && kx == 0) || v > best) {
                        best = v;
                        arg = at;
                    }
#elif KIND == POOL_AVG
                    acc += v;
#else
                    acc += p == 2.0f ? v * v : (p == 1.0f ? fabsf(v) : powf(fabsf(v), p));
#endif
                }
            }
        }
#if KIND == POOL_MAX
        pool_st(y + i, best);
#if INDICES
#if COLMAJOR
        const int az = arg / (ih * iw), ay = (arg / iw) % ih, ax = arg % iw;
        arg = (ax * ih + ay) * id + az;
#endif
        indices[i] = plane * in_plane + arg;
#endif
#elif KIND == POOL_AVG
        pool_st(y + i, acc / (float)(count > 0 ? count : 1));
#else
        pool_st(y + i, p == 2.0f ? sqrtf(acc) : (p == 1.0f ? acc : powf(acc, 1.0f / p)));
#endif
    }
}
