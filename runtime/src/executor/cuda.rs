//! The CUDA executor: runs an engine built for a GPU with the cubins and
//! launches of its kernel table.
//!
//! ```no_run
//! use trtc_runtime::{Engine, Tensor};
//!
//! # fn main() -> Result<(), trtc_runtime::Error> {
//! let engine = Engine::load("model.engine")?;
//! let gpu = engine.cuda(0)?; // checks libcuda, the GPU and its SM; loads cubins, uploads weights
//! let mut context = gpu.create_context()?; // one per thread: its own stream and arena
//! let input = Tensor::zeros(engine.inputs()[0].ty.clone())?;
//! let outputs = context.run(&[(engine.inputs()[0].name.as_str(), &input)])?;
//! # Ok(())
//! # }
//! ```
//!
//! - [`CudaEngine`] (`Send + Sync`, one per engine and device) holds the
//!   loaded modules and the weights, uploaded once.
//! - [`CudaExecutionContext`] (`Send`, not `Sync`, several per engine) holds
//!   a stream, an activation arena laid out like the CPU executor's, the
//!   kernel arguments resolved against both, and a CUDA graph of the plan's
//!   launches, captured on the first run and replayed after.
//!
//! Layers the kernel table marks as host layers run the CPU reference op on
//! host copies of their tensors, synchronously; an engine with any host
//! layer runs without a CUDA graph.
//!
//! An engine whose shapes vary (optimization profiles) needs a
//! [`LaunchPlanner`] (`trtc_kernels::FamilyPlanner`), given to
//! [`Engine::cuda_with_planner`]: a context computes the launches of each
//! new set of input shapes once (the kernels are compiled already, sizes are
//! kernel arguments), keeps them with their own CUDA graph for the
//! [`SHAPE_CACHE`] most recently used shapes, and replays the graph of the
//! shapes bound in a run.
//!
//! libcuda is loaded at run time: this module builds without CUDA, and on a
//! machine without a driver or GPU every entry point returns a clear
//! [`Error::Device`] instead of panicking.

mod driver;
mod context;

pub use context::{CudaExecutionContext, GpuEvent};
pub use driver::{check_elf_bounds, libcuda_search_dirs, LIBCUDA, LIBCUDA_ENV};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::kernels::{KernelTable, LaunchPlanner, LayerKernels};
use cudarc::driver::{result, sys, CudaContext};
use driver::{cuda_error, format_driver_version, DeviceBuffer, LoadedModule};
use std::sync::Arc;

/// Dynamic shared memory a kernel may use without opting in.
const DEFAULT_DYNAMIC_SHARED_LIMIT: i64 = 48 * 1024;

/// How many sets of input shapes a context keeps launches and a CUDA graph
/// for (the least recently used goes first): enough for every batch size of
/// a server's dynamic batcher up to 64 without computing any twice (a new
/// shape's launches take 1-2.5 ms of CPU time for 31-111 layers, measured
/// on the dev VM, before the capture of its graph).
pub const SHAPE_CACHE: usize = 64;

/// What a loaded module allows a launch: threads per block (its register
/// use decides) and dynamic shared memory (as configured at load).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ModuleLimits {
    pub max_threads: u64,
    pub max_dynamic_shared: u32,
}

/// A GPU as the driver describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub ordinal: usize,
    /// E.g. `NVIDIA H200`.
    pub name: String,
    /// Compute capability as major * 10 + minor, e.g. 90.
    pub sm: u32,
    /// The CUDA version the driver supports, e.g. `13.0`.
    pub driver_version: String,
    /// The same as `cuDriverGetVersion` reports it, e.g. `13000`.
    pub driver_version_number: i32,
    pub total_memory_bytes: usize,
}

/// Whether libcuda loads and the driver lists at least one GPU. Never panics.
pub fn available() -> bool {
    device_count().is_ok_and(|n| n > 0)
}

/// How many GPUs the driver lists (an error when libcuda is missing).
pub fn device_count() -> Result<usize> {
    driver::init()?;
    let n = result::device::get_count().map_err(|e| cuda_error("cuDeviceGetCount", e))?;
    Ok(n.max(0) as usize)
}

