// Resize in nearest (LINEAR 0) or linear (LINEAR 1) mode, following the
// runtime's CPU reference (itself the ONNX reference): per axis, the output
// coordinate maps to a source coordinate in f64 by the coordinate
// transformation mode COORD, and
//   nearest: the source pixel is picked by NEAREST (the CPU's rule: an
//            integral coordinate picks itself);
//   linear:  the value is the nested 1-D interpolation over every axis, the
//            last axis innermost, in f64 with the same operation order as the
//            CPU's separable passes, then converted to the storage type once.
// Products use __dmul_rn so that no multiply-add is contracted: the f64
// coordinates and weights are then bit-identical to the CPU's.
//
// COORD: 0 half_pixel, 1 half_pixel_symmetric, 2 pytorch_half_pixel,
// 3 align_corners, 4 asymmetric, 5 tf_crop_and_resize.
// NEAREST: 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil.
// EXCLUDE_OUTSIDE (linear): zero the weights of taps outside the input and
// renormalize. For linear mode the builder also defines T (the storage C
// type), LOAD(p) (its value as a double) and STORE(p, v) (v to storage).
//
// Per axis d: in<d> and out<d> the input and output sizes, sc<d> the scale
// (f64 bits), rs<d>/re<d> the region of interest (f64 bits, crop mode only),
// st<d> the input's stride. fill_bits: the extrapolation value in the
// storage type (nearest) or as f64 bits (linear).

__device__ __forceinline__ double trtc_f64(long long bits) { return __longlong_as_double(bits); }

// The source coordinate of output coordinate o; false when it is outside the
// crop region (tf_crop_and_resize), where the output is the fill value.
__device__ __forceinline__ bool trtc_source_coord(long long o, long long in_len, long long out_len, double scale,
                                                  double roi_s, double roi_e, double* x_out) {
    const double x = (double)o, in_w = (double)in_len;
    const double out_w = __dmul_rn(scale, in_w);
    double v;
#if COORD == 0
    v = (x + 0.5) / scale - 0.5;
#elif COORD == 1
    const double adjustment = (double)out_len / out_w;
    const double offset = __dmul_rn(in_w / 2.0, 1.0 - adjustment);
    v = offset + (x + 0.5) / scale - 0.5;
#elif COORD == 2
    v = out_w == 1.0 ? -0.5 : (x + 0.5) / scale - 0.5;
#elif COORD == 3
    v = out_w == 1.0 ? 0.0 : __dmul_rn(x, in_w - 1.0) / (out_w - 1.0);
#elif COORD == 4
    v = x / scale;
#else
    const double span = out_w == 1.0 ? __dmul_rn(roi_e - roi_s, in_w - 1.0) / 2.0
                                     : __dmul_rn(__dmul_rn(x, roi_e - roi_s), in_w - 1.0) / (out_w - 1.0);
    v = span + __dmul_rn(roi_s, in_w - 1.0);
    if (v < 0.0 || v > in_w - 1.0) return false;
#endif
    *x_out = v;
    return true;
}

// The base pixel (left of x) and the distance from it, in (0, 1].
__device__ __forceinline__ void trtc_base(double x, long long* base, double* ratio) {
    const double fl = floor(x);
    if (x == fl) {
        *base = trtc_f2i<long long>(fl) - 1;
        *ratio = 1.0;
    } else {
        *base = trtc_f2i<long long>(fl);
        *ratio = x - fl;
    }
}

__device__ __forceinline__ long long trtc_clamp_index(long long i, long long last) {
    const long long hi = last > 0 ? last : 0;
    return i < 0 ? 0 : (i > hi ? hi : i);
}

#define TRTC_RESIZE_DIM_PARAMS(d) long long in##d, long long out##d, long long sc##d, long long rs##d, long long re##d, long long st##d
#define TRTC_RESIZE_DIMS                                                                                          \
    const long long in_len[8] = {in0, in1, in2, in3, in4, in5, in6, in7};                                        \
    const long long out_len[8] = {out0, out1, out2, out3, out4, out5, out6, out7};                               \
    const long long scale_bits[8] = {sc0, sc1, sc2, sc3, sc4, sc5, sc6, sc7};                                    \
    const long long roi_s_bits[8] = {rs0, rs1, rs2, rs3, rs4, rs5, rs6, rs7};                                    \
    const long long roi_e_bits[8] = {re0, re1, re2, re3, re4, re5, re6, re7};                                    \
    const long long in_stride[8] = {st0, st1, st2, st3, st4, st5, st6, st7};

