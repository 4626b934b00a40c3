// trtc's CUDA emulator, host side: the fiber scheduler and the program's
// main(). Included once, at the end of a generated program, after the
// modules and their entry table:
//   const trtc_emu::Entry trtc_emu_entries[] = {{"name", run}, ...};
//   const int trtc_emu_entry_count = ...;
//
// The program runs one job file (argv[1]), a list of lines:
//   buf ID BYTES in PATH ALIGN
//                            a read-only device buffer loaded from a file,
//                            starting ALIGN-byte aligned (256 is what
//                            cudaMalloc guarantees)
//   buf ID BYTES out ALIGN   an output buffer, filled with 0xff bytes first
//                            (NaN for floats) so that unwritten elements show
//                            (a buffer ID defined again is reallocated)
//   launch ENTRY GX GY GZ BX BY BZ SHARED N ARG...
//                            ARG: bID (buffer ID's address), n (null),
//                            i4:V or i8:V (integers), f:HEXBITS (f32)
//   save ID PATH             writes buffer ID to a file
//   fill ID                  refills buffer ID with 0xff bytes
//   order forward|reverse    the order in which the scheduler runs the
//                            threads of a block between barriers
// Buffers end at a page boundary followed by an inaccessible page, and the
// bytes between the buffer's end and that page (fewer than ALIGN) are
// checked after every launch, so out-of-bounds accesses past the end crash
// or are reported.
//
// With TRTC_EMU_LIBRARY defined (a module compiled for the emulated driver,
// `libcuda.cpp`), there is no main() and no job: the module exports
// trtc_emu_launch(), which runs one launch of one of its entry points on
// memory the driver allocated, and takes its entry table
//   const trtc_emu::RawEntry trtc_emu_raw_entries[] = {{"name", run}, ...};
//   const int trtc_emu_raw_entry_count = ...;
#pragma once
#include <stdarg.h>

#ifdef TRTC_EMU_LIBRARY
extern const trtc_emu::RawEntry trtc_emu_raw_entries[];
extern const int trtc_emu_raw_entry_count;
#else
extern const trtc_emu::Entry trtc_emu_entries[];
extern const int trtc_emu_entry_count;
#endif

uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;

