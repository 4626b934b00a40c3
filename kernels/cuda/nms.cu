// NonMaxSuppression over boxes [B, N, 4] and scores [B, C, N] (f32), as the
// runtime's CPU reference computes it: per batch and class, the boxes whose
// score exceeds the threshold, in descending score order (scores ordered as
// Rust's f32::total_cmp orders them, ties by index), each kept unless it
// overlaps a kept box by more than the IoU threshold, at most `per_class` of
// them. The output lists [batch, class, box] triples (i64), batch-major then
// class, each class's boxes in the order they were kept.
//
// trtc_nms_classes: one block per (batch, class). A bit per box in dynamic
// shared memory says whether the box is still a candidate. Each round keeps
// the best candidate (a block-wide maximum of (score key, -index)) and, in
// one pass over the candidates, drops every one the kept box overlaps while
// finding the next best. A block writes its rows to its own stretch of the
// output's room, rows [(b * C + c) * room, + room), and its count to
// counts[1 + b * C + c].
// trtc_nms_compact: one block moves each class's rows down to follow the
// previous classes' and writes the number of rows to counts[0], which the
// executor reads back as the output's size in this run.
//
// Box arithmetic uses the _rn intrinsics so that NVRTC contracts nothing
// (bit-identical IoU with the CPU). Bits 0, 1 and 2 of `present` say which
// of the optional scalar inputs (max_output_boxes_per_class, iou_threshold,
// score_threshold) the layer has; an absent one's pointer is not read.
// Defines: CENTER (center_point_box).

struct TrtcNmsBox {
    float x1, y1, x2, y2, area;
};

// A box's four coordinates, read with one 16-byte load (plan tensors are
// 64-byte aligned and a box is 16 bytes).
struct __align__(16) TrtcNmsRaw {
    float v[4];
};

__device__ __forceinline__ TrtcNmsBox trtc_nms_box(const float* at) {
    const TrtcNmsRaw raw = *(const TrtcNmsRaw*)at;
    const float* v = raw.v;
    TrtcNmsBox b;
    if (CENTER) {
        const float hw = __fdiv_rn(v[2], 2.0f), hh = __fdiv_rn(v[3], 2.0f);
        b.x1 = __fsub_rn(v[0], hw);
        b.y1 = __fsub_rn(v[1], hh);
        b.x2 = __fadd_rn(v[0], hw);
        b.y2 = __fadd_rn(v[1], hh);
    } else {
        b.x1 = fminf(v[1], v[3]);
        b.y1 = fminf(v[0], v[2]);
        b.x2 = fmaxf(v[1], v[3]);
        b.y2 = fmaxf(v[0], v[2]);
    }
    b.area = __fmul_rn(__fsub_rn(b.x2, b.x1), __fsub_rn(b.y2, b.y1));
    return b;
}

// Whether `cand` overlaps the kept box `kept` by more than `threshold`
// (empty boxes never overlap), in the CPU's order of operations.
__device__ __forceinline__ bool trtc_nms_overlaps(const TrtcNmsBox& kept, const TrtcNmsBox& cand, float threshold) {
    const float w = __fsub_rn(fminf(kept.x2, cand.x2), fmaxf(kept.x1, cand.x1));
    const float h = __fsub_rn(fminf(kept.y2, cand.y2), fmaxf(kept.y1, cand.y1));
    if (w <= 0.0f || h <= 0.0f) return false;
    const float inter = __fmul_rn(w, h);
    const float uni = __fsub_rn(__fadd_rn(kept.area, cand.area), inter);
    if (kept.area <= 0.0f || cand.area <= 0.0f || uni <= 0.0f) return false;
    return __fdiv_rn(inter, uni) > threshold;
}

// A candidate's rank: larger is kept first. The score's total-order key in
// the high word (f32::total_cmp's order), the complemented index in the low
// word (lower index first among equal scores); never 0, which means none.
__device__ __forceinline__ u64 trtc_nms_rank(float score, u32 index) {
    const u32 bits = __float_as_uint(score);
    const u32 key = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
    return ((u64)key << 32) | (u64)(~index);
}

