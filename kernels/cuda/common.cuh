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
