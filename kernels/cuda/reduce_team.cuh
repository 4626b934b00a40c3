// Axis reductions: the threads of a "team" cooperate on one output (one
// row of a reduction or normalization), and a tensor is seen through a
// `View` as `nq` outputs of `n` reduced elements each.
//
// The including source defines the team geometry:
//   TEAM_ROWS 1: block (TEAM_SIZE, TEAMS): a team is one row of the block,
//     TEAM_SIZE consecutive threads along x (warp shuffles when it fits in a
//     warp). For reductions whose innermost reduced dim is contiguous.
//   TEAM_ROWS 0: block (32, TEAM_SIZE): a team is one column of the block;
//     32 teams per block, so adjacent outputs sit on adjacent lanes. For
//     reductions whose innermost dim is kept.
// and RED2 (1 when the reduced elements span two merged dims).
// TEAM_SIZE is a power of two.

#if TEAM_ROWS
#define TEAMS_PER_BLOCK TEAMS
#define TEAM_ID threadIdx.y
#define TEAM_RANK threadIdx.x
#else
#define TEAMS_PER_BLOCK 32
#define TEAM_ID threadIdx.x
#define TEAM_RANK threadIdx.y
#endif

// Element (q, r) of the view lies at `view_base(q) + view_off(r)`: the
// output index q splits into (q1, q0) with q0 < q0n, the reduced index r
// into (r1, r0) with r0 < r0n, each part with its own element stride.
struct View {
    long long q0n, sq1, sq0;
    int r0n;
    long long sr1, sr0;
};

__device__ __forceinline__ long long view_base(const View& w, long long q) {
    const long long q1 = q / w.q0n;
    return q1 * w.sq1 + (q - q1 * w.q0n) * w.sq0;
}

__device__ __forceinline__ long long view_off(const View& w, int r) {
#if RED2
    const int r1 = r / w.r0n;
    return (long long)r1 * w.sr1 + (long long)(r - r1 * w.r0n) * w.sr0;
#else
    return (long long)r * w.sr0;
#endif
}

// Reductions as (identity, combine) pairs; all are associative and
// commutative, so any split of the work over threads gives the same result
// up to float rounding.
struct SumOp {
    __device__ static float id() { return 0.0f; }
    __device__ static float op(float a, float b) { return a + b; }
};
struct ProdOp {
    __device__ static float id() { return 1.0f; }
    __device__ static float op(float a, float b) { return a * b; }
};
// Sums in f64 (for statistics that must be exact on constant data).
struct DSumOp {
    __device__ static double id() { return 0.0; }
    __device__ static double op(double a, double b) { return a + b; }
};
// Max and min that propagate NaN (numpy's and the CPU Reduce's rule).
struct MaxNanOp {
    __device__ static float id() { return -__int_as_float(0x7f800000); }
    __device__ static float op(float a, float b) { return (a != a || b != b) ? a + b : fmaxf(a, b); }
};
struct MinNanOp {
    __device__ static float id() { return __int_as_float(0x7f800000); }
    __device__ static float op(float a, float b) { return (a != a || b != b) ? a + b : fminf(a, b); }
};
// Max that ignores NaN (`f32::max`, what the CPU Softmax takes).
struct MaxOp {
    __device__ static float id() { return -__int_as_float(0x7f800000); }
    __device__ static float op(float a, float b) { return fmaxf(a, b); }
};

// A candidate of ArgMax/ArgMin: its value and index (i < 0: none yet).
struct ArgVal {
    float v;
    int i;
};

// The sequential rule of the CPU op as an order-free combine: the first NaN
// wins; otherwise the largest (smallest) value, ties to the first index (the
// last with kLast).
template <bool kMax, bool kLast>
struct ArgOp {
    __device__ static ArgVal id() {
        ArgVal a;
        a.v = 0.0f;
        a.i = -1;
        return a;
    }
    __device__ static ArgVal op(ArgVal a, ArgVal b) {
        if (b.i < 0) return a;
        if (a.i < 0) return b;
        const bool an = a.v != a.v, bn = b.v != b.v;
        if (an || bn) {
            if (an && bn) return a.i < b.i ? a : b;
            return an ? a : b;
        }
        if (kMax ? b.v > a.v : b.v < a.v) return b;
        if (kMax ? a.v > b.v : a.v < b.v) return a;
        return (kLast ? b.i > a.i : b.i < a.i) ? b : a;
    }
};

__device__ __forceinline__ float shfl_xor(float v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
__device__ __forceinline__ double shfl_xor(double v, int o) {
    const int lo = __shfl_xor_sync(0xffffffffu, __double2loint(v), o);
    const int hi = __shfl_xor_sync(0xffffffffu, __double2hiint(v), o);
    return __hiloint2double(hi, lo);
}
__device__ __forceinline__ ArgVal shfl_xor(ArgVal a, int o) {
    a.v = __shfl_xor_sync(0xffffffffu, a.v, o);
    a.i = __shfl_xor_sync(0xffffffffu, a.i, o);
    return a;
}

// Every shfl_xor overload must be declared above: team_reduce finds them by
// ordinary lookup (a double would otherwise convert to float).

// Combines the values of a team; every thread of the team gets the result.
// Every thread of the block must call it (it may synchronize the block).
template <class Op, class T>
__device__ __forceinline__ T team_reduce(T v) {
#if TEAM_ROWS
#if TEAM_SIZE <= 32
    for (int o = TEAM_SIZE / 2; o > 0; o >>= 1) v = Op::op(v, shfl_xor(v, o));
    return v;
#else
    __shared__ T part[TEAMS][TEAM_SIZE / 32];
    for (int o = 16; o > 0; o >>= 1) v = Op::op(v, shfl_xor(v, o));
    if ((threadIdx.x & 31) == 0) part[threadIdx.y][threadIdx.x >> 5] = v;
    __syncthreads();
    v = part[threadIdx.y][0];
    for (int k = 1; k < TEAM_SIZE / 32; ++k) v = Op::op(v, part[threadIdx.y][k]);
    __syncthreads();
    return v;
#endif
#else
    __shared__ T part[TEAM_SIZE][33];
    part[threadIdx.y][threadIdx.x] = v;
    __syncthreads();
    for (int s = TEAM_SIZE / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.y < s) part[threadIdx.y][threadIdx.x] = Op::op(part[threadIdx.y][threadIdx.x], part[threadIdx.y + s][threadIdx.x]);
        __syncthreads();
    }
    v = part[0][threadIdx.x];
    __syncthreads();
    return v;
#endif
}

__device__ __forceinline__ View make_view(long long q0n, long long sq1, long long sq0, int r0n, long long sr1, long long sr0) {
    View w;
    w.q0n = q0n;
    w.sq1 = sq1;
    w.sq0 = sq0;
    w.r0n = r0n;
    w.sr1 = sr1;
    w.sr0 = sr0;
    return w;
}

// The parameters every axis kernel takes after its tensors, in this order:
// the number of outputs, the view, and the number of reduced elements.
#define VIEW_PARAMS long long nq, long long q0n, long long sq1, long long sq0, int n, int r0n, long long sr1, long long sr0