#if !LINEAR
extern "C" __global__ void trtc_movement_resize_nearest(NARROW* __restrict__ out, const NARROW* __restrict__ in,
                                                        long long n_, long long fill_bits,
                                                        TRTC_RESIZE_DIM_PARAMS(0), TRTC_RESIZE_DIM_PARAMS(1),
                                                        TRTC_RESIZE_DIM_PARAMS(2), TRTC_RESIZE_DIM_PARAMS(3),
                                                        TRTC_RESIZE_DIM_PARAMS(4), TRTC_RESIZE_DIM_PARAMS(5),
                                                        TRTC_RESIZE_DIM_PARAMS(6), TRTC_RESIZE_DIM_PARAMS(7)) {
    TRTC_RESIZE_DIMS
    const NARROW fill = (NARROW)(unsigned long long)fill_bits;
    const IDX n = (IDX)n_;
    TRTC_FOR_EACH(i, n) {
        IDX r = i;
        long long src = 0;
        bool inside = true;
#pragma unroll
        for (int d = RANK - 1; d >= 0; --d) {
            IDX c = r;
            if (d > 0) {
                c = r % (IDX)out_len[d];
                r /= (IDX)out_len[d];
            }
            double x;
            if (!trtc_source_coord((long long)c, in_len[d], out_len[d], trtc_f64(scale_bits[d]), trtc_f64(roi_s_bits[d]),
                                   trtc_f64(roi_e_bits[d]), &x)) {
                inside = false;
                continue;
            }
            long long base;
            double ratio;
            trtc_base(x, &base, &ratio);
#if NEAREST == 0
            const bool right = ratio == 1.0 || ratio > 0.5;
#elif NEAREST == 1
            const bool right = ratio == 1.0 || ratio >= 0.5;
#elif NEAREST == 2
            const bool right = ratio == 1.0;
#else
            const bool right = true;
#endif
            src += trtc_clamp_index(base + (right ? 1 : 0), in_len[d] - 1) * in_stride[d];
        }
        out[i] = inside ? in[src] : fill;
    }
}
#else
// One axis' two taps: input indices and weights, or `extrapolate`.
struct trtc_taps {
    long long idx[2];
    double w[2];
    bool extrapolate;
};

// The nested interpolation from axis D inward: Σ_t w[D][t] * (axis D+1's
// value at tap t), starting from 0 like the CPU's accumulation.
template <int D> struct trtc_interp {
    static __device__ __forceinline__ double at(const T* in, long long base, const trtc_taps* taps,
                                                const long long* in_stride, double fill) {
        if (taps[D].extrapolate) return fill;
        double s = 0.0;
#pragma unroll
        for (int t = 0; t < 2; ++t) {
            const double v = trtc_interp<D + 1>::at(in, base + taps[D].idx[t] * in_stride[D], taps, in_stride, fill);
            s = s + __dmul_rn(taps[D].w[t], v);
        }
        return s;
    }
};
template <> struct trtc_interp<RANK> {
    static __device__ __forceinline__ double at(const T* in, long long base, const trtc_taps*, const long long*, double) {
        return LOAD(in + base);
    }
};

extern "C" __global__ void trtc_movement_resize_linear(T* __restrict__ out, const T* __restrict__ in, long long n_,
                                                       long long fill_bits, TRTC_RESIZE_DIM_PARAMS(0),
                                                       TRTC_RESIZE_DIM_PARAMS(1), TRTC_RESIZE_DIM_PARAMS(2),
                                                       TRTC_RESIZE_DIM_PARAMS(3), TRTC_RESIZE_DIM_PARAMS(4),
                                                       TRTC_RESIZE_DIM_PARAMS(5), TRTC_RESIZE_DIM_PARAMS(6),
                                                       TRTC_RESIZE_DIM_PARAMS(7)) {
    TRTC_RESIZE_DIMS
    const double fill = trtc_f64(fill_bits);
    const IDX n = (IDX)n_;
    TRTC_FOR_EACH(i, n) {
        trtc_taps taps[RANK > 0 ? RANK : 1];
        IDX r = i;
#pragma unroll
        for (int d = RANK - 1; d >= 0; --d) {
            IDX c = r;
            if (d > 0) {
                c = r % (IDX)out_len[d];
                r /= (IDX)out_len[d];
            }
            double x;
            taps[d].extrapolate = !trtc_source_coord((long long)c, in_len[d], out_len[d], trtc_f64(scale_bits[d]),
                                                     trtc_f64(roi_s_bits[d]), trtc_f64(roi_e_bits[d]), &x);
            if (taps[d].extrapolate) continue;
            long long base;
            double ratio;
            trtc_base(x, &base, &ratio);
            double w0 = 1.0 - ratio, w1 = ratio;
            const long long last = in_len[d] - 1;
#if EXCLUDE_OUTSIDE
            if (base < 0 || base > last) w0 = 0.0;
            if (base + 1 < 0 || base + 1 > last) w1 = 0.0;
            const double sum = w0 + w1;
            if (sum != 0.0) {
                w0 = w0 / sum;
                w1 = w1 / sum;
            }
#endif
            taps[d].idx[0] = trtc_clamp_index(base, last);
            taps[d].idx[1] = trtc_clamp_index(base + 1, last);
            taps[d].w[0] = w0;
            taps[d].w[1] = w1;
        }
        STORE(out + i, trtc_interp<0>::at(in, 0, taps, in_stride, fill));
    }
}
#endif
