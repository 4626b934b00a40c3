//! The CUDA driver, loaded at run time through cudarc, and the few owned
//! driver objects the executor needs (device memory, modules).
//!
//! cudarc dlopens libcuda by bare name and **panics** when it cannot, and it
//! resolves every driver function lazily, panicking when a symbol is
//! missing. So before any cudarc call this module finds libcuda itself
//! (preloading it by absolute path from the usual places when the loader
//! does not find it) and checks once that every driver function the
//! executor calls is there. After [`ensure_libcuda`] succeeds, no cudarc
//! call made by the executor can panic for a missing library or symbol.

use crate::error::{Error, Result};
use cudarc::driver::result::{self, DriverError};
use cudarc::driver::{sys, CudaContext};
use std::ffi::{c_void, CString};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// The driver library's soname.
pub const LIBCUDA: &str = "libcuda.so.1";

/// An environment variable naming libcuda's path, for unusual installs.
pub const LIBCUDA_ENV: &str = "TRTC_LIBCUDA";

/// Directories searched for `libcuda.so.1` when the loader does not find it
/// by name.
pub fn libcuda_search_dirs() -> Vec<PathBuf> {
    [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/usr/local/nvidia/lib64",
        "/usr/local/nvidia/lib",
        "/usr/lib/wsl/lib",
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect()
}

/// Every libcuda function the executor reaches through cudarc (including
/// through `CudaContext`, `CudaStream`, `CudaEvent` and `CudaGraph`), by the
/// exact name cudarc resolves. A driver that lacks one is refused up front.
const REQUIRED_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuCtxSynchronize",
    "cuModuleLoadData",
    "cuModuleGetFunction",
    "cuModuleUnload",
    "cuFuncGetAttribute",
    "cuFuncSetAttribute",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemsetD8Async",
    "cuMemcpyHtoD_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoDAsync_v2",
    "cuStreamCreate",
    "cuStreamSynchronize",
    "cuStreamDestroy_v2",
    "cuStreamWaitEvent",
    "cuStreamBeginCapture_v2",
    "cuStreamEndCapture",
    "cuGraphInstantiateWithFlags",
    "cuGraphUpload",
    "cuGraphLaunch",
    "cuGraphExecDestroy",
    "cuGraphDestroy",
    "cuLaunchKernel",
    "cuEventCreate",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventElapsedTime_v2",
    "cuEventDestroy_v2",
];

static LOADED: OnceLock<std::result::Result<String, String>> = OnceLock::new();

/// Makes libcuda loadable by cudarc, once per process, and returns where it
/// came from. The error names `libcuda.so.1` and every place searched.
pub fn ensure_libcuda() -> Result<&'static str> {
    let r = LOADED.get_or_init(|| {
        let source = find_libcuda()?;
        check_symbols(&source)?;
        Ok(source)
    });
    match r {
        Ok(s) => Ok(s.as_str()),
        Err(e) => Err(Error::Device(e.clone())),
    }
}

fn culib_present() -> bool {
    // SAFETY: cudarc's probe only dlopens its candidate names (running the
    // library's initializers, which is what loading the driver means) and
    // closes them again.
    unsafe { sys::is_culib_present() }
}

fn find_libcuda() -> std::result::Result<String, String> {
    if culib_present() {
        return Ok(format!("{LIBCUDA} (from the loader's search path)"));
    }
    let mut candidates = Vec::new();
    if let Some(p) = std::env::var_os(LIBCUDA_ENV) {
        candidates.push(PathBuf::from(p));
    }
    candidates.extend(libcuda_search_dirs().into_iter().map(|d| d.join(LIBCUDA)));
    let mut failures = Vec::new();
    for path in &candidates {
        if !path.is_file() {
            continue;
        }
        // SAFETY: loading the NVIDIA driver library runs its initializers.
        // It stays loaded for the life of the process (the handle is
        // leaked), so cudarc's dlopen of the soname finds this copy.
        match unsafe { libloading::Library::new(path) } {
            Ok(lib) => {
                std::mem::forget(lib);
                if culib_present() {
                    return Ok(path.display().to_string());
                }
                failures.push(format!("{} loaded but cudarc still cannot open {LIBCUDA} by name", path.display()));
            }
            Err(e) => failures.push(format!("{}: {e}", path.display())),
        }
    }
    let dirs: Vec<String> = libcuda_search_dirs().iter().map(|d| d.display().to_string()).collect();
    let mut msg = format!(
        "cannot run on a GPU: {LIBCUDA} (the NVIDIA driver's CUDA library) was not found on the loader's search path nor in {}",
        dirs.join(", ")
    );
    if !failures.is_empty() {
        msg.push_str(&format!(" ({})", failures.join("; ")));
    }
    msg.push_str(&format!("; install the NVIDIA driver, set {LIBCUDA_ENV} to the library's path, or run with --device cpu"));
    Err(msg)
}

