// The GEMM on tensor cores (mma.sync, see mma.cuh): f16 inputs with f32
// accumulators (m16n8k16), f32 inputs rounded to tf32 with f32 accumulators
// (m16n8k8), s8 inputs with s32 accumulators (m16n8k32), or FP8 E4M3
// inputs with f32 accumulators (m16n8k32, sm_89 and newer). Follows
// gemm_common.cuh (parameters, batching, epilogue).
//
// A block computes a BM x BN tile of Y with WM x WN warps, each a
// (BM / WM) x (BN / WN) warp tile of 16 x 8 mma tiles, stepping through K
// BK elements at a time. STAGES shared-memory buffers are filled by cp.async
// (16-byte chunks, zero-filled past M, N or K) STAGES - 1 k-tiles ahead of
// the tiles being multiplied. A is [M, K] (K-contiguous); B is [N, K]
// (B_KMAJOR 1, K-contiguous) or [K, N] (N-contiguous: f16 reads it with
// ldmatrix.trans, tf32 with 32-bit shared loads, and s8 and e4m3 stage it through
// registers: blocks of 16 k x 4 columns loaded one k-tile ahead,
// transposed with byte permutes and stored K-contiguous after the current
// k-tile's mma, so that its shared tile is the [N, K] one). Every row of A
// and B must start 16-byte aligned (the builder checks the leading
// dimensions and batch strides). The asm of mma.cuh has C++ equivalents
// for the CPU emulator of kernels/emu (TRTC_EMULATE).
//
// Each mma step consumes 32 bytes of K (16 f16, 8 tf32, 32 s8 or e4m3), so
// the fragment loads are the same for every type (see mma.cuh). Shared
// tiles are unpadded, their 16-byte chunks XOR-swizzled per row so that
// ldmatrix and the tf32 B loads are free of bank conflicts.
//
// Tunable: BM, BN, BK, WM, WN, STAGES (see linear/gemm_tc.rs).
// TC_KIND: 0 f16, 1 tf32, 2 s8, 3 e4m3.

#define TC_THREADS (WM * WN * 32)

constexpr int ES = sizeof(AB_T);        // bytes per element
constexpr int CE = 16 / ES;             // elements per 16-byte chunk
constexpr int KB = BK * ES;             // bytes of K per k-tile row
constexpr int A_CPR = KB / 16;          // chunks per row of the A tile
constexpr int A_STAGE = BM * KB;        // bytes of one A tile
// 8-bit [K, N]: B goes through registers into a K-contiguous tile.
#define TC_BYTES (TC_KIND == 2 || TC_KIND == 3)
#define B_TRANSPOSE (!B_KMAJOR && TC_BYTES)
#if B_KMAJOR || B_TRANSPOSE
#define B_SMEM_KMAJOR 1
constexpr int B_CPR = KB / 16;
constexpr int B_ROW = KB;
constexpr int B_STAGE = BN * KB;
#else
#define B_SMEM_KMAJOR 0
constexpr int B_ROW = BN * ES;          // bytes per k row of the B tile
constexpr int B_CPR = B_ROW / 16;
constexpr int B_STAGE = BK * B_ROW;
#endif
constexpr int WTM = BM / WM, WTN = BN / WN;  // warp tile
constexpr int MI = WTM / 16, NI = WTN / 8;   // mma tiles per warp
constexpr int KSTEPS = KB / 32;              // mma steps per k-tile

// Where logical chunk c of row r of the B tile lives. tf32 [K, N] tiles are
// read by 32-bit loads of 4 k rows x 8 columns: rows must spread over the
// bank groups in pairs of chunks.
__device__ __forceinline__ int b_chunk(int r, int c) {
#if !B_SMEM_KMAJOR && TC_KIND == 1
    return c ^ ((r & 3) << 1);
#else
    return swizzle_chunk(r, c, B_CPR);
#endif
}

__device__ __forceinline__ void tc_load_stage(unsigned char* sa, unsigned char* sb, const AB_T* A, const AB_T* B,
                                              int M, int N, int K, int m0, int n0, int k0, int tid) {
    const u32 a_base = smem_addr(sa), b_base = smem_addr(sb);
#pragma unroll
    for (int i = tid; i < BM * A_CPR; i += TC_THREADS) {
        const int r = i / A_CPR, c = i % A_CPR;
        const int gr = m0 + r, gk = k0 + c * CE;
        const bool ok = gr < M && gk < K;
        cp_async16(a_base + r * KB + swizzle_chunk(r, c, A_CPR) * 16, ok ? A + (long long)gr * K + gk : A, ok);
    }
#if B_TRANSPOSE
    // B is staged through registers (tc_load_b / tc_store_b).
#elif B_KMAJOR
#pragma unroll
    for (int i = tid; i < BN * B_CPR; i += TC_THREADS) {
        const int r = i / B_CPR, c = i % B_CPR;
        const int gn = n0 + r, gk = k0 + c * CE;
        const bool ok = gn < N && gk < K;
        cp_async16(b_base + r * B_ROW + b_chunk(r, c) * 16, ok ? B + (long long)gn * K + gk : B, ok);
    }
#else
#pragma unroll
    for (int i = tid; i < BK * B_CPR; i += TC_THREADS) {
        const int r = i / B_CPR, c = i % B_CPR;
        const int gk = k0 + r, gn = n0 + c * CE;
        const bool ok = gk < K && gn < N;
        cp_async16(b_base + r * B_ROW + b_chunk(r, c) * 16, ok ? B + (long long)gk * N + gn : B, ok);
    }
#endif
}

