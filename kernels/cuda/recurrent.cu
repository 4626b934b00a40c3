// LSTM, GRU and RNN (the runtime's `Recurrent`): one block per (batch
// entry, direction), on grid (N, D), runs that entry's whole sequence with
// its state in shared memory. Each step loads x_t, computes every gate row
// `x_t . W[row] + h . R[row] + biases` with one warp per row (lanes stride
// over the row, coalesced, then a shuffle sum), then the cell's gate math
// with one thread per hidden unit, as the CPU reference does: biases join
// the input projection, except the GRU's recurrent h-gate bias under
// LINEAR_BEFORE_RESET, which the reset gate scales with `h . R_h`; without
// it the candidate reads `R_h . (r * h)`, a second product after the reset
// gate. Pre-activations are clipped when HAS_CLIP; the LSTM's peepholes
// (i, o, f) read the previous cell state for i and f and the new one for
// o. A batch entry whose sequence length is L runs L steps (the reverse
// direction from step L - 1), its Y rows from L on are zero, Y_h and Y_c
// its state after its last step. A length outside [0, T] traps, so the
// launch fails as the CPU op fails. Arithmetic in f32; f16 storage widens
// on load and rounds once on store (`HalfIo`).
//
// Defines: T (storage: float or f16), TI (sequence lengths: int or long
// long), CELL (0 RNN, 1 GRU, 2 LSTM), LINEAR_BEFORE_RESET, INPUT_FORGET,
// HAS_CLIP, BATCH_MAJOR (ONNX layout = 1), REVERSE_ONLY (the one direction
// runs backwards), HAS_B, HAS_LENS, HAS_H0, HAS_C0, HAS_P (which optional
// inputs are given; an absent one's pointer is never read), ACTS
// (activations per direction), and `trtc_rnn_act(slot, x)` (slot =
// direction * ACTS + k).

#define TRTC_RNN_GATES (CELL == 0 ? 1 : (CELL == 1 ? 3 : 4))

__device__ __forceinline__ float trtc_rnn_clip(float v, float clip) {
#if HAS_CLIP
    return fminf(fmaxf(v, -clip), clip);
#else
    return v;
#endif
}

