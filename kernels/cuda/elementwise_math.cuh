// Integer and conversion helpers of the elementwise kernels, written to match
// the runtime's CPU reference ops bit for bit: wrapping integer arithmetic
// (Rust's wrapping_* methods), division and remainder by zero giving 0,
// shifts by the bit width or more giving 0 (or the sign fill), and Rust's
// saturating `as` from floats to integers (NaN becomes 0).
//
// Wrapping arithmetic goes through an unsigned type at least as wide as int,
// so that no operand is promoted to a signed int that could overflow.

template <typename T> struct trtc_wide { typedef unsigned int t; };
template <> struct trtc_wide<long long> { typedef unsigned long long t; };
template <> struct trtc_wide<unsigned long long> { typedef unsigned long long t; };

// Whether T is a signed integer type, and x < 0 without comparing an
// unsigned value with zero.
template <typename T> struct trtc_signed { static const bool value = false; };
template <> struct trtc_signed<signed char> { static const bool value = true; };
template <> struct trtc_signed<short> { static const bool value = true; };
template <> struct trtc_signed<int> { static const bool value = true; };
template <> struct trtc_signed<long long> { static const bool value = true; };
template <typename T> __device__ __forceinline__ bool trtc_lt0(T x) {
    return trtc_signed<T>::value && (x & (T)((T)1 << (sizeof(T) * 8 - 1))) != 0;
}

template <typename T> __device__ __forceinline__ T trtc_wadd(T a, T b) {
    typedef typename trtc_wide<T>::t W;
    return (T)((W)a + (W)b);
}
template <typename T> __device__ __forceinline__ T trtc_wsub(T a, T b) {
    typedef typename trtc_wide<T>::t W;
    return (T)((W)a - (W)b);
}
template <typename T> __device__ __forceinline__ T trtc_wmul(T a, T b) {
    typedef typename trtc_wide<T>::t W;
    return (T)((W)a * (W)b);
}
template <typename T> __device__ __forceinline__ T trtc_wneg(T a) {
    typedef typename trtc_wide<T>::t W;
    return (T)((W)0 - (W)a);
}
// Truncating division; by zero gives 0 and MIN / -1 wraps to MIN.
template <typename T> __device__ __forceinline__ T trtc_idiv(T a, T b) {
    if (b == (T)0) return (T)0;
    if (trtc_signed<T>::value && b == (T)-1) return trtc_wneg(a);
    return (T)(a / b);
}
// The remainder with the dividend's sign (fmod) or the divisor's (Python);
// by zero gives 0.
template <typename T> __device__ __forceinline__ T trtc_irem(T a, T b, bool fmod) {
    if (b == (T)0) return (T)0;
    if (trtc_signed<T>::value && b == (T)-1) return (T)0;
    T r = (T)(a % b);
    if (!fmod && r != (T)0 && trtc_lt0(r) != trtc_lt0(b)) r = trtc_wadd(r, b);
    return r;
}
template <typename T> __device__ __forceinline__ T trtc_shl(T a, T b) {
    typedef typename trtc_wide<T>::t W;
    if (trtc_lt0(b) || (unsigned long long)b >= sizeof(T) * 8) return (T)0;
    return (T)((W)a << (unsigned)b);
}
// Arithmetic for signed types (a shift past the width fills with the sign).
template <typename T> __device__ __forceinline__ T trtc_shr(T a, T b) {
    if (trtc_lt0(b) || (unsigned long long)b >= sizeof(T) * 8) return trtc_lt0(a) ? (T)-1 : (T)0;
    return (T)(a >> (unsigned)b);
}

// Rust's `x as T` from a float: truncation toward zero, saturation at T's
// range, NaN to 0. `lo` and `hi` are -2^(bits-1) (0 unsigned) and
// 2^(bits-1) (2^bits unsigned), both exact in any float type.
template <typename T> struct trtc_limits;
template <> struct trtc_limits<signed char> { static __device__ __forceinline__ double lo() { return -128.0; } static __device__ __forceinline__ double hi() { return 128.0; } static const signed char min = -128; static const signed char max = 127; };
template <> struct trtc_limits<short> { static __device__ __forceinline__ double lo() { return -32768.0; } static __device__ __forceinline__ double hi() { return 32768.0; } static const short min = -32768; static const short max = 32767; };
template <> struct trtc_limits<int> { static __device__ __forceinline__ double lo() { return -2147483648.0; } static __device__ __forceinline__ double hi() { return 2147483648.0; } static const int min = (-2147483647 - 1); static const int max = 2147483647; };
template <> struct trtc_limits<long long> { static __device__ __forceinline__ double lo() { return -9223372036854775808.0; } static __device__ __forceinline__ double hi() { return 9223372036854775808.0; } static const long long min = (-9223372036854775807LL - 1); static const long long max = 9223372036854775807LL; };
template <> struct trtc_limits<unsigned char> { static __device__ __forceinline__ double lo() { return 0.0; } static __device__ __forceinline__ double hi() { return 256.0; } static const unsigned char min = 0; static const unsigned char max = 255; };
template <> struct trtc_limits<unsigned short> { static __device__ __forceinline__ double lo() { return 0.0; } static __device__ __forceinline__ double hi() { return 65536.0; } static const unsigned short min = 0; static const unsigned short max = 65535; };
template <> struct trtc_limits<unsigned int> { static __device__ __forceinline__ double lo() { return 0.0; } static __device__ __forceinline__ double hi() { return 4294967296.0; } static const unsigned int min = 0; static const unsigned int max = 4294967295u; };
template <> struct trtc_limits<unsigned long long> { static __device__ __forceinline__ double lo() { return 0.0; } static __device__ __forceinline__ double hi() { return 18446744073709551616.0; } static const unsigned long long min = 0; static const unsigned long long max = 18446744073709551615ull; };

template <typename T, typename F> __device__ __forceinline__ T trtc_f2i(F x) {
    if (x != x) return (T)0;
    if (x <= (F)trtc_limits<T>::lo()) return trtc_limits<T>::min;
    if (x >= (F)trtc_limits<T>::hi()) return trtc_limits<T>::max;
    return (T)x;
}

// Integer power with wrapping multiplication (the runtime's Pow on
// integer bases and exponents): a negative exponent keeps only 1 and -1.
template <typename T> __device__ __forceinline__ T trtc_ipow(T base, long long e) {
    if (e < 0) {
        if (base == (T)1) return (T)1;
        if (trtc_lt0(base) && trtc_wadd(base, (T)1) == (T)0) return (e % 2 == 0) ? (T)1 : base;
        return (T)0;
    }
    T acc = (T)1;
    unsigned long long u = (unsigned long long)e;
    while (u > 0) {
        if (u & 1) acc = trtc_wmul(acc, base);
        base = trtc_wmul(base, base);
        u >>= 1;
    }
    return acc;
}