/// The name, compute capability and driver version of GPU `ordinal`
/// (`trtc build --target cuda` uses the SM to compile for this GPU).
pub fn device_info(ordinal: usize) -> Result<DeviceInfo> {
    let count = device_count()?;
    if count == 0 {
        return Err(Error::Device("no CUDA device found: the NVIDIA driver lists no GPU; run with --device cpu".into()));
    }
    if ordinal >= count {
        return Err(Error::Device(format!(
            "CUDA device {ordinal} does not exist: this machine has {count} GPU{} (0..{})",
            if count == 1 { "" } else { "s" },
            count - 1
        )));
    }
    let dev = result::device::get(ordinal as i32).map_err(|e| cuda_error(format!("cuDeviceGet({ordinal})"), e))?;
    let name = result::device::get_name(dev).map_err(|e| cuda_error("cuDeviceGetName", e))?;
    let attr = |a: sys::CUdevice_attribute| {
        // SAFETY: `dev` was returned by cuDeviceGet.
        unsafe { result::device::get_attribute(dev, a) }.map_err(|e| cuda_error(format!("cuDeviceGetAttribute({a:?})"), e))
    };
    let major = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    // SAFETY: `dev` was returned by cuDeviceGet.
    let total_memory_bytes = unsafe { result::device::total_mem(dev) }.map_err(|e| cuda_error("cuDeviceTotalMem", e))?;
    let mut version: std::ffi::c_int = 0;
    // SAFETY: writes one int; the symbol was checked to exist.
    unsafe { sys::cuDriverGetVersion(&mut version) }.result().map_err(|e| cuda_error("cuDriverGetVersion", e))?;
    Ok(DeviceInfo {
        ordinal,
        name,
        sm: (major.max(0) * 10 + minor.max(0)) as u32,
        driver_version: format_driver_version(version),
        driver_version_number: version,
        total_memory_bytes,
    })
}

/// Holds GPU `ordinal`'s primary CUDA context alive while it lives. The
/// driver destroys a primary context when its last user releases it, and
/// creating one is not cheap; a program that loads and
/// drops many engines in turn (the autotuner loads one per candidate) holds
/// one of these so that the context is created once.
pub struct ContextKeepAlive {
    _ctx: Arc<CudaContext>,
}

impl ContextKeepAlive {
    pub fn new(ordinal: usize) -> Result<ContextKeepAlive> {
        device_info(ordinal)?;
        Ok(ContextKeepAlive { _ctx: primary_context(ordinal)? })
    }
}

/// GPU `ordinal`'s primary context (created if no one holds it).
fn primary_context(ordinal: usize) -> Result<Arc<CudaContext>> {
    CudaContext::new(ordinal).map_err(|e| cuda_error(format!("cannot create a CUDA context on GPU {ordinal}"), e))
}

/// An engine loaded on one GPU: its modules and weights. Shared by every
/// thread that runs the engine on that GPU (`Send + Sync`); each thread runs
/// it through its own [`CudaExecutionContext`].
pub struct CudaEngine<'e> {
    engine: &'e Engine,
    device: DeviceInfo,
    /// One per entry of the kernel table's modules, in order.
    modules: Vec<LoadedModule>,
    limits: Vec<ModuleLimits>,
    /// Computes launches at new shapes, for an engine whose shapes vary.
    planner: Option<Arc<dyn LaunchPlanner>>,
    weights: DeviceBuffer,
    has_host_layers: bool,
    launch_count: usize,
    /// Dropped last (the other fields hold their own references too).
    ctx: Arc<CudaContext>,
}

impl std::fmt::Debug for CudaEngine<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaEngine")
            .field("device", &self.device)
            .field("modules", &self.modules.len())
            .field("weights_bytes", &self.engine.weights().len())
            .field("has_host_layers", &self.has_host_layers)
            .finish()
    }
}

impl Engine {
    /// Loads this engine on GPU `ordinal`; see [`CudaEngine::new`]. An
    /// engine whose shapes vary needs [`Engine::cuda_with_planner`].
    pub fn cuda(&self, ordinal: usize) -> Result<CudaEngine<'_>> {
        CudaEngine::new(self, ordinal)
    }

    /// Loads this engine on GPU `ordinal` with `planner` computing launches
    /// at the shapes bound in each run (needed when the engine's shapes
    /// vary; any engine may be loaded so).
    pub fn cuda_with_planner(&self, ordinal: usize, planner: Arc<dyn LaunchPlanner>) -> Result<CudaEngine<'_>> {
        CudaEngine::with_planner(self, ordinal, planner)
    }

    /// Whether the engine's input shapes vary at run time: a profile with a
    /// range, or several profiles.
    pub fn shapes_vary(&self) -> bool {
        self.profiles().len() > 1 || self.profiles().iter().any(|p| p.is_dynamic())
    }
}

