// A strided copy: for every index of a RANK-dimensional iteration space (in
// row-major order, element i), one side is contiguous (element i) and the
// other at offset Σ coord[d] * stride[d] (strides may be negative or zero).
// With SCATTER 0 the output is contiguous and the input strided (Transpose,
// Slice, Split, Expand, Tile); with SCATTER 1 the reverse (one input of a
// Concat). Offsets and strides count ELEMs.
//
// dims d1..d7 are the iteration space's dimensions (the outermost is implied
// by n); s0..s7 the strided side's strides. Unused ones are ignored.
extern "C" __global__ void trtc_movement_copy(NARROW* __restrict__ out, const NARROW* __restrict__ in, long long n_,
                                              long long src_off, long long dst_off, long long d1, long long d2,
                                              long long d3, long long d4, long long d5, long long d6, long long d7,
                                              long long s0, long long s1, long long s2, long long s3, long long s4,
                                              long long s5, long long s6, long long s7) {
    const long long dims[8] = {1, d1, d2, d3, d4, d5, d6, d7};
    const long long strides[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
    const bool aligned = trtc_aligned(out, in);
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
#if SCATTER
        trtc_move(out, (IDX)dst_off + off, in, (IDX)src_off + i, aligned);
#else
        trtc_move(out, (IDX)dst_off + i, in, (IDX)src_off + off, aligned);
#endif
    }
}
