// The GEMM on CUDA cores, for every operand layout and type: exact f32 (or
// int32 for int8) multiply-adds, the fallback when no tensor-core kernel
// fits a layer. Shared-memory tiles of TILE_M x TILE_N x TILE_K, each thread
// computing THREAD_M x THREAD_N outputs. Follows gemm_common.cuh (parameters,
// batching, epilogue).
// Tunable: TILE_M, TILE_N, TILE_K, THREAD_M, THREAD_N (see gemm.rs).
// Layout: TRANS_A 1 reads A stored [K, M], TRANS_B 1 reads B stored [N, K]
// (otherwise [M, K] and [K, N], row-major); LOAD_AB(p) widens an element of
// A or B to acc_t.

#define SIMT_THREADS ((TILE_M / THREAD_M) * (TILE_N / THREAD_N))

extern "C" __global__ void __launch_bounds__(SIMT_THREADS) trtc_gemm_simt(GEMM_PARAMS) {
    __shared__ acc_t As[TILE_K][TILE_M];
    __shared__ acc_t Bs[TILE_K][TILE_N];
    GEMM_BATCH_SETUP(epi)
    const int tid = threadIdx.x;
    const int tx = tid % (TILE_N / THREAD_N);
    const int ty = tid / (TILE_N / THREAD_N);
    const int row0 = blockIdx.y * TILE_M;
    const int col0 = blockIdx.x * TILE_N;
    acc_t acc[THREAD_M][THREAD_N];
#pragma unroll
    for (int i = 0; i < THREAD_M; ++i)
#pragma unroll
        for (int j = 0; j < THREAD_N; ++j) acc[i][j] = 0;
    for (int k0 = 0; k0 < K; k0 += TILE_K) {
        // Consecutive threads read consecutive addresses of either layout.
        for (int i = tid; i < TILE_M * TILE_K; i += SIMT_THREADS) {
#if TRANS_A
            const int r = i % TILE_M, c = i / TILE_M;
#else
            const int r = i / TILE_K, c = i % TILE_K;
#endif
            const int gr = row0 + r, gc = k0 + c;
#if TRANS_A
            As[c][r] = (gr < M && gc < K) ? LOAD_AB(A + (long long)gc * M + gr) : (acc_t)0;
#else
            As[c][r] = (gr < M && gc < K) ? LOAD_AB(A + (long long)gr * K + gc) : (acc_t)0;
#endif
        }
        for (int i = tid; i < TILE_K * TILE_N; i += SIMT_THREADS) {
#if TRANS_B
            const int r = i % TILE_K, c = i / TILE_K;
#else
            const int r = i / TILE_N, c = i % TILE_N;
#endif
            const int gr = k0 + r, gc = col0 + c;
#if TRANS_B
            Bs[r][c] = (gr < K && gc < N) ? LOAD_AB(B + (long long)gc * K + gr) : (acc_t)0;
#else
            Bs[r][c] = (gr < K && gc < N) ? LOAD_AB(B + (long long)gr * N + gc) : (acc_t)0;
#endif
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE_K; ++kk) {
            acc_t a[THREAD_M], b[THREAD_N];
#pragma unroll
            for (int i = 0; i < THREAD_M; ++i) a[i] = As[kk][ty * THREAD_M + i];
#pragma unroll
            for (int j = 0; j < THREAD_N; ++j) b[j] = Bs[kk][tx * THREAD_N + j];
#pragma unroll
            for (int i = 0; i < THREAD_M; ++i)
#pragma unroll
                for (int j = 0; j < THREAD_N; ++j) acc[i][j] += a[i] * b[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < THREAD_M; ++i)
#pragma unroll
        for (int j = 0; j < THREAD_N; ++j)
            gemm_store(epi, row0 + ty * THREAD_M + i, col0 + tx * THREAD_N + j, acc[i][j]);
}
