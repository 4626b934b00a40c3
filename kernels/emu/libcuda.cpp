// An emulated CUDA driver: the subset of libcuda's API that trtc's CUDA
// executor calls (runtime/src/executor/cuda/driver.rs lists it), running
// every launch on the CPU with the emulator of this directory. With it, the
// executor itself (its launches at bound shapes, CUDA graphs per shape,
// counts read back after layers sized by the data, If/Loop sub-plans) runs
// on a machine without a GPU, and its outputs can be compared with the CPU
// executor's.
//
// Build (see kernels/src/emu.rs and compiler/tests/emulated_driver.rs):
//   g++ -std=c++20 -O1 -shared -fPIC -Wl,-soname,libcuda.so.1 -o libcuda.so.1 libcuda.cpp -ldl
// Use: TRTC_LIBCUDA=/path/to/libcuda.so.1 TRTC_EMU_MODULES=DIR, where DIR
// holds the emulator program of every module the engines load (a build
// with TRTC_EMU_MODULES set writes them, named by the FNV-1a digest of the
// cubin). A module's program is compiled with g++ the first time a cubin
// needs it (DIR/KEY-DIGEST.so, DIGEST that of the program text, kept for
// later runs).
//
// The device: one GPU of compute capability TRTC_EMU_SM (default 90), 80
// GiB. Streams are synchronous; events hold the host time of their record.
// Stream capture records launches, memsets and device-to-device copies
// and refuses what a real capture refuses (synchronizing the capturing
// stream, copies to or from host memory). Device memory is host memory,
// each allocation followed by an inaccessible page; a kernel launch whose
// block has no threads, or a dynamic shared-memory request above 48 KiB
// that the function was not opted into, fails as on a GPU.
#include <dlfcn.h>
#include <elf.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#define EXPORT extern "C" __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum : CUresult {
    OK = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    NOT_INITIALIZED = 3,
    INVALID_DEVICE = 101,
    INVALID_IMAGE = 200,
    INVALID_CONTEXT = 201,
    INVALID_HANDLE = 400,
    NOT_FOUND = 500,
    NOT_READY = 600,
    LAUNCH_FAILED = 719,
    NOT_PERMITTED = 800,
    NOT_SUPPORTED = 801,
    STREAM_CAPTURE_UNSUPPORTED = 900,
    STREAM_CAPTURE_INVALIDATED = 901,
    STREAM_CAPTURE_WRONG_THREAD = 908,
};

