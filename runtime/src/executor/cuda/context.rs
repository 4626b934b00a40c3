//! Execution contexts of the CUDA executor: a stream, an activation arena,
//! the plan's launches with their arguments resolved, and a CUDA graph; for
//! an engine whose shapes vary, launches and a graph per set of input shapes
//! bound (the most recent [`SHAPE_CACHE`]).

mod control;

use super::driver::{cuda_error, DeviceBuffer};
use super::{CudaEngine, SHAPE_CACHE};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::kernels::{counters, KernelArg, Launch, LayerKernels};
use crate::plan::{Layer, Plan, Storage, TensorId};
use crate::tensor::{Tensor, TensorType, TensorView};
use cudarc::driver::{result, sys, CudaEvent, CudaGraph, CudaStream};
use std::ffi::c_void;
use std::sync::Arc;

// Kernel arguments are stored in 8-byte slots whose first bytes are the
// value; that is the value's layout only on little-endian machines.
#[cfg(not(target_endian = "little"))]
compile_error!("the CUDA executor packs kernel arguments for little-endian hosts");

/// One kernel launch with its arguments resolved to values.
struct PreparedLaunch {
    /// Index into the kernel table's modules (for error messages).
    module: u32,
    function: sys::CUfunction,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared_bytes: u32,
    /// One 8-byte slot per kernel parameter, in order. A 4-byte argument
    /// occupies the low bytes of its slot; the driver reads as many bytes as
    /// the kernel's parameter has, from the slot's start.
    values: Box<[u64]>,
    /// Pointers to each slot of `values`: the array `cuLaunchKernel` takes.
    /// `values` is boxed and never modified or reallocated, so the pointers
    /// stay valid for the life of this struct, wherever it moves.
    params: Box<[*mut c_void]>,
}

// SAFETY: the raw pointers are a driver function handle (usable from any
// thread once the context is current) and pointers into this struct's own
// heap allocation `values`; moving the struct to another thread moves
// ownership of both. It is not `Sync`: launching needs `&mut`.
unsafe impl Send for PreparedLaunch {}

impl PreparedLaunch {
    fn new(module: u32, function: sys::CUfunction, launch: &crate::kernels::Launch, values: Vec<u64>) -> PreparedLaunch {
        let mut values = values.into_boxed_slice();
        let base = values.as_mut_ptr();
        // SAFETY: `i < values.len()`, so each pointer is inside the allocation.
        let params = (0..values.len()).map(|i| unsafe { base.add(i) } as *mut c_void).collect();
        let [gx, gy, gz] = launch.grid;
        let [bx, by, bz] = launch.block;
        PreparedLaunch {
            module,
            function,
            grid: (gx, gy, gz),
            block: (bx, by, bz),
            shared_bytes: launch.shared_bytes,
            values,
            params,
        }
    }
}

impl PreparedLaunch {
    /// Queues the launch on `stream`; `what` names it in an error.
    fn launch(&mut self, stream: sys::CUstream, what: impl FnOnce() -> String) -> Result<()> {
        debug_assert_eq!(self.values.len(), self.params.len());
        // SAFETY: `function` belongs to a module the engine keeps loaded
        // while a context borrows it; `params` has one pointer per kernel
        // parameter, in order, each to an 8-byte slot holding the value
        // (addresses inside the arena, the weights or a control layer's
        // buffer, whose ranges were validated, or scalars), as the kernel
        // table declares the kernel's signature; the geometry was validated
        // (non-zero, within limits) at load and the block size and shared
        // memory were checked against the kernel's attributes.
        unsafe { result::launch_kernel(self.function, self.grid, self.block, self.shared_bytes, stream, &mut self.params) }
            .map_err(|e| cuda_error(what(), e))
    }
}

/// Resolves the arguments of `launches` with `arg` (which gives each tensor
/// argument's address); `what` names them in errors. The inner error says
/// why a launch cannot run on this GPU (more threads or shared memory than
/// its kernel allows): the layer then runs on the host.
fn prepare_launches(
    engine: &CudaEngine<'_>,
    launches: &[Launch],
    what: &str,
    mut arg: impl FnMut(&KernelArg) -> std::result::Result<u64, String>,
) -> Result<std::result::Result<Vec<PreparedLaunch>, String>> {
    let bad = |m: String| Error::invalid(format!("{what}: {m}"));
    let mut prepared = Vec::with_capacity(launches.len());
    for l in launches {
        let module = engine.module(l.module).ok_or_else(|| bad(format!("launches module {} which does not exist", l.module)))?;
        let limits = engine.module_limits(l.module).expect("one per module");
        let threads = l.block.iter().map(|&b| b as u64).product::<u64>();
        if threads > limits.max_threads || l.shared_bytes > limits.max_dynamic_shared {
            return Ok(Err(format!(
                "its launch of {threads} threads and {} bytes of shared memory exceeds what the kernel allows on this GPU",
                l.shared_bytes
            )));
        }
        let values = l
            .args
            .iter()
            .map(|a| match *a {
                KernelArg::I32(v) => Ok(v as u32 as u64),
                KernelArg::I64(v) => Ok(v as u64),
                KernelArg::F32(v) => Ok(v.to_bits() as u64),
                _ => arg(a),
            })
            .collect::<std::result::Result<Vec<u64>, String>>()
            .map_err(bad)?;
        prepared.push(PreparedLaunch::new(l.module, module.function(), l, values));
    }
    Ok(Ok(prepared))
}

/// How a layer runs at the shapes bound.
enum Prepared {
    /// Kernel launches on the stream; for a layer whose output size its
    /// kernels compute (`KernelArg::Counts`), the device address of the
    /// counter that holds output 0's rows after them.
    Launches { launches: Vec<PreparedLaunch>, count_at: Option<u64> },
    /// The CPU reference op on host copies of its tensors.
    Host,
    /// An If or Loop whose sub-plans run as launches, the control decided
    /// on the host.
    Control(Box<control::PreparedControl>),
}

/// A captured CUDA graph of the plan's launches.
struct Graph(CudaGraph);

// SAFETY: graph objects may be used from any thread but not concurrently
// (CUDA's graph thread-safety rules); the context owns it and needs `&mut`
// to launch or replace it, so it is never shared, only moved.
unsafe impl Send for Graph {}

