// The 8-bit float formats ONNX defines, as the runtime's `float8.rs`
// decodes and encodes them: decoding gives the exact value; encoding rounds
// the exact (f64) value to nearest even at the format's precision, then a
// magnitude above the largest finite one saturates to it (SAT) or becomes
// infinity (E5M2) or NaN (the others). The FNUZ formats have no negative
// zero (0x80 is their NaN). Formats: 0 E4M3FN, 1 E4M3FNUZ, 2 E5M2,
// 3 E5M2FNUZ (always a literal, so each call folds to one format).

__device__ __forceinline__ int trtc_f8_mbits(int f) { return f < 2 ? 3 : 2; }
__device__ __forceinline__ int trtc_f8_bias(int f) { return f == 0 ? 7 : (f == 1 ? 8 : (f == 2 ? 15 : 16)); }
__device__ __forceinline__ bool trtc_f8_uz(int f) { return f == 1 || f == 3; }
__device__ __forceinline__ double trtc_f8_max(int f) { return f == 0 ? 448.0 : (f == 1 ? 240.0 : 57344.0); }
__device__ __forceinline__ unsigned char trtc_f8_nan(int f, bool neg) {
    return trtc_f8_uz(f) ? (unsigned char)0x80 : (unsigned char)(0x7f | (neg ? 0x80 : 0));
}
// 2^k, exactly, for the small exponents these formats use.
__device__ __forceinline__ double trtc_pow2(int k) { return __longlong_as_double((long long)(1023 + k) << 52); }
// floor(log2(a)) of a positive finite double (subnormals: the smallest).
__device__ __forceinline__ int trtc_exponent_of(double a) {
    return (int)((__double_as_longlong(a) >> 52) & 0x7ff) - 1023;
}

__device__ __forceinline__ float trtc_f8_decode(unsigned char bits, int f) {
    if (trtc_f8_uz(f) && bits == 0x80) return __int_as_float(0x7fc00000);
    const int m = trtc_f8_mbits(f);
    const int exponent = (bits & 0x7f) >> m;
    const int mantissa = bits & ((1 << m) - 1);
    const int all_ones = (1 << (7 - m)) - 1;
    float magnitude;
    if (f == 2 && exponent == all_ones) {
        magnitude = mantissa == 0 ? __int_as_float(0x7f800000) : __int_as_float(0x7fc00000);
    } else if (f == 0 && exponent == all_ones && mantissa == 7) {
        magnitude = __int_as_float(0x7fc00000);
    } else if (exponent == 0) {
        magnitude = (float)((double)mantissa * trtc_pow2(1 - trtc_f8_bias(f) - m));
    } else {
        magnitude = (float)((double)(mantissa + (1 << m)) * trtc_pow2(exponent - trtc_f8_bias(f) - m));
    }
    return (bits & 0x80) ? -magnitude : magnitude;
}

// The bits of a magnitude the format holds exactly, with a sign.
__device__ __forceinline__ unsigned char trtc_f8_exact(double magnitude, bool neg, int f) {
    const unsigned char sign = neg ? 0x80 : 0;
    if (magnitude == 0.0) return trtc_f8_uz(f) ? (unsigned char)0 : sign;
    const int m = trtc_f8_mbits(f);
    const int min_exponent = 1 - trtc_f8_bias(f);
    const int e = trtc_exponent_of(magnitude);
    int field;
    double mantissa;
    if (e < min_exponent) {
        field = 0;
        mantissa = magnitude / trtc_pow2(min_exponent - m);
    } else {
        field = e + trtc_f8_bias(f);
        mantissa = magnitude / trtc_pow2(e - m) - (double)(1 << m);
    }
    return (unsigned char)((field << m) | (int)mantissa) | sign;
}

__device__ __forceinline__ unsigned char trtc_f8_encode(double x, int f, bool saturate) {
    const bool neg = (__double_as_longlong(x) >> 63) != 0;
    if (x != x) return trtc_f8_nan(f, neg);
    const double a = fabs(x);
    const double mx = trtc_f8_max(f);
    bool overflow = a >= 2.0 * mx;
    double rounded = 0.0;
    if (!overflow) {
        const int m = trtc_f8_mbits(f);
        const int e = trtc_exponent_of(a);
        const int min_exponent = 1 - trtc_f8_bias(f);
        const double quantum = trtc_pow2((e > min_exponent ? e : min_exponent) - m);
        rounded = rint(a / quantum) * quantum;
        overflow = rounded > mx;
    }
    if (overflow) {
        if (saturate) return trtc_f8_exact(mx, neg, f);
        if (f == 2) return (unsigned char)(0x7c | (neg ? 0x80 : 0));
        return trtc_f8_nan(f, neg);
    }
    return trtc_f8_exact(rounded, neg, f);
}

// E4M3FN bits of an f32, rounded to nearest even and saturating (NaN stays
// NaN, infinities become +-448): what trtc_f8_encode(v, 0, true) gives,
// in f32 arithmetic, which is exact for an f32 input (scaling by a power of
// two and rintf) and light enough for the kernels' epilogues.
__device__ __forceinline__ unsigned char trtc_e4m3_sat(float v) {
    const unsigned char sign = (unsigned char)((__float_as_uint(v) >> 24) & 0x80);
    const float a = fabsf(v);
    if (a != a) return (unsigned char)(0x7f | sign);
    if (a >= 448.0f) return (unsigned char)(0x7e | sign);
    // a's binade (the subnormal range shares the lowest normal one, 2^-6),
    // and a in units of the format's step there, 2^(e-3): 8 to 16 in the
    // binade, 0 to 8 below it.
    int e = (int)((__float_as_uint(a) >> 23) & 0xff) - 127;
    e = e < -6 ? -6 : e;
    const int u = (int)rintf(__fmul_rn(a, __uint_as_float((u32)(127 + 3 - e) << 23)));
    if (u < 8) return (unsigned char)(sign | u);
    if (u == 16) return (unsigned char)(sign | ((e + 8) << 3));
    return (unsigned char)(sign | ((e + 7) << 3) | (u - 8));
}

// The value of an E4M3FN byte in f32 bit arithmetic: trtc_f8_decode(b, 0)
// without doubles, for the kernels' inner loops.
__device__ __forceinline__ float trtc_e4m3_value(unsigned char b) {
    const u32 e = (b >> 3) & 15, m = b & 7;
    float magnitude;
    if (e == 15 && m == 7) magnitude = __int_as_float(0x7fc00000);
    else if (e == 0) magnitude = (float)m * 0.001953125f;
    else magnitude = __uint_as_float(((e + 120) << 23) | (m << 20));
    return (b & 0x80) ? -magnitude : magnitude;
}

// E4M3FN storage of the FP8 GEMM and convolution kernels: a struct, so
// that ld/st overloads tell it from plain bytes. Loads decode exactly;
// stores saturate, as QuantizeLinear and the runtime's Fp8Linear do.
struct __align__(1) f8e4m3 {
    unsigned char bits;
};
__device__ __forceinline__ float ld(const f8e4m3* p) { return trtc_e4m3_value(p->bits); }
__device__ __forceinline__ void st(f8e4m3* p, float v) { p->bits = trtc_e4m3_sat(v); }