namespace {

std::recursive_mutex lock;
bool initialized = false;
int primary_context = 1;  // its address is the context handle
void* current_context = nullptr;

void note(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "emulated libcuda: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

int sm() {
    const char* s = getenv("TRTC_EMU_SM");
    return s ? atoi(s) : 90;
}

// ---------------------------------------------------------------------------
// Device memory.

struct Allocation {
    unsigned char* map;
    size_t map_bytes;
    size_t bytes;
};
std::map<uintptr_t, Allocation> allocations;  // by start address

const Allocation* allocation_of(const void* p, size_t n, uintptr_t* start) {
    const uintptr_t a = (uintptr_t)p;
    auto it = allocations.upper_bound(a);
    if (it == allocations.begin()) return nullptr;
    --it;
    if (a + n > it->first + it->second.bytes) return nullptr;
    if (start) *start = it->first;
    return &it->second;
}

int in_device_memory(const void* p, size_t n) { return allocation_of(p, n, nullptr) != nullptr; }

bool device_range(CUdeviceptr p, size_t n, const char* what) {
    if (n == 0 || in_device_memory((const void*)p, n)) return true;
    note("%s: %zu bytes at 0x%llx are not inside one device allocation", what, n, p);
    return false;
}

// ---------------------------------------------------------------------------
// Modules and functions.

typedef int (*LaunchFn)(const char*, const unsigned*, const unsigned*, unsigned, void**, int (*)(const void*, size_t));
typedef int (*ParamsFn)(const char*, const size_t**);

struct Module {
    void* so;
    LaunchFn launch;
    ParamsFn params;
    std::string key;
};
struct Function {
    Module* module;
    std::string name;
    // Its parameters' count and sizes (the module's table).
    int params;
    const size_t* sizes;
    int max_dynamic_shared = 48 * 1024;
};

uint64_t fnv(const unsigned char* p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

// The bytes of an ELF image: to the end of its last header table or section.
size_t elf_size(const unsigned char* image) {
    const Elf64_Ehdr* h = (const Elf64_Ehdr*)image;
    if (memcmp(h->e_ident, ELFMAG, SELFMAG) != 0 || h->e_ident[EI_CLASS] != ELFCLASS64) return 0;
    size_t end = h->e_ehsize;
    if (h->e_shoff) end = std::max(end, (size_t)(h->e_shoff + (size_t)h->e_shentsize * h->e_shnum));
    if (h->e_phoff) end = std::max(end, (size_t)(h->e_phoff + (size_t)h->e_phentsize * h->e_phnum));
    for (unsigned i = 0; i < h->e_shnum; ++i) {
        const Elf64_Shdr* s = (const Elf64_Shdr*)(image + h->e_shoff + (size_t)i * h->e_shentsize);
        if (s->sh_type != SHT_NOBITS) end = std::max(end, (size_t)(s->sh_offset + s->sh_size));
    }
    return end;
}

bool exists(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
}

// Compiles DIR/KEY.cpp into a shared object named by the digest of the
// program text (so a changed emulator is compiled again) unless that
// exists, and returns its path ("" on failure). The first line of the
// program names the flags (`// g++ FLAGS`).
std::string compile(const std::string& dir, const std::string& key) {
    const std::string src = dir + "/" + key + ".cpp";
    FILE* f = fopen(src.c_str(), "r");
    if (!f) {
        FILE* s = fopen((dir + "/" + key + ".skip").c_str(), "r");
        if (s) {
            char why[512] = "";
            if (!fgets(why, sizeof why, s)) why[0] = 0;
            fclose(s);
            note("module %s has no emulator program: %s", key.c_str(), why);
        } else {
            note("no emulator program for cubin %s in %s (was the engine built with TRTC_EMU_MODULES=%s?)", key.c_str(), dir.c_str(),
                 dir.c_str());
        }
        return "";
    }
    std::string text;
    char buf[65536];
    for (size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
    fclose(f);
    if (text.compare(0, 7, "// g++ ") != 0) {
        note("%s does not start with its g++ flags", src.c_str());
        return "";
    }
    char digest[17];
    snprintf(digest, sizeof digest, "%016llx", (unsigned long long)fnv((const unsigned char*)text.data(), text.size()));
    const std::string so = dir + "/" + key + "-" + digest + ".so";
    if (exists(so)) return so;
    const std::string flags = text.substr(7, text.find('\n') - 7);
    const std::string tmp = so + ".tmp" + std::to_string(getpid());
    const std::string cmd = "g++ " + flags + " -shared -fPIC -fvisibility=hidden -Wl,-Bsymbolic -o '" + tmp + "' '" + src + "'";
    if (system(cmd.c_str()) != 0) {
        note("g++ failed: %s", cmd.c_str());
        return "";
    }
    if (rename(tmp.c_str(), so.c_str()) != 0) return "";
    return so;
}

// ---------------------------------------------------------------------------
// Streams, events and graphs.

struct Op {
    enum Kind { LAUNCH, MEMSET, COPY } kind;
    Function* function = nullptr;
    unsigned grid[3], block[3], shared = 0;
    std::vector<std::vector<unsigned char>> params;
    CUdeviceptr dst = 0, src = 0;
    size_t bytes = 0;
    unsigned char value = 0;
};
struct Graph {
    std::vector<Op> ops;
};
struct Stream {
    Graph* capture = nullptr;  // while capturing
};
Stream default_stream;
struct Event {
    double seconds = 0;
};

Stream* stream_of(void* s) { return s ? (Stream*)s : &default_stream; }

double now() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

CUresult run(const Op& op) {
    switch (op.kind) {
    case Op::MEMSET:
        memset((void*)op.dst, op.value, op.bytes);
        return OK;
    case Op::COPY:
        memmove((void*)op.dst, (const void*)op.src, op.bytes);
        return OK;
    case Op::LAUNCH: {
        std::vector<void*> p;
        for (auto& v : op.params) p.push_back((void*)v.data());
        const int r = op.function->module->launch(op.function->name.c_str(), op.grid, op.block, op.shared, p.data(), in_device_memory);
        if (r != 0) {
            note("module %s has no entry point %s", op.function->module->key.c_str(), op.function->name.c_str());
            return LAUNCH_FAILED;
        }
        return OK;
    }
    }
    return INVALID_VALUE;
}

// Runs the operation now, or records it into the capturing stream's graph.
CUresult submit(void* stream, Op op) {
    Stream* s = stream_of(stream);
    if (s->capture) {
        s->capture->ops.push_back(std::move(op));
        return OK;
    }
    return run(op);
}

CUresult refuse_in_capture(void* stream, const char* what) {
    if (stream_of(stream)->capture) {
        note("%s on a capturing stream (a CUDA graph cannot hold it)", what);
        return STREAM_CAPTURE_UNSUPPORTED;
    }
    return OK;
}

// Streams capturing now (a context-wide synchronization fails while any does).
int capturing = 0;

const char* error_name(CUresult r) {
    switch (r) {
    case OK: return "CUDA_SUCCESS";
    case INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
    case INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case NOT_READY: return "CUDA_ERROR_NOT_READY";
    case LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
    case NOT_PERMITTED: return "CUDA_ERROR_NOT_PERMITTED";
    case NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    case STREAM_CAPTURE_UNSUPPORTED: return "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
    case STREAM_CAPTURE_INVALIDATED: return "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
    default: return "CUDA_ERROR_UNKNOWN";
    }
}

}  // namespace

#define LOCKED std::lock_guard<std::recursive_mutex> guard(lock)
#define NEED_INIT \
    if (!initialized) return NOT_INITIALIZED

// ---------------------------------------------------------------------------
// Initialization, devices, contexts.

EXPORT CUresult cuInit(unsigned) {
    LOCKED;
    initialized = true;
    return OK;
}
// NVRTC opens libcuda.so.1 when it is loaded and asks for the driver's
// private tables; this driver has none, as an old driver would.
EXPORT CUresult cuGetExportTable(const void** table, const void*) {
    if (table) *table = nullptr;
    return NOT_SUPPORTED;
}
EXPORT CUresult cuDriverGetVersion(int* v) {
    if (!v) return INVALID_VALUE;
    *v = 13000;
    return OK;
}
EXPORT CUresult cuGetErrorName(CUresult r, const char** s) {
    if (!s) return INVALID_VALUE;
    *s = error_name(r);
    return OK;
}
EXPORT CUresult cuGetErrorString(CUresult r, const char** s) {
    if (!s) return INVALID_VALUE;
    *s = error_name(r);
    return OK;
}
EXPORT CUresult cuDeviceGetCount(int* n) {
    NEED_INIT;
    *n = 1;
    return OK;
}
EXPORT CUresult cuDeviceGet(CUdevice* d, int ordinal) {
    NEED_INIT;
    if (ordinal != 0) return INVALID_DEVICE;
    *d = 0;
    return OK;
}
EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
    NEED_INIT;
    if (d != 0) return INVALID_DEVICE;
    snprintf(name, len, "trtc emulated GPU (sm_%d, on the CPU)", sm());
    return OK;
}
EXPORT CUresult cuDeviceGetAttribute(int* v, int attribute, CUdevice d) {
    NEED_INIT;
    if (d != 0) return INVALID_DEVICE;
    switch (attribute) {
    case 1: *v = 1024; break;                // MAX_THREADS_PER_BLOCK
    case 8: *v = 48 * 1024; break;           // MAX_SHARED_MEMORY_PER_BLOCK
    case 10: *v = 32; break;                 // WARP_SIZE
    case 16: *v = 132; break;                // MULTIPROCESSOR_COUNT
    case 75: *v = sm() / 10; break;          // COMPUTE_CAPABILITY_MAJOR
    case 76: *v = sm() % 10; break;          // COMPUTE_CAPABILITY_MINOR
    case 97: *v = 227 * 1024; break;         // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    case 115: *v = 0; break;                 // MEMORY_POOLS_SUPPORTED
    default: *v = 0; break;
    }
    return OK;
}
EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice d) {
    NEED_INIT;
    if (d != 0) return INVALID_DEVICE;
    *bytes = 80ull << 30;
    return OK;
}
EXPORT CUresult cuDevicePrimaryCtxRetain(void** ctx, CUdevice d) {
    NEED_INIT;
    if (d != 0) return INVALID_DEVICE;
    *ctx = &primary_context;
    return OK;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { return d == 0 ? OK : INVALID_DEVICE; }
EXPORT CUresult cuCtxGetCurrent(void** ctx) {
    NEED_INIT;
    *ctx = current_context;
    return OK;
}
EXPORT CUresult cuCtxSetCurrent(void* ctx) {
    NEED_INIT;
    current_context = ctx;
    return OK;
}
EXPORT CUresult cuCtxSynchronize() {
    LOCKED;
    if (capturing > 0) {
        note("cuCtxSynchronize while a stream captures");
        return STREAM_CAPTURE_UNSUPPORTED;
    }
    return OK;
}

// ---------------------------------------------------------------------------
// Modules.

EXPORT CUresult cuModuleLoadData(void** module, const void* image) {
    LOCKED;
    NEED_INIT;
    const char* dir = getenv("TRTC_EMU_MODULES");
    if (!dir) {
        note("TRTC_EMU_MODULES is not set: nowhere to find the modules' emulator programs");
        return INVALID_IMAGE;
    }
    const size_t n = elf_size((const unsigned char*)image);
    if (n == 0) {
        note("cuModuleLoadData: the image is not a 64-bit ELF cubin");
        return INVALID_IMAGE;
    }
    char key[17];
    snprintf(key, sizeof key, "%016llx", (unsigned long long)fnv((const unsigned char*)image, n));
    const std::string so = compile(dir, key);
    if (so.empty()) return INVALID_IMAGE;
    void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        note("dlopen %s: %s", so.c_str(), dlerror());
        return INVALID_IMAGE;
    }
    auto launch = (LaunchFn)dlsym(h, "trtc_emu_launch");
    auto params = (ParamsFn)dlsym(h, "trtc_emu_params");
    if (!launch || !params) {
        note("%s lacks trtc_emu_launch or trtc_emu_params", so.c_str());
        return INVALID_IMAGE;
    }
    *module = new Module{h, launch, params, key};
    return OK;
}
EXPORT CUresult cuModuleGetFunction(void** function, void* module, const char* name) {
    LOCKED;
    Module* m = (Module*)module;
    if (!m) return INVALID_HANDLE;
    const size_t* sizes;
    const int params = m->params(name, &sizes);
    if (params < 0) return NOT_FOUND;
    *function = new Function{m, name, params, sizes};
    return OK;
}
EXPORT CUresult cuModuleUnload(void* module) {
    LOCKED;
    // The functions may outlive it in a careless caller; the library stays.
    delete (Module*)module;
    return OK;
}
EXPORT CUresult cuFuncGetAttribute(int* v, int attribute, void* function) {
    Function* f = (Function*)function;
    if (!f) return INVALID_HANDLE;
    switch (attribute) {
    case 0: *v = 1024; break;                      // MAX_THREADS_PER_BLOCK
    case 4: *v = 32; break;                        // NUM_REGS
    case 6: *v = sm(); break;                      // BINARY_VERSION
    case 8: *v = f->max_dynamic_shared; break;     // MAX_DYNAMIC_SHARED_SIZE_BYTES
    default: *v = 0; break;                        // static shared, local, const bytes
    }
    return OK;
}
EXPORT CUresult cuFuncSetAttribute(void* function, int attribute, int value) {
    Function* f = (Function*)function;
    if (!f) return INVALID_HANDLE;
    if (attribute == 8) {
        if (value < 0 || value > 227 * 1024) return INVALID_VALUE;
        f->max_dynamic_shared = value;
    }
    return OK;
}

// ---------------------------------------------------------------------------
// Memory.

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
    LOCKED;
    NEED_INIT;
    if (bytes == 0) return INVALID_VALUE;
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    // 256-byte aligned, ending as close to a guard page as that allows.
    const size_t span = (bytes + 255) / 256 * 256;
    const size_t data_pages = (span + pg - 1) / pg;
    const size_t map_bytes = (data_pages + 1) * pg;
    unsigned char* map = (unsigned char*)mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED) return OUT_OF_MEMORY;
    mprotect(map + data_pages * pg, pg, PROT_NONE);
    unsigned char* data = map + data_pages * pg - span;
    // Fresh device memory is not zero on a GPU either.
    memset(data, 0xff, bytes);
    allocations[(uintptr_t)data] = Allocation{map, map_bytes, bytes};
    *p = (CUdeviceptr)data;
    return OK;
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
    LOCKED;
    auto it = allocations.find((uintptr_t)p);
    if (it == allocations.end()) return INVALID_VALUE;
    munmap(it->second.map, it->second.map_bytes);
    allocations.erase(it);
    return OK;
}
EXPORT CUresult cuMemsetD8Async(CUdeviceptr p, unsigned char value, size_t n, void* stream) {
    LOCKED;
    if (!device_range(p, n, "cuMemsetD8Async")) return INVALID_VALUE;
    Op op{Op::MEMSET};
    op.dst = p, op.value = value, op.bytes = n;
    return submit(stream, op);
}
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
    LOCKED;
    if (CUresult r = refuse_in_capture(nullptr, "cuMemcpyHtoD")) return r;
    if (!device_range(dst, n, "cuMemcpyHtoD")) return INVALID_VALUE;
    memcpy((void*)dst, src, n);
    return OK;
}
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, void* stream) {
    LOCKED;
    if (CUresult r = refuse_in_capture(stream, "cuMemcpyHtoDAsync from host memory")) return r;
    if (!device_range(dst, n, "cuMemcpyHtoDAsync")) return INVALID_VALUE;
    memcpy((void*)dst, src, n);
    return OK;
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, void* stream) {
    LOCKED;
    if (CUresult r = refuse_in_capture(stream, "cuMemcpyDtoHAsync to host memory")) return r;
    if (!device_range(src, n, "cuMemcpyDtoHAsync")) return INVALID_VALUE;
    memcpy(dst, (const void*)src, n);
    return OK;
}
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, void* stream) {
    LOCKED;
    if (!device_range(dst, n, "cuMemcpyDtoDAsync destination") || !device_range(src, n, "cuMemcpyDtoDAsync source")) return INVALID_VALUE;
    Op op{Op::COPY};
    op.dst = dst, op.src = src, op.bytes = n;
    return submit(stream, op);
}

