// GEMMs of few rows (M <= 16: batch-1 classifiers, decoding): matrix-vector
// products on CUDA cores, exact f32 (int32 for int8) multiply-adds. B is read
// once, coalesced, by many blocks; the rows of A are small and hit in cache.
// A block computes ROWS rows of Y for 8 (TRANS_B) or 32 columns:
// - TRANS_B (B stored [N, K]): one warp per column, its lanes splitting K,
//   then a warp reduction;
// - otherwise (B stored [K, N]): one thread per column, 8 warps splitting K,
//   then a reduction through shared memory.
// Follows gemm_common.cuh (parameters, batching, epilogue).
// Tunable: ROWS (see linear/gemm_gemv.rs). Layout: TRANS_A 1 reads A stored
// [K, M]; LOAD_AB(p) widens an element of A or B to acc_t.

#if TRANS_A
#define GEMV_A(r, k) LOAD_AB(A + (long long)(k) * M + (r))
#else
#define GEMV_A(r, k) LOAD_AB(A + (long long)(r) * K + (k))
#endif

// One block per SM as the stated minimum: ptxas otherwise trades spilled
// registers for occupancy with 8 rows.
extern "C" __global__ void __launch_bounds__(256, 1) trtc_gemm_gemv(GEMM_PARAMS) {
    GEMM_BATCH_SETUP(epi)
    const int r0 = blockIdx.y * ROWS;
    const int rows = M - r0 < ROWS ? M - r0 : ROWS;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    acc_t acc[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) acc[r] = 0;
#if TRANS_B
    const int c = blockIdx.x * 8 + warp;
    if (c >= N) return;
    const AB_T* b = B + (long long)c * K;
    for (int k = lane; k < K; k += 32) {
        const acc_t bv = LOAD_AB(b + k);
#pragma unroll
        for (int r = 0; r < ROWS; ++r)
            if (r < rows) acc[r] += GEMV_A(r0 + r, k) * bv;
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
    if (lane == 0)
#pragma unroll
        for (int r = 0; r < ROWS; ++r)
            if (r < rows) gemm_store(epi, r0 + r, c, acc[r]);
#else
    __shared__ acc_t part[8][ROWS][32];
    const int c = blockIdx.x * 32 + lane;
    if (c < N) {
        for (int k = warp; k < K; k += 8) {
            const acc_t bv = LOAD_AB(B + (long long)k * N + c);
#pragma unroll
            for (int r = 0; r < ROWS; ++r)
                if (r < rows) acc[r] += GEMV_A(r0 + r, k) * bv;
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r) part[warp][r][lane] = acc[r];
    __syncthreads();
    // Warp r sums row r over the 8 K slices.
    if (warp < ROWS && warp < rows && c < N) {
        acc_t s = 0;
#pragma unroll
        for (int w = 0; w < 8; ++w) s += part[w][warp][lane];
        gemm_store(epi, r0 + warp, c, s);
    }
#endif
}