#if B_TRANSPOSE
// B k-tiles as blocks of 16 k rows x 4 columns (a 16-byte chunk in each of
// 4 rows of the K-contiguous tile), loaded from [K, N] as 16 32-bit words:
// consecutive threads take consecutive column groups, so every row read is
// coalesced. N and K are multiples of 16, so a block is entirely inside or
// outside the matrix.
constexpr int BT_BLOCKS = (BK / 16) * (BN / 4);
constexpr int BT_PER_THREAD = (BT_BLOCKS + TC_THREADS - 1) / TC_THREADS;
struct BRegs {
    u32 v[BT_PER_THREAD][16];
};

__device__ __forceinline__ void tc_load_b(BRegs& b, const AB_T* B, int N, int K, int n0, int k0, int tid) {
#pragma unroll
    for (int j = 0; j < BT_PER_THREAD; ++j) {
        const int i = tid + j * TC_THREADS;
        const int gk = k0 + (i / (BN / 4)) * 16, gn = n0 + (i % (BN / 4)) * 4;
        const bool ok = i < BT_BLOCKS && gk < K && gn < N;
#pragma unroll
        for (int q = 0; q < 16; ++q) b.v[j][q] = ok ? *(const u32*)(B + (long long)(gk + q) * N + gn) : 0u;
    }
}

// Transposes each block (v[q] holds columns n..n+3 of row k+q) into the
// 16 k values of each column and stores them as one chunk per column.
__device__ __forceinline__ void tc_store_b(const BRegs& b, unsigned char* sb, int tid) {
#pragma unroll
    for (int j = 0; j < BT_PER_THREAD; ++j) {
        const int i = tid + j * TC_THREADS;
        if (i >= BT_BLOCKS) continue;
        const int kc = i / (BN / 4), nb = i % (BN / 4);
        // w[g][c]: rows 4g..4g+3 of column c, one byte each, k ascending.
        u32 w[4][4];
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            const u32* v = b.v[j] + 4 * g;
            const u32 lo01 = __byte_perm(v[0], v[1], 0x5140), hi01 = __byte_perm(v[0], v[1], 0x7362);
            const u32 lo23 = __byte_perm(v[2], v[3], 0x5140), hi23 = __byte_perm(v[2], v[3], 0x7362);
            w[g][0] = __byte_perm(lo01, lo23, 0x5410);
            w[g][1] = __byte_perm(lo01, lo23, 0x7632);
            w[g][2] = __byte_perm(hi01, hi23, 0x5410);
            w[g][3] = __byte_perm(hi01, hi23, 0x7632);
        }
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int r = nb * 4 + c;
            *(uint4*)(sb + r * B_ROW + b_chunk(r, kc) * 16) = make_uint4(w[0][c], w[1][c], w[2][c], w[3][c]);
        }
    }
}
#endif

// One k-tile's worth of mma steps of this warp on the tiles sa, sb.
__device__ __forceinline__ void tc_compute_stage(const unsigned char* sa, const unsigned char* sb, int wm0, int wn0,
                                                 int lane, acc_t (&acc)[MI][NI][4]) {
    const u32 a_base = smem_addr(sa), b_base = smem_addr(sb);
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
        u32 af[MI][4], bf[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {
            // Lanes 0-15 address rows 0-15 at bytes 0-15 of the step, lanes
            // 16-31 the same rows at bytes 16-31: matrices a0, a1, a2, a3.
            const int r = wm0 + mi * 16 + (lane & 15);
            const int c = ks * 2 + (lane >> 4);
            ldmatrix_x4(af[mi], a_base + r * KB + swizzle_chunk(r, c, A_CPR) * 16);
        }
#if B_SMEM_KMAJOR
#pragma unroll
        for (int nj = 0; nj < NI / 2; ++nj) {
            // Matrices: (n 0-7, bytes 0-15), (n 0-7, bytes 16-31),
            // (n 8-15, bytes 0-15), (n 8-15, bytes 16-31).
            const int r = wn0 + nj * 16 + (lane & 7) + ((lane >> 4) << 3);
            const int c = ks * 2 + ((lane >> 3) & 1);
            u32 t[4];
            ldmatrix_x4(t, b_base + r * B_ROW + b_chunk(r, c) * 16);
            bf[2 * nj][0] = t[0];
            bf[2 * nj][1] = t[1];
            bf[2 * nj + 1][0] = t[2];
            bf[2 * nj + 1][1] = t[3];
        }
#elif TC_KIND == 0
#pragma unroll
        for (int nj = 0; nj < NI / 2; ++nj) {
            // Transposed 8x8 blocks of the [k][n] tile: (k 0-7, n 0-7),
            // (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15).
            const int r = ks * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
            const int c = (wn0 + nj * 16 + ((lane >> 4) << 3)) / CE;
            u32 t[4];
            ldmatrix_x4_trans(t, b_base + r * B_ROW + b_chunk(r, c) * 16);
            bf[2 * nj][0] = t[0];
            bf[2 * nj][1] = t[1];
            bf[2 * nj + 1][0] = t[2];
            bf[2 * nj + 1][1] = t[3];
        }
#else
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
            // b0 = B[k = t][n = g], b1 = B[k = t + 4][n = g] of this step.
            const int n = wn0 + ni * 8 + (lane >> 2);
            const int k = ks * 8 + (lane & 3);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = k + 4 * h;
                bf[ni][h] = *(const u32*)(sb + r * B_ROW + b_chunk(r, n / CE) * 16 + (n % CE) * 4);
            }
        }
