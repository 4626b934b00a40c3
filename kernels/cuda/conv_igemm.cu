// Convolution as an implicit GEMM over NCDHW activations (2-D and 1-D convs
// run with D = KD = 1, 1-D ones with H = KH = 1 too):
//   out[img, co, p] = sum over k of A[img*P + p, k] * W[co, k]
// per group (blockIdx.z): GEMM rows are output pixels (m = img*P + p, P the
// pixels of one output plane), GEMM columns the group's output channels,
// and k = (ci*KD + kz)*KH*KW + ky*KW + kx runs over the group's input
// channels and kernel taps, the order of the weight's [M, C/g, kD, kH, kW]
// layout, so weight tiles are K-contiguous loads. A is never materialized:
// each tile of it is gathered from x while it is loaded (zero outside the
// image and past the edges of the GEMM).
//
// Pipeline: a block computes a TM x TN tile in steps of TK; the next step's
// tiles are loaded into registers while the current one is computed from
// shared memory (two shared buffers, one barrier per step).
//
// Defines (besides those of conv_common.cuh):
//   VARIANT   0 SIMT (f32 FMA, or exact int32 for int8), 1 TF32 mma.sync
//             m16n8k8, 2 f16 mma.sync m16n8k16, 3 s8 mma.sync m16n8k32,
//             4 e4m3 mma.sync m16n8k32 (f32 accumulators, sm_89 and newer);
//   TM TN TK  the block tile; SIMT: THM x THN outputs per thread, strided
//             by the thread grid; mma: WARPS_M x WARPS_N warps;
//   CONV3D    1 for 3-D convs (else the depth axis is compiled out);
//   POINTWISE 1 for 1x1 convs with unit strides and no padding: A is x
//             itself, read without any window arithmetic;
//   IDX64     1 when x is too large for 32-bit element offsets.

#if VARIANT == 0
#define THREADS ((TM / THM) * (TN / THN))
#else
#define THREADS (WARPS_M * WARPS_N * 32)
#define WM (TM / WARPS_M)
#define WN (TN / WARPS_N)
#define MI (WM / 16)
#define NI (WN / 8)
#endif

// The f16 and 8-bit mma take two or four consecutive k per 32-bit register:
// their loaders gather k in groups of KG, packed into one word (lowest k in
// the lowest bits), so a register stages a whole group.
#if VARIANT == 2
#define KG 2
#elif VARIANT >= 3
#define KG 4
#else
#define KG 1
#endif
#define KBITS (32 / KG)

// A loads: each thread gathers one k group of the tile for A_PER pixels
// (A_TPR consecutive threads cover consecutive pixels of one k group).
#define A_TPR (THREADS * KG / TK)
#define A_PER (TM / A_TPR)
// B loads: each thread loads one k group for B_PER output channels (B_KT
// consecutive threads cover consecutive k of one channel).
#define B_KT (TK / KG)
#define B_RS (THREADS / B_KT)
#define B_PER (TN / B_RS)

#if IDX64
typedef long long xidx_t;
#else
typedef int xidx_t;
#endif

// What one loaded element of A or B is held as between load and store.
#if VARIANT == 0
typedef acc_t reg_t;
#define CONV_LOAD(p) conv_ld(p)
#elif VARIANT == 1
typedef float reg_t;
#define CONV_LOAD(p) (*(p))
#elif VARIANT == 2
typedef u32 reg_t;
#define CONV_LOAD(p) ((u32)(p)->bits)
#elif VARIANT == 3
typedef u32 reg_t;
#define CONV_LOAD(p) ((u32)(unsigned char)*(p))
#else
typedef u32 reg_t;
#define CONV_LOAD(p) ((u32)(p)->bits)
#endif

// Sizes of one convolution, with the depth axis folded to constants when
// CONV3D is 0.
struct ConvGeo {
    int C, D, H, W, KD, KH, KW, dd, dh, dw, DHW, K;
};

// A position in k: input channel and kernel tap.
struct KPos {
    int ci, kz, ky, kx;
};

__device__ __forceinline__ KPos kpos_of(int k, const ConvGeo& g) {
    KPos s;
    s.kx = k % g.KW;
    k /= g.KW;
    s.ky = k % g.KH;
    k /= g.KH;
    s.kz = k % g.KD;
    s.ci = k / g.KD;
    return s;
}