namespace trtc_emu {
// Dynamic shared memory (extern __shared__ arrays point here).
static unsigned char dynamic_smem[228 * 1024] __attribute__((section("trtc_shared"), aligned(128)));
unsigned char* dynamic_shared() { return dynamic_smem; }
unsigned char* smem_base() { return (unsigned char*)__start_trtc_shared; }

Thread* threads;
unsigned current;
static unsigned nthreads;
static ucontext_t scheduler;
static const size_t STACK = 256 * 1024;
static unsigned char* stacks;
static unsigned nstacks;
static void (*body_fn)(void*);
static void* body_ctx;
static const char* launch_name = "";
static bool reverse_order = false;
static unsigned long long exited_lane_waits;

void fail(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "emulator: %s: ", launch_name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    _exit(3);
}

void note_exited_lanes() { ++exited_lane_waits; }

void wait(State s, unsigned mask) {
    Thread& t = threads[current];
    t.state = s;
    t.warp_mask = mask;
    swapcontext(&t.ctx, &scheduler);
}

static void set_index(unsigned t) {
    current = t;
    threadIdx = {t % blockDim.x, (t / blockDim.x) % blockDim.y, t / (blockDim.x * blockDim.y)};
}

static void fiber_main() {
    body_fn(body_ctx);
    threads[current].state = DONE;
    // Returning resumes uc_link, the scheduler.
}

static const char* state_name(State s) {
    switch (s) {
    case RUNNABLE: return "runnable";
    case AT_BLOCK_BARRIER: return "__syncthreads";
    case AT_WARP_BARRIER: return "a warp barrier";
    default: return "exited";
    }
}

// Releases the barriers that every thread they wait for has reached; false
// when none can be released (a deadlock: divergent barriers).
static bool release() {
    bool released = false;
    for (unsigned w = 0; w < nthreads; w += 32) {
        const unsigned n = nthreads - w < 32 ? nthreads - w : 32;
        for (unsigned l = 0; l < n; ++l) {
            Thread& t = threads[w + l];
            if (t.state != AT_WARP_BARRIER) continue;
            // Every lane of the mask must wait at a warp barrier too (or
            // have exited: counted as arrived, and noted).
            bool ready = true, exited = false;
            for (unsigned k = 0; k < n; ++k) {
                if (!((t.warp_mask >> k) & 1u)) continue;
                const State s = threads[w + k].state;
                if (s == DONE) exited = true;
                else if (s != AT_WARP_BARRIER) ready = false;
            }
            if (!ready) continue;
            if (exited || (n < 32 && (t.warp_mask >> n) != 0)) note_exited_lanes();
            for (unsigned k = 0; k < n; ++k)
                if (((t.warp_mask >> k) & 1u) && threads[w + k].state == AT_WARP_BARRIER) threads[w + k].state = RUNNABLE;
            released = true;
        }
    }
    if (released) return true;
    bool all = true, any = false;
    for (unsigned t = 0; t < nthreads; ++t) {
        if (threads[t].state == AT_BLOCK_BARRIER) any = true;
        else if (threads[t].state != DONE) all = false;
    }
    if (any && all) {
        for (unsigned t = 0; t < nthreads; ++t)
            if (threads[t].state == AT_BLOCK_BARRIER) threads[t].state = RUNNABLE;
        return true;
    }
    return false;
}

static void run_block() {
    for (unsigned t = 0; t < nthreads; ++t) {
        Thread& th = threads[t];
        getcontext(&th.ctx);
        th.ctx.uc_stack.ss_sp = stacks + (size_t)t * STACK;
        th.ctx.uc_stack.ss_size = STACK;
        th.ctx.uc_link = &scheduler;
        makecontext(&th.ctx, fiber_main, 0);
        th.state = RUNNABLE;
        th.ncopies = 0;
        th.group = 0;
    }
    for (;;) {
        bool ran = false;
        for (unsigned i = 0; i < nthreads; ++i) {
            const unsigned t = reverse_order ? nthreads - 1 - i : i;
            if (threads[t].state != RUNNABLE) continue;
            set_index(t);
            swapcontext(&scheduler, &threads[t].ctx);
            ran = true;
        }
        bool done = true;
        for (unsigned t = 0; t < nthreads && done; ++t) done = threads[t].state == DONE;
        if (done) return;
        (void)ran;
        if (!release()) {
            fprintf(stderr, "emulator: %s: deadlock in block (%u, %u, %u):", launch_name, blockIdx.x, blockIdx.y, blockIdx.z);
            for (unsigned t = 0; t < nthreads; ++t)
                if (t < 64 || threads[t].state != threads[t - 1].state) fprintf(stderr, " t%u %s;", t, state_name(threads[t].state));
            fprintf(stderr, "\n");
            _exit(3);
        }
    }
}

void launch_current(void (*body)(void*), void* ctx) {
    body_fn = body;
    body_ctx = ctx;
    nthreads = blockDim.x * blockDim.y * blockDim.z;
    if (nthreads == 0 || nthreads > 1024) fail("block of %u threads", nthreads);
    if (nthreads > nstacks) {
        const size_t bytes = (size_t)nthreads * STACK;
        stacks = (unsigned char*)mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (stacks == MAP_FAILED) fail("cannot map %zu bytes of stacks", bytes);
        // Locals a kernel reads before writing read 0xff bytes, not zeros.
        for (unsigned t = 0; t < nthreads; ++t) memset(stacks + (size_t)(t + 1) * STACK - 16384, 0xff, 16384);
        nstacks = nthreads;
        threads = (Thread*)calloc(nthreads, sizeof(Thread));
    }
    for (unsigned z = 0; z < gridDim.z; ++z)
        for (unsigned y = 0; y < gridDim.y; ++y)
            for (unsigned x = 0; x < gridDim.x; ++x) {
                blockIdx = {x, y, z};
                memset(__start_trtc_shared, 0xff, __stop_trtc_shared - __start_trtc_shared);
                run_block();
            }
}

#ifdef TRTC_EMU_LIBRARY
// Device memory is the driver's: it says whether a range lies inside one
// of its allocations.
static int (*in_device_memory)(const void*, size_t);

void check_global(const void* p, size_t n, const char* what) {
    if (in_device_memory && in_device_memory(p, n)) return;
    fail("%s %p (%zu bytes) is not inside device memory (thread %u of block (%u, %u, %u))", what, p, n, current, blockIdx.x,
         blockIdx.y, blockIdx.z);
}
}  // namespace trtc_emu

// Runs one launch of entry point `entry`; -1 when the module has none of
// that name. `params` as cuLaunchKernel takes them.
extern "C" __attribute__((visibility("default"))) int trtc_emu_launch(const char* entry, const unsigned* grid, const unsigned* block,
                                                                     unsigned shared, void** params,
                                                                     int (*device_memory)(const void*, size_t)) {
    using namespace trtc_emu;
    for (int e = 0; e < trtc_emu_raw_entry_count; ++e) {
        if (!trtc_emu_raw_entries[e].name || strcmp(trtc_emu_raw_entries[e].name, entry)) continue;
        in_device_memory = device_memory;
        launch_name = trtc_emu_raw_entries[e].name;
        if (shared > sizeof dynamic_smem) fail("%u bytes of dynamic shared memory", shared);
        gridDim.x = grid[0], gridDim.y = grid[1], gridDim.z = grid[2];
        blockDim.x = block[0], blockDim.y = block[1], blockDim.z = block[2];
        trtc_emu_raw_entries[e].run(params);
        return 0;
    }
    return -1;
}