__device__ __forceinline__ float trtc_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void trtc_recurrent(T* __restrict__ y, T* __restrict__ y_h, T* __restrict__ y_c,
                                          const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ r,
                                          const T* __restrict__ b, const TI* __restrict__ lens,
                                          const T* __restrict__ h0, const T* __restrict__ c0,
                                          const T* __restrict__ p, long long steps, long long batch,
                                          long long input, long long hidden, long long dirs, float clip) {
    extern __shared__ float trtc_rnn_smem[];
    const long long bi = blockIdx.x, dir = blockIdx.y;
    const long long gh = TRTC_RNN_GATES * hidden;
    float* xs = trtc_rnn_smem;          // [input]
    float* hs = xs + input;             // [hidden]
    float* cs = hs + hidden;            // [hidden]
    float* gates = cs + hidden;         // [gh]
    float* extra = gates + gh;          // [hidden]: the GRU's r * h or h . R_h + Rb_h
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, warps = blockDim.x >> 5;
    const long long len = HAS_LENS ? (long long)lens[bi] : steps;
    if (len < 0 || len > steps) __trap();
    const bool reversed = dir == 1 || REVERSE_ONLY;
#if BATCH_MAJOR
#define TRTC_STATE(j) ((bi * dirs + dir) * hidden + (j))
#define TRTC_Y(t, j) (((bi * steps + (t)) * dirs + dir) * hidden + (j))
#define TRTC_X(t, k) ((bi * steps + (t)) * input + (k))
#else
#define TRTC_STATE(j) ((dir * batch + bi) * hidden + (j))
#define TRTC_Y(t, j) ((((t) * dirs + dir) * batch + bi) * hidden + (j))
#define TRTC_X(t, k) (((t) * batch + bi) * input + (k))
#endif
    for (long long j = tid; j < hidden; j += blockDim.x) {
        hs[j] = HAS_H0 ? ld(h0 + TRTC_STATE(j)) : 0.0f;
        cs[j] = HAS_C0 ? ld(c0 + TRTC_STATE(j)) : 0.0f;
    }
    // Rows a batch entry does not reach are zero.
    for (long long i = tid; i < (steps - len) * hidden; i += blockDim.x) {
        st(y + TRTC_Y(len + i / hidden, i % hidden), 0.0f);
    }
    const T* wd = w + dir * gh * input;
    const T* rd = r + dir * gh * hidden;
    const T* wb = b + dir * 2 * gh;
    const T* rb = wb + gh;
    const T* pd = p + dir * 3 * hidden;
    const int slot = (int)dir * ACTS;
    __syncthreads();
    for (long long s = 0; s < len; ++s) {
        const long long t = reversed ? len - 1 - s : s;
        for (long long k = tid; k < input; k += blockDim.x) xs[k] = ld(x + TRTC_X(t, k));
        __syncthreads();
        for (long long row = warp; row < gh; row += warps) {
            float ax = 0.0f, ah = 0.0f;
            const T* wrow = wd + row * input;
            for (long long k = lane; k < input; k += 32) ax += ld(wrow + k) * xs[k];
            // The GRU without linear_before_reset multiplies its h gate's R
            // by r * h, after the reset gate.
            const bool recurrent = !(CELL == 1 && !LINEAR_BEFORE_RESET && row >= 2 * hidden);
            if (recurrent) {
                const T* rrow = rd + row * hidden;
                for (long long k = lane; k < hidden; k += 32) ah += ld(rrow + k) * hs[k];
            }
            ax = trtc_warp_sum(ax);
            ah = trtc_warp_sum(ah);
            if (lane == 0) {
                const float bw = HAS_B ? ld(wb + row) : 0.0f, br = HAS_B ? ld(rb + row) : 0.0f;
                if (CELL == 1 && LINEAR_BEFORE_RESET && row >= 2 * hidden) {
                    gates[row] = ax + bw;
                    extra[row - 2 * hidden] = ah + br;
                } else {
                    gates[row] = ax + bw + br + ah;
                }
            }
        }
        __syncthreads();
#if CELL == 1 && !LINEAR_BEFORE_RESET
        for (long long j = tid; j < hidden; j += blockDim.x) {
            extra[j] = trtc_rnn_act(slot, trtc_rnn_clip(gates[hidden + j], clip)) * hs[j];
        }
        __syncthreads();
        for (long long row = 2 * hidden + warp; row < gh; row += warps) {
            float a = 0.0f;
            const T* rrow = rd + row * hidden;
            for (long long k = lane; k < hidden; k += 32) a += ld(rrow + k) * extra[k];
            a = trtc_warp_sum(a);
            if (lane == 0) gates[row] += a;
        }
        __syncthreads();
#endif
        for (long long j = tid; j < hidden; j += blockDim.x) {
            float hn;
#if CELL == 0
            hn = trtc_rnn_act(slot, trtc_rnn_clip(gates[j], clip));
#elif CELL == 1
            const float z = trtc_rnn_act(slot, trtc_rnn_clip(gates[j], clip));
#if LINEAR_BEFORE_RESET
            const float rg = trtc_rnn_act(slot, trtc_rnn_clip(gates[hidden + j], clip));
            const float cand = gates[2 * hidden + j] + rg * extra[j];
#else
            const float cand = gates[2 * hidden + j];
#endif
            const float hh = trtc_rnn_act(slot + 1, trtc_rnn_clip(cand, clip));
            hn = (1.0f - z) * hh + z * hs[j];
#else
            const float c_prev = cs[j];
            const float pi = HAS_P ? ld(pd + j) : 0.0f, po = HAS_P ? ld(pd + hidden + j) : 0.0f;
            const float pf = HAS_P ? ld(pd + 2 * hidden + j) : 0.0f;
            const float ig = trtc_rnn_act(slot, trtc_rnn_clip(gates[j] + pi * c_prev, clip));
#if INPUT_FORGET
            const float fg = 1.0f - ig;
#else
            const float fg = trtc_rnn_act(slot, trtc_rnn_clip(gates[2 * hidden + j] + pf * c_prev, clip));
#endif
            const float g = trtc_rnn_act(slot + 1, trtc_rnn_clip(gates[3 * hidden + j], clip));
            const float c = fg * c_prev + ig * g;
            cs[j] = c;
            const float o = trtc_rnn_act(slot, trtc_rnn_clip(gates[hidden + j] + po * c, clip));
            hn = o * trtc_rnn_act(slot + 2, c);
#endif
            hs[j] = hn;
            st(y + TRTC_Y(t, j), hn);
        }
        __syncthreads();
    }
    for (long long j = tid; j < hidden; j += blockDim.x) {
        st(y_h + TRTC_STATE(j), hs[j]);
        if (CELL == 2) st(y_c + TRTC_STATE(j), cs[j]);
    }
#undef TRTC_STATE
#undef TRTC_Y
#undef TRTC_X
}
