// Movement kernels that also write values not read from the data input:
// Pad (KIND 1), Trilu (KIND 2), OneHot (KIND 3), IndexGrid (KIND 4) and
// SizeOf (KIND 5). ELEM is NARROW here.

#if KIND == 1
// Pad in MODE 0 constant, 1 reflect, 2 edge, 3 wrap. Per output dimension
// d: its size o<d>, the padding before the kept region b<d>, the kept size
// k<d>, the elements cropped from the input's start c<d> and the input's
// stride s<d>. A coordinate inside the kept region reads the input; outside,
// constant mode writes `value[0]` (with HAS_VALUE; 0 without the value
// input), the other modes map the coordinate into the kept region as the CPU
// does.
#define TRTC_PAD_DIM_PARAMS(d) long long o##d, long long b##d, long long k##d, long long c##d, long long s##d
extern "C" __global__ void trtc_movement_pad(NARROW* __restrict__ out, const NARROW* __restrict__ in,
#if HAS_VALUE
                                             const NARROW* __restrict__ value,
#endif
                                             long long n_,
                                             TRTC_PAD_DIM_PARAMS(0), TRTC_PAD_DIM_PARAMS(1), TRTC_PAD_DIM_PARAMS(2),
                                             TRTC_PAD_DIM_PARAMS(3), TRTC_PAD_DIM_PARAMS(4), TRTC_PAD_DIM_PARAMS(5),
                                             TRTC_PAD_DIM_PARAMS(6), TRTC_PAD_DIM_PARAMS(7)) {
    const long long od[8] = {o0, o1, o2, o3, o4, o5, o6, o7};
    const long long before[8] = {b0, b1, b2, b3, b4, b5, b6, b7};
    const long long kept[8] = {k0, k1, k2, k3, k4, k5, k6, k7};
    const long long crop[8] = {c0, c1, c2, c3, c4, c5, c6, c7};
    const long long stride[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
#if HAS_VALUE
    const NARROW fill = value[0];
#else
    const NARROW fill = (NARROW)0;
#endif
    const IDX n = (IDX)n_;
    TRTC_FOR_EACH(i, n) {
        IDX r = i;
        long long src = 0;
        bool inside = true;
#pragma unroll
        for (int d = RANK - 1; d >= 0; --d) {
            IDX c = r;
            if (d > 0) {
                c = r % (IDX)od[d];
                r /= (IDX)od[d];
            }
            const long long rel = (long long)c - before[d];
            const long long m = kept[d];
            long long j;
#if MODE == 0
            if (rel < 0 || rel >= m) inside = false;
            j = rel;
#elif MODE == 1
            if (m == 1) {
                j = 0;
            } else {
                const long long period = 2 * (m - 1);
                j = rel % period;
                if (j < 0) j += period;
                if (j >= m) j = period - j;
            }
#elif MODE == 2
            j = rel < 0 ? 0 : (rel > m - 1 ? m - 1 : rel);
#else
            j = rel % m;
            if (j < 0) j += m;
#endif
            src += (crop[d] + j) * stride[d];
        }
        out[i] = inside ? in[src] : fill;
    }
}
#elif KIND == 2
// Over [mats, rows, cols]: keeps column j of row i where j - i >= k (upper)
// or j - i <= k (lower) and zeroes the rest.
extern "C" __global__ void trtc_movement_trilu(NARROW* __restrict__ out, const NARROW* __restrict__ in, long long n_,
                                               long long rows, long long cols, long long k, int upper) {
    const IDX n = (IDX)n_;
    TRTC_FOR_EACH(i, n) {
        const long long j = (long long)(i % (IDX)cols);
        const long long row = (long long)((i / (IDX)cols) % (IDX)rows);
        const bool keep = upper ? (j - row >= k) : (j - row <= k);
        out[i] = keep ? in[i] : (NARROW)0;
    }
}
#elif KIND == 3
// Output element (o, d, m) over [outer, depth, inner] is `on` where index
// (o, m) resolves to d and `off` elsewhere; values = [off, on]. INDEX_T is
// the indices' C type and INDEX_VALUE(p) their integer value (floats
// truncate, saturate and map NaN to 0, as the CPU's `trunc() as i64`).
extern "C" __global__ void trtc_movement_one_hot(NARROW* __restrict__ out, const INDEX_T* __restrict__ indices,
                                                 const NARROW* __restrict__ values, long long n_, long long inner,
                                                 long long depth) {
    const NARROW off = values[0], on = values[1];
    const IDX n = (IDX)n_;
    TRTC_FOR_EACH(i, n) {
        const IDX m = i % (IDX)inner;
        const IDX t = i / (IDX)inner;
        const long long d = (long long)(t % (IDX)depth);
        const IDX o = t / (IDX)depth;
        long long v = INDEX_VALUE(indices + o * (IDX)inner + m);
        if (v < 0) v += depth;
        out[i] = v == d ? on : off;
    }
}
#elif KIND == 4
// IndexGrid: element i of a row-major grid of RANK dimensions (sizes
// d1..d7 of dimensions 1 to RANK - 1; dimension 0 needs none) holds
// offset + sum over d of step_d * index_d, in wrapping 64-bit arithmetic,
// stored truncated to NARROW (i64 or i32), as the CPU computes it.
extern "C" __global__ void trtc_movement_index_grid(NARROW* __restrict__ out, long long n_, long long offset,
                                                    long long d1, long long d2, long long d3, long long d4,
                                                    long long d5, long long d6, long long d7, long long t0,
                                                    long long t1, long long t2, long long t3, long long t4,
                                                    long long t5, long long t6, long long t7) {
    const long long size[8] = {1, d1, d2, d3, d4, d5, d6, d7};
    const unsigned long long step[8] = {(unsigned long long)t0, (unsigned long long)t1, (unsigned long long)t2,
                                        (unsigned long long)t3, (unsigned long long)t4, (unsigned long long)t5,
                                        (unsigned long long)t6, (unsigned long long)t7};
    const IDX n = (IDX)n_;
    TRTC_FOR_EACH(i, n) {
        IDX r = i;
        unsigned long long v = (unsigned long long)offset;
#pragma unroll
        for (int d = RANK - 1; d >= 0; --d) {
            IDX c = r;
            if (d > 0) {
                c = r % (IDX)size[d];
                r /= (IDX)size[d];
            }
            v += step[d] * (unsigned long long)c;
        }
        out[i] = (NARROW)v;
    }
}
#elif KIND == 5
// SizeOf: the n (at most 8) sizes read from the bound shapes, passed as
// arguments, stored as NARROW (i64 or i32).
extern "C" __global__ void trtc_movement_sizes(NARROW* __restrict__ out, long long n, long long v0, long long v1,
                                               long long v2, long long v3, long long v4, long long v5, long long v6,
                                               long long v7) {
    // A chain of selects rather than an array indexed by the thread, which
    // ptxas would place in local memory.
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long v = i == 0 ? v0 : i == 1 ? v1 : i == 2 ? v2 : i == 3 ? v3 : i == 4 ? v4 : i == 5 ? v5 : i == 6 ? v6 : v7;
    if (i < n && i < 8) out[i] = (NARROW)v;
}
#endif
