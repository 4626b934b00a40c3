// Softmax and LogSoftmax along the reduced elements of a view (see
// reduce_team.cuh); y has x's layout. Like the CPU op: the maximum ignores
// NaN, e = exp(x - max), softmax = e * (1 / sum e), log-softmax =
// (x - max) - log(sum e). A row of -inf gives NaN, as on the CPU.
//
// Defines: TX (storage of x and y), LOG, and the team geometry.

extern "C" __global__ void trtc_softmax_axis(const TX* __restrict__ x, TX* __restrict__ y, VIEW_PARAMS) {
    const View w = make_view(q0n, sq1, sq0, r0n, sr1, sr0);
    for (long long first = (long long)blockIdx.x * TEAMS_PER_BLOCK; first < nq; first += (long long)gridDim.x * TEAMS_PER_BLOCK) {
        const long long q = first + TEAM_ID;
        const bool live = q < nq;
        const long long base = live ? view_base(w, q) : 0;
        const int len = live ? n : 0;
        float m = MaxOp::id();
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) m = fmaxf(m, ld(x + base + view_off(w, r)));
        m = team_reduce<MaxOp>(m);
        float s = 0.0f;
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) s += expf(ld(x + base + view_off(w, r)) - m);
        s = team_reduce<SumOp>(s);
#if LOG
        const float log_sum = logf(s);
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) {
            const long long o = base + view_off(w, r);
            st(y + o, (ld(x + o) - m) - log_sum);
        }
#else
        const float inv = 1.0f / s;
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) {
            const long long o = base + view_off(w, r);
            st(y + o, expf(ld(x + o) - m) * inv);
        }
#endif
    }
}