// The largest `v` of the block (blockDim.x a multiple of 32, at most 1024),
// given to every thread. `scratch` holds 33 values.
__device__ __forceinline__ u64 trtc_nms_block_max(u64 v, u64* scratch) {
    for (int d = 16; d > 0; d >>= 1) {
        const u64 o = __shfl_down_sync(0xffffffffu, v, d);
        v = o > v ? o : v;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (int)(blockDim.x >> 5) ? scratch[lane] : 0ull;
        for (int d = 16; d > 0; d >>= 1) {
            const u64 o = __shfl_down_sync(0xffffffffu, v, d);
            v = o > v ? o : v;
        }
        if (lane == 0) scratch[32] = v;
    }
    __syncthreads();
    v = scratch[32];
    // Nobody writes `scratch` again before every thread has read the result.
    __syncthreads();
    return v;
}

extern "C" __global__ void trtc_nms_classes(long long* __restrict__ out, u64* __restrict__ counts,
                                            const float* __restrict__ boxes, const float* __restrict__ scores,
                                            const long long* __restrict__ max_per_class,
                                            const float* __restrict__ iou_threshold,
                                            const float* __restrict__ score_threshold, int present,
                                            long long classes, long long n, long long room) {
    extern __shared__ u32 trtc_nms_alive[];
    __shared__ u64 scratch[33];
    const long long group = blockIdx.x;
    const long long b = group / classes, c = group % classes;
    const float* bx = boxes + b * n * 4;
    const float* s = scores + group * n;
    const long long wanted = (present & 1) ? (*max_per_class > 0 ? *max_per_class : 0) : 0;
    const long long per_class = wanted < room ? wanted : room;
    const float iou = (present & 2) ? *iou_threshold : 0.0f;
    const bool filter = (present & 4) != 0;
    const float min_score = filter ? *score_threshold : 0.0f;
    const long long words = (n + 31) / 32;
    // The candidates: boxes whose score passes the threshold; each thread
    // owns whole words, so no bit is shared between threads.
    u64 best = 0;
    for (long long w = threadIdx.x; w < words; w += blockDim.x) {
        u32 bits = 0;
        for (int k = 0; k < 32 && w * 32 + k < n; ++k) {
            const long long j = w * 32 + k;
            const float v = s[j];
            if (!filter || v > min_score) {
                bits |= 1u << k;
                const u64 r = trtc_nms_rank(v, (u32)j);
                best = r > best ? r : best;
            }
        }
        trtc_nms_alive[w] = bits;
    }
    best = trtc_nms_block_max(best, scratch);
    long long kept = 0;
    long long* rows = out + group * room * 3;
    while (best != 0 && kept < per_class) {
        const long long i = (long long)(u32)(~(u32)best);
        if (threadIdx.x == 0) {
            rows[kept * 3] = b;
            rows[kept * 3 + 1] = c;
            rows[kept * 3 + 2] = i;
        }
        ++kept;
        if (kept == per_class) break;
        const TrtcNmsBox k = trtc_nms_box(bx + i * 4);
        best = 0;
        for (long long w = threadIdx.x; w < words; w += blockDim.x) {
            u32 bits = trtc_nms_alive[w];
            if (w == i / 32) bits &= ~(1u << (i % 32));
            u32 left = bits;
            while (left) {
                const int bit = __ffs((int)left) - 1;
                left &= left - 1;
                const long long j = w * 32 + bit;
                if (trtc_nms_overlaps(k, trtc_nms_box(bx + j * 4), iou)) {
                    bits &= ~(1u << bit);
                } else {
                    const u64 r = trtc_nms_rank(s[j], (u32)j);
                    best = r > best ? r : best;
                }
            }
            trtc_nms_alive[w] = bits;
        }
        best = trtc_nms_block_max(best, scratch);
    }
    if (threadIdx.x == 0) counts[1 + group] = (u64)kept;
}

extern "C" __global__ void trtc_nms_compact(long long* __restrict__ out, u64* __restrict__ counts, long long groups,
                                            long long room) {
    long long dst = 0;
    for (long long g = 0; g < groups; ++g) {
        const long long k = (long long)counts[1 + g];
        const long long src = g * room;
        if (src != dst) {
            // Rows move down: chunk j is read whole before it is written, and
            // its writes land below chunk j + 1's sources.
            const long long elements = k * 3;
            for (long long base = 0; base < elements; base += blockDim.x) {
                const long long e = base + threadIdx.x;
                const long long v = e < elements ? out[src * 3 + e] : 0;
                __syncthreads();
                if (e < elements) out[dst * 3 + e] = v;
                __syncthreads();
            }
        }
        dst += k;
    }
    if (threadIdx.x == 0) counts[0] = (u64)dst;
}