impl<'e> CudaEngine<'e> {
    /// Loads an engine on GPU `ordinal`. Checks, in order, each with its own
    /// error: that the engine was built for a GPU, that libcuda loads, that
    /// the GPU exists, and that its compute capability is the one the
    /// cubins were compiled for (exactly). Then loads every cubin, checks
    /// each launch against its kernel's limits (threads per block, shared
    /// memory), and uploads the weights once.
    pub fn new(engine: &'e Engine, ordinal: usize) -> Result<CudaEngine<'e>> {
        CudaEngine::load(engine, ordinal, None)
    }

    /// [`CudaEngine::new`] with `planner` computing launches at the shapes
    /// bound in each run (what an engine whose shapes vary needs).
    pub fn with_planner(engine: &'e Engine, ordinal: usize, planner: Arc<dyn LaunchPlanner>) -> Result<CudaEngine<'e>> {
        CudaEngine::load(engine, ordinal, Some(planner))
    }

    fn load(engine: &'e Engine, ordinal: usize, planner: Option<Arc<dyn LaunchPlanner>>) -> Result<CudaEngine<'e>> {
        let Some(table) = engine.kernels() else {
            return Err(Error::Device(
                "this engine was built for the CPU; rebuild it with --target cuda (or sm_XX), or run it with --device cpu".into(),
            ));
        };
        if engine.shapes_vary() && planner.is_none() {
            return Err(Error::Device(
                "this engine's input shapes vary at run time: load it with Engine::cuda_with_planner(ordinal, Arc::new(trtc_kernels::FamilyPlanner)), which computes launches at the bound shapes".into(),
            ));
        }
        let device = device_info(ordinal)?;
        if device.sm != table.sm {
            return Err(Error::Device(format!(
                "engine built for sm_{}, this GPU ({}) is sm_{}: rebuild the engine with --target cuda on this machine (or --target sm_{})",
                table.sm, device.name, device.sm, device.sm
            )));
        }
        let ctx = primary_context(ordinal)?;
        // SAFETY: the executor orders every use of its buffers itself: all
        // work of a context is on its one stream, weights are written once
        // (synchronously) before any launch, and buffers are freed only
        // after their stream is synchronized (design.md §5).
        unsafe { ctx.disable_event_tracking() };
        let (modules, limits) = load_modules(&ctx, engine, table, &device)?;
        let weights_host = engine.weights();
        let weights = DeviceBuffer::alloc(&ctx, weights_host.len(), "the engine's weights")?;
        if !weights_host.is_empty() {
            // SAFETY: the buffer holds at least `weights_host.len()` bytes;
            // the copy is synchronous, so the host slice outlives it.
            unsafe { result::memcpy_htod_sync(weights.ptr(), weights_host) }
                .map_err(|e| cuda_error(format!("uploading {} bytes of weights", weights_host.len()), e))?;
        }
        let has_host_layers = table.layers.iter().any(|l| matches!(l, LayerKernels::Host { .. }));
        let launch_count = table.layers.iter().map(|l| l.launches().len()).sum();
        Ok(CudaEngine { engine, device, modules, limits, planner, weights, has_host_layers, launch_count, ctx })
    }

    pub fn engine(&self) -> &'e Engine {
        self.engine
    }

    /// The GPU, e.g. `NVIDIA H200`.
    pub fn gpu_name(&self) -> &str {
        &self.device.name
    }

    /// The CUDA version of the driver, e.g. `13.0`.
    pub fn driver_version(&self) -> &str {
        &self.device.driver_version
    }

    pub fn device(&self) -> &DeviceInfo {
        &self.device
    }

    /// Whether some layers run on the host (then no CUDA graph is used).
    pub fn has_host_layers(&self) -> bool {
        self.has_host_layers
    }

    /// Kernel launches in one run of the plan.
    pub fn launch_count(&self) -> usize {
        self.launch_count
    }

    /// A new execution context: its own stream and activation arena.
    pub fn create_context(&self) -> Result<CudaExecutionContext<'_>> {
        CudaExecutionContext::new(self)
    }

    pub(crate) fn kernel_table(&self) -> &'e KernelTable {
        self.engine.kernels().expect("checked in CudaEngine::new")
    }