fn check_symbols(source: &str) -> std::result::Result<(), String> {
    // SAFETY: `find_libcuda` succeeded, so cudarc's `culib` opens the
    // library instead of panicking; it only dlopens and keeps the handle.
    let lib = unsafe { sys::culib() };
    let missing: Vec<&str> = REQUIRED_SYMBOLS
        .iter()
        .copied()
        // SAFETY: looking a symbol up does not call it; the pointer is dropped.
        .filter(|name| unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_err())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut version: std::ffi::c_int = 0;
    // SAFETY: cuDriverGetVersion writes one int; it needs no cuInit. It was
    // checked to exist unless it is in `missing`.
    let version = if missing.contains(&"cuDriverGetVersion") {
        "unknown".to_string()
    } else {
        unsafe { sys::cuDriverGetVersion(&mut version) };
        format_driver_version(version)
    };
    Err(format!(
        "the NVIDIA driver at {source} (CUDA {version}) is too old for trtc, which needs a driver for CUDA 13.0 or newer: it lacks {}",
        missing.join(", ")
    ))
}

/// `13000` → `"13.0"`, as `cuDriverGetVersion` encodes it.
pub fn format_driver_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// Errors that leave the CUDA context unusable: every later call fails too.
fn is_sticky(e: &DriverError) -> bool {
    use sys::CUresult::*;
    matches!(
        e.0,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_LAUNCH_FAILED
    )
}

/// The driver's name and description of an error, e.g.
/// `CUDA_ERROR_OUT_OF_MEMORY (out of memory)`.
pub fn describe(e: &DriverError) -> String {
    let name = e.error_name().map(|c| c.to_string_lossy().into_owned()).unwrap_or_else(|_| format!("{:?}", e.0));
    let mut s = match e.error_string() {
        Ok(text) => format!("{name} ({})", text.to_string_lossy()),
        Err(_) => name,
    };
    if is_sticky(e) {
        s.push_str("; a kernel fault leaves the CUDA context unusable, so the process must restart");
    }
    s
}

/// An [`Error::Cuda`] saying what failed and why.
pub fn cuda_error(what: impl std::fmt::Display, e: DriverError) -> Error {
    Error::Cuda(format!("{what}: {}", describe(&e)))
}

/// Initializes the driver (after making sure libcuda loads).
pub fn init() -> Result<()> {
    ensure_libcuda()?;
    match result::init() {
        Ok(()) => Ok(()),
        Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => Err(Error::Device(format!(
            "no CUDA device found: the NVIDIA driver is installed but lists no GPU ({}); run with --device cpu",
            describe(&e)
        ))),
        Err(e) => Err(Error::Device(format!("the CUDA driver did not initialize (cuInit): {}", describe(&e)))),
    }
}

/// A device allocation, freed on drop.
pub struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    bytes: usize,
    ctx: Arc<CudaContext>,
}

impl DeviceBuffer {
    /// Allocates `bytes` (at least 256, so an empty arena or weight section
    /// still has a valid address) of uninitialized device memory.
    pub fn alloc(ctx: &Arc<CudaContext>, bytes: usize, what: &str) -> Result<DeviceBuffer> {
        ctx.bind_to_thread().map_err(|e| cuda_error("making the CUDA context current", e))?;
        let n = bytes.max(256);
        // SAFETY: the context is current; the memory is only ever used as
        // raw bytes by kernels and copies, never read as Rust values.
        let ptr = unsafe { result::malloc_sync(n) }
            .map_err(|e| cuda_error(format!("cannot allocate {n} bytes of GPU memory for {what}"), e))?;
        Ok(DeviceBuffer { ptr, bytes: n, ctx: ctx.clone() })
    }

    /// The device address of the first byte.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// The allocation's size in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // Errors cannot be returned from drop; cudarc records them on the
        // context, where the next checked call reports them.
        self.ctx.record_err(self.ctx.bind_to_thread());
        // SAFETY: allocated by `malloc_sync` in this context and freed once.
        // Owners synchronize their streams before dropping a buffer that
        // queued work may still use (and cuMemFree itself waits for the
        // device to be done with the memory).
        self.ctx.record_err(unsafe { result::free_sync(self.ptr) });
    }
}

/// A loaded cubin and its single entry point, unloaded on drop.
pub struct LoadedModule {
    module: sys::CUmodule,
    function: sys::CUfunction,
    ctx: Arc<CudaContext>,
}

// SAFETY: module and function handles are plain driver handles, valid in any
// thread once their context is current (every user binds it first). The
// driver API is thread safe for launching the same function from several
// threads; the handles are only mutated (attributes) while loading, before
// the module is shared.
unsafe impl Send for LoadedModule {}
// SAFETY: as above; shared use is launches and attribute queries only.
unsafe impl Sync for LoadedModule {}