// s += d digit by digit; every digit of d is below its radix, so each digit
// carries at most once.
__device__ __forceinline__ void kpos_add(KPos& s, const KPos& d, const ConvGeo& g) {
    int c;
    s.kx += d.kx;
    c = s.kx >= g.KW;
    if (c) s.kx -= g.KW;
    s.ky += d.ky + c;
    c = s.ky >= g.KH;
    if (c) s.ky -= g.KH;
    s.kz += d.kz + c;
    c = s.kz >= g.KD;
    if (c) s.kz -= g.KD;
    s.ci += d.ci + c;
}

// The parts of an element's address and bounds check that depend on k only.
struct KTap {
    int off, zd, yd, xd;
    bool valid;
};

__device__ __forceinline__ KTap ktap_of(const KPos& s, int k, const ConvGeo& g) {
    KTap t;
    t.valid = k < g.K;
#if POINTWISE
    t.zd = t.yd = t.xd = 0;
    t.off = s.ci * g.DHW;
#else
    t.zd = s.kz * g.dd;
    t.yd = s.ky * g.dh;
    t.xd = s.kx * g.dw;
    t.off = s.ci * g.DHW + (t.zd * g.H + t.yd) * g.W + t.xd;
#endif
    return t;
}

// Per-pixel part of the gather: the offset of the window's origin in x and
// its coordinates (iy = -2^29 marks a pixel past the end of the GEMM).
struct ARow {
    xidx_t off;
    int iz, iy, ix;
};

__device__ __forceinline__ bool arow_covers(const ARow& r, const KTap& t, const ConvGeo& g) {
#if POINTWISE
    return t.valid && r.iy >= 0;
#else
    bool ok = t.valid && (unsigned)(r.iy + t.yd) < (unsigned)g.H && (unsigned)(r.ix + t.xd) < (unsigned)g.W;
#if CONV3D
    ok = ok && (unsigned)(r.iz + t.zd) < (unsigned)g.D;
#endif
    return ok;
#endif
}

// Gathers this thread's share of the A and B tiles of the step starting at
// k0 into ra and rb; apos is the k position k0 + a_kl.
__device__ __forceinline__ void conv_load(reg_t (&ra)[A_PER], reg_t (&rb)[B_PER], const XT* __restrict__ x,
                                          const XT* __restrict__ w, const ARow (&arow)[A_PER],
                                          const int (&brow)[B_PER], const KPos& apos, int k0, int a_kl, int b_kl,
                                          const ConvGeo& g) {
#if KG == 1
    const KTap t = ktap_of(apos, k0 + a_kl, g);
#pragma unroll
    for (int j = 0; j < A_PER; ++j) {
        const bool ok = arow_covers(arow[j], t, g);
        ra[j] = ok ? (reg_t)CONV_LOAD(x + (arow[j].off + t.off)) : (reg_t)0;
    }
    const int kb = k0 + b_kl;
#pragma unroll
    for (int j = 0; j < B_PER; ++j) {
        const bool ok = brow[j] >= 0 && kb < g.K;
        rb[j] = ok ? (reg_t)CONV_LOAD(w + (brow[j] + kb)) : (reg_t)0;
    }
#else
    KTap t[KG];
    KPos s = apos;
    const KPos one = kpos_of(1, g);
#pragma unroll
    for (int e = 0; e < KG; ++e) {
        if (e) kpos_add(s, one, g);
        t[e] = ktap_of(s, k0 + a_kl + e, g);
    }
#pragma unroll
    for (int j = 0; j < A_PER; ++j) {
        u32 word = 0;
#pragma unroll
        for (int e = 0; e < KG; ++e) {
            const bool ok = arow_covers(arow[j], t[e], g);
            const u32 v = ok ? CONV_LOAD(x + (arow[j].off + t[e].off)) : 0u;
            word |= v << (KBITS * e);
        }
        ra[j] = word;
    }
    const int kb = k0 + b_kl;
#pragma unroll
    for (int j = 0; j < B_PER; ++j) {
        u32 word = 0;
#pragma unroll
        for (int e = 0; e < KG; ++e) {
            const bool ok = brow[j] >= 0 && kb + e < g.K;
            const u32 v = ok ? CONV_LOAD(w + (brow[j] + kb + e)) : 0u;
            word |= v << (KBITS * e);
        }
        rb[j] = word;
    }
#endif
}