// The parameter count of entry point `entry` and their sizes; -1 when the
// module has none of that name.
extern "C" __attribute__((visibility("default"))) int trtc_emu_params(const char* entry, const size_t** sizes) {
    for (int e = 0; e < trtc_emu_raw_entry_count; ++e) {
        if (!trtc_emu_raw_entries[e].name || strcmp(trtc_emu_raw_entries[e].name, entry)) continue;
        *sizes = trtc_emu_raw_entries[e].sizes;
        return trtc_emu_raw_entries[e].params;
    }
    return -1;
}
#else
// ---------------------------------------------------------------------------
// Buffers with a guard page after each.

struct Buffer {
    unsigned char* map = nullptr;
    size_t map_bytes = 0;
    unsigned char* data = nullptr;
    size_t bytes = 0, slack = 0;
    bool used = false;
};
static Buffer buffers[64];
static const unsigned char SLACK_BYTE = 0xcd;

static size_t page() { return (size_t)sysconf(_SC_PAGESIZE); }

static void alloc_buffer(Buffer& b, size_t bytes, size_t align) {
    if (b.used) munmap(b.map, b.map_bytes);
    const size_t pg = page();
    if (align == 0 || align > pg || (align & (align - 1))) fail("buffer alignment %zu", align);
    // Start `align`-byte aligned, end as close to the guard page as that
    // allows.
    const size_t span = (bytes + align - 1) / align * align;
    const size_t data_pages = (span + pg - 1) / pg;
    b.map_bytes = (data_pages + 2) * pg;
    b.map = (unsigned char*)mmap(nullptr, b.map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b.map == MAP_FAILED) fail("cannot map a buffer of %zu bytes", bytes);
    mprotect(b.map, pg, PROT_NONE);
    mprotect(b.map + (data_pages + 1) * pg, pg, PROT_NONE);
    b.data = b.map + (data_pages + 1) * pg - span;
    b.bytes = bytes;
    b.slack = span - bytes;
    memset(b.data + bytes, SLACK_BYTE, b.slack);
    b.used = true;
}

void check_global(const void* p, size_t n, const char* what) {
    const unsigned char* a = (const unsigned char*)p;
    for (const Buffer& b : buffers)
        if (b.used && a >= b.data && a + n <= b.data + b.bytes && (n > 0 || a <= b.data + b.bytes)) return;
    fail("%s %p (%zu bytes) is not inside a device buffer (thread %u of block (%u, %u, %u))", what, p, n, current, blockIdx.x,
         blockIdx.y, blockIdx.z);
}

static void check_slack(int id) {
    const Buffer& b = buffers[id];
    for (size_t i = 0; i < b.slack; ++i)
        if (b.data[b.bytes + i] != SLACK_BYTE) fail("write past the end of buffer %d (%zu bytes): byte %zu", id, b.bytes, b.bytes + i);
}

static void on_segv(int sig, siginfo_t* info, void*) {
    char msg[256];
    const unsigned char* a = (const unsigned char*)info->si_addr;
    int which = -1;
    long long off = 0;
    for (int i = 0; i < 64; ++i) {
        const Buffer& b = buffers[i];
        if (b.used && a >= b.map && a < b.map + b.map_bytes) {
            which = i;
            off = a - b.data;
        }
    }
    int n;
    if (which >= 0 && off >= 0 && off < (long long)buffers[which].bytes)
        n = snprintf(msg, sizeof msg, "emulator: %s: signal %d: write to read-only input buffer %d at byte %lld, thread %u of block (%u, %u, %u)\n",
                     launch_name, sig, which, off, current, blockIdx.x, blockIdx.y, blockIdx.z);
    else if (which >= 0)
        n = snprintf(msg, sizeof msg, "emulator: %s: signal %d: access at byte %lld of buffer %d (%zu bytes), thread %u of block (%u, %u, %u)\n",
                     launch_name, sig, off, which, buffers[which].bytes, current, blockIdx.x, blockIdx.y, blockIdx.z);
    else
        n = snprintf(msg, sizeof msg, "emulator: %s: signal %d at address %p, thread %u of block (%u, %u, %u)\n", launch_name, sig,
                     info->si_addr, current, blockIdx.x, blockIdx.y, blockIdx.z);
    if (write(2, msg, n) < 0) {
    }
    _exit(4);
}