/// A CUDA event that records timestamps (cudarc's default events do not),
/// for measuring GPU time between two points of a context's stream.
pub struct GpuEvent {
    event: CudaEvent,
}

impl GpuEvent {
    /// Milliseconds of GPU time from `self` to `end` (both recorded); waits
    /// for `end` to complete.
    pub fn elapsed_ms(&self, end: &GpuEvent) -> Result<f32> {
        self.event.elapsed_ms(&end.event).map_err(|e| cuda_error("measuring the time between two events", e))
    }

    /// Waits until the work recorded before this event is done.
    pub fn synchronize(&self) -> Result<()> {
        self.event.synchronize().map_err(|e| cuda_error("waiting for an event", e))
    }
}

/// The launches of the plan at one set of input shapes, resolved to
/// addresses, and their CUDA graph once captured.
struct Bound {
    /// The input bindings' shapes, in binding order.
    inputs: Vec<Vec<usize>>,
    /// Every tensor's type at these shapes; `None` for the plan's own.
    types: Option<Arc<Vec<TensorType>>>,
    /// Per plan layer: how it runs.
    layers: Vec<Prepared>,
    /// The counters of layers whose kernels size their output; launches
    /// hold their addresses.
    _counters: Option<DeviceBuffer>,
    /// Layers the kernel table runs on the GPU that run on the host at these
    /// shapes (no kernel compiled for them), with the reason.
    fallbacks: Vec<(String, String)>,
    launch_count: usize,
    graph: Option<Graph>,
}

impl Bound {
    /// Whether a run must stop on the host between layers: a host layer, a
    /// control layer, or a device layer whose output size is read back.
    fn waits_on_host(&self) -> bool {
        self.layers.iter().any(|l| !matches!(l, Prepared::Launches { count_at: None, .. }))
    }
}

/// Per-thread execution state on the GPU: a stream, an activation arena, the
/// plan's launches with their arguments resolved against the arena and the
/// weights, and the CUDA graph of those launches. For an engine whose
/// shapes vary, the same per set of input shapes bound, the most recently
/// used first. Create one per thread or stream (`Send`, not `Sync`).
pub struct CudaExecutionContext<'a> {
    engine: &'a CudaEngine<'a>,
    stream: Arc<CudaStream>,
    arena: DeviceBuffer,
    /// The shapes bound so far, most recently used first; `bound[0]` is the
    /// one runs use (never empty).
    bound: Vec<Bound>,
    use_graph: bool,
    /// The profile runs must use (`set_profile`), or the first that admits
    /// their shapes.
    profile: Option<usize>,
    /// The types, in the current run, of tensors sized by the data (by
    /// tensor id; empty until a layer gives one): an output of a layer
    /// whose size depends on the data (NonMaxSuppression, whose kernels
    /// count its rows; an If whose branches differ, on the host) and every
    /// tensor after it, computed by host layers (the kernel table puts them
    /// there).
    sized: Vec<Option<TensorType>>,
    /// Device memory of tensors sized by the data that outgrew the room the
    /// engine planned for them (a Loop's scan outputs over a trip count read
    /// at run time), by tensor id, kept for later runs; a tensor lives here
    /// in the runs where `sized` makes it larger than its room. Only host
    /// layers and the caller read such tensors.
    spilled: Vec<Option<DeviceBuffer>>,
}

impl std::fmt::Debug for CudaExecutionContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaExecutionContext")
            .field("arena_bytes", &self.arena.len())
            .field("cuda_graph", &self.cuda_graph())
            .field("graph_captured", &self.bound[0].graph.is_some())
            .field("shapes_bound", &self.bound.len())
            .finish()
    }
}