// The shared buffers of one step. A is [k][pixel] (pixels contiguous, as
// gathered) for SIMT, TF32 and f16, whose A fragments come through
// ldmatrix.trans; it is [pixel][k] for s8 and e4m3 (four k per word). B is
// [k][channel] for SIMT and [channel][k] (k contiguous, as in the weight)
// for the mma variants. The paddings make the fragment reads of a warp hit
// 32 distinct banks (or distinct 16-byte rows for ldmatrix).
#if VARIANT == 0
typedef acc_t AsTile[TK][TM];
typedef acc_t BsTile[TK][TN + 1];
#elif VARIANT == 1
typedef u32 AsTile[TK][TM + 8];
typedef u32 BsTile[TN][TK + 4];
#elif VARIANT == 2
typedef unsigned short AsTile[TK][TM + 8];
typedef unsigned short BsTile[TN][TK + 8];
#else
typedef unsigned char AsTile[TM][TK + 16];
typedef unsigned char BsTile[TN][TK + 16];
#endif

// Stores ra and rb into one shared buffer.
__device__ __forceinline__ void conv_store(AsTile& As, BsTile& Bs, const reg_t (&ra)[A_PER], const reg_t (&rb)[B_PER],
                                           int a_kl, int a_ml, int b_kl, int b_nl) {
#pragma unroll
    for (int j = 0; j < A_PER; ++j) {
        const int m = a_ml + j * A_TPR;
#if VARIANT == 0
        As[a_kl][m] = ra[j];
#elif VARIANT == 1
        As[a_kl][m] = to_tf32(__float_as_uint(ra[j]));
#elif VARIANT == 2
        As[a_kl][m] = (unsigned short)ra[j];
        As[a_kl + 1][m] = (unsigned short)(ra[j] >> 16);
#else
        *(u32*)&As[m][a_kl] = ra[j];
#endif
    }
#pragma unroll
    for (int j = 0; j < B_PER; ++j) {
        const int n = b_nl + j * B_RS;
#if VARIANT == 0
        Bs[b_kl][n] = rb[j];
#elif VARIANT == 1
        Bs[n][b_kl] = to_tf32(__float_as_uint(rb[j]));
#else
        *(u32*)&Bs[n][b_kl] = rb[j];
#endif
    }
}