// ---------------------------------------------------------------------------
// Streams and events.

EXPORT CUresult cuStreamCreate(void** stream, unsigned) {
    LOCKED;
    NEED_INIT;
    *stream = new Stream;
    return OK;
}
EXPORT CUresult cuStreamSynchronize(void* stream) {
    LOCKED;
    return refuse_in_capture(stream, "cuStreamSynchronize");
}
EXPORT CUresult cuStreamDestroy_v2(void* stream) {
    LOCKED;
    if (stream) delete (Stream*)stream;
    return OK;
}
EXPORT CUresult cuStreamWaitEvent(void*, void*, unsigned) { return OK; }
EXPORT CUresult cuEventCreate(void** event, unsigned) {
    *event = new Event;
    return OK;
}
EXPORT CUresult cuEventRecord(void* event, void* stream) {
    LOCKED;
    if (CUresult r = refuse_in_capture(stream, "cuEventRecord")) return r;
    ((Event*)event)->seconds = now();
    return OK;
}
EXPORT CUresult cuEventSynchronize(void*) { return OK; }
EXPORT CUresult cuEventElapsedTime_v2(float* ms, void* start, void* end) {
    *ms = (float)((((Event*)end)->seconds - ((Event*)start)->seconds) * 1e3);
    return OK;
}
EXPORT CUresult cuEventDestroy_v2(void* event) {
    delete (Event*)event;
    return OK;
}

