// A contiguous copy of `nbytes` bytes from in + src_off to out + dst_off, in
// 16-, 8- or 4-byte words when both addresses allow it (checked at run time,
// so one module serves every alignment), the tail byte by byte.
struct __align__(16) trtc_v16 { unsigned int x, y, z, w; };

template <typename W>
__device__ __forceinline__ unsigned long long trtc_copy_words(unsigned char* o, const unsigned char* s,
                                                              unsigned long long nbytes) {
    const unsigned long long words = nbytes / sizeof(W);
    W* ow = reinterpret_cast<W*>(o);
    const W* sw = reinterpret_cast<const W*>(s);
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < words;
         i += (unsigned long long)gridDim.x * blockDim.x)
        ow[i] = sw[i];
    return words * sizeof(W);
}

extern "C" __global__ void trtc_movement_flat(unsigned char* __restrict__ out, const unsigned char* __restrict__ in,
                                              long long nbytes_, long long dst_off, long long src_off) {
    unsigned char* o = out + dst_off;
    const unsigned char* s = in + src_off;
    const unsigned long long nbytes = (unsigned long long)nbytes_;
    const unsigned long long a = (unsigned long long)o | (unsigned long long)s;
    unsigned long long done = 0;
    if ((a & 15) == 0) {
        done = trtc_copy_words<trtc_v16>(o, s, nbytes);
    } else if ((a & 7) == 0) {
        done = trtc_copy_words<unsigned long long>(o, s, nbytes);
    } else if ((a & 3) == 0) {
        done = trtc_copy_words<unsigned int>(o, s, nbytes);
    }
    for (unsigned long long i = done + (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < nbytes;
         i += (unsigned long long)gridDim.x * blockDim.x)
        o[i] = s[i];
}
