// trtc's CUDA emulator, device side: the subset of CUDA C++ the kernels in
// kernels/cuda/ use, compiled by the host C++ compiler (g++ -std=c++20).
// See README.md next to this file for what it models and what it does not.
//
// Execution model: every CUDA thread of a block is a fiber (ucontext) with
// its own stack; the blocks of a grid run one after another. A fiber runs
// until it reaches a barrier (__syncthreads, __syncwarp, a shuffle, ldmatrix,
// mma) or returns; the scheduler then runs the next one, and releases a
// barrier once every thread it waits for has arrived. Execution is therefore
// sequential and deterministic: no data races, and the order in which the
// threads run between two barriers is thread 0 first, then 1, ...
//
// Inline PTX cannot run here: sources put the C++ emulation of each asm
// statement in an `#ifdef TRTC_EMULATE` branch that calls the functions
// below (trtc_emu_*), so that NVRTC, which never defines TRTC_EMULATE,
// compiles exactly the PTX it always did.
#pragma once
#define TRTC_EMULATE 1

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include <type_traits>
#include <utility>

extern "C" char __start_trtc_shared[], __stop_trtc_shared[];

// ---------------------------------------------------------------------------
// Qualifiers and built-in types.

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// Shared arrays are statics in one section, which the scheduler fills with
// 0xff bytes (NaN for floats) before every block: shared memory is not
// zero-initialized on a GPU either. (GCC ignores the section of statics in
// function templates; those keep the previous block's contents.)
#define __shared__ static __attribute__((section("trtc_shared")))
#define __constant__ static

struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) int2 { int x, y; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
struct __attribute__((aligned(16))) double2 { double x, y; };
struct __attribute__((aligned(16))) longlong2 { long long x, y; };
struct __attribute__((aligned(16))) ulonglong2 { unsigned long long x, y; };
struct __attribute__((aligned(4))) uchar4 { unsigned char x, y, z, w; };
struct __attribute__((aligned(4))) char4 { signed char x, y, z, w; };
struct __attribute__((aligned(4))) short2 { short x, y; };
struct __attribute__((aligned(4))) ushort2 { unsigned short x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline double2 make_double2(double x, double y) { return {x, y}; }
inline longlong2 make_longlong2(long long x, long long y) { return {x, y}; }
inline uchar4 make_uchar4(unsigned char x, unsigned char y, unsigned char z, unsigned char w) { return {x, y, z, w}; }
inline short2 make_short2(short x, short y) { return {x, y}; }

// The current thread's coordinates: globals the scheduler sets before it
// resumes a fiber (one OS thread runs every fiber).
extern uint3 threadIdx, blockIdx;
extern dim3 blockDim, gridDim;
static const int warpSize = 32;

// ---------------------------------------------------------------------------
// Arithmetic intrinsics. Host float arithmetic is IEEE round-to-nearest-even
// like the _rn intrinsics (the harness compiles with -ffp-contract=off, so
// nothing is fused unless a kernel calls fmaf).

inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float a) { return 1.0f / a; }
inline float __fsqrt_rn(float a) { return sqrtf(a); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float a, float b) { return powf(a, b); }
inline float __saturatef(float x) { return x != x ? 0.0f : fminf(fmaxf(x, 0.0f), 1.0f); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float exp10f(float x) { return powf(10.0f, x); }
inline float normcdff(float x) { return 0.5f * erfcf(-x * 0.70710678118654752f); }

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline double max(double a, double b) { return fmax(a, b); }
inline unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned umax(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long llmin(long long a, long long b) { return a < b ? a : b; }
inline long long llmax(long long a, long long b) { return a > b ? a : b; }

// Conversions with the GPU's rules: float to integer saturates and maps NaN
// to 0 (C++ leaves out-of-range conversions undefined).
template <class I> inline I trtc_emu_f2i(double v, double lo, double hi) {
    if (v != v) return 0;
    if (v <= lo) return (I)lo;
    if (v >= hi) return (I)hi;
    return (I)v;
}
inline float __int2float_rn(int i) { return (float)i; }
inline float __uint2float_rn(unsigned i) { return (float)i; }
inline float __ll2float_rn(long long i) { return (float)i; }
inline float __ull2float_rn(unsigned long long i) { return (float)i; }
inline double __int2double_rn(int i) { return (double)i; }
inline double __ll2double_rn(long long i) { return (double)i; }
inline int __float2int_rn(float f) { return trtc_emu_f2i<int>(nearbyint(f), -2147483648.0, 2147483647.0); }
inline int __float2int_rz(float f) { return trtc_emu_f2i<int>(trunc(f), -2147483648.0, 2147483647.0); }
inline int __float2int_rd(float f) { return trtc_emu_f2i<int>(floor(f), -2147483648.0, 2147483647.0); }
inline int __float2int_ru(float f) { return trtc_emu_f2i<int>(ceil(f), -2147483648.0, 2147483647.0); }
inline unsigned __float2uint_rn(float f) { return trtc_emu_f2i<unsigned>(nearbyint(f), 0.0, 4294967295.0); }
inline unsigned __float2uint_rz(float f) { return trtc_emu_f2i<unsigned>(trunc(f), 0.0, 4294967295.0); }
inline long long __float2ll_rn(float f) {
    return f != f ? 0 : f >= 9.2233720368547758e18f ? 9223372036854775807LL : f < -9.2233720368547758e18f ? (-9223372036854775807LL - 1) : (long long)nearbyintf(f);
}
inline long long __float2ll_rz(float f) {
    return f != f ? 0 : f >= 9.2233720368547758e18f ? 9223372036854775807LL : f < -9.2233720368547758e18f ? (-9223372036854775807LL - 1) : (long long)f;
}
inline int __double2int_rn(double d) { return trtc_emu_f2i<int>(nearbyint(d), -2147483648.0, 2147483647.0); }
inline int __double2int_rz(double d) { return trtc_emu_f2i<int>(trunc(d), -2147483648.0, 2147483647.0); }
inline float __double2float_rn(double d) { return (float)d; }

template <class To, class From> inline To trtc_emu_bits(From f) {
    static_assert(sizeof(To) == sizeof(From));
    To t;
    memcpy(&t, &f, sizeof t);
    return t;
}
inline int __float_as_int(float f) { return trtc_emu_bits<int>(f); }
inline unsigned __float_as_uint(float f) { return trtc_emu_bits<unsigned>(f); }
inline float __int_as_float(int i) { return trtc_emu_bits<float>(i); }
inline float __uint_as_float(unsigned i) { return trtc_emu_bits<float>(i); }
inline long long __double_as_longlong(double d) { return trtc_emu_bits<long long>(d); }
inline double __longlong_as_double(long long i) { return trtc_emu_bits<double>(i); }
inline int __double2loint(double d) { return (int)(unsigned)trtc_emu_bits<unsigned long long>(d); }
inline int __double2hiint(double d) { return (int)(unsigned)(trtc_emu_bits<unsigned long long>(d) >> 32); }
inline double __hiloint2double(int hi, int lo) {
    return trtc_emu_bits<double>(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo);
}

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; ++i) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
// prmt: byte i of the result is byte (s >> 4i) & 7 of the 8 bytes {y, x}.
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
    const unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)((v << (s & 31)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
    const unsigned long long v = ((unsigned long long)hi << 32) | lo;
    return (unsigned)(v >> (s & 31));
}
template <class T> inline T __ldg(const T* p) { return *p; }
inline void __threadfence() {}
inline void __threadfence_block() {}

// ---------------------------------------------------------------------------
// f16 and tf32 conversions (what the PTX cvt instructions compute).

// cvt.f32.f16
inline float trtc_emu_f16_to_f32(unsigned short h) {
    const unsigned sign = (unsigned)(h & 0x8000u) << 16;
    const unsigned e = (h >> 10) & 0x1f, m = h & 0x3ffu;
    if (e == 0) {
        const float v = ldexpf((float)m, -24);
        return sign ? -v : v;
    }
    if (e == 31) return trtc_emu_bits<float>(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
    return trtc_emu_bits<float>(sign | ((e + 112) << 23) | (m << 13));
}

// cvt.rn.f16.f32: round to nearest even, overflow to infinity.
inline unsigned short trtc_emu_f32_to_f16(float f) {
    const unsigned x = trtc_emu_bits<unsigned>(f);
    const unsigned short sign = (unsigned short)((x >> 16) & 0x8000u);
    const unsigned ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u | ((ax >> 13) & 0x1ffu);  // NaN stays NaN
    if (ax >= 0x47800000u) return sign | 0x7c00u;                          // >= 2^16: inf
    const unsigned e = ax >> 23;
    if (e >= 113) {  // a normal f16 (or rounds up to infinity)
        unsigned h = ((e - 112) << 10) | ((ax & 0x7fffffu) >> 13);
        const unsigned rem = ax & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
        return sign | (unsigned short)h;
    }
    if (e < 102) return sign;  // below half the smallest subnormal
    const unsigned m = (ax & 0x7fffffu) | 0x800000u;
    const unsigned shift = 126 - e;  // 14..24
    unsigned h = m >> shift;
    const unsigned rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return sign | (unsigned short)h;
}

// cvt.rna.tf32.f32: keep 10 mantissa bits, round to nearest, ties away
// from zero; the result is an f32 bit pattern with the low 13 bits clear.
inline unsigned trtc_emu_to_tf32(float f) {
    const unsigned x = trtc_emu_bits<unsigned>(f);
    if ((x & 0x7f800000u) == 0x7f800000u) return x;  // inf, NaN
    return (x + 0x1000u) & ~0x1fffu;
}

// ---------------------------------------------------------------------------
// The scheduler's interface (defined in driver.h).

namespace trtc_emu {
enum State { RUNNABLE, AT_BLOCK_BARRIER, AT_WARP_BARRIER, DONE };
// Per-thread state, indexed by the linear thread index in the block.
struct Thread {
    ucontext_t ctx;
    State state;
    unsigned warp_mask;  // the lanes a warp barrier waits for
    // Warp exchange area (shuffles, ldmatrix, mma): what this lane offers.
    unsigned long long value;
    const void* ptr;
    unsigned frag[10];
    // Pending cp.async copies: destination, source, bytes read, group.
    struct Copy {
        unsigned char* dst;
        const unsigned char* src;
        int bytes, read, group;
    } copies[64];
    int ncopies, group;
};
extern Thread* threads;
extern unsigned current;
void wait(State s, unsigned mask);
[[noreturn]] void fail(const char* fmt, ...);
unsigned char* smem_base();
unsigned char* dynamic_shared();
void note_exited_lanes();
// Fails unless [p, p + bytes) lies inside one device buffer.
void check_global(const void* p, size_t bytes, const char* what);
inline unsigned lin_tid() { return current; }
}  // namespace trtc_emu

inline void __syncthreads() { trtc_emu::wait(trtc_emu::AT_BLOCK_BARRIER, 0); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { trtc_emu::wait(trtc_emu::AT_WARP_BARRIER, mask); }
[[noreturn]] inline void __trap() { trtc_emu::fail("__trap() in thread %u of block (%u, %u, %u)", threadIdx.x, blockIdx.x, blockIdx.y, blockIdx.z); }

namespace trtc_emu {
// The lanes of the current warp, relative to the block's linear index.
inline unsigned warp_base() { return current & ~31u; }

// Offers `v`, waits for the warp, reads what lane `src` offered, and waits
// again so that the exchange area may be reused.
template <class T> inline T exchange(unsigned mask, T v, int src) {
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 64 bits");
    unsigned long long u = 0;
    memcpy(&u, &v, sizeof(T));
    threads[current].value = u;
    __syncwarp(mask);
    const unsigned s = warp_base() + ((unsigned)src & 31u);
    const unsigned long long r = threads[s].value;
    __syncwarp(mask);
    T out;
    memcpy(&out, &r, sizeof(T));
    return out;
}
inline unsigned lane() { return current & 31u; }
}  // namespace trtc_emu

template <class T> inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
    const int l = (int)trtc_emu::lane();
    return trtc_emu::exchange(mask, v, (l & ~(width - 1)) + (src & (width - 1)));
}
template <class T> inline T __shfl_xor_sync(unsigned mask, T v, int x, int width = 32) {
    const int l = (int)trtc_emu::lane();
    const int s = l ^ x;
    return trtc_emu::exchange(mask, v, ((s & ~(width - 1)) == (l & ~(width - 1))) ? s : l);
}
template <class T> inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
    const int l = (int)trtc_emu::lane();
    const int s = l + (int)d;
    return trtc_emu::exchange(mask, v, ((s & ~(width - 1)) == (l & ~(width - 1))) ? s : l);
}
template <class T> inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {
    const int l = (int)trtc_emu::lane();
    const int s = l - (int)d;
    return trtc_emu::exchange(mask, v, (s >= (l & ~(width - 1))) ? s : l);
}
inline unsigned __ballot_sync(unsigned mask, int p) {
    trtc_emu::threads[trtc_emu::current].value = p != 0;
    __syncwarp(mask);
    unsigned r = 0;
    for (unsigned l = 0; l < 32; ++l) {
        const unsigned t = trtc_emu::warp_base() + l;
        if (((mask >> l) & 1u) && t < blockDim.x * blockDim.y * blockDim.z && trtc_emu::threads[t].value) r |= 1u << l;
    }
    __syncwarp(mask);
    return r;
}
inline int __any_sync(unsigned mask, int p) { return __ballot_sync(mask, p) != 0; }
inline int __all_sync(unsigned mask, int p) { return __ballot_sync(mask, p) == __ballot_sync(mask, 1); }
inline unsigned __activemask() { return 0xffffffffu; }

// Atomics: execution is sequential, so plain read-modify-writes.
template <class T> inline T atomicAdd(T* p, T v) { T o = *p; *p = o + v; return o; }
template <class T> inline T atomicMax(T* p, T v) { T o = *p; *p = o > v ? o : v; return o; }
template <class T> inline T atomicMin(T* p, T v) { T o = *p; *p = o < v ? o : v; return o; }
template <class T> inline T atomicExch(T* p, T v) { T o = *p; *p = v; return o; }
template <class T> inline T atomicCAS(T* p, T c, T v) { T o = *p; if (o == c) *p = v; return o; }

// ---------------------------------------------------------------------------
// Tensor-core and async-copy PTX (mma.cuh).

// cvta.to.shared: a shared-window address is the offset in the section of
// shared statics (dynamic shared memory is part of it).
inline unsigned trtc_emu_smem_addr(const void* p) {
    const unsigned char* b = trtc_emu::smem_base();
    if ((const unsigned char*)p < b || (const char*)p >= __stop_trtc_shared)
        trtc_emu::fail("cvta.to.shared of %p, which is not shared memory", p);
    return (unsigned)((const unsigned char*)p - b);
}
inline unsigned char* trtc_emu_smem_ptr(unsigned a) { return trtc_emu::smem_base() + a; }

// cp.async.cg.shared.global [dst], [src], 16, src_size: queued, and carried
// out when a cp.async.wait_group retires its group: the latest moment the
// PTX memory model allows, so reading a stage before waiting for it reads
// stale data here.
inline void trtc_emu_cp_async(unsigned dst, const void* src, int bytes, int src_size) {
    trtc_emu::Thread& t = trtc_emu::threads[trtc_emu::current];
    unsigned char* d = trtc_emu_smem_ptr(dst);
    if ((dst % bytes) != 0 || ((uintptr_t)src % bytes) != 0)
        trtc_emu::fail("misaligned cp.async of %d bytes: shared %#x, global %p", bytes, dst, src);
    if (t.ncopies == (int)(sizeof t.copies / sizeof t.copies[0])) trtc_emu::fail("more than 64 pending cp.async copies in one thread");
    // The source must be a valid global address even when nothing is read.
    trtc_emu::check_global(src, src_size > 0 ? (size_t)src_size : 0, "cp.async source");
    t.copies[t.ncopies++] = {d, (const unsigned char*)src, bytes, src_size < bytes ? src_size : bytes, t.group};
}
inline void trtc_emu_cp_async_commit() { trtc_emu::threads[trtc_emu::current].group++; }
// cp.async.wait_group n: completes every committed group but the n newest.
inline void trtc_emu_cp_async_wait(int n) {
    trtc_emu::Thread& t = trtc_emu::threads[trtc_emu::current];
    int kept = 0;
    for (int i = 0; i < t.ncopies; ++i) {
        const auto& c = t.copies[i];
        if (c.group < t.group - n) {
            memcpy(c.dst, c.src, c.read);
            memset(c.dst + c.read, 0, c.bytes - c.read);
        } else {
            t.copies[kept++] = c;
        }
    }
    t.ncopies = kept;
}

// ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{.trans}.shared.b16: lanes 8j..8j+7
// give the row addresses of matrix j; lane l receives, in r[j], the 16-bit
// elements (row l/4, cols 2(l%4), 2(l%4)+1) of matrix j, or with .trans
// (rows 2(l%4), 2(l%4)+1, col l/4); the lower column (row) in the low half.
inline void trtc_emu_ldmatrix(unsigned* r, int num, bool trans, unsigned addr) {
    using namespace trtc_emu;
    if (addr % 16) fail("ldmatrix row address %#x is not 16-byte aligned", addr);
    threads[current].ptr = trtc_emu_smem_ptr(addr);
    __syncwarp();
    const unsigned l = lane(), base = warp_base();
    for (int j = 0; j < num; ++j) {
        auto row = [&](unsigned i) { return (const unsigned short*)threads[base + 8 * j + i].ptr; };
        if (!trans) {
            const unsigned short* p = row(l / 4);
            r[j] = p[2 * (l % 4)] | ((unsigned)p[2 * (l % 4) + 1] << 16);
        } else {
            r[j] = row(2 * (l % 4))[l / 4] | ((unsigned)row(2 * (l % 4) + 1)[l / 4] << 16);
        }
    }
    __syncwarp();
}

// mma.sync.aligned.m16n8kK.row.col: in 32-bit registers (g = lane / 4,
// t = lane % 4), each register holding E elements consecutive in k (the
// lowest k in the lowest bits):
//   A: a0 (row g, word t), a1 (row g+8, word t), a2 (row g, word t+4),
//      a3 (row g+8, word t+4);  B: b0 (word t, col g), b1 (word t+4, col g);
//   C/D: c0, c1 (row g, cols 2t, 2t+1), c2, c3 (row g+8, cols 2t, 2t+1).
// Kind 0: f16 (E = 2, k16), 1: tf32 (E = 1, k8), 2: s8 (E = 4, k32), 3:
// FP8 E4M3 (E = 4, k32, f32 accumulators). Float products are summed in
// f64 and rounded once (the hardware's internal rounding differs in the
// last bits); tf32 operands drop their low 13 bits, as the hardware ignores
// them; s8 sums wrap like s32.
namespace trtc_emu {
// The value of an E4M3FN byte: bias 7, no infinities, S.1111.111 is NaN.
inline double e4m3_value(unsigned char b) {
    const int e = (b >> 3) & 15, m = b & 7;
    double magnitude;
    if (e == 15 && m == 7) magnitude = NAN;
    else if (e == 0) magnitude = ldexp((double)m, -9);
    else magnitude = ldexp((double)(8 + m), e - 10);
    return (b & 0x80) ? -magnitude : magnitude;
}
inline double mma_elem(int kind, unsigned word, int e) {
    switch (kind) {
    case 0: return trtc_emu_f16_to_f32((unsigned short)(word >> (16 * e)));
    case 1: return trtc_emu_bits<float>(word & ~0x1fffu);
    case 3: return e4m3_value((unsigned char)(word >> (8 * e)));
    default: return (double)(signed char)(word >> (8 * e));
    }
}
inline void mma(int kind, unsigned* d, const unsigned* a, const unsigned* b) {
    Thread& me = threads[current];
    for (int i = 0; i < 4; ++i) me.frag[i] = a[i];
    me.frag[4] = b[0];
    me.frag[5] = b[1];
    for (int i = 0; i < 4; ++i) me.frag[6 + i] = d[i];
    __syncwarp();
    const int E = kind == 0 ? 2 : kind == 1 ? 1 : 4;  // kinds 2 and 3: four bytes
    const unsigned base = warp_base(), l = lane(), g = l / 4, t = l % 4;
    // A word (row r, w) is held by lane 4(r % 8) + w % 4, register
    // (r >= 8) + 2 (w >= 4); B word (w, col c) by lane 4c + w % 4,
    // register (w >= 4).
    for (int i = 0; i < 4; ++i) {
        const unsigned r = g + 8 * (i >= 2), c = 2 * t + (i & 1);
        double sum = 0;
        long long isum = 0;
        for (unsigned w = 0; w < 8; ++w) {
            const unsigned aw = threads[base + 4 * (r % 8) + w % 4].frag[(r >= 8) + 2 * (w >= 4)];
            const unsigned bw = threads[base + 4 * c + w % 4].frag[4 + (w >= 4)];
            for (int e = 0; e < E; ++e) {
                if (kind == 2) isum += (long long)mma_elem(2, aw, e) * (long long)mma_elem(2, bw, e);
                else sum += mma_elem(kind, aw, e) * mma_elem(kind, bw, e);
            }
        }
        if (kind == 2) d[i] = (unsigned)((long long)(int)me.frag[6 + i] + isum);
        else d[i] = trtc_emu_bits<unsigned>((float)((double)trtc_emu_bits<float>(me.frag[6 + i]) + sum));
    }
    __syncwarp();
}
}  // namespace trtc_emu
inline void trtc_emu_mma_f16_16816(float* d, const unsigned* a, const unsigned* b) { trtc_emu::mma(0, (unsigned*)d, a, b); }
inline void trtc_emu_mma_tf32_1688(float* d, const unsigned* a, const unsigned* b) { trtc_emu::mma(1, (unsigned*)d, a, b); }
inline void trtc_emu_mma_s8_16832(int* d, const unsigned* a, const unsigned* b) { trtc_emu::mma(2, (unsigned*)d, a, b); }
inline void trtc_emu_mma_e4m3_16832(float* d, const unsigned* a, const unsigned* b) { trtc_emu::mma(3, (unsigned*)d, a, b); }

// ---------------------------------------------------------------------------
// Launch arguments: the driver passes each as an Arg, and invoke() converts
// them to the kernel's parameter types, checking kinds and sizes (an I32
// argument for a long long parameter is an error, as it is on the GPU).

namespace trtc_emu {
struct Arg {
    char kind;  // 'p' pointer, 'i' integer, 'f' f32
    int size;   // bytes of an integer argument (4 or 8)
    void* p;
    long long i;
    float f;
};
void launch_current(void (*body)(void*), void* ctx);

template <class T> inline T convert(const Arg& a, int index) {
    if constexpr (std::is_pointer_v<T>) {
        if (a.kind != 'p') fail("argument %d: a pointer parameter gets a %c argument", index, a.kind);
        return (T)a.p;
    } else if constexpr (std::is_floating_point_v<T>) {
        if (a.kind != 'f' || sizeof(T) != 4) fail("argument %d: a %zu-byte float parameter gets a %c argument", index, sizeof(T), a.kind);
        return (T)a.f;
    } else {
        static_assert(std::is_integral_v<T> || std::is_enum_v<T>, "unsupported kernel parameter type");
        if (a.kind != 'i' || a.size != (int)sizeof(T))
            fail("argument %d: a %zu-byte integer parameter gets a %c argument of %d bytes", index, sizeof(T), a.kind, a.size);
        return (T)a.i;
    }
}
template <class... P, size_t... I> inline void call(void (*f)(P...), const Arg* a, std::index_sequence<I...>) {
    f(convert<P>(a[I], (int)I)...);
}
template <class... P> inline void invoke(void (*f)(P...), const Arg* a, int n) {
    if (n != (int)sizeof...(P)) fail("%d launch arguments for a kernel of %zu parameters", n, sizeof...(P));
    struct Ctx {
        void (*f)(P...);
        const Arg* a;
    } ctx{f, a};
    launch_current([](void* c) { auto* x = (Ctx*)c; call(x->f, x->a, std::index_sequence_for<P...>{}); }, &ctx);
}
// One entry point of a module of the generated program.
struct Entry {
    const char* name;
    void (*run)(const Arg*, int);
};

// The emulated driver's launches (`libcuda.cpp`) pass what cuLaunchKernel
// got: a pointer to each parameter's value, with no types to check.
template <class... P, size_t... I> inline void call_raw(void (*f)(P...), void** p, std::index_sequence<I...>) {
    f(*(P*)p[I]...);
}
template <class... P> inline void invoke_raw(void (*f)(P...), void** p) {
    struct Ctx {
        void (*f)(P...);
        void** p;
    } ctx{f, p};
    launch_current([](void* c) { auto* x = (Ctx*)c; call_raw(x->f, x->p, std::index_sequence_for<P...>{}); }, &ctx);
}
template <class... P> struct ParamSizes {
    static constexpr size_t values[sizeof...(P) + 1] = {sizeof(P)..., 0};
};
template <class... P> constexpr const size_t* param_sizes(void (*)(P...)) { return ParamSizes<P...>::values; }
template <class... P> constexpr int param_count(void (*)(P...)) { return (int)sizeof...(P); }
// One entry point of a module compiled for the emulated driver, with the
// sizes of its parameters (the driver copies their values when a launch is
// captured into a graph).
struct RawEntry {
    const char* name;
    void (*run)(void**);
    int params;
    const size_t* sizes;
};
// What an entry point's name means where the preprocessor left its
// definition out of the module (the glue names every `__global__` of the
// text): a null entry.
struct Missing {};
template <auto F> void run_raw(void** p) { invoke_raw(F, p); }
template <auto F> constexpr RawEntry raw_entry(const char* name) {
    if constexpr (std::is_same_v<std::remove_cv_t<decltype(F)>, Missing>) {
        return RawEntry{nullptr, nullptr, -1, nullptr};
    } else {
        return RawEntry{name, run_raw<F>, param_count(F), param_sizes(F)};
    }
}
}  // namespace trtc_emu
