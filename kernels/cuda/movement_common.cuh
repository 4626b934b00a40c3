// Shared pieces of the movement kernels, which move elements without looking
// at their values: element types by byte width, and the move of one "wide"
// element (several adjacent narrow ones) that falls back to narrow accesses
// when the tensors' addresses are not aligned to the wide type.
//
// The builder defines:
//   NARROW  the unsigned type of the tensors' element size (1, 2, 4 or 8 bytes)
//   ELEM    the type one thread moves at a time: NARROW, or a wider type
//           holding VEC adjacent elements (8 or 16 bytes)
//   VEC     sizeof(ELEM) / sizeof(NARROW)
//   IDX     the signed index type (int or long long)
//   RANK    the number of dimensions the kernel indexes (0 to 8)
struct __align__(16) trtc_v16 { unsigned int x, y, z, w; };

// Wide element t of `out` = wide element s of `in`; `aligned` says whether
// both pointers are aligned to ELEM (otherwise VEC narrow moves).
__device__ __forceinline__ void trtc_move(NARROW* out, IDX t, const NARROW* in, IDX s, bool aligned) {
    if (VEC == 1 || aligned) {
        reinterpret_cast<ELEM*>(out)[t] = reinterpret_cast<const ELEM*>(in)[s];
    } else {
#pragma unroll
        for (int v = 0; v < VEC; ++v) out[t * VEC + v] = in[s * VEC + v];
    }
}

__device__ __forceinline__ bool trtc_aligned(const void* a, const void* b) {
    return ((((unsigned long long)a) | ((unsigned long long)b)) & (sizeof(ELEM) - 1)) == 0;
}

// The grid-stride loop over `n` elements.
#define TRTC_FOR_EACH(i, n) for (IDX i = (IDX)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (IDX)gridDim.x * blockDim.x)
