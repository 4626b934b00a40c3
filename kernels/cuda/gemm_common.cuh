// What every GEMM kernel shares: its parameter list, the batch offsets and
// the epilogue. Y[z][r][c] = epilogue(sum_k A[z][r][k] * B[z][k][c]).
//
// The builder defines (see kernels/src/gemm.rs, GemmSpec):
//   AB_T      storage of A and B: float, f16, i8 or f8e4m3;
//   GEMM_INT8 1 for int8 operands (int accumulators, per-channel scales);
//   GEMM_FP8  1 for FP8 E4M3 operands (f32 accumulators, per-channel
//             scales; float8.cuh precedes this file);
//   OUT_T     storage of Y: float, f16, i8 (OUT_INT8 1: requantized) or
//             f8e4m3 (OUT_FP8 1: requantized, saturating);
//   HAS_E, E_T  an addend E (Gemm's C, a bias) read with strides (ser, sec)
//               per row and column and (se0, se1) per batch index;
//   HAS_R, R_T  a residual laid out like Y;
//   ACT(v)    the activation, an expression of the float v.
//
// The epilogue follows the CPU reference operation by operation, with
// __fmul_rn/__fadd_rn so that no multiply-add is contracted:
//   float:  v = alpha * acc (+ beta * E) (+ R), then ACT;
//   int8:   v = f32(f64(alpha) * acc) * (x_scale * w_scale[c]) (+ beta * E)
//           (+ R), then ACT (the CPU sums in f64, exactly like int32 does,
//           and applies Gemm's alpha in f64 before rounding to f32);
//   int8 output: saturate(round_half_even(v / y_scale)), NaN to 0;
//   FP8: as int8, with the f32 accumulator (the CPU sums in f64, so the
//   two differ in the last bits of long sums); FP8 output:
//   e4m3(v / y_scale), saturating.
// The batch index z = blockIdx.z splits as z0 = z / nz1, z1 = z % nz1; A, B
// and E move by (sa0, sa1), (sb0, sb1), (se0, se1) element strides (0
// broadcasts), Y and R by M * N per z.

#if GEMM_INT8
typedef int acc_t;
#else
typedef float acc_t;
#endif
// Quantized operands: per-channel weight scales in the epilogue.
#define GEMM_QUANT (GEMM_INT8 || GEMM_FP8)
#if GEMM_QUANT
#define GEMM_P_SCALE const float* __restrict__ w_scale,
#else
#define GEMM_P_SCALE
#endif
#if HAS_E
#define GEMM_P_E const E_T* __restrict__ E,
#define GEMM_P_E_STRIDES long long se0, long long se1, long long ser, long long sec,
#else
#define GEMM_P_E
#define GEMM_P_E_STRIDES
#endif
#if HAS_R
#define GEMM_P_R const R_T* __restrict__ R,
#else
#define GEMM_P_R
#endif

#define GEMM_PARAMS                                                                                                 \
    const AB_T *__restrict__ A, const AB_T *__restrict__ B, GEMM_P_SCALE GEMM_P_E GEMM_P_R OUT_T *__restrict__ Y, \
        int M, int N, int K, int nz1, long long sa0, long long sa1, long long sb0, long long sb1,                  \
        GEMM_P_E_STRIDES float alpha, float beta, float x_scale, float y_scale

// The epilogue's view of one batch entry.
struct GemmEpi {
    OUT_T* y;
#if HAS_E
    const E_T* e;
    long long ers, ecs;
#endif
#if HAS_R
    const R_T* r;
#endif
#if GEMM_QUANT
    const float* ws;
#endif
    int M, N;
    float alpha, beta, x_scale, y_scale;
};

// Moves A and B to batch entry blockIdx.z and returns the epilogue's view
// of it. Expands inside a kernel declared with GEMM_PARAMS.
#define GEMM_BATCH_SETUP(epi)                                                      \
    GemmEpi epi;                                                                   \
    {                                                                              \
        const long long z = blockIdx.z, z0 = z / nz1, z1 = z % nz1;                \
        A += z0 * sa0 + z1 * sa1;                                                  \
        B += z0 * sb0 + z1 * sb1;                                                  \
        epi.y = Y + z * (long long)M * N;                                          \
        GEMM_SETUP_E(epi)                                                          \
        GEMM_SETUP_R(epi)                                                          \
        GEMM_SETUP_SCALE(epi)                                                      \
        epi.M = M;                                                                 \
        epi.N = N;                                                                 \
        epi.alpha = alpha;                                                         \
        epi.beta = beta;                                                           \
        epi.x_scale = x_scale;                                                     \
        epi.y_scale = y_scale;                                                     \
    }