// A minimum of one block per SM lets ptxas use up to 255 registers; without
// it, ptxas aims at more resident blocks and spills.
extern "C" __global__ void __launch_bounds__(THREADS, 1)
trtc_conv_igemm(const XT* __restrict__ x, const XT* __restrict__ w, const BT* __restrict__ bias,
                const RT* __restrict__ residual, const float* __restrict__ wscale, OT* __restrict__ out,
                int has_bias, int has_res, float x_scale, float out_scale, int N, int C, int D_, int H, int W, int M,
                int OD_, int OH, int OW, int KD_, int KH, int KW, int sd_, int sh, int sw, int pd_, int ph, int pw,
                int dd_, int dh, int dw, int groups) {
#if CONV3D
    const int D = D_, OD = OD_, KD = KD_, dd = dd_;
#else
    const int D = 1, OD = 1, KD = 1, dd = 1;
#endif
    ConvGeo g;
    g.C = C;
    g.D = D;
    g.H = H;
    g.W = W;
    g.KD = KD;
    g.KH = KH;
    g.KW = KW;
    g.dd = dd;
    g.dh = dh;
    g.dw = dw;
    g.DHW = D * H * W;
    const int Cg = C / groups, Mg = M / groups;
    g.K = Cg * KD * KH * KW;
    const int P = OD * OH * OW;
    const int GM = N * P;
    const int grp = blockIdx.z;
    const int ntiles = (Mg + TN - 1) / TN;
    const int m0 = (blockIdx.x / ntiles) * TM;
    const int n0 = (blockIdx.x % ntiles) * TN;
    const int tid = threadIdx.x;

    __shared__ __align__(16) AsTile As[2];
    __shared__ __align__(16) BsTile Bs[2];

    // This thread's share of the A tile: k group a_kl, pixels a_ml + j*A_TPR.
    const int a_kl = (tid / A_TPR) * KG;
    const int a_ml = tid % A_TPR;
    ARow arow[A_PER];
#pragma unroll
    for (int j = 0; j < A_PER; ++j) {
        const int m = m0 + a_ml + j * A_TPR;
        ARow r;
        r.off = 0;
        r.iz = r.iy = r.ix = -(1 << 29);
        if (m < GM) {
            const int img = m / P;
            const int p = m - img * P;
            const xidx_t plane0 = ((xidx_t)img * C + (xidx_t)grp * Cg) * g.DHW;
#if POINTWISE
            r.off = plane0 + p;
            r.iz = r.iy = r.ix = 0;
#else
            const int ox = p % OW;
            const int q = p / OW;
            const int oy = q % OH;
#if CONV3D
            r.iz = (q / OH) * sd_ - pd_;
#else
            r.iz = 0;
#endif
            r.iy = oy * sh - ph;
            r.ix = ox * sw - pw;
            r.off = plane0 + (xidx_t)((r.iz * H + r.iy) * W + r.ix);
#endif
        }
        arow[j] = r;
    }
    // This thread's share of the B tile: k group b_kl, channels b_nl + j*B_RS
    // (weight row offsets, -1 past the group's channels).
    const int b_kl = (tid % B_KT) * KG;
    const int b_nl = tid / B_KT;
    int brow[B_PER];
#pragma unroll
    for (int j = 0; j < B_PER; ++j) {
        const int n = n0 + b_nl + j * B_RS;
        brow[j] = n < Mg ? (grp * Mg + n) * g.K : -1;
    }

    KPos apos = kpos_of(a_kl, g);
    const KPos astep = kpos_of(TK, g);
    reg_t ra[A_PER], rb[B_PER];
#if VARIANT == 0
    const int tx = tid % (TN / THN);
    const int ty = tid / (TN / THN);
    acc_t acc[THM][THN];
#pragma unroll
    for (int i = 0; i < THM; ++i)
#pragma unroll
        for (int j = 0; j < THN; ++j) acc[i][j] = 0;
#else
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int wm = (warp % WARPS_M) * WM;
    const int wn = (warp / WARPS_M) * WN;
    const int gq = lane >> 2;
    const int tq = lane & 3;
    acc_t acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0;
#endif

    const int ktiles = (g.K + TK - 1) / TK;
    if (ktiles > 0) {
        conv_load(ra, rb, x, w, arow, brow, apos, 0, a_kl, b_kl, g);
        conv_store(As[0], Bs[0], ra, rb, a_kl, a_ml, b_kl, b_nl);
    }
    __syncthreads();
    for (int kt = 0; kt < ktiles; ++kt) {
        const int buf = kt & 1;
        const bool more = kt + 1 < ktiles;
        if (more) {
            kpos_add(apos, astep, g);
            conv_load(ra, rb, x, w, arow, brow, apos, (kt + 1) * TK, a_kl, b_kl, g);
        }
#if VARIANT == 0
#pragma unroll
        for (int kk = 0; kk < TK; ++kk) {
            acc_t a[THM], b[THN];
#pragma unroll
            for (int i = 0; i < THM; ++i) a[i] = As[buf][kk][ty + i * (TM / THM)];
#pragma unroll
            for (int j = 0; j < THN; ++j) b[j] = Bs[buf][kk][tx + j * (TN / THN)];
#pragma unroll
            for (int i = 0; i < THM; ++i)
#pragma unroll
                for (int j = 0; j < THN; ++j) {
#if ACC_INT
                    acc[i][j] += a[i] * b[j];
#else
                    acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
#endif
                }
        }
#elif VARIANT == 1
#pragma unroll
        for (int kk = 0; kk < TK; kk += 8) {
            u32 a[MI][4], b[NI][2];
#pragma unroll
            for (int i = 0; i < MI; ++i) {
                const int r = wm + i * 16 + gq;
                a[i][0] = As[buf][kk + tq][r];
                a[i][1] = As[buf][kk + tq][r + 8];
                a[i][2] = As[buf][kk + tq + 4][r];
                a[i][3] = As[buf][kk + tq + 4][r + 8];
            }
#pragma unroll
            for (int j = 0; j < NI; ++j) {
                const int c = wn + j * 8 + gq;
                b[j][0] = Bs[buf][c][kk + tq];
                b[j][1] = Bs[buf][c][kk + tq + 4];
            }
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) mma_tf32_1688(acc[i][j], a[i], b[j]);
        }
#elif VARIANT == 2
#pragma unroll
        for (int kk = 0; kk < TK; kk += 16) {
            u32 a[MI][4], b[NI][2];
            const int mat = lane >> 3;
#pragma unroll
            for (int i = 0; i < MI; ++i) {
                const unsigned short* p = &As[buf][kk + (lane & 7) + ((mat >> 1) << 3)][wm + i * 16 + ((mat & 1) << 3)];
                ldmatrix_x4_trans(a[i], smem_addr(p));
            }
#pragma unroll
            for (int j = 0; j < NI; ++j) {
                const int c = wn + j * 8 + gq;
                b[j][0] = *(const u32*)&Bs[buf][c][kk + 2 * tq];
                b[j][1] = *(const u32*)&Bs[buf][c][kk + 8 + 2 * tq];
            }
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) mma_f16_16816(acc[i][j], a[i], b[j]);
        }
