// ArgMax / ArgMin along one axis, or Hardmax, over a view (see
// reduce_team.cuh). ArgMax/ArgMin write the index (long long) of the chosen
// element at y[q]; Hardmax writes 1 there and 0 elsewhere along the axis (y
// has x's layout).
//
// Defines: TX (storage of x), TY (storage of y), IS_MAX, LAST (ties go to
// the last index), HARDMAX, and the team geometry.

typedef ArgOp<IS_MAX, LAST> FoldOp;

extern "C" __global__ void trtc_reduce_arg(const TX* __restrict__ x, TY* __restrict__ y, VIEW_PARAMS) {
    const View w = make_view(q0n, sq1, sq0, r0n, sr1, sr0);
    for (long long first = (long long)blockIdx.x * TEAMS_PER_BLOCK; first < nq; first += (long long)gridDim.x * TEAMS_PER_BLOCK) {
        const long long q = first + TEAM_ID;
        const bool live = q < nq;
        const long long base = live ? view_base(w, q) : 0;
        const int len = live ? n : 0;
        ArgVal a = FoldOp::id();
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) {
            ArgVal c;
            c.v = ld(x + base + view_off(w, r));
            c.i = r;
            a = FoldOp::op(a, c);
        }
        a = team_reduce<FoldOp>(a);
#if HARDMAX
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) st(y + base + view_off(w, r), r == a.i ? 1.0f : 0.0f);
#else
        if (live && TEAM_RANK == 0) y[q] = (long long)a.i;
#endif
    }
}
