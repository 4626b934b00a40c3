// Tensor-core building blocks in inline PTX (sm_80 and up), for NVRTC without
// CUDA headers. Include after common.cuh (it uses u32).
//
// Shared memory addresses: smem_addr() turns a generic pointer to shared
// memory into the 32-bit shared-window address ldmatrix and cp.async take.
//
// cp.async (global -> shared, 16 bytes, bypassing L1):
//   cp_async16(dst, src, pred)  copies 16 bytes when pred, else writes 16
//                               zero bytes (src-size 0: nothing is read, but
//                               src must still be a valid global address);
//   cp_async_commit()           closes the current group of copies;
//   cp_async_wait<N>()          waits until at most N groups are pending.
//   Both addresses must be 16-byte aligned.
//
// ldmatrix (shared -> registers, one warp): ldmatrix_x4(r, addr) loads four
// 8x8 matrices of 16-bit elements; lanes 8j..8j+7 give the addresses of the
// 8 rows (16 bytes each) of matrix j, and lane t receives, in r[j], the two
// elements of row t/4, columns 2(t%4) and 2(t%4)+1 of matrix j. With .trans
// (ldmatrix_x4_trans) lane t receives rows 2(t%4), 2(t%4)+1 of column t/4
// instead. The element size only matters for the transposition: without it
// a "row of 16 bytes" works for any type, so one ldmatrix_x4 fetches the A
// fragment of every mma below from a K-contiguous tile, and an x4 on a
// K-contiguous [N][K] tile gives the B fragments of two n8 tiles.
//
// mma.sync (one warp, row-major A, column-major B, f32 or s32 accumulators).
// In units of 32-bit registers, the three shapes below share one layout
// (g = lane / 4, t = lane % 4); each register holds 32 bits of K, i.e. two
// f16, one tf32 or four s8 or e4m3 values, consecutive in K:
//   A (16 x 32 bytes of K): a0 = (row g,   K word t),   a1 = (row g+8, word t),
//                           a2 = (row g,   K word t+4), a3 = (row g+8, word t+4)
//   B (32 bytes of K x 8):  b0 = (K word t, col g),     b1 = (K word t+4, col g)
//   C/D (16 x 8):           c0, c1 = row g,   cols 2t, 2t+1
//                           c2, c3 = row g+8, cols 2t, 2t+1
//   mma_f16_16816   m16n8k16, f16 inputs, f32 accumulators;
//   mma_tf32_1688   m16n8k8, tf32 inputs (f32 bits rounded by to_tf32), f32;
//   mma_s8_16832    m16n8k32, s8 inputs, s32 accumulators (wrapping);
//   mma_e4m3_16832  m16n8k32, FP8 E4M3 inputs, f32 accumulators (sm_89
//                   and newer: Ada and Hopper).
//
// TRTC_EMULATE (never defined for NVRTC) selects the C++ equivalents of
// kernels/emu/shim.h, for the CPU emulator.

__device__ __forceinline__ u32 smem_addr(const void* p) {
#ifdef TRTC_EMULATE
    return trtc_emu_smem_addr(p);
#else
    u32 a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
#endif
}

__device__ __forceinline__ void cp_async16(u32 dst, const void* src, bool pred) {
    int n = pred ? 16 : 0;
#ifdef TRTC_EMULATE
    trtc_emu_cp_async(dst, src, 16, n);
#else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(n) : "memory");
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#ifdef TRTC_EMULATE
    trtc_emu_cp_async_commit();
#else
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
#ifdef TRTC_EMULATE
    trtc_emu_cp_async_wait(N);
#else
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], u32 addr) {
#ifdef TRTC_EMULATE
    trtc_emu_ldmatrix(r, 4, false, addr);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#endif
}

__device__ __forceinline__ void ldmatrix_x4_trans(u32 (&r)[4], u32 addr) {
#ifdef TRTC_EMULATE
    trtc_emu_ldmatrix(r, 4, true, addr);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#endif
}

// Rounds the f32 in `x` to tf32 (to nearest, ties away from zero), as the
// tf32 mma expects its operands.
__device__ __forceinline__ u32 to_tf32(u32 x) {
#ifdef TRTC_EMULATE
    return trtc_emu_to_tf32(__uint_as_float(x));
#else
    u32 r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(__uint_as_float(x)));
    return r;
#endif
}

__device__ __forceinline__ void mma_f16_16816(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
#ifdef TRTC_EMULATE
    trtc_emu_mma_f16_16816(d, a, b);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

__device__ __forceinline__ void mma_tf32_1688(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
#ifdef TRTC_EMULATE
    trtc_emu_mma_tf32_1688(d, a, b);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

__device__ __forceinline__ void mma_s8_16832(int (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
#ifdef TRTC_EMULATE
    trtc_emu_mma_s8_16832(d, a, b);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

__device__ __forceinline__ void mma_e4m3_16832(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
#ifdef TRTC_EMULATE
    trtc_emu_mma_e4m3_16832(d, a, b);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

// The 16-byte chunk where logical chunk `c` of row `r` of a tile with `cpr`
// chunks per row is stored (cpr a power of two >= 2): an XOR swizzle of the
// chunk index by the row. The 8 rows one ldmatrix reads (8 consecutive rows
// from a multiple of 8, same logical chunk) fall in 8 different bank groups;
// so do 8 rows 4 apart (r0 + 4j), which is how a transposing copy writes
// the tile. Copies into the tile use the same mapping.
__device__ __forceinline__ int swizzle_chunk(int r, int c, int cpr) {
    int c8 = cpr < 8 ? cpr : 8;
    return c ^ ((r / (8 / c8) + r / 8) % c8);
}
