// RoiAlign over X [N, C, H, W]: one thread per output element
// (roi, c, ph, pw) of Y [R, C, OH, OW], following the runtime's CPU
// reference in f64: the region (x1, y1, x2, y2) of `rois`, scaled by
// spatial_scale and shifted by HALF_PIXEL's half pixel (else at least one
// pixel wide), is split into OH x OW bins, each sampled on a gh x gw grid
// (SAMPLING_RATIO, or ceil(bin size) when it is 0), every sample bilinear
// with the CPU's border rules (more than a pixel outside: zero; below 0:
// clamped to 0; at the last pixel: that pixel); MAX takes the largest
// weighted neighbour of any sample, else the mean. A batch index outside
// [0, N) or a region needing more than 2^24 samples traps, so the launch
// fails as the CPU op fails. Products use __dmul_rn (no contraction).
//
// Defines: T (x, rois, y: float or f16), TI (batch indices: int or long
// long), MAX, HALF_PIXEL.

// The taps along one axis of `len` for coordinate v (v in [-1, len]).
__device__ __forceinline__ void trtc_roi_axis(double v, long long len, long long* lo, long long* hi, double* frac) {
    v = v < 0.0 ? 0.0 : v;
    const long long low = (long long)v;
    if (low >= len - 1) {
        *lo = len - 1;
        *hi = len - 1;
        *frac = 0.0;
    } else {
        *lo = low;
        *hi = low + 1;
        *frac = v - (double)low;
    }
}

extern "C" __global__ void trtc_pool_roi_align(T* __restrict__ y, const T* __restrict__ x, const T* __restrict__ rois,
                                               const TI* __restrict__ batch, long long total, long long n,
                                               long long channels, long long h, long long w, long long oh, long long ow,
                                               long long sampling_ratio, long long scale_bits) {
    const double spatial_scale = __longlong_as_double(scale_bits);
    const double neg_inf = __longlong_as_double((long long)0xfff0000000000000ULL);
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
        const long long pw = i % ow;
        const long long ph = (i / ow) % oh;
        const long long c = (i / (ow * oh)) % channels;
        const long long r = i / (ow * oh * channels);
        const long long b = (long long)batch[r];
        if (b < 0 || b >= n) __trap();
        const double offset = HALF_PIXEL ? 0.5 : 0.0;
        const T* roi = rois + r * 4;
        const double x1 = __dmul_rn((double)ld(roi), spatial_scale) - offset;
        const double y1 = __dmul_rn((double)ld(roi + 1), spatial_scale) - offset;
        double rw = __dmul_rn((double)ld(roi + 2), spatial_scale) - offset - x1;
        double rh = __dmul_rn((double)ld(roi + 3), spatial_scale) - offset - y1;
        if (!HALF_PIXEL) {
            rw = fmax(rw, 1.0);
            rh = fmax(rh, 1.0);
        }
        const double bin_h = rh / (double)oh, bin_w = rw / (double)ow;
        long long gh, gw;
        if (sampling_ratio > 0) {
            gh = sampling_ratio;
            gw = sampling_ratio;
        } else {
            const double qh = rh / (double)oh, qw = rw / (double)ow;
            gh = (isfinite(qh) && qh > 0.0) ? (long long)fmin(ceil(qh), 4096.0) : 0;
            gw = (isfinite(qw) && qw > 0.0) ? (long long)fmin(ceil(qw), 4096.0) : 0;
        }
        if ((double)oh * (double)ow * (double)gh * (double)gw > 16777216.0) __trap();
        const double count = (double)(gh * gw > 1 ? gh * gw : 1);
        const T* src = x + (b * channels + c) * h * w;
        double acc = MAX ? neg_inf : 0.0;
        for (long long iy = 0; iy < gh; ++iy) {
            const double sy = y1 + __dmul_rn((double)ph, bin_h) + __dmul_rn((double)iy + 0.5, bin_h) / (double)gh;
            for (long long ix = 0; ix < gw; ++ix) {
                const double sx = x1 + __dmul_rn((double)pw, bin_w) + __dmul_rn((double)ix + 0.5, bin_w) / (double)gw;
                double wts[4] = {0.0, 0.0, 0.0, 0.0};
                long long offs[4] = {0, 0, 0, 0};
                if (!(sy < -1.0 || sy > (double)h || sx < -1.0 || sx > (double)w)) {
                    long long y0, y1i, x0, x1i;
                    double ly, lx;
                    trtc_roi_axis(sy, h, &y0, &y1i, &ly);
                    trtc_roi_axis(sx, w, &x0, &x1i, &lx);
                    const double hy = 1.0 - ly, hx = 1.0 - lx;
                    wts[0] = __dmul_rn(hy, hx);
                    wts[1] = __dmul_rn(hy, lx);
                    wts[2] = __dmul_rn(ly, hx);
                    wts[3] = __dmul_rn(ly, lx);
                    offs[0] = y0 * w + x0;
                    offs[1] = y0 * w + x1i;
                    offs[2] = y1i * w + x0;
                    offs[3] = y1i * w + x1i;
                }
                double s = MAX ? neg_inf : 0.0;
                for (int k = 0; k < 4; ++k) {
                    const double v = wts[k] == 0.0 ? 0.0 : __dmul_rn(wts[k], (double)ld(src + offs[k]));
                    s = MAX ? fmax(s, v) : s + v;
                }
                acc = MAX ? fmax(acc, s) : acc + s;
            }
        }
        double out = MAX ? acc : acc / count;
        if (gh * gw == 0) out = 0.0;
        st(y + i, (float)out);
    }
}
