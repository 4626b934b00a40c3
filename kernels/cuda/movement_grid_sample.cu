// GridSample on 2-D images, nearest (MODE 0) or linear (MODE 1), following
// the runtime's CPU reference: each output element (n, c, oy, ox) reads its
// grid point (x, y) in [-1, 1], maps each coordinate to pixel space
// (ALIGN: -1 and 1 are the border pixels' centres, else their outer edges),
// rounds it half to even (nearest), folds it back inside when it lies out
// of range (PADDING 0 zeros: no folding; 1 border: clamped; 2 reflection:
// reflected at the edges), and reads the pixels around it, a pixel outside
// the image reading 0 (zeros), the nearest border pixel (border) or its
// reflection inside (reflection). Arithmetic is f64, products with
// __dmul_rn so that none is contracted into a multiply-add, and taps are
// summed in the CPU's order (row above first, left pixel first); the
// result is rounded once to the storage type T (f32 or f16, through ld/st).

__device__ __forceinline__ double trtc_gs_denormalize(double v, long long len) {
    const double l = (double)len;
#if ALIGN
    return __dmul_rn((v + 1.0) / 2.0, l - 1.0);
#else
    return (__dmul_rn(v + 1.0, l) - 1.0) / 2.0;
#endif
}

__device__ __forceinline__ void trtc_gs_bounds(long long len, double* lo, double* hi) {
#if ALIGN
    *lo = 0.0;
    *hi = (double)len - 1.0;
#else
    *lo = -0.5;
    *hi = (double)len - 0.5;
#endif
}

// Folds x into [lo, hi] by reflecting at the edges, as the CPU's `reflect`.
__device__ __forceinline__ double trtc_gs_reflect(double x, double lo, double hi) {
    const double range = hi - lo;
    if (range <= 0.0) return lo;
    double d, from, to, sign;
    if (x < lo) {
        d = lo - x; from = lo; to = hi; sign = 1.0;
    } else if (x > hi) {
        d = x - hi; from = hi; to = lo; sign = -1.0;
    } else {
        return x;
    }
    const double n = trunc(d / range);
    const double r = d - __dmul_rn(n, range);
    return fmod(n, 2.0) == 0.0 ? from + __dmul_rn(sign, r) : to - __dmul_rn(sign, r);
}

// A pixel index under the padding mode; -1 reads zero.
__device__ __forceinline__ long long trtc_gs_pixel(long long i, long long len) {
    const long long last = len - 1;
#if PADDING == 0
    return (i >= 0 && i <= last) ? i : -1;
#elif PADDING == 1
    return i < 0 ? 0 : (i > last ? last : i);
#else
    double lo, hi;
    trtc_gs_bounds(len, &lo, &hi);
    const long long r = trtc_f2i<long long>(trtc_gs_reflect((double)i, lo, hi));
    return r < 0 ? 0 : (r > last ? last : r);
#endif
}

// The taps of one axis: pixel indices (-1: zero) and weights; returns how
// many (0 when the coordinate is not finite).
__device__ __forceinline__ int trtc_gs_taps(double v, long long len, long long* idx, double* w) {
    double x = trtc_gs_denormalize(v, len);
#if MODE == 0
    x = rint(x);
#endif
    double lo, hi;
    trtc_gs_bounds(len, &lo, &hi);
    if (x < lo || x > hi) {
#if PADDING == 1
        x = fmin(fmax(x, 0.0), (double)len - 1.0);
#elif PADDING == 2
        x = trtc_gs_reflect(x, lo, hi);
#endif
    }
    if (!isfinite(x)) return 0;
#if MODE == 0
    idx[0] = trtc_gs_pixel(trtc_f2i<long long>(x), len);
    w[0] = 1.0;
    return 1;
#else
    const double x0 = floor(x);
    const double t = x - x0;
    const long long i0 = trtc_f2i<long long>(x0);
    idx[0] = trtc_gs_pixel(i0, len);
    idx[1] = trtc_gs_pixel(i0 == 9223372036854775807LL ? i0 : i0 + 1, len);
    w[0] = 1.0 - t;
    w[1] = t;
    return 2;
#endif
}

// out [N, C, HO, WO], x [N, C, H, W], grid [N, HO, WO, 2] (x first).
extern "C" __global__ void trtc_movement_grid_sample(T* __restrict__ out, const T* __restrict__ x,
                                                     const T* __restrict__ grid, long long n_, long long channels,
                                                     long long h, long long w, long long ho, long long wo) {
    const IDX n = (IDX)n_;
    TRTC_FOR_EACH(i, n) {
        const IDX positions = (IDX)(ho * wo);
        const IDX p = i % positions;
        const IDX plane = i / positions;  // n * C + c
        const IDX b = plane / (IDX)channels;
        const T* g = grid + ((size_t)b * positions + p) * 2;
        long long iy[2], ix[2];
        double wy[2], wx[2];
        const int ny = trtc_gs_taps((double)ld(g + 1), h, iy, wy);
        const int nx = trtc_gs_taps((double)ld(g), w, ix, wx);
        const T* src = x + (size_t)plane * (size_t)(h * w);
        double v = 0.0;
        for (int a = 0; a < ny; ++a) {
            for (int c = 0; c < nx; ++c) {
                const double weight = __dmul_rn(__dmul_rn(1.0, wy[a]), wx[c]);
                if (iy[a] >= 0 && ix[c] >= 0) {
                    v += __dmul_rn(weight, (double)ld(src + iy[a] * w + ix[c]));
                }
            }
        }
        st(out + i, (float)v);
    }
}
