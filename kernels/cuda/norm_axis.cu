// LpNormalization (p = 1 or 2) and MeanVarianceNormalization along the
// reduced elements of a view (see reduce_team.cuh); y has x's layout.
//
// LpNorm: y = x / ||x||_p, and 0 where the norm is 0 (f32 sums).
// MVN: y = (x - mean) / (sqrt(var) + 1e-9), with the mean and the centered
// variance summed in f64 like the CPU op: with an epsilon that small, a
// constant slice must give exactly x - mean = 0.
//
// Defines: TX (storage of x and y), KIND (below), and the team geometry.

#define NORM_L1 1
#define NORM_L2 2
#define NORM_MVN 3

extern "C" __global__ void trtc_norm_axis(const TX* __restrict__ x, TX* __restrict__ y, VIEW_PARAMS) {
    const View w = make_view(q0n, sq1, sq0, r0n, sr1, sr0);
    for (long long first = (long long)blockIdx.x * TEAMS_PER_BLOCK; first < nq; first += (long long)gridDim.x * TEAMS_PER_BLOCK) {
        const long long q = first + TEAM_ID;
        const bool live = q < nq;
        const long long base = live ? view_base(w, q) : 0;
        const int len = live ? n : 0;
#if KIND == NORM_MVN
        double s = 0.0;
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) s += (double)ld(x + base + view_off(w, r));
        const double mean = team_reduce<DSumOp>(s) / (double)n;
        double v2 = 0.0;
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) {
            const double d = (double)ld(x + base + view_off(w, r)) - mean;
            v2 += d * d;
        }
        const double var = team_reduce<DSumOp>(v2) / (double)n;
        const double inv = 1.0 / (sqrt(var) + 1e-9);
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) {
            const long long o = base + view_off(w, r);
            st(y + o, (float)(((double)ld(x + o) - mean) * inv));
        }
#else
        float a = 0.0f;
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) {
            const float v = ld(x + base + view_off(w, r));
#if KIND == NORM_L1
            a += fabsf(v);
#else
            a += v * v;
#endif
        }
        a = team_reduce<SumOp>(a);
#if KIND == NORM_L2
        a = sqrtf(a);
#endif
        const float inv = a == 0.0f ? 0.0f : 1.0f / a;
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) {
            const long long o = base + view_off(w, r);
            st(y + o, ld(x + o) * inv);
        }
#endif
    }
}
