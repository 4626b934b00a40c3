// Helpers every conv kernel shares: loads that widen to the accumulator
// type, and the epilogue that turns an accumulator into a stored output the
// way the CPU reference does it, operation by operation.
//
// Defines the including source sets:
//   XT, WT, BT, RT, OT  storage types of x, w, bias, residual and output;
//   ACC_INT             1 when x and w are int8 (exact int32 accumulation);
//   ACC_FP8             1 when x and w are FP8 E4M3 (f32 accumulation;
//                       float8.cuh precedes this file);
//   OUT_INT8            1 when the output is int8 (requantized);
//   OUT_FP8             1 when the output is E4M3 (requantized, saturating);
//   CONV_ACT(v)         the activation applied to the f32 value v ((v) when none).
//
// Float layers (Conv, ConvTranspose, fused Conv, any of them on f16 storage):
//   y = acc + bias[c]; y = y + residual; y = act(y); store (rounded once if f16).
// Int8 layers (Int8Linear, see runtime/src/ops/precision/int8_linear.rs):
//   y = f32(acc) * (x_scale * w_scale[c]); y = y + bias[c]; y = y + residual;
//   y = act(y); store as f32, f16, or saturate(round_half_even(y / out_scale)).
// FP8 layers (Fp8Linear): the same with an f32 accumulator, and an E4M3
// output stored as e4m3(y / out_scale), saturating.
// The explicit _rn intrinsics keep the compiler from contracting a multiply
// and the following add into an FMA, which the CPU never does.

#if ACC_INT
typedef int acc_t;
#else
typedef float acc_t;
#endif
// Quantized layers: the accumulator is scaled in the epilogue.
#define QUANT (ACC_INT || ACC_FP8)

__device__ __forceinline__ float conv_ld(const float* p) { return *p; }
__device__ __forceinline__ float conv_ld(const f16* p) { return f16_to_f32(*p); }
__device__ __forceinline__ int conv_ld(const i8* p) { return (int)*p; }
#if ACC_FP8
__device__ __forceinline__ float conv_ld(const f8e4m3* p) { return ld(p); }
#endif

// The value of output channel co before residual and activation.
__device__ __forceinline__ float conv_product(acc_t acc, int co, const BT* bias, int has_bias,
                                              const float* wscale, float x_scale) {
#if ACC_INT
    float v = __fmul_rn(__int2float_rn(acc), __fmul_rn(x_scale, wscale[co]));
    if (has_bias) v = __fadd_rn(v, ld(bias + co));
    return v;
#elif ACC_FP8
    float v = __fmul_rn(acc, __fmul_rn(x_scale, wscale[co]));
    if (has_bias) v = __fadd_rn(v, ld(bias + co));
    return v;
#else
    return has_bias ? __fadd_rn(acc, ld(bias + co)) : acc;
#endif
}

// Residual, activation and the store of output element idx.
__device__ __forceinline__ void conv_finish(OT* out, const RT* residual, int has_res, long long idx, float v,
                                            float out_scale) {
    if (has_res) v = __fadd_rn(v, ld(residual + idx));
    v = CONV_ACT(v);
#if OUT_INT8
    float q = rintf(__fdiv_rn(v, out_scale));
    out[idx] = (q != q) ? (i8)0 : (i8)(int)fminf(fmaxf(q, -128.0f), 127.0f);
#elif OUT_FP8
    out[idx].bits = trtc_e4m3_sat(__fdiv_rn(v, out_scale));
#else
    st(out + idx, v);
#endif
}