#else
#pragma unroll
        for (int kk = 0; kk < TK; kk += 32) {
            u32 a[MI][4], b[NI][2];
#pragma unroll
            for (int i = 0; i < MI; ++i) {
                const int r = wm + i * 16 + gq;
                a[i][0] = *(const u32*)&As[buf][r][kk + 4 * tq];
                a[i][1] = *(const u32*)&As[buf][r + 8][kk + 4 * tq];
                a[i][2] = *(const u32*)&As[buf][r][kk + 16 + 4 * tq];
                a[i][3] = *(const u32*)&As[buf][r + 8][kk + 16 + 4 * tq];
            }
#pragma unroll
            for (int j = 0; j < NI; ++j) {
                const int c = wn + j * 8 + gq;
                b[j][0] = *(const u32*)&Bs[buf][c][kk + 4 * tq];
                b[j][1] = *(const u32*)&Bs[buf][c][kk + 16 + 4 * tq];
            }
#pragma unroll
            for (int i = 0; i < MI; ++i)
#pragma unroll
                for (int j = 0; j < NI; ++j) {
#if VARIANT == 3
                    mma_s8_16832(acc[i][j], a[i], b[j]);
#else
                    mma_e4m3_16832(acc[i][j], a[i], b[j]);
#endif
                }
        }
#endif
        if (more) conv_store(As[buf ^ 1], Bs[buf ^ 1], ra, rb, a_kl, a_ml, b_kl, b_nl);
        __syncthreads();
    }

    // Epilogue: output element (img, co, p) of GEMM row m = img*P + p.
    const long long plane_stride = (long long)M * P;
#if VARIANT == 0
#pragma unroll
    for (int i = 0; i < THM; ++i) {
        const int m = m0 + ty + i * (TM / THM);
        if (m >= GM) continue;
        const int img = m / P;
        const long long obase = img * plane_stride + (m - img * P);
#pragma unroll
        for (int j = 0; j < THN; ++j) {
            const int n = n0 + tx + j * (TN / THN);
            if (n >= Mg) continue;
            const int co = grp * Mg + n;
            const float v = conv_product(acc[i][j], co, bias, has_bias, wscale, x_scale);
            conv_finish(out, residual, has_res, obase + (long long)co * P, v, out_scale);
        }
    }
#else
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = m0 + wm + i * 16 + h * 8 + gq;
            if (m >= GM) continue;
            const int img = m / P;
            const long long obase = img * plane_stride + (m - img * P);
#pragma unroll
            for (int j = 0; j < NI; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int n = n0 + wn + j * 8 + 2 * tq + e;
                    if (n >= Mg) continue;
                    const int co = grp * Mg + n;
                    const float v = conv_product(acc[i][j][2 * h + e], co, bias, has_bias, wscale, x_scale);
                    conv_finish(out, residual, has_res, obase + (long long)co * P, v, out_scale);
                }
        }
#endif
}