impl LoadedModule {
    /// Loads a cubin and looks its entry point up. `what` names the module
    /// in errors (entry point and tactic).
    pub fn load(ctx: &Arc<CudaContext>, cubin: &[u8], entry: &str, what: &str) -> Result<LoadedModule> {
        check_elf_bounds(cubin).map_err(|m| Error::invalid(format!("{what}: {m}")))?;
        ctx.bind_to_thread().map_err(|e| cuda_error("making the CUDA context current", e))?;
        // SAFETY: `cubin` is an ELF image whose header, program headers and
        // section contents were checked to lie inside the buffer, which
        // outlives the call (the driver copies what it keeps). A cubin is GPU
        // code: engines, like TensorRT plans, must come from trusted sources.
        let module = unsafe { result::module::load_data(cubin.as_ptr() as *const c_void) }
            .map_err(|e| cuda_error(format!("cannot load the cubin of {what} (cuModuleLoadData)"), e))?;
        let name = CString::new(entry).map_err(|_| Error::invalid(format!("{what}: entry point contains a NUL byte")))?;
        // SAFETY: `module` was just loaded and is not unloaded yet.
        let function = match unsafe { result::module::get_function(module, name) } {
            Ok(f) => f,
            Err(e) => {
                // SAFETY: loaded above, unloaded once here.
                ctx.record_err(unsafe { result::module::unload(module) });
                return Err(cuda_error(format!("the cubin of {what} has no entry point '{entry}'"), e));
            }
        };
        Ok(LoadedModule { module, function, ctx: ctx.clone() })
    }

    pub fn function(&self) -> sys::CUfunction {
        self.function
    }

    /// A function attribute (registers, static shared memory, ...).
    pub fn attribute(&self, attr: sys::CUfunction_attribute) -> Result<i32> {
        // SAFETY: the function belongs to this live module.
        unsafe { result::function::get_function_attribute(self.function, attr) }
            .map_err(|e| cuda_error(format!("cuFuncGetAttribute({attr:?})"), e))
    }

    /// Sets a function attribute (used for the dynamic shared memory limit).
    pub fn set_attribute(&self, attr: sys::CUfunction_attribute, value: i32) -> Result<()> {
        // SAFETY: the function belongs to this live module; attributes are
        // set before the engine is shared between threads.
        unsafe { result::function::set_function_attribute(self.function, attr, value) }
            .map_err(|e| cuda_error(format!("cuFuncSetAttribute({attr:?}, {value})"), e))
    }
}

impl Drop for LoadedModule {
    fn drop(&mut self) {
        self.ctx.record_err(self.ctx.bind_to_thread());
        // SAFETY: loaded in this context and unloaded once; contexts that
        // launch its function borrow the engine that owns it, so none is
        // left when it drops.
        self.ctx.record_err(unsafe { result::module::unload(self.module) });
    }
}

/// Checks that an ELF64 little-endian image's header tables and section
/// contents lie inside `bytes`. `cuModuleLoadData` takes a bare pointer and
/// trusts the offsets inside the image; without this check a corrupted
/// engine could make the driver read past the buffer.
pub fn check_elf_bounds(bytes: &[u8]) -> std::result::Result<(), String> {
    let u16_at = |at: usize| bytes.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]) as u64);
    let u32_at = |at: usize| bytes.get(at..at + 4).map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")));
    let u64_at = |at: usize| bytes.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    let len = bytes.len() as u64;
    let bad = |m: &str| Err(format!("cubin is not a valid ELF image ({m})"));
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
        return bad("too short or wrong magic");
    }
    if bytes[4] != 2 || bytes[5] != 1 {
        return bad("not 64-bit little-endian");
    }
    let (Some(phoff), Some(shoff), Some(phentsize), Some(phnum), Some(shentsize), Some(shnum)) =
        (u64_at(0x20), u64_at(0x28), u16_at(0x36), u16_at(0x38), u16_at(0x3a), u16_at(0x3c))
    else {
        return bad("truncated header");
    };
    let table_fits = |off: u64, entsize: u64, num: u64, min_entsize: u64| {
        num == 0 || (entsize >= min_entsize && off.checked_add(entsize * num).is_some_and(|end| end <= len))
    };
    if !table_fits(phoff, phentsize, phnum, 56) {
        return bad("program headers outside the image");
    }
    if !table_fits(shoff, shentsize, shnum, 64) {
        return bad("section headers outside the image");
    }
    for i in 0..phnum {
        let h = (phoff + i * phentsize) as usize;
        let (Some(off), Some(filesz)) = (u64_at(h + 8), u64_at(h + 0x20)) else {
            return bad("truncated program header");
        };
        if off.checked_add(filesz).is_none_or(|end| end > len) {
            return bad("a segment lies outside the image");
        }
    }
    const SHT_NOBITS: u32 = 8;
    for i in 0..shnum {
        let h = (shoff + i * shentsize) as usize;
        let (Some(kind), Some(off), Some(size)) = (u32_at(h + 4), u64_at(h + 0x18), u64_at(h + 0x20)) else {
            return bad("truncated section header");
        };
        if kind != SHT_NOBITS && off.checked_add(size).is_none_or(|end| end > len) {
            return bad("a section lies outside the image");
        }
    }
    Ok(())
}
