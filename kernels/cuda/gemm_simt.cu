// C[M,N] = epilogue(A[M,K] · B[K,N] + bias[N] (+ residual[M,N])), f32 on CUDA
// cores, shared-memory tiles of TILE_M x TILE_N x TILE_K, each thread
// computing THREAD_M x THREAD_N outputs. Row-major, batched over blockIdx.z
// with element strides between batches (0 to broadcast).
// Tunable: TILE_M, TILE_N, TILE_K, THREAD_M, THREAD_N (see gemm.rs).
// Epilogue: EPILOGUE(v) is a macro the builder defines.

extern "C" __global__ void __launch_bounds__((TILE_M / THREAD_M) * (TILE_N / THREAD_N))
trtc_gemm_simt(const float* __restrict__ A, const float* __restrict__ B, const float* __restrict__ bias,
               const float* __restrict__ residual, float* __restrict__ C, int M, int N, int K,
               long long batch_a, long long batch_b, long long batch_c) {
    __shared__ float As[TILE_K][TILE_M];
    __shared__ float Bs[TILE_K][TILE_N];
    const int threads = (TILE_M / THREAD_M) * (TILE_N / THREAD_N);
    const int tid = threadIdx.x;
    const int tx = tid % (TILE_N / THREAD_N);
    const int ty = tid / (TILE_N / THREAD_N);
    const int row0 = blockIdx.y * TILE_M;
    const int col0 = blockIdx.x * TILE_N;
    A += blockIdx.z * batch_a;
    B += blockIdx.z * batch_b;
    C += blockIdx.z * batch_c;
    if (residual) residual += blockIdx.z * batch_c;
    float acc[THREAD_M][THREAD_N];
#pragma unroll
    for (int i = 0; i < THREAD_M; ++i)
#pragma unroll
        for (int j = 0; j < THREAD_N; ++j) acc[i][j] = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE_K) {
        for (int i = tid; i < TILE_M * TILE_K; i += threads) {
            int r = i / TILE_K, c = i % TILE_K;
            int gr = row0 + r, gc = k0 + c;
            As[c][r] = (gr < M && gc < K) ? A[(long long)gr * K + gc] : 0.0f;
        }
        for (int i = tid; i < TILE_K * TILE_N; i += threads) {
            int r = i / TILE_N, c = i % TILE_N;
            int gr = k0 + r, gc = col0 + c;
            Bs[r][c] = (gr < K && gc < N) ? B[(long long)gr * N + gc] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE_K; ++kk) {
            float a[THREAD_M], b[THREAD_N];
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
    for (int i = 0; i < THREAD_M; ++i) {
        int r = row0 + ty * THREAD_M + i;
        if (r >= M) continue;
#pragma unroll
        for (int j = 0; j < THREAD_N; ++j) {
            int c = col0 + tx * THREAD_N + j;
            if (c >= N) continue;
            float v = acc[i][j];
            if (bias) v += bias[c];
            if (residual) v += residual[(long long)r * N + c];
            C[(long long)r * N + c] = EPILOGUE(v);
        }
    }
}
