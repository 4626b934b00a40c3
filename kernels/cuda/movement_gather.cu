// Index-driven copies: Gather, GatherElements, GatherND, ReverseSequence.
// Indices resolve as the CPU reference resolves them: negative ones count
// from the end of their dimension, and one outside [-dim, dim) is an error
// there. A kernel cannot return an error, so it traps instead: the launch
// fails and the executor reports it, rather than producing any output.
//
// The builder defines KIND (1 Gather, 2 GatherElements, 3 GatherND,
// 4 ReverseSequence), INDEX_T (the index type, int or long long) and, for
// GatherND, M (the length of an index tuple).

__device__ __forceinline__ long long trtc_resolve(long long i, long long dim) {
    const long long r = i < 0 ? i + dim : i;
    if (r < 0 || r >= dim) __trap();
    return r;
}

#if KIND == 1
// out[o, j, k] = in[o, resolve(indices[j]), k], counting k in ELEMs (the
// inner run is a multiple of VEC).
extern "C" __global__ void trtc_movement_gather(NARROW* __restrict__ out, const NARROW* __restrict__ in,
                                                const INDEX_T* __restrict__ indices, long long n_, long long inner,
                                                long long count, long long axis_len) {
    const bool aligned = trtc_aligned(out, in);
    const IDX n = (IDX)n_;
    TRTC_FOR_EACH(i, n) {
        const IDX k = i % (IDX)inner;
        const IDX t = i / (IDX)inner;
        const IDX j = t % (IDX)count;
        const IDX o = t / (IDX)count;
        const IDX r = (IDX)trtc_resolve((long long)indices[j], axis_len);
        trtc_move(out, i, in, (o * (IDX)axis_len + r) * (IDX)inner + k, aligned);
    }
}
#elif KIND == 2
// Over the indices' shape (dims d1..d7 below the implied outermost): out[c] =
// in[c with c[axis] = resolve(indices[c])]; s0..s7 are the input's strides
// with the axis' replaced by 0, axis_stride the axis' own.
extern "C" __global__ void trtc_movement_gather_elements(NARROW* __restrict__ out, const NARROW* __restrict__ in,
                                                         const INDEX_T* __restrict__ indices, long long n_,
                                                         long long axis_len, long long axis_stride, long long d1,
                                                         long long d2, long long d3, long long d4, long long d5,
                                                         long long d6, long long d7, long long s0, long long s1,
                                                         long long s2, long long s3, long long s4, long long s5,
                                                         long long s6, long long s7) {
    const long long dims[8] = {1, d1, d2, d3, d4, d5, d6, d7};
    const long long strides[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
    const IDX n = (IDX)n_;
    TRTC_FOR_EACH(i, n) {
        IDX r = i, off = 0;
#pragma unroll
        for (int d = RANK - 1; d > 0; --d) {
            const IDX c = r % (IDX)dims[d];
            r /= (IDX)dims[d];
            off += c * (IDX)strides[d];
        }
        off += r * (IDX)strides[0];
        off += (IDX)trtc_resolve((long long)indices[i], axis_len) * (IDX)axis_stride;
        out[i] = in[off];
    }
}
#elif KIND == 3
// Output element (g, e): index tuple g (batch entry g / tuples) addresses a
// block of `block` ELEMs; x0..x7 and t0..t7 are the dims and strides (in
// ELEMs) of the M tuple-indexed input dimensions.
extern "C" __global__ void trtc_movement_gather_nd(NARROW* __restrict__ out, const NARROW* __restrict__ in,
                                                   const INDEX_T* __restrict__ indices, long long n_, long long block,
                                                   long long tuples, long long batch_len, long long x0, long long x1,
                                                   long long x2, long long x3, long long x4, long long x5,
                                                   long long x6, long long x7, long long t0, long long t1,
                                                   long long t2, long long t3, long long t4, long long t5,
                                                   long long t6, long long t7) {
    const long long dims[8] = {x0, x1, x2, x3, x4, x5, x6, x7};
    const long long strides[8] = {t0, t1, t2, t3, t4, t5, t6, t7};
    const bool aligned = trtc_aligned(out, in);
    const IDX n = (IDX)n_;
    TRTC_FOR_EACH(i, n) {
        const IDX e = i % (IDX)block;
        const IDX g = i / (IDX)block;
        IDX off = (g / (IDX)tuples) * (IDX)batch_len + e;
#pragma unroll
        for (int j = 0; j < M; ++j) off += (IDX)trtc_resolve((long long)indices[g * M + j], dims[j]) * (IDX)strides[j];
        trtc_move(out, i, in, off, aligned);
    }
}
#elif KIND == 4
// Over [a0, a1, run] (the batch and time axes in either order, then the rest
// in ELEMs): the first lens[b] steps of batch entry b reverse along time.
extern "C" __global__ void trtc_movement_reverse_sequence(NARROW* __restrict__ out, const NARROW* __restrict__ in,
                                                          const INDEX_T* __restrict__ lens, long long n_,
                                                          long long a1, long long run, long long time,
                                                          int batch_first) {
    const bool aligned = trtc_aligned(out, in);
    const IDX n = (IDX)n_;
    TRTC_FOR_EACH(i, n) {
        const IDX k = i % (IDX)run;
        const IDX t01 = i / (IDX)run;
        const IDX c1 = t01 % (IDX)a1;
        const IDX c0 = t01 / (IDX)a1;
        const IDX b = batch_first ? c0 : c1;
        const IDX t = batch_first ? c1 : c0;
        const long long len = (long long)lens[b];
        if (len < 0 || len > time) __trap();
        const IDX src_t = t < (IDX)len ? (IDX)len - 1 - t : t;
        const IDX s = batch_first ? (c0 * (IDX)a1 + src_t) : (src_t * (IDX)a1 + c1);
        trtc_move(out, i, in, s * (IDX)run + k, aligned);
    }
}
#endif