impl<'a> CudaExecutionContext<'a> {
    pub(crate) fn new(engine: &'a CudaEngine<'a>) -> Result<CudaExecutionContext<'a>> {
        engine.bind()?;
        let plan = engine.engine().plan();
        let arena_bytes = usize::try_from(plan.arena_bytes).map_err(|_| Error::invalid("arena too large"))?;
        let stream = engine.context().new_stream().map_err(|e| cuda_error("creating a CUDA stream", e))?;
        let arena = DeviceBuffer::alloc(engine.context(), arena_bytes, "the activation arena")?;
        // Zeroed like the CPU executor's arena, so that results never
        // depend on what the memory held before.
        // SAFETY: the arena holds `arena.len()` bytes; the memset is waited
        // for just below.
        unsafe { result::memset_d8_async(arena.ptr(), 0, arena.len(), stream.cu_stream()) }
            .map_err(|e| cuda_error("clearing the activation arena", e))?;
        stream.synchronize().map_err(|e| cuda_error("clearing the activation arena", e))?;
        let mut ctx = CudaExecutionContext {
            engine,
            stream,
            arena,
            bound: Vec::new(),
            use_graph: true,
            profile: None,
            sized: Vec::new(),
            spilled: Vec::new(),
        };
        let planned: Vec<Vec<usize>> = plan.inputs.iter().map(|&id| plan.tensors[id].ty.shape.clone()).collect();
        let first = ctx.prepare(planned, None)?;
        ctx.bound.push(first);
        if engine.engine().shapes_vary() {
            // Runs start at the first profile's optimum, as TensorRT's
            // contexts do until shapes are set.
            let opt = engine.engine().profiles()[0].input_types(plan, crate::profile::ProfilePoint::Opt);
            let shapes: Vec<Vec<usize>> = opt.into_iter().map(|t| t.shape).collect();
            ctx.bind_shapes(shapes)?;
        }
        Ok(ctx)
    }

    /// The launches of the plan with every tensor of type `types` (the
    /// plan's own when `None`), arguments resolved against the arena and
    /// the weights. A layer the planner gives no launches for, or whose
    /// launches this GPU's modules do not allow, runs on the host.
    fn prepare(&self, inputs: Vec<Vec<usize>>, types: Option<Arc<Vec<TensorType>>>) -> Result<Bound> {
        let engine = self.engine;
        let plan = engine.engine().plan();
        let table = engine.kernel_table();
        let kernels: std::borrow::Cow<'_, [LayerKernels]> = match (&types, engine.planner()) {
            (None, _) => std::borrow::Cow::Borrowed(&table.layers),
            (Some(t), Some(planner)) => std::borrow::Cow::Owned(table.at_types(plan, t, planner)),
            (Some(_), None) => return Err(Error::Device("this engine's shapes vary: load it with a launch planner".into())),
        };
        let address = |id: TensorId| tensor_address(plan, self.arena.ptr(), engine.weights_ptr(), id);
        // The counters of layers whose kernels size their output, 8 bytes
        // each, at these offsets.
        let mut counter_offsets: Vec<Option<u64>> = vec![None; plan.layers.len()];
        let mut counter_bytes = 0u64;
        for (li, (layer, kernels)) in plan.layers.iter().zip(kernels.iter()).enumerate() {
            if let LayerKernels::Device(launches) = kernels {
                let n = counters(layer, launches).map_err(|m| Error::invalid(format!("layer {}: {m}", layer.name)))?;
                if n > 0 {
                    counter_offsets[li] = Some(counter_bytes);
                    counter_bytes += n as u64 * 8;
                }
            }
        }
        let counter_buffer = match counter_bytes {
            0 => None,
            n => Some(DeviceBuffer::alloc(engine.context(), n as usize, "the counters of layers sized on the GPU")?),
        };
        let counter_base = counter_buffer.as_ref().map_or(0, |b| b.ptr());
        let mut bound = Bound {
            inputs,
            types,
            layers: Vec::with_capacity(plan.layers.len()),
            _counters: None,
            fallbacks: Vec::new(),
            launch_count: 0,
            graph: None,
        };
        for (li, ((layer, kernels), built)) in plan.layers.iter().zip(kernels.iter()).zip(&table.layers).enumerate() {
            let what = format!("layer {}", layer.name);
            let prepared = match kernels {
                LayerKernels::Host { reason } => {
                    if !matches!(built, LayerKernels::Host { .. }) {
                        bound.fallbacks.push((layer.name.clone(), reason.clone()));
                    }
                    bound.layers.push(Prepared::Host);
                    continue;
                }
                LayerKernels::Device(launches) => prepare_launches(engine, launches, &what, |a| match *a {
                    KernelArg::Input(k) => match layer.inputs.get(k as usize) {
                        Some(Some(id)) => Ok(address(*id)),
                        Some(None) => Ok(0),
                        None => Err(format!("passes input {k} of {}", layer.inputs.len())),
                    },
                    KernelArg::Output(k) => match layer.outputs.get(k as usize) {
                        Some(id) => Ok(address(*id)),
                        None => Err(format!("passes output {k} of {}", layer.outputs.len())),
                    },
                    KernelArg::Counts(_) => match counter_offsets[li] {
                        Some(offset) => Ok(counter_base + offset),
                        None => Err("passes counters it was not given".into()),
                    },
                    _ => Err(format!("passes {a:?} as a tensor")),
                })?
                .map(|launches| Prepared::Launches {
                    launches,
                    count_at: counter_offsets[li].map(|offset| counter_base + offset),
                }),
                LayerKernels::Control(bodies) => {
                    control::PreparedControl::new(engine, layer, bodies, &address)?.map(|c| Prepared::Control(Box::new(c)))
                }
            };
            match prepared {
                Err(why) => {
                    bound.fallbacks.push((layer.name.clone(), why));
                    bound.layers.push(Prepared::Host);
                }
                Ok(p) => {
                    bound.launch_count += match &p {
                        Prepared::Launches { launches, .. } => launches.len(),
                        Prepared::Control(c) => c.launch_count(),
                        Prepared::Host => 0,
                    };
                    bound.layers.push(p);
                }
            }
        }
        bound._counters = counter_buffer;
        Ok(bound)
    }

    /// Makes `inputs` (every input binding's shape, in binding order) the
    /// shapes runs use: checked against the profiles, every tensor's type
    /// inferred, launches computed (once per set of shapes, kept for the
    /// [`SHAPE_CACHE`] most recently used).
    fn bind_shapes(&mut self, inputs: Vec<Vec<usize>>) -> Result<()> {
        let engine = self.engine.engine();
        let plan = engine.plan();
        let shapes: Vec<&[usize]> = inputs.iter().map(|s| s.as_slice()).collect();
        crate::profile::select(engine.profiles(), plan, &shapes, self.profile)?;
        if let Some(k) = self.bound.iter().position(|b| b.inputs == inputs) {
            let b = self.bound.remove(k);
            self.bound.insert(0, b);
            return Ok(());
        }
        let types: Vec<TensorType> =
            plan.inputs.iter().zip(&inputs).map(|(&id, s)| TensorType::new(plan.tensors[id].ty.dtype, s.clone())).collect();
        let types = Arc::new(crate::profile::bind(plan, &types)?);
        let bound = self.prepare(inputs, Some(types))?;
        if self.bound.len() >= SHAPE_CACHE {
            // The graph dropped may still be running on the stream.
            self.sync(|| "waiting for the GPU before dropping the launches of other shapes".into())?;
            self.bound.truncate(SHAPE_CACHE - 1);
        }
        self.bound.insert(0, bound);
        Ok(())
    }

    /// Sets the shapes of input bindings for the runs that do not give
    /// them ([`CudaExecutionContext::enqueue`] and
    /// [`CudaExecutionContext::enqueue_device`]), like TensorRT's
    /// `setInputShape`: inputs not named keep their current shape. The
    /// shapes must lie inside a profile.
    pub fn set_input_shapes(&mut self, shapes: &[(&str, &[usize])]) -> Result<()> {
        self.engine.bind()?;
        let engine = self.engine.engine();
        let plan = engine.plan();
        for (name, _) in shapes {
            if !plan.inputs.iter().any(|&i| plan.tensors[i].name == *name) {
                return Err(unknown_input(engine, name));
            }
        }
        let inputs: Vec<Vec<usize>> = plan
            .inputs
            .iter()
            .zip(&self.bound[0].inputs)
            .map(|(&id, current)| {
                shapes.iter().find(|(n, _)| *n == plan.tensors[id].name).map_or_else(|| current.clone(), |(_, s)| s.to_vec())
            })
            .collect();
        if engine.shapes_vary() {
            return self.bind_shapes(inputs);
        }
        if inputs != self.bound[0].inputs {
            let (name, shape) = plan
                .inputs
                .iter()
                .zip(&inputs)
                .zip(&self.bound[0].inputs)
                .find(|((_, a), b)| a != b)
                .map(|((&id, a), _)| (&plan.tensors[id].name, a))
                .expect("some input differs");
            return Err(Error::Binding(format!(
                "input '{name}' cannot take shape {shape:?}: this engine's input shapes are fixed (build it with --min/--opt/--max-shapes for shapes that vary)"
            )));
        }
        Ok(())
    }

    /// The shapes the next run without inputs uses (binding order, with
    /// names).
    pub fn input_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let plan = self.engine.engine().plan();
        plan.inputs.iter().zip(&self.bound[0].inputs).map(|(&id, s)| (plan.tensors[id].name.clone(), s.clone())).collect()
    }

    /// Output binding `name`'s type at the shapes bound now (for
    /// [`CudaExecutionContext::enqueue_device`]'s destinations; a layer
    /// sized by the data may give less).
    pub fn output_type(&self, name: &str) -> Result<TensorType> {
        let plan = self.engine.engine().plan();
        let Some((_, id)) = plan.outputs.iter().find(|(n, _)| n == name) else {
            let names: Vec<&str> = self.engine.engine().outputs().iter().map(|b| b.name.as_str()).collect();
            return Err(Error::Binding(format!("unknown output '{name}'; the engine's outputs are {names:?}")));
        };
        Ok(self.bound_type(*id))
    }

    /// Makes every run use profile `index` (`None`: the first that admits
    /// a run's shapes), as the CPU executor's `set_profile`.
    pub fn set_profile(&mut self, index: Option<usize>) -> Result<()> {
        let count = self.engine.engine().profiles().len();
        if let Some(k) = index {
            if k >= count {
                return Err(Error::Binding(format!("profile {k} does not exist: the engine has {count} profiles")));
            }
        }
        self.profile = index;
        Ok(())
    }

    /// The profile set with [`CudaExecutionContext::set_profile`].
    pub fn profile(&self) -> Option<usize> {
        self.profile
    }

    /// Layers the kernel table runs on the GPU that run on the host at the
    /// shapes bound now, with the reason (empty unless the engine's shapes
    /// vary and no compiled kernel serves these shapes).
    pub fn host_fallbacks(&self) -> &[(String, String)] {
        &self.bound[0].fallbacks
    }

    pub fn engine(&self) -> &'a CudaEngine<'a> {
        self.engine
    }

    /// Turns the CUDA graph on (the default) or off. Off, every run launches
    /// each kernel itself (for benchmarks of launch overhead and for
    /// debugging). Turning it off drops a captured graph.
    pub fn set_cuda_graph(&mut self, on: bool) {
        self.use_graph = on;
        if !on {
            for b in &mut self.bound {
                b.graph = None;
            }
        }
    }

    /// Whether runs replay a CUDA graph: it is on, and at the shapes bound
    /// now the plan has no host layer, no layer whose output size is read
    /// back, and at least one launch.
    pub fn cuda_graph(&self) -> bool {
        let b = &self.bound[0];
        self.use_graph && !b.waits_on_host() && b.launch_count > 0
    }

    /// The context's stream, for callers that order their own work with it
    /// (e.g. around [`CudaExecutionContext::enqueue_device`]). It stays owned
    /// by the context: do not destroy it.
    pub fn stream(&self) -> sys::CUstream {
        self.stream.cu_stream()
    }

    /// Waits until all work queued on the context's stream is done; reports
    /// any error of that work.
    pub fn synchronize(&self) -> Result<()> {
        self.engine.bind()?;
        self.sync(|| "waiting for the GPU".into())
    }

    /// Runs the engine on host tensors given by binding name and returns the
    /// outputs by name, in binding order. The inputs are checked like the
    /// CPU executor checks them (unknown, missing, repeated or mistyped
    /// inputs; fixed inputs must have their built value). Copies in, runs
    /// the plan (replaying the CUDA graph after the first run), copies out,
    /// and waits.
    pub fn run(&mut self, inputs: &[(&str, &Tensor)]) -> Result<Vec<(String, Tensor)>> {
        self.run_views(&crate::tensor::views(inputs))
    }

    /// Like [`CudaExecutionContext::run`] on borrowed input bytes (a
    /// caller's arrays, copied to the GPU from where they are).
    pub fn run_views(&mut self, inputs: &[(&str, TensorView<'_>)]) -> Result<Vec<(String, Tensor)>> {
        self.engine.bind()?;
        let bound = check_host_inputs(self.engine.engine(), inputs)?;
        self.bind_given(&bound)?;
        self.upload_inputs(&bound)?;
        self.execute()?;
        self.download_outputs("running the engine")
    }

    /// Like [`CudaExecutionContext::run`], layer by layer without a graph:
    /// waits after every layer (so a GPU fault names its layer and op),
    /// downloads the layer's outputs and passes them to `observe` with the
    /// layer's index in the plan. For finding the first layer whose GPU
    /// output differs from the CPU executor's. An error from `observe` stops
    /// the run and is returned.
    pub fn run_layers(
        &mut self,
        inputs: &[(&str, &Tensor)],
        mut observe: impl FnMut(usize, &[Tensor]) -> Result<()>,
    ) -> Result<Vec<(String, Tensor)>> {
        self.engine.bind()?;
        let bound = check_host_inputs(self.engine.engine(), &crate::tensor::views(inputs))?;
        self.bind_given(&bound)?;
        self.upload_inputs(&bound)?;
        self.sync(|| "copying the inputs to the GPU".into())?;
        self.sized.clear();
        let plan = self.engine.engine().plan();
        for (li, layer) in plan.layers.iter().enumerate() {
            let outputs = if !matches!(self.bound[0].layers[li], Prepared::Host) {
                self.launch_layer(li)?;
                self.run_control(li)?;
                self.sync(|| format!("layer {} failed on the GPU", describe_layer(layer)))?;
                self.read_count(li)?;
                let mut outputs = Vec::with_capacity(layer.outputs.len());
                for &o in &layer.outputs {
                    match self.download_as(o, &self.actual(o)) {
                        Ok(t) => outputs.push(t),
                        Err(e) => {
                            // Let the copies already queued finish before
                            // their destinations are dropped.
                            let _ = self.stream.synchronize();
                            return Err(e);
                        }
                    }
                }
                self.sync(|| format!("downloading the outputs of layer {}", describe_layer(layer)))?;
                outputs
            } else {
                self.run_host_layer(li)?
            };
            observe(li, &outputs)?;
        }
        self.download_outputs("running the engine layer by layer")
    }

    /// Queues one run of the plan on the stream, without copies and without
    /// waiting, on whatever the input tensors' arena bytes hold (the last
    /// inputs copied in, unless later layers reused that memory): for timing
    /// GPU compute alone, not for results. Host layers, control-flow layers
    /// and layers whose kernels count their rows make it wait on the GPU.
    pub fn enqueue(&mut self) -> Result<()> {
        self.engine.bind()?;
        self.execute()
    }

    /// Queues a run on data already on the GPU: device-to-device copies of
    /// each input into the arena, the plan, and copies of the named outputs
    /// out, all on the context's stream; does not wait. Every input binding
    /// must be given once (fixed inputs may be named; they are ignored, their
    /// value is built in); outputs may be a subset of the output bindings,
    /// each named at most once. Tensors have the shapes bound now: for an
    /// engine whose shapes vary, set them first with
    /// [`CudaExecutionContext::set_input_shapes`] (outputs' types:
    /// [`CudaExecutionContext::output_type`]).
    ///
    /// # Safety
    /// Each pointer must be a device address in this engine's CUDA context
    /// (the device's primary context) holding at least the tensor's size in
    /// bytes at the bound shapes (at most `BindingInfo::ty.bytes()`), and stay valid until the stream's
    /// work is done. Inputs must be ready when the stream reaches the copies
    /// (make the stream wait for their producer, or synchronize first), and
    /// outputs may be read only after [`CudaExecutionContext::synchronize`]
    /// or an event recorded after this call.
    pub unsafe fn enqueue_device(&mut self, inputs: &[(&str, u64)], outputs: &[(&str, u64)]) -> Result<()> {
        self.engine.bind()?;
        let engine = self.engine.engine();
        let plan = engine.plan();
        let ins = check_device_inputs(engine, inputs)?;
        let outs = check_device_outputs(engine, outputs)?;
        for (id, src) in ins {
            let n = self.bound_type(id).bytes();
            // SAFETY: the arena range of an input tensor was validated when
            // the engine loaded; the caller guarantees `src` holds `n` bytes.
            unsafe { result::memcpy_dtod_async(self.address(id), src, n, self.stream.cu_stream()) }
                .map_err(|e| cuda_error(format!("copying input '{}' ({n} bytes) into the arena", plan.tensors[id].name), e))?;
        }
        self.execute()?;
        for (name, id, dst) in outs {
            if self.spilled_now(id).is_some() {
                return Err(Error::Binding(format!(
                    "output '{name}' is {} in this run, larger than the room the engine planned and the caller's buffer holds (run with host tensors instead)",
                    self.actual(id)
                )));
            }
            let n = self.bound_type(id).bytes();
            // SAFETY: as above, with the caller's guarantee for `dst`.
            unsafe { result::memcpy_dtod_async(dst, self.address(id), n, self.stream.cu_stream()) }
                .map_err(|e| cuda_error(format!("copying output '{name}' ({n} bytes) out of the arena"), e))?;
        }
        Ok(())
    }

    /// A new timing event (created with `CU_EVENT_DEFAULT`, so it records
    /// timestamps).
    pub fn create_event(&self) -> Result<GpuEvent> {
        let event = self
            .engine
            .context()
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| cuda_error("creating a CUDA event", e))?;
        Ok(GpuEvent { event })
    }

    /// Records `event` at the current end of the context's stream.
    pub fn record_event(&self, event: &GpuEvent) -> Result<()> {
        event.event.record(&self.stream).map_err(|e| cuda_error("recording a CUDA event", e))
    }

    /// GPU milliseconds of `iterations` back-to-back [`enqueue`]s (total,
    /// not per iteration), measured with events on the stream; waits for
    /// them. End-to-end latency with copies is what timing `run` measures.
    ///
    /// [`enqueue`]: CudaExecutionContext::enqueue
    pub fn time_enqueues(&mut self, iterations: usize) -> Result<f32> {
        self.engine.bind()?;
        let (start, end) = (self.create_event()?, self.create_event()?);
        self.record_event(&start)?;
        for _ in 0..iterations {
            self.execute()?;
        }
        self.record_event(&end)?;
        start.elapsed_ms(&end)
    }

    /// The device address of a tensor of the plan: where the engine planned
    /// it, or its spill buffer in a run where it outgrew that room.
    fn address(&self, id: TensorId) -> u64 {
        if let Some(buffer) = self.spilled_now(id) {
            return buffer.ptr();
        }
        tensor_address(self.engine.engine().plan(), self.arena.ptr(), self.engine.weights_ptr(), id)
    }

    /// The spill buffer a tensor lives in during this run, if it does.
    fn spilled_now(&self, id: TensorId) -> Option<&DeviceBuffer> {
        let ty = self.sized.get(id)?.as_ref()?;
        let room = self.engine.engine().plan().tensors[id].ty.bytes();
        self.spilled.get(id)?.as_ref().filter(|_| ty.bytes() > room)
    }

    /// Gives tensor `o`, an output of host layer `li` of type `ty` in this
    /// run, larger than its room, a spill buffer that holds it, unless a
    /// layer that runs on the GPU reads it (its launches hold the planned
    /// address).
    fn spill(&mut self, li: usize, o: TensorId, ty: &TensorType) -> Result<()> {
        let plan = self.engine.engine().plan();
        let reader = plan
            .layers
            .iter()
            .enumerate()
            .skip(li + 1)
            .find(|(k, l)| l.inputs.iter().flatten().any(|&i| i == o) && !matches!(self.bound[0].layers[*k], Prepared::Host));
        if let Some((_, l)) = reader {
            return Err(Error::op(format!(
                "layer {}: output '{}' is {ty}, larger than the {} the engine planned for, and layer {} reads it on the GPU (build with --target cpu)",
                describe_layer(&plan.layers[li]),
                plan.tensors[o].name,
                plan.tensors[o].ty,
                describe_layer(l)
            )));
        }
        if self.spilled.len() < plan.tensors.len() {
            self.spilled.resize_with(plan.tensors.len(), || None);
        }
        let bytes = ty.bytes();
        if self.spilled[o].as_ref().is_none_or(|b| b.len() < bytes) {
            // The old buffer may still be read by queued copies.
            self.sync(|| "the GPU work before a larger spill buffer".into())?;
            let what = format!("tensor '{}' ({ty}, beyond its planned room)", plan.tensors[o].name);
            self.spilled[o] = Some(DeviceBuffer::alloc(self.engine.context(), bytes, &what)?);
        }
        Ok(())
    }

    fn sync(&self, what: impl FnOnce() -> String) -> Result<()> {
        self.stream.synchronize().map_err(|e| cuda_error(what(), e))
    }

    /// Runs the plan once on the stream: replays the graph (capturing it the
    /// first time) or launches layer by layer.
    fn execute(&mut self) -> Result<()> {
        self.sized.clear();
        if !self.cuda_graph() {
            for li in 0..self.bound[0].layers.len() {
                match self.bound[0].layers[li] {
                    Prepared::Launches { .. } => {
                        self.launch_layer(li)?;
                        self.read_count(li)?;
                    }
                    Prepared::Control(_) => self.run_control(li)?,
                    Prepared::Host => {
                        self.run_host_layer(li)?;
                    }
                }
            }
            return Ok(());
        }
        if self.bound[0].graph.is_none() {
            self.capture()?;
        }
        let graph = self.bound[0].graph.as_ref().expect("captured above");
        graph.0.launch().map_err(|e| cuda_error("launching the engine's CUDA graph", e))
    }

    /// Captures every launch of the plan (it has no host layers) in a CUDA
    /// graph. Capture records launches without running them.
    fn capture(&mut self) -> Result<()> {
        let stream = self.stream.clone();
        // Thread-local mode: other threads' contexts may keep allocating
        // and launching while this one captures.
        stream
            .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(|e| cuda_error("starting to capture a CUDA graph", e))?;
        let mut launched = Ok(());
        for li in 0..self.bound[0].layers.len() {
            launched = self.launch_layer(li);
            if launched.is_err() {
                break;
            }
        }
        // Always end the capture, so the stream is usable again whatever
        // happened; a failed launch invalidates the capture.
        let ended = stream.end_capture(sys::CUgraphInstantiate_flags(0));
        launched?;
        let hint = |e: Error| match e {
            Error::Cuda(m) => Error::Cuda(format!("{m}; set_cuda_graph(false) runs the engine without a graph")),
            other => other,
        };
        let graph = ended
            .map_err(|e| hint(cuda_error("capturing the engine's launches in a CUDA graph", e)))?
            .ok_or_else(|| hint(Error::Cuda("capturing the engine's launches produced no CUDA graph".into())))?;
        graph.upload().map_err(|e| hint(cuda_error("uploading the engine's CUDA graph", e)))?;
        self.bound[0].graph = Some(Graph(graph));
        Ok(())
    }

    /// Queues a device layer's launches on the stream (nothing for other
    /// layers).
    fn launch_layer(&mut self, li: usize) -> Result<()> {
        let engine = self.engine;
        let stream = self.stream.cu_stream();
        let layer = &engine.engine().plan().layers[li];
        let Prepared::Launches { launches, .. } = &mut self.bound[0].layers[li] else { return Ok(()) };
        let count = launches.len();
        for (k, l) in launches.iter_mut().enumerate() {
            let (module, grid, block, shared) = (l.module, l.grid, l.block, l.shared_bytes);
            l.launch(stream, || {
                format!(
                    "layer {}: launch {}/{count} of {} with grid {grid:?}, block {block:?}, {shared} bytes of shared memory",
                    describe_layer(layer),
                    k + 1,
                    describe_module(engine, module),
                )
            })?;
        }
        Ok(())
    }

    /// For a device layer whose kernels count its output's rows: waits for
    /// them, reads the count back and records output 0's type in this run in
    /// `sized` (the layers after it run on the host at that size). Does
    /// nothing for other layers.
    fn read_count(&mut self, li: usize) -> Result<()> {
        let Prepared::Launches { count_at: Some(at), .. } = self.bound[0].layers[li] else { return Ok(()) };
        let plan = self.engine.engine().plan();
        let layer = &plan.layers[li];
        let mut bytes = [0u8; 8];
        // SAFETY: `at` is the address of one of this bound's counters (8
        // bytes, in a buffer it owns); `bytes` outlives the wait just below.
        let copied = unsafe { result::memcpy_dtoh_async(&mut bytes[..], at, self.stream.cu_stream()) };
        let waited = self.sync(|| format!("layer {} on the GPU", describe_layer(layer)));
        copied.map_err(|e| cuda_error(format!("reading the row count of layer {}", describe_layer(layer)), e))?;
        waited?;
        let rows = u64::from_le_bytes(bytes);
        let o = layer.outputs[0];
        let mut ty = self.bound_type(o);
        match ty.shape.first_mut() {
            Some(first) if rows <= *first as u64 => *first = rows as usize,
            _ => {
                return Err(Error::Device(format!(
                    "layer {}: its kernels counted {rows} rows of output '{}', which the engine planned as {ty}",
                    describe_layer(layer),
                    plan.tensors[o].name
                )))
            }
        }
        self.record_size(o, ty);
        Ok(())
    }

    /// Records a tensor's type in this run, sized by the data.
    fn record_size(&mut self, id: TensorId, ty: TensorType) {
        let tensors = self.engine.engine().plan().tensors.len();
        if self.sized.len() < tensors {
            self.sized.resize(tensors, None);
        }
        self.sized[id] = Some(ty);
    }

    /// Runs a host layer: waits for the stream, downloads the layer's arena
    /// inputs (at their sizes in this run), evaluates the CPU reference op,
    /// uploads its outputs and waits again. Returns the outputs. An output
    /// whose size depends on the data is recorded in `sized`; it must fit
    /// the room the engine planned for it.
    fn run_host_layer(&mut self, li: usize) -> Result<Vec<Tensor>> {
        let engine = self.engine.engine();
        let plan = engine.plan();
        let layer = &plan.layers[li];
        self.sync(|| format!("the GPU work before host layer {}", describe_layer(layer)))?;
        let mut downloaded: Vec<Option<Tensor>> = Vec::with_capacity(layer.inputs.len());
        for input in &layer.inputs {
            let d = match *input {
                Some(id) if matches!(plan.tensors[id].storage, Storage::Arena { .. }) => {
                    match self.download_as(id, &self.actual(id)) {
                        Ok(t) => Some(t),
                        Err(e) => {
                            // Let the copies already queued finish before their
                            // destinations are dropped.
                            let _ = self.stream.synchronize();
                            return Err(e);
                        }
                    }
                }
                _ => None,
            };
            downloaded.push(d);
        }
        self.sync(|| format!("downloading the inputs of host layer {}", describe_layer(layer)))?;
        let weights = engine.weights();
        let views: Vec<Option<TensorView>> = layer
            .inputs
            .iter()
            .zip(&downloaded)
            .map(|(input, d)| match (input, d) {
                (None, _) => None,
                (Some(_), Some(t)) => Some(t.view()),
                (Some(id), None) => {
                    let t = &plan.tensors[*id];
                    let Storage::Weight { offset } = t.storage else { unreachable!("arena inputs were downloaded") };
                    let bytes = &weights[offset as usize..offset as usize + t.ty.bytes()];
                    Some(TensorView { dtype: t.ty.dtype, shape: &t.ty.shape, bytes })
                }
            })
            .collect();
        // Output types follow the inputs' (and, for a layer sized by the
        // data, what it computes).
        let outputs = layer.op.eval_views(&views).map_err(|e| Error::op(format!("layer {}: {e}", describe_layer(layer))))?;
        for (t, &o) in outputs.iter().zip(&layer.outputs) {
            let planned = &plan.tensors[o].ty;
            if t.ty() == planned {
                continue;
            }
            if t.bytes().len() > planned.bytes() {
                self.spill(li, o, t.ty())?;
            }
            self.record_size(o, t.ty().clone());
        }
        for (t, &o) in outputs.iter().zip(&layer.outputs) {
            if let Err(e) = self.upload(o, t.bytes()) {
                let _ = self.stream.synchronize();
                return Err(e);
            }
        }
        // The uploads read `outputs`: wait before they can be dropped.
        self.sync(|| format!("uploading the outputs of host layer {}", describe_layer(layer)))?;
        Ok(outputs)
    }

    /// A tensor's type in the current run: its planned type, unless a host
    /// layer sized it by the data.
    fn actual(&self, id: TensorId) -> TensorType {
        match self.sized.get(id) {
            Some(Some(t)) => t.clone(),
            _ => self.bound_type(id),
        }
    }

    /// A tensor's type at the shapes bound now.
    fn bound_type(&self, id: TensorId) -> TensorType {
        match &self.bound[0].types {
            Some(types) => types[id].clone(),
            None => self.engine.engine().plan().tensors[id].ty.clone(),
        }
    }

    /// Binds the shapes of checked host inputs (an engine whose shapes
    /// vary; a fixed engine's inputs were checked to have its shapes).
    fn bind_given(&mut self, inputs: &[(TensorId, TensorView<'_>)]) -> Result<()> {
        if !self.engine.engine().shapes_vary() {
            return Ok(());
        }
        let shapes: Vec<Vec<usize>> = inputs.iter().map(|(_, t)| t.shape.to_vec()).collect();
        self.bind_shapes(shapes)
    }

    /// Queues the copy of `bytes` into a plan tensor's device memory. The
    /// caller keeps `bytes` alive until the stream is synchronized.
    fn upload(&self, id: TensorId, bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        let name = &self.engine.engine().plan().tensors[id].name;
        // SAFETY: the tensor's device range holds `bytes.len()` bytes (its
        // type's size, validated at load); the caller keeps `bytes` alive
        // until the stream is synchronized.
        unsafe { result::memcpy_htod_async(self.address(id), bytes, self.stream.cu_stream()) }
            .map_err(|e| cuda_error(format!("copying {} bytes of '{name}' to the GPU", bytes.len()), e))
    }

    /// Queues the download of the first bytes of an arena tensor's room (or
    /// of its spill buffer), as type `ty` (its size in this run), into a new
    /// host tensor; the tensor may be read (or dropped) only after the
    /// stream is synchronized.
    fn download_as(&self, id: TensorId, ty: &crate::tensor::TensorType) -> Result<Tensor> {
        let desc = &self.engine.engine().plan().tensors[id];
        debug_assert!(ty.bytes() <= self.spilled_now(id).map_or(desc.ty.bytes(), |b| b.len()));
        let mut t = Tensor::zeros(ty.clone())?;
        if !t.bytes().is_empty() {
            let n = t.bytes().len();
            // SAFETY: the tensor's device range holds `n` bytes (validated
            // at load); the destination is a heap buffer of `n` bytes that
            // does not move when `t` does, kept until the stream is
            // synchronized by every caller.
            unsafe { result::memcpy_dtoh_async(t.bytes_mut(), self.address(id), self.stream.cu_stream()) }
                .map_err(|e| cuda_error(format!("copying {n} bytes of '{}' from the GPU", desc.name), e))?;
        }
        Ok(t)
    }

    /// Queues the copies of checked inputs into the arena.
    fn upload_inputs(&self, bound: &[(TensorId, TensorView<'_>)]) -> Result<()> {
        for (id, t) in bound {
            if let Err(e) = self.upload(*id, t.bytes) {
                let _ = self.stream.synchronize();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Downloads every output binding (weights straight from the host copy)
    /// and waits for the stream; a failure of the queued work is reported
    /// as failing `what`.
    fn download_outputs(&self, what: &str) -> Result<Vec<(String, Tensor)>> {
        let engine = self.engine.engine();
        let plan = engine.plan();
        let mut outputs = Vec::with_capacity(plan.outputs.len());
        for (name, id) in &plan.outputs {
            let desc = &plan.tensors[*id];
            let t = match desc.storage {
                Storage::Weight { offset } => {
                    Tensor::from_bytes(desc.ty.clone(), &engine.weights()[offset as usize..offset as usize + desc.ty.bytes()])
                }
                Storage::Arena { .. } => self.download_as(*id, &self.actual(*id)),
            };
            match t {
                Ok(t) => outputs.push((name.clone(), t)),
                Err(e) => {
                    let _ = self.stream.synchronize();
                    return Err(e);
                }
            }
        }
        self.sync(|| {
            let hint = if self.cuda_graph() { " (run_layers names the failing layer)" } else { "" };
            format!("{what} on the GPU failed{hint}")
        })?;
        Ok(outputs)
    }
}

impl Drop for CudaExecutionContext<'_> {
    fn drop(&mut self) {
        // Queued work may still use the arena: let it finish before the
        // arena is freed. Errors are recorded on the CUDA context.
        let ctx = self.engine.context();
        ctx.record_err(ctx.bind_to_thread());
        ctx.record_err(self.stream.synchronize());
    }
}

/// `kernel ENTRY (TACTIC)`, as errors name a launch's module.
fn describe_module(engine: &CudaEngine<'_>, module: u32) -> String {
    let m = engine.kernel_table().modules.get(module as usize);
    let (entry, tactic) = m.map(|m| (m.entry.as_str(), m.tactic.as_str())).unwrap_or(("?", "?"));
    format!("kernel {entry} ({tactic})")
}

/// `name (Op)`, as errors name a layer.
fn describe_layer(layer: &Layer) -> String {
    format!("{} ({})", layer.name, layer.op.display_name())
}

fn tensor_address(plan: &Plan, arena: u64, weights: u64, id: TensorId) -> u64 {
    match plan.tensors[id].storage {
        Storage::Arena { offset } => arena + offset,
        Storage::Weight { offset } => weights + offset,
    }
}

fn unknown_input(engine: &Engine, name: &str) -> Error {
    let names: Vec<&str> = engine.inputs().iter().map(|b| b.name.as_str()).collect();
    Error::Binding(format!("unknown input '{name}'; the engine's inputs are {names:?}"))
}

fn is_known_input(plan: &Plan, name: &str) -> bool {
    plan.inputs.iter().any(|&i| plan.tensors[i].name == name) || plan.fixed_inputs.iter().any(|f| f.name == name)
}

/// The checks and messages of the CPU executor's input binding: unknown
/// names, fixed inputs with another value, missing, repeated or mistyped
/// inputs. Returns the arena tensor and value of each input binding.
fn check_host_inputs<'t>(engine: &Engine, inputs: &[(&str, TensorView<'t>)]) -> Result<Vec<(TensorId, TensorView<'t>)>> {
    let plan = engine.plan();
    for (name, _) in inputs {
        if !is_known_input(plan, name) {
            return Err(unknown_input(engine, name));
        }
    }
    for f in &plan.fixed_inputs {
        if let Some((_, t)) = inputs.iter().find(|(n, _)| *n == f.name) {
            let desc = &plan.tensors[f.value];
            let Storage::Weight { offset } = desc.storage else { unreachable!("validated") };
            let want = &engine.weights()[offset as usize..offset as usize + desc.ty.bytes()];
            if t.ty() != desc.ty || t.bytes != want {
                return Err(Error::Binding(format!(
                    "input '{}' is a shape input fixed when the engine was built; rebuild to change it",
                    f.name
                )));
            }
        }
    }
    let mut bound = Vec::with_capacity(plan.inputs.len());
    for &id in &plan.inputs {
        let desc = &plan.tensors[id];
        let mut found = inputs.iter().filter(|(n, _)| *n == desc.name);
        let Some((_, t)) = found.next() else {
            return Err(Error::Binding(format!("missing input '{}' ({})", desc.name, desc.ty)));
        };
        if found.next().is_some() {
            return Err(Error::Binding(format!("input '{}' given twice", desc.name)));
        }
        // Shapes that vary are checked against the profiles when bound.
        let fits = if engine.shapes_vary() { t.dtype == desc.ty.dtype } else { t.ty() == desc.ty };
        if !fits {
            let want = engine.profiles().first().and_then(|p| p.describe(&desc.name, desc.ty.dtype));
            let want = want.unwrap_or_else(|| desc.ty.to_string());
            return Err(Error::Binding(format!("input '{}' must be {want}, got {}", desc.name, t.ty())));
        }
        bound.push((id, *t));
    }
    Ok(bound)
}

/// Input checks for device pointers: unknown, missing and repeated names,
/// null pointers for non-empty tensors. Fixed inputs are accepted and
/// ignored (their value cannot be compared without a copy).
fn check_device_inputs(engine: &Engine, inputs: &[(&str, u64)]) -> Result<Vec<(TensorId, u64)>> {
    let plan = engine.plan();
    for (name, _) in inputs {
        if !is_known_input(plan, name) {
            return Err(unknown_input(engine, name));
        }
    }
    let mut bound = Vec::with_capacity(plan.inputs.len());
    for &id in &plan.inputs {
        let desc = &plan.tensors[id];
        let mut found = inputs.iter().filter(|(n, _)| *n == desc.name);
        let Some(&(_, ptr)) = found.next() else {
            return Err(Error::Binding(format!("missing input '{}' ({})", desc.name, desc.ty)));
        };
        if found.next().is_some() {
            return Err(Error::Binding(format!("input '{}' given twice", desc.name)));
        }
        if ptr == 0 && desc.ty.bytes() > 0 {
            return Err(Error::Binding(format!("input '{}' ({}) has a null device pointer", desc.name, desc.ty)));
        }
        if desc.ty.bytes() > 0 {
            bound.push((id, ptr));
        }
    }
    Ok(bound)
}

/// Output checks for device pointers: every name an output binding, none
/// twice, no null pointer for a non-empty tensor. Returns name, tensor and
/// destination of each non-empty output.
fn check_device_outputs<'n>(engine: &Engine, outputs: &[(&'n str, u64)]) -> Result<Vec<(&'n str, TensorId, u64)>> {
    let plan = engine.plan();
    let mut bound = Vec::with_capacity(outputs.len());
    for (i, &(name, ptr)) in outputs.iter().enumerate() {
        let Some((_, id)) = plan.outputs.iter().find(|(n, _)| n == name) else {
            let names: Vec<&str> = engine.outputs().iter().map(|b| b.name.as_str()).collect();
            return Err(Error::Binding(format!("unknown output '{name}'; the engine's outputs are {names:?}")));
        };
        if outputs[..i].iter().any(|(n, _)| *n == name) {
            return Err(Error::Binding(format!("output '{name}' given twice")));
        }
        let ty = &plan.tensors[*id].ty;
        if ptr == 0 && ty.bytes() > 0 {
            return Err(Error::Binding(format!("output '{name}' ({ty}) has a null device pointer")));
        }
        if ty.bytes() > 0 {
            bound.push((name, *id, ptr));
        }
    }
    Ok(bound)
}