    /// Waits until all work queued in the engine's CUDA context is done, on
    /// every stream: the device's primary context, which other libraries on
    /// the same GPU (PyTorch, CuPy) share, so their pending writes to the
    /// tensors given to [`CudaExecutionContext::enqueue_device`] are done too.
    pub fn synchronize_device(&self) -> Result<()> {
        self.ctx.synchronize().map_err(|e| cuda_error("waiting for the GPU", e))
    }

    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    pub(crate) fn module(&self, index: u32) -> Option<&LoadedModule> {
        self.modules.get(index as usize)
    }

    pub(crate) fn module_limits(&self, index: u32) -> Option<ModuleLimits> {
        self.limits.get(index as usize).copied()
    }

    pub(crate) fn planner(&self) -> Option<&dyn LaunchPlanner> {
        self.planner.as_deref()
    }

    pub(crate) fn weights_ptr(&self) -> u64 {
        self.weights.ptr()
    }

    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().map_err(|e| cuda_error("making the CUDA context current", e))
    }
}

/// Loads every module of the table and checks each launch against the
/// kernel's own limits, so that a launch never fails for resources.
fn load_modules(
    ctx: &Arc<CudaContext>,
    engine: &Engine,
    table: &KernelTable,
    device: &DeviceInfo,
) -> Result<(Vec<LoadedModule>, Vec<ModuleLimits>)> {
    let plan = engine.plan();
    let optin_shared = {
        let dev = result::device::get(device.ordinal as i32).map_err(|e| cuda_error("cuDeviceGet", e))?;
        // SAFETY: `dev` was returned by cuDeviceGet.
        unsafe {
            result::device::get_attribute(dev, sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        }
        .map_err(|e| cuda_error("cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)", e))? as i64
    };
    let mut modules = Vec::with_capacity(table.modules.len());
    let mut limits = Vec::with_capacity(table.modules.len());
    for (i, m) in table.modules.iter().enumerate() {
        let what = format!("kernel module {i} ({}, tactic {})", m.entry, m.tactic);
        let module = LoadedModule::load(ctx, &m.cubin, &m.entry, &what).map_err(|e| match e {
            Error::Cuda(msg) => Error::Cuda(format!(
                "{msg}; the engine's kernels were compiled by NVRTC {} for sm_{} and this driver supports CUDA {}: a driver older than the compiler cannot load them",
                table.nvrtc_version, table.sm, device.driver_version
            )),
            other => other,
        })?;
        // The most threads per block and dynamic shared memory any launch of
        // this module asks for, with the first layer that asks.
        let mut max_threads: Option<(u64, &str)> = None;
        let mut max_shared: Option<(u32, &str)> = None;
        for (layer, kernels) in plan.layers.iter().zip(&table.layers) {
            for l in kernels.launches().into_iter().filter(|l| l.module as usize == i) {
                let threads = l.block.iter().map(|&b| b as u64).product::<u64>();
                if max_threads.is_none_or(|(t, _)| threads > t) {
                    max_threads = Some((threads, &layer.name));
                }
                if max_shared.is_none_or(|(s, _)| l.shared_bytes > s) {
                    max_shared = Some((l.shared_bytes, &layer.name));
                }
            }
        }
        let attr = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK;
        let kernel_max_threads = module.attribute(attr)? as u64;
        if let Some((threads, layer)) = max_threads {
            if threads > kernel_max_threads {
                return Err(Error::Cuda(format!(
                    "layer {layer} launches {what} with {threads} threads per block, but on this GPU the kernel allows at most {kernel_max_threads} (its register use); rebuild the engine"
                )));
            }
        }
        let static_shared = module.attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)? as i64;
        let mut max_dynamic_shared = (DEFAULT_DYNAMIC_SHARED_LIMIT - static_shared).max(0) as u32;
        if let Some((shared, layer)) = max_shared {
            let dynamic = shared as i64;
            if static_shared + dynamic > optin_shared {
                return Err(Error::Cuda(format!(
                    "layer {layer} launches {what} with {dynamic} bytes of dynamic shared memory; with its {static_shared} static bytes that exceeds this GPU's {optin_shared} bytes per block"
                )));
            }
            if static_shared + dynamic > DEFAULT_DYNAMIC_SHARED_LIMIT {
                module
                    .set_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic as i32)
                    .map_err(|e| match e {
                        Error::Cuda(msg) => {
                            Error::Cuda(format!("{what}, {dynamic} bytes of dynamic shared memory for layer {layer}: {msg}"))
                        }
                        other => other,
                    })?;
                max_dynamic_shared = shared;
            }
        }
        modules.push(module);
        limits.push(ModuleLimits { max_threads: kernel_max_threads, max_dynamic_shared });
    }
    Ok((modules, limits))
}
