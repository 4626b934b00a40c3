// Fused multi-head attention (FusedOp::Attention): one block per
// (query tile of TQ rows, head, batch item); WARPS warps, each owning
// TQ / WARPS query rows from the scores to the output.
//
// q, k: [batch, seq, heads * d], v: [batch, seq_k, heads * dv], out:
// [batch, seq_q, heads * dv]. As the CPU op: Q and K are scaled after the
// head split (q_scale, k_scale; 1 when absent, which is exact), scores =
// Q.K^T then * s_scale (or / s_scale with s_div), + mask (broadcast to
// [batch, heads, seq_q, seq_k] through its strides), softmax along the keys
// (maximum ignoring NaN, e = exp(s - max), p = e * (1 / sum e)), NaN
// probabilities set to 0 with nan_to_zero, then P.V. f32 arithmetic
// throughout; loads widen, the output store rounds once.
//
// Dynamic shared memory, in floats: Q tile [TQ][d], scores [TQ][sk], and a
// buffer for 32 keys, [32][d + 1] (padded against bank conflicts), reused
// for 32 values, [32][DVS * 32] (zero-filled past dv).
//
// Defines: TQ, WARPS, DVS (ceil(dv / 32)), TQT, TKT, TVT, TOT (storage of
// q, k, v, out), HAS_MASK, TMT (storage of the mask).

#define RW (TQ / WARPS)
#define NT (WARPS * 32)
#define KC 32

extern "C" __global__ void __launch_bounds__(NT) trtc_attention_fused(
    const TQT* __restrict__ q, const TKT* __restrict__ k, const TVT* __restrict__ v,
#if HAS_MASK
    const TMT* __restrict__ mask, long long msb, long long msh, long long msq, long long msk,
#endif
    TOT* __restrict__ out, int heads, int sq, int sk, int d, int dv, float q_scale, float k_scale, float s_scale,
    int s_div, int nan_to_zero) {
    extern __shared__ float smem[];
    float* qs = smem;
    float* sc = qs + TQ * d;
    float* kv = sc + TQ * sk;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int q0 = blockIdx.x * TQ, h = blockIdx.y, b = blockIdx.z;
    const long long hd = (long long)heads * d, hdv = (long long)heads * dv;
    const TQT* qb = q + ((long long)b * sq + q0) * hd + (long long)h * d;
    const TKT* kb = k + (long long)b * sk * hd + (long long)h * d;
    const TVT* vb = v + (long long)b * sk * hdv + (long long)h * dv;

    for (int i = tid; i < TQ * d; i += NT) {
        const int r = i / d, c = i - r * d;
        qs[i] = q0 + r < sq ? ld(qb + r * hd + c) * q_scale : 0.0f;
    }

    // Scores, 32 keys at a time: lane j of every warp computes key kc + j
    // for the warp's rows.
    const int row0 = warp * RW;
    for (int kc = 0; kc < sk; kc += KC) {
        __syncthreads();
        for (int i = tid; i < KC * d; i += NT) {
            const int j = i / d, c = i - j * d;
            kv[j * (d + 1) + c] = kc + j < sk ? ld(kb + (kc + j) * hd + c) * k_scale : 0.0f;
        }
        __syncthreads();
        float acc[RW];
#pragma unroll
        for (int r = 0; r < RW; ++r) acc[r] = 0.0f;
        const float* kr = kv + lane * (d + 1);
        const float* qr = qs + row0 * d;
        for (int c = 0; c < d; ++c) {
            const float kx = kr[c];
#pragma unroll
            for (int r = 0; r < RW; ++r) acc[r] += qr[r * d + c] * kx;
        }
        const int kj = kc + lane;
        if (kj < sk) {
#pragma unroll
            for (int r = 0; r < RW; ++r) {
                float s = s_div ? acc[r] / s_scale : acc[r] * s_scale;
#if HAS_MASK
                const int qi = q0 + row0 + r;
                if (qi < sq) s += ld(mask + b * msb + h * msh + qi * msq + kj * msk);
#endif
                sc[(row0 + r) * sk + kj] = s;
            }
        }
    }
    __syncwarp();

    // Softmax of the warp's own rows.
#pragma unroll
    for (int r = 0; r < RW; ++r) {
        float* sr = sc + (row0 + r) * sk;
        float m = -__int_as_float(0x7f800000);
        for (int j = lane; j < sk; j += 32) m = fmaxf(m, sr[j]);
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        float s = 0.0f;
        for (int j = lane; j < sk; j += 32) {
            const float e = expf(sr[j] - m);
            sr[j] = e;
            s += e;
        }
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        const float inv = 1.0f / s;
        for (int j = lane; j < sk; j += 32) {
            const float p = sr[j] * inv;
            sr[j] = nan_to_zero && p != p ? 0.0f : p;
        }
    }
    __syncwarp();

    // out = P.V, 32 values at a time: lane c of every warp accumulates
    // columns c, c + 32, ... of the warp's rows.
    float o[RW][DVS];
#pragma unroll
    for (int r = 0; r < RW; ++r)
#pragma unroll
        for (int s = 0; s < DVS; ++s) o[r][s] = 0.0f;
    for (int kc = 0; kc < sk; kc += KC) {
        __syncthreads();
        for (int i = tid; i < KC * DVS * 32; i += NT) {
            const int j = i / (DVS * 32), c = i - j * (DVS * 32);
            kv[i] = kc + j < sk && c < dv ? ld(vb + (kc + j) * hdv + c) : 0.0f;
        }
        __syncthreads();
        const int jn = sk - kc < KC ? sk - kc : KC;
        for (int j = 0; j < jn; ++j) {
            float vx[DVS];
#pragma unroll
            for (int s = 0; s < DVS; ++s) vx[s] = kv[j * (DVS * 32) + s * 32 + lane];
#pragma unroll
            for (int r = 0; r < RW; ++r) {
                const float p = sc[(row0 + r) * sk + kc + j];
#pragma unroll
                for (int s = 0; s < DVS; ++s) o[r][s] += p * vx[s];
            }
        }
    }
#pragma unroll
    for (int r = 0; r < RW; ++r) {
        const int qi = q0 + row0 + r;
        if (qi >= sq) continue;
        TOT* orow = out + ((long long)b * sq + qi) * hdv + (long long)h * dv;
#pragma unroll
        for (int s = 0; s < DVS; ++s) {
            const int c = s * 32 + lane;
            if (c < dv) st(orow + c, o[r][s]);
        }
    }
}