// ---------------------------------------------------------------------------
// Graphs.

EXPORT CUresult cuStreamBeginCapture_v2(void* stream, int) {
    LOCKED;
    Stream* s = stream_of(stream);
    if (!stream || s->capture) return INVALID_VALUE;  // the legacy stream cannot capture
    s->capture = new Graph;
    ++capturing;
    return OK;
}
EXPORT CUresult cuStreamEndCapture(void* stream, void** graph) {
    LOCKED;
    Stream* s = stream_of(stream);
    if (!s->capture) return INVALID_VALUE;
    *graph = s->capture;
    s->capture = nullptr;
    --capturing;
    return OK;
}
EXPORT CUresult cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long) {
    LOCKED;
    if (!graph) return INVALID_VALUE;
    *exec = new Graph(*(Graph*)graph);
    return OK;
}
EXPORT CUresult cuGraphUpload(void*, void*) { return OK; }
EXPORT CUresult cuGraphLaunch(void* exec, void* stream) {
    LOCKED;
    if (!exec) return INVALID_VALUE;
    if (stream_of(stream)->capture) return NOT_SUPPORTED;
    for (const Op& op : ((Graph*)exec)->ops)
        if (CUresult r = run(op)) return r;
    return OK;
}
EXPORT CUresult cuGraphExecDestroy(void* exec) {
    delete (Graph*)exec;
    return OK;
}
EXPORT CUresult cuGraphDestroy(void* graph) {
    delete (Graph*)graph;
    return OK;
}

