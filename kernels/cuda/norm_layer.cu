// LayerNormalization over rows of n contiguous elements (the trailing dims
// from the op's axis), one team per row (reduce_team.cuh, rows teams):
// mean, then the centered variance (two passes, f32), then
// y = (x - mean) * inv_std * scale + bias in the CPU op's order. Scale and
// bias broadcast to the normalized dims as their trailing ns / nb elements
// (index r mod ns). With STATS, also writes each row's mean and 1 / std.
//
// Defines: TX (x, y), TS (scale), TB (bias), TM (statistics), HAS_BIAS,
// STATS, and the team geometry.

extern "C" __global__ void trtc_norm_layer(const TX* __restrict__ x, const TS* __restrict__ scale,
#if HAS_BIAS
                                           const TB* __restrict__ bias,
#endif
                                           TX* __restrict__ y,
#if STATS
                                           TM* __restrict__ mean_out, TM* __restrict__ inv_out,
#endif
                                           long long nq, int n, int ns, int nb, float eps) {
    for (long long first = (long long)blockIdx.x * TEAMS_PER_BLOCK; first < nq; first += (long long)gridDim.x * TEAMS_PER_BLOCK) {
        const long long q = first + TEAM_ID;
        const bool live = q < nq;
        const long long base = live ? q * n : 0;
        const int len = live ? n : 0;
        float s = 0.0f;
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) s += ld(x + base + r);
        const float mean = team_reduce<SumOp>(s) / (float)n;
        float v2 = 0.0f;
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) {
            const float d = ld(x + base + r) - mean;
            v2 += d * d;
        }
        const float var = team_reduce<SumOp>(v2) / (float)n;
        const float inv = 1.0f / sqrtf(var + eps);
#if STATS
        if (live && TEAM_RANK == 0) {
            st(mean_out + q, mean);
            st(inv_out + q, inv);
        }
#endif
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) {
            const float sc = ld(scale + (ns == n ? r : r % ns));
#if HAS_BIAS
            const float bi = ld(bias + (nb == n ? r : r % nb));
#else
            const float bi = 0.0f;
#endif
            st(y + base + r, (ld(x + base + r) - mean) * inv * sc + bi);
        }
    }
}