#if HAS_E
#define GEMM_SETUP_E(epi) epi.e = E + z0 * se0 + z1 * se1; epi.ers = ser; epi.ecs = sec;
#else
#define GEMM_SETUP_E(epi)
#endif
#if HAS_R
#define GEMM_SETUP_R(epi) epi.r = R + z * (long long)M * N;
#else
#define GEMM_SETUP_R(epi)
#endif
#if GEMM_QUANT
#define GEMM_SETUP_SCALE(epi) epi.ws = w_scale;
#else
#define GEMM_SETUP_SCALE(epi)
#endif

// The activated f32 value of output (r, c) from its accumulator.
__device__ __forceinline__ float gemm_value(const GemmEpi& p, int r, int c, acc_t acc) {
#if GEMM_QUANT
    float v = (float)((double)p.alpha * (double)acc);
    v = __fmul_rn(v, __fmul_rn(p.x_scale, p.ws[c]));
#else
    float v = __fmul_rn(p.alpha, acc);
#endif
#if HAS_E
    v = __fadd_rn(v, __fmul_rn(p.beta, ld(p.e + r * p.ers + c * p.ecs)));
#endif
#if HAS_R
    v = __fadd_rn(v, ld(p.r + (long long)r * p.N + c));
#endif
    return ACT(v);
}

#if OUT_INT8
__device__ __forceinline__ i8 gemm_requantize(float v, float scale) {
    float q = rintf(__fdiv_rn(v, scale));
    return (i8)(q != q ? 0 : (int)fminf(fmaxf(q, -128.0f), 127.0f));
}
__device__ __forceinline__ void gemm_put(const GemmEpi& p, long long o, float v) { p.y[o] = gemm_requantize(v, p.y_scale); }
__device__ __forceinline__ void gemm_put2(const GemmEpi& p, long long o, float v0, float v1) {
    unsigned short lo = (unsigned char)gemm_requantize(v0, p.y_scale);
    unsigned short hi = (unsigned char)gemm_requantize(v1, p.y_scale);
    *(unsigned short*)(p.y + o) = (unsigned short)(lo | (hi << 8));
}
#elif OUT_FP8
__device__ __forceinline__ unsigned char gemm_requantize(float v, float scale) {
    return trtc_e4m3_sat(__fdiv_rn(v, scale));
}
__device__ __forceinline__ void gemm_put(const GemmEpi& p, long long o, float v) { p.y[o].bits = gemm_requantize(v, p.y_scale); }
__device__ __forceinline__ void gemm_put2(const GemmEpi& p, long long o, float v0, float v1) {
    const unsigned short lo = gemm_requantize(v0, p.y_scale), hi = gemm_requantize(v1, p.y_scale);
    *(unsigned short*)(p.y + o) = (unsigned short)(lo | (hi << 8));
}
#else
__device__ __forceinline__ void gemm_store_pair(float* y, float v0, float v1) { *(float2*)y = make_float2(v0, v1); }
__device__ __forceinline__ void gemm_store_pair(f16* y, float v0, float v1) {
    u32 lo = f32_to_f16(v0).bits, hi = f32_to_f16(v1).bits;
    *(u32*)y = lo | (hi << 16);
}
__device__ __forceinline__ void gemm_put(const GemmEpi& p, long long o, float v) { st(p.y + o, v); }
__device__ __forceinline__ void gemm_put2(const GemmEpi& p, long long o, float v0, float v1) {
    gemm_store_pair(p.y + o, v0, v1);
}
#endif

// Stores output (r, c) if it lies inside the M x N result.
__device__ __forceinline__ void gemm_store(const GemmEpi& p, int r, int c, acc_t acc) {
    if (r < p.M && c < p.N) gemm_put(p, (long long)r * p.N + c, gemm_value(p, r, c, acc));
}

// Stores outputs (r, c) and (r, c + 1), as one paired store when both lie
// inside the result and the pair is aligned in memory.
__device__ __forceinline__ void gemm_store2(const GemmEpi& p, int r, int c, acc_t a0, acc_t a1) {
    if (r >= p.M || c >= p.N) return;
    const long long o = (long long)r * p.N + c;
    if (c + 1 < p.N && ((unsigned long long)(p.y + o) & (2 * sizeof(OUT_T) - 1)) == 0) {
        gemm_put2(p, o, gemm_value(p, r, c, a0), gemm_value(p, r, c + 1, a1));
    } else {
        gemm_put(p, o, gemm_value(p, r, c, a0));
        if (c + 1 < p.N) gemm_put(p, o + 1, gemm_value(p, r, c + 1, a1));
    }
}