// ---------------------------------------------------------------------------
// Launches.

EXPORT CUresult cuLaunchKernel(void* function, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                               unsigned shared, void* stream, void** params, void** extra) {
    LOCKED;
    Function* f = (Function*)function;
    if (!f) return INVALID_HANDLE;
    if (extra) return NOT_SUPPORTED;
    if (!gx || !gy || !gz || !bx || !by || !bz || (unsigned long long)bx * by * bz > 1024 || gy > 65535 || gz > 65535) {
        note("%s: grid (%u, %u, %u), block (%u, %u, %u)", f->name.c_str(), gx, gy, gz, bx, by, bz);
        return INVALID_VALUE;
    }
    if ((int)shared > f->max_dynamic_shared) {
        note("%s: %u bytes of dynamic shared memory, above the function's %d", f->name.c_str(), shared, f->max_dynamic_shared);
        return INVALID_VALUE;
    }
    if (f->params > 0 && !params) return INVALID_VALUE;
    Op op{Op::LAUNCH};
    op.function = f;
    op.grid[0] = gx, op.grid[1] = gy, op.grid[2] = gz;
    op.block[0] = bx, op.block[1] = by, op.block[2] = bz;
    op.shared = shared;
    // The values are copied now, as the driver does.
    for (int i = 0; i < f->params; ++i) {
        const unsigned char* v = (const unsigned char*)params[i];
        op.params.emplace_back(v, v + f->sizes[i]);
    }
    return submit(stream, std::move(op));
}
