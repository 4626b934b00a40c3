// Reduce*, and the global pools, over a view (see reduce_team.cuh):
// y[q] = finish(fold over r of map(x[q, r])), accumulated in f32.
//
// Defines: TX (storage type of x and y), KIND (below), and the team
// geometry of reduce_team.cuh.

#define KIND_SUM 0
#define KIND_MEAN 1
#define KIND_MAX 2
#define KIND_MIN 3
#define KIND_PROD 4
#define KIND_L1 5
#define KIND_L2 6
#define KIND_LOGSUM 7
#define KIND_LOGSUMEXP 8
#define KIND_SUMSQUARE 9
// MaxPool over whole planes: NaN only when the first element is NaN (the
// first tap always wins, later taps only when strictly greater).
#define KIND_POOLMAX 10
// LpPool over whole planes: (sum |x|^p)^(1/p).
#define KIND_LP 11

#if KIND == KIND_PROD
typedef ProdOp FoldOp;
#elif KIND == KIND_MAX || KIND == KIND_LOGSUMEXP
typedef MaxNanOp FoldOp;
#elif KIND == KIND_MIN
typedef MinNanOp FoldOp;
#elif KIND == KIND_POOLMAX
typedef MaxOp FoldOp;
#else
typedef SumOp FoldOp;
#endif

__device__ __forceinline__ float reduce_map(float v, float p) {
#if KIND == KIND_L1
    return fabsf(v);
#elif KIND == KIND_L2 || KIND == KIND_SUMSQUARE
    return v * v;
#elif KIND == KIND_LP
    return powf(fabsf(v), p);
#else
    return v;
#endif
}

__device__ __forceinline__ float reduce_finish(float a, int n, float p) {
#if KIND == KIND_MEAN
    return a / (float)n;
#elif KIND == KIND_L2
    return sqrtf(a);
#elif KIND == KIND_LOGSUM
    return logf(a);
#elif KIND == KIND_LP
    return powf(a, 1.0f / p);
#else
    return a;
#endif
}

extern "C" __global__ void trtc_reduce_axis(const TX* __restrict__ x, TX* __restrict__ y, VIEW_PARAMS, float p) {
    const View w = make_view(q0n, sq1, sq0, r0n, sr1, sr0);
    for (long long first = (long long)blockIdx.x * TEAMS_PER_BLOCK; first < nq; first += (long long)gridDim.x * TEAMS_PER_BLOCK) {
        const long long q = first + TEAM_ID;
        const bool live = q < nq;
        const TX* xq = x + (live ? view_base(w, q) : 0);
        const int len = live ? n : 0;
        float a = FoldOp::id();
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) a = FoldOp::op(a, reduce_map(ld(xq + view_off(w, r)), p));
        a = team_reduce<FoldOp>(a);
#if KIND == KIND_LOGSUMEXP
        // Around the maximum when it is finite, like the CPU op.
        const float shift = fabsf(a) < __int_as_float(0x7f800000) ? a : 0.0f;
        float s = 0.0f;
        for (int r = TEAM_RANK; r < len; r += TEAM_SIZE) s += expf(ld(xq + view_off(w, r)) - shift);
        s = team_reduce<SumOp>(s);
        a = shift + logf(s);
#elif KIND == KIND_POOLMAX
        if (len > 0) {
            const float first_tap = ld(xq);
            if (first_tap != first_tap) a = first_tap;
        }
#endif
        if (live && TEAM_RANK == 0) st(y + q, reduce_finish(a, n, p));
    }
}
