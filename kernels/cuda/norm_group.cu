// GroupNormalization and InstanceNormalization: one team (reduce_team.cuh,
// rows teams) per (batch item, group), whose channels and spatial elements
// are `len` contiguous elements. Mean, then the centered variance (two
// passes, f32), then per channel a = inv_std * scale, shift = bias - mean * a
// and y = x * a + shift, as the CPU op. Scale and bias hold one value per
// channel (param_div 1) or per group (param_div = channels per group).
//
// Defines: TX (x, y), TS (scale), TB (bias), and the team geometry.

extern "C" __global__ void trtc_norm_group(const TX* __restrict__ x, const TS* __restrict__ scale,
                                           const TB* __restrict__ bias, TX* __restrict__ y, long long nq, int len_all,
                                           int groups, int per_group, int spatial, int param_div, float eps) {
    for (long long first = (long long)blockIdx.x * TEAMS_PER_BLOCK; first < nq; first += (long long)gridDim.x * TEAMS_PER_BLOCK) {
        const long long q = first + TEAM_ID;
        const bool live = q < nq;
        const long long base = live ? q * len_all : 0;
        const int len = live ? len_all : 0;
        float s = 0.0f;
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) s += ld(x + base + r);
        const float mean = team_reduce<SumOp>(s) / (float)len_all;
        float v2 = 0.0f;
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) {
            const float d = ld(x + base + r) - mean;
            v2 += d * d;
        }
        const float var = team_reduce<SumOp>(v2) / (float)len_all;
        const float inv = 1.0f / sqrtf(var + eps);
        const int first_channel = (int)(q % groups) * per_group;
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) {
            const int p = (first_channel + r / spatial) / param_div;
            const float a = inv * ld(scale + p);
            const float shift = ld(bias + p) - mean * a;
            st(y + base + r, ld(x + base + r) * a + shift);
        }
    }
}
