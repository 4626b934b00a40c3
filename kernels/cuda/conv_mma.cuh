// Tensor-core building blocks of the conv kernels, in inline PTX (sm_80 and
// up; NVRTC has no CUDA headers). g = lane / 4, t = lane % 4 below.
//
// mma.sync, row-major A (16 x k), column-major B (k x 8), C/D (16 x 8):
//   conv_mma_tf32  m16n8k8:  a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4);
//                            b0 (k t, n g), b1 (k t+4, n g); f32 accumulators.
//   conv_mma_f16   m16n8k16: each register holds two f16 consecutive in k,
//                            the lower one in the low half:
//                            a0 (g, 2t..), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..);
//                            b0 (k 2t.., n g), b1 (k 2t+8.., n g); f32 accumulators.
//   conv_mma_s8    m16n8k32: each register holds four s8 consecutive in k:
//                            a0 (g, 4t..), a1 (g+8, 4t..), a2 (g, 4t+16..), a3 (g+8, 4t+16..);
//                            b0 (k 4t.., n g), b1 (k 4t+16.., n g); s32 accumulators.
//   Accumulators: c0, c1 = row g, cols 2t, 2t+1; c2, c3 = row g+8, same cols.
//
// conv_ldmatrix_x4_trans: four 8x8 matrices of 16-bit elements; lanes 8j..8j+7
// give the addresses of the 8 rows (16 bytes, 16-byte aligned) of matrix j,
// and lane l receives in r[j] the elements (row 2(l%4), col l/4) and
// (row 2(l%4)+1, col l/4) of matrix j: the transpose of a [k][m] tile.
//
// TRTC_EMULATE (never defined for NVRTC) selects the C++ equivalents of
// kernels/emu/shim.h, for the CPU emulator.

__device__ __forceinline__ u32 conv_smem_addr(const void* p) {
#ifdef TRTC_EMULATE
    return trtc_emu_smem_addr(p);
#else
    u32 a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
#endif
}

// Rounds an f32 to tf32 (nearest, ties away from zero), as cuBLAS does.
__device__ __forceinline__ u32 conv_tf32(float f) {
#ifdef TRTC_EMULATE
    return trtc_emu_to_tf32(f);
#else
    u32 r;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
    return r;
#endif
}

__device__ __forceinline__ void conv_mma_tf32(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
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

__device__ __forceinline__ void conv_mma_f16(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
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

__device__ __forceinline__ void conv_mma_s8(int (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
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

__device__ __forceinline__ void conv_ldmatrix_x4_trans(u32 (&r)[4], u32 addr) {
#ifdef TRTC_EMULATE
    trtc_emu_ldmatrix(r, 4, true, addr);
#else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
#endif
}