static void install_handlers() {
    static unsigned char alt[64 * 1024];
    stack_t ss = {};
    ss.ss_sp = alt;
    ss.ss_size = sizeof alt;
    sigaltstack(&ss, nullptr);
    struct sigaction sa = {};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
    sigaction(SIGFPE, &sa, nullptr);
}
}  // namespace trtc_emu

int main(int argc, char** argv) {
    using namespace trtc_emu;
    if (argc != 2) {
        fprintf(stderr, "usage: %s JOB\n", argv[0]);
        return 2;
    }
    install_handlers();
    FILE* job = fopen(argv[1], "r");
    if (!job) fail("cannot open %s", argv[1]);
    char line[8192];
    while (fgets(line, sizeof line, job)) {
        char* save = nullptr;
        const char* cmd = strtok_r(line, " \n", &save);
        if (!cmd) continue;
        auto next = [&]() -> const char* {
            const char* t = strtok_r(nullptr, " \n", &save);
            if (!t) fail("truncated job line (%s)", cmd);
            return t;
        };
        if (!strcmp(cmd, "buf")) {
            const int id = atoi(next());
            const size_t bytes = strtoull(next(), nullptr, 10);
            const char* how = next();
            if (id < 0 || id >= 64) fail("buffer id %d", id);
            const char* path = !strcmp(how, "in") ? next() : nullptr;
            const size_t align = strtoull(next(), nullptr, 10);
            alloc_buffer(buffers[id], bytes, align);
            Buffer& b = buffers[id];
            if (path) {
                FILE* f = fopen(path, "rb");
                if (!f) fail("cannot open %s", path);
                if (fread(b.data, 1, bytes, f) != bytes) fail("short read of %s", path);
                fclose(f);
                // Inputs are read-only: a kernel that writes one crashes.
                const size_t pg = page();
                unsigned char* first = (unsigned char*)((uintptr_t)b.data / pg * pg);
                mprotect(first, b.map + b.map_bytes - pg - first, PROT_READ);
            } else {
                memset(b.data, 0xff, bytes);
            }
        } else if (!strcmp(cmd, "launch")) {
            const int e = atoi(next());
            if (e < 0 || e >= trtc_emu_entry_count) fail("entry %d", e);
            dim3 g, b;
            g.x = atoi(next()), g.y = atoi(next()), g.z = atoi(next());
            b.x = atoi(next()), b.y = atoi(next()), b.z = atoi(next());
            const unsigned shared = (unsigned)atoi(next());
            const int n = atoi(next());
            Arg args[64];
            if (n > 64) fail("%d arguments", n);
            for (int i = 0; i < n; ++i) {
                const char* a = next();
                Arg& x = args[i];
                x = Arg{};
                if (a[0] == 'b') {
                    const int id = atoi(a + 1);
                    if (id < 0 || id >= 64 || !buffers[id].used) fail("argument %d: no buffer %d", i, id);
                    x.kind = 'p';
                    x.p = buffers[id].data;
                } else if (a[0] == 'n') {
                    x.kind = 'p';
                    x.p = nullptr;
                } else if (a[0] == 'i') {
                    x.kind = 'i';
                    x.size = a[1] - '0';
                    x.i = strtoll(a + 3, nullptr, 10);
                } else if (a[0] == 'f') {
                    x.kind = 'f';
                    const unsigned bits = (unsigned)strtoul(a + 2, nullptr, 16);
                    memcpy(&x.f, &bits, 4);
                } else {
                    fail("argument %d: %s", i, a);
                }
            }
            launch_name = trtc_emu_entries[e].name;
            if (shared > sizeof dynamic_smem) fail("%u bytes of dynamic shared memory", shared);
            gridDim = g;
            blockDim = b;
            trtc_emu_entries[e].run(args, n);
            for (int i = 0; i < 64; ++i)
                if (buffers[i].used) check_slack(i);
        } else if (!strcmp(cmd, "fill")) {
            const int id = atoi(next());
            if (id < 0 || id >= 64 || !buffers[id].used) fail("fill of no buffer %d", id);
            memset(buffers[id].data, 0xff, buffers[id].bytes);
        } else if (!strcmp(cmd, "order")) {
            reverse_order = !strcmp(next(), "reverse");
        } else if (!strcmp(cmd, "save")) {
            const int id = atoi(next());
            const char* path = next();
            FILE* f = fopen(path, "wb");
            if (!f || fwrite(buffers[id].data, 1, buffers[id].bytes, f) != buffers[id].bytes) fail("cannot write %s", path);
            fclose(f);
        } else {
            fail("unknown job line %s", cmd);
        }
    }
    if (exited_lane_waits) fprintf(stderr, "emulator: note: %llu warp barriers counted exited lanes as arrived\n", exited_lane_waits);
    return 0;
}
#endif  // TRTC_EMU_LIBRARY