#endif
#if TC_KIND == 1
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int j = 0; j < 4; ++j) af[mi][j] = to_tf32(af[mi][j]);
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int j = 0; j < 2; ++j) bf[ni][j] = to_tf32(bf[ni][j]);
#endif
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) {
#if TC_KIND == 0
                mma_f16_16816(acc[mi][ni], af[mi], bf[ni]);
#elif TC_KIND == 1
                mma_tf32_1688(acc[mi][ni], af[mi], bf[ni]);
#elif TC_KIND == 2
                mma_s8_16832(acc[mi][ni], af[mi], bf[ni]);
#else
                mma_e4m3_16832(acc[mi][ni], af[mi], bf[ni]);
#endif
            }
    }
}

// ptxas trades a few spilled registers for occupancy in some 8-bit kernels
// (the transposing B loader, the scaled epilogue); one block per SM as the
// stated minimum lets them keep their registers.
#if TC_BYTES
#define TC_BOUNDS __launch_bounds__(TC_THREADS, 1)
#else
#define TC_BOUNDS __launch_bounds__(TC_THREADS)
#endif

extern "C" __global__ void TC_BOUNDS trtc_gemm_tc(GEMM_PARAMS) {
    __shared__ __align__(128) unsigned char smem[STAGES * (A_STAGE + B_STAGE)];
    GEMM_BATCH_SETUP(epi)
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int wm0 = (warp / WN) * WTM, wn0 = (warp % WN) * WTN;
    unsigned char* const sa = smem;
    unsigned char* const sb = smem + STAGES * A_STAGE;

    acc_t acc[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[mi][ni][j] = 0;

    // Prologue: the first STAGES - 1 k-tiles in flight, one commit group
    // each (empty past the end, so that group i is always k-tile i).
    const int ktiles = (K + BK - 1) / BK;
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < ktiles) {
            tc_load_stage(sa + s * A_STAGE, sb + s * B_STAGE, A, B, M, N, K, m0, n0, s * BK, tid);
#if B_TRANSPOSE
            BRegs b;
            tc_load_b(b, B, N, K, n0, s * BK, tid);
            tc_store_b(b, sb + s * B_STAGE, tid);
#endif
        }
        cp_async_commit();
    }
    for (int kt = 0; kt < ktiles; ++kt) {
        // k-tile kt has landed for this thread; the barrier makes it
        // visible to all and ends every warp's reads of k-tile kt - 1,
        // whose buffer the next prefetch reuses.
        cp_async_wait<STAGES - 2>();
        __syncthreads();
        const int pf = kt + STAGES - 1;
        if (pf < ktiles) {
            const int s = pf % STAGES;
            tc_load_stage(sa + s * A_STAGE, sb + s * B_STAGE, A, B, M, N, K, m0, n0, pf * BK, tid);
        }
        cp_async_commit();
#if B_TRANSPOSE
        // Loaded before and stored after this k-tile's mma, which hides the
        // loads' latency; the stores land in k-tile kt - 1's buffer, which
        // every warp is done with, and are read after a later barrier.
        BRegs b;
        if (pf < ktiles) tc_load_b(b, B, N, K, n0, pf * BK, tid);
#endif
        const int s = kt % STAGES;
        tc_compute_stage(sa + s * A_STAGE, sb + s * B_STAGE, wm0, wn0, lane, acc);
#if B_TRANSPOSE
        if (pf < ktiles) tc_store_b(b, sb + (pf % STAGES) * B_STAGE, tid);
#endif
    }
    cp_async_wait<0>();

    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {
            const int r = m0 + wm0 + mi * 16 + g, c = n0 + wn0 + ni * 8 + 2 * t;
            gemm_store2(epi, r, c, acc[mi][ni][0], acc[mi][ni][1]);
            gemm_store2(epi, r + 8, c, acc[mi][ni][2], acc[mi][ni][3]);
        }
}
