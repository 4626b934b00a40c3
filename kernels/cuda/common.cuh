// Shared device helpers. Self-contained: NVRTC compiles it without any CUDA
// header, so nothing here includes one.
typedef unsigned int u32;
typedef unsigned long long u64;

__device__ __forceinline__ float trtc_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float trtc_relu(float x) { return x > 0.0f ? x : (x != x ? x : 0.0f); }
__device__ __forceinline__ float trtc_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float trtc_gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float trtc_hard_sigmoid(float x, float a, float b) {
    return fmaxf(0.0f, fminf(1.0f, a * x + b));
}

// Half precision without cuda_fp16.h: an IEEE binary16 value is stored as its
// 16 bits; conversions go through PTX `cvt` (round to nearest even, like the
// CPU executor's `half` crate). A struct, so that overloads can tell it from
// 16-bit integers. TRTC_EMULATE (never defined for NVRTC) selects the C++
// equivalents of the PTX in kernels/emu/shim.h, for the CPU emulator.
struct __align__(2) f16 { unsigned short bits; };
typedef signed char i8;
__device__ __forceinline__ float f16_to_f32(f16 h) {
    float f;
#ifdef TRTC_EMULATE
    f = trtc_emu_f16_to_f32(h.bits);
#else
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
#endif
    return f;
}
__device__ __forceinline__ f16 f32_to_f16(float f) {
    f16 h;
#ifdef TRTC_EMULATE
    h.bits = trtc_emu_f32_to_f16(f);
#else
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
#endif
    return h;
}
// Loads widen to f32 and stores round once from f32: a kernel written with
// ld/st computes in f32 whatever its storage type, which is what the CPU
// executor's HalfIo does.
__device__ __forceinline__ float ld(const float* p) { return *p; }
__device__ __forceinline__ float ld(const f16* p) { return f16_to_f32(*p); }
__device__ __forceinline__ void st(float* p, float v) { *p = v; }
__device__ __forceinline__ void st(f16* p, float v) { *p = f32_to_f16(v); }
