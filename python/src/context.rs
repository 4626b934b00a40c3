//! `trtc.Context`: runs an engine, on the CPU executor or on a GPU.

use crate::convert;
use crate::errors::{self, Kind};
use crate::gpu::GpuEngine;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyMapping};
use std::sync::{Arc, Mutex};
use trtc_runtime::{CudaExecutionContext, ExecutionContext, Tensor, TensorView};

/// Where a context runs.
pub enum Place {
    Cpu,
    Gpu(Arc<GpuEngine>),
}

/// How a CPU context runs its layers.
#[derive(Clone, Copy, Debug)]
pub struct CpuOptions {
    /// Threads per layer; every core when `None`.
    pub threads: Option<usize>,
    /// The reference f32 arithmetic instead of the faster kernels.
    pub exact: bool,
}

type CpuContextOf<'a> = ExecutionContext<'a>;
type GpuContextOf<'a> = CudaExecutionContext<'a>;

self_cell::self_cell!(
    struct CpuCell {
        owner: Arc<trtc_runtime::Engine>,
        #[not_covariant]
        dependent: CpuContextOf,
    }
);

self_cell::self_cell!(
    struct GpuCell {
        owner: Arc<GpuEngine>,
        #[not_covariant]
        dependent: GpuContextOf,
    }
);

enum Inner {
    Cpu(CpuCell),
    Gpu(GpuCell),
}

impl Inner {
    fn run(&mut self, inputs: &[(&str, TensorView<'_>)]) -> trtc_runtime::Result<Vec<(String, Tensor)>> {
        match self {
            Inner::Cpu(c) => c.with_dependent_mut(|_, ctx| ctx.run_views(inputs)),
            Inner::Gpu(c) => c.with_dependent_mut(|_, ctx| ctx.run_views(inputs)),
        }
    }
}

/// Runs one engine: its activation memory and, on a GPU, its stream. One
/// per thread: calls on one context from several threads take turns.
#[pyclass(module = "trtc", name = "Context", frozen)]
pub struct Context {
    /// The `trtc.Engine`, kept alive and returned by the `engine` getter.
    engine: Py<PyAny>,
    runtime: Arc<trtc_runtime::Engine>,
    device: &'static str,
    threads: usize,
    inner: Mutex<Inner>,
}

impl Context {
    pub fn new(engine: Py<PyAny>, runtime: Arc<trtc_runtime::Engine>, place: Place, cpu: CpuOptions) -> PyResult<Context> {
        let (inner, device, threads) = match place {
            Place::Cpu => {
                let threads = cpu.threads.unwrap_or_else(trtc_runtime::parallel::machine_threads);
                let cell = CpuCell::try_new(runtime.clone(), |e| {
                    let mut ctx = e.create_context()?;
                    ctx.set_threads(threads)?;
                    ctx.set_math(if cpu.exact { trtc_runtime::math::Math::Exact } else { trtc_runtime::math::Math::Fast });
                    Ok::<_, trtc_runtime::Error>(ctx)
                })
                .map_err(errors::runtime)?;
                (Inner::Cpu(cell), "cpu", threads)
            }
            Place::Gpu(gpu) => {
                let cell = GpuCell::try_new(gpu, |g| g.borrow_dependent().create_context()).map_err(errors::runtime)?;
                (Inner::Gpu(cell), "cuda:0", 0)
            }
        };
        Ok(Context { engine, runtime, device, threads, inner: Mutex::new(inner) })
    }
}

#[pymethods]
impl Context {
    /// Runs the engine. `inputs` maps input names to arrays (any
    /// array-like; numpy arrays of the binding's dtype are read in place),
    /// or is one array for an engine with one input. Returns the outputs
    /// by name, in binding order, as new numpy arrays. The GIL is released
    /// while the engine runs.
    fn run<'py>(&self, py: Python<'py>, inputs: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
        let arrays = input_arrays(py, &self.runtime, inputs)?;
        let views =
            arrays.iter().map(|(name, dtype, a)| Ok((name.as_str(), convert::view(a, *dtype)?))).collect::<PyResult<Vec<_>>>()?;
        let outputs = py.detach(|| {
            errors::no_panic(|| {
                let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
                inner.run(&views).map_err(errors::runtime)
            })
        })?;
        let dict = PyDict::new(py);
        for (name, t) in &outputs {
            dict.set_item(name, convert::output_array(py, t)?)?;
        }
        Ok(dict)
    }

    /// Runs the engine on arrays already on the GPU, with no copy through
    /// the host: `inputs` and `outputs` map binding names to objects with
    /// `__cuda_array_interface__` (CuPy arrays, PyTorch CUDA tensors) on the
    /// context's GPU, C-contiguous, of each binding's dtype and shape. Every
    /// input must be given; `outputs` may name a subset of the outputs,
    /// which are written in place. Waits for all pending work on the GPU
    /// first (the arrays' producers, on any stream), and for the engine's
    /// work before returning. Returns `outputs` as a dict.
    fn run_device<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyMapping>,
        outputs: &Bound<'py, PyMapping>,
    ) -> PyResult<Bound<'py, PyDict>> {
        if self.device == "cpu" {
            return Err(errors::error(Kind::Argument, "run_device needs a context on a GPU (create_context(device='cuda'))"));
        }
        let engine = &self.runtime;
        let plan = engine.plan();
        // An engine whose shapes vary takes the arrays' shapes: bound first,
        // then every array is checked against the types at those shapes.
        let mut bound: Option<(Shapes, Vec<trtc_runtime::TensorType>)> = None;
        if engine.shapes_vary() {
            let mut shapes = Vec::new();
            for item in inputs.items()?.iter() {
                let (name, value): (String, Bound<'py, PyAny>) = item.extract()?;
                if engine.inputs().iter().any(|b| b.name == name) {
                    shapes.push((name.clone(), convert::device_shape(&format!("input {name}"), &value)?));
                }
            }
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let Inner::Gpu(cell) = &mut *inner else { unreachable!("checked above: a GPU context") };
            let outs = cell
                .with_dependent_mut(|_, ctx| {
                    let refs: Vec<(&str, &[usize])> = shapes.iter().map(|(n, s)| (n.as_str(), s.as_slice())).collect();
                    ctx.set_input_shapes(&refs)?;
                    engine.outputs().iter().map(|b| ctx.output_type(&b.name)).collect::<trtc_runtime::Result<Vec<_>>>()
                })
                .map_err(errors::runtime)?;
            bound = Some((shapes, outs));
        }
        let mut ins = Vec::new();
        for item in inputs.items()?.iter() {
            let (name, value): (String, Bound<'py, PyAny>) = item.extract()?;
            let given = bound.as_ref().and_then(|(shapes, _)| shapes.iter().find(|(n, _)| *n == name));
            let ty = match engine.inputs().iter().find(|b| b.name == name) {
                Some(b) if let Some((_, shape)) = given => trtc_runtime::TensorType::new(b.ty.dtype, shape.clone()),
                Some(b) => b.ty.clone(),
                None => match plan.fixed_inputs.iter().find(|f| f.name == name) {
                    Some(f) => plan.tensors[f.value].ty.clone(),
                    None => {
                        let names: Vec<&str> = engine.inputs().iter().map(|b| b.name.as_str()).collect();
                        return Err(errors::error(
                            Kind::Binding,
                            format!("unknown input '{name}'; the engine's inputs are {names:?}"),
                        ));
                    }
                },
            };
            ins.push((name.clone(), convert::device_address(py, &format!("input {name}"), &value, &ty, false)?));
        }
        let dict = PyDict::new(py);
        let mut outs = Vec::new();
        for item in outputs.items()?.iter() {
            let (name, value): (String, Bound<'py, PyAny>) = item.extract()?;
            let Some(k) = engine.outputs().iter().position(|b| b.name == name) else {
                let names: Vec<&str> = engine.outputs().iter().map(|b| b.name.as_str()).collect();
                return Err(errors::error(Kind::Binding, format!("unknown output '{name}'; the engine's outputs are {names:?}")));
            };
            let ty = bound.as_ref().map_or(&engine.outputs()[k].ty, |(_, outs)| &outs[k]);
            outs.push((name.clone(), convert::device_address(py, &format!("output {name}"), &value, ty, true)?));
            dict.set_item(&name, &value)?;
        }
        py.detach(|| {
            errors::no_panic(|| {
                let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
                let Inner::Gpu(cell) = &mut *inner else { unreachable!("checked above: a GPU context") };
                cell.with_dependent_mut(|gpu, ctx| {
                    let ins: Vec<(&str, u64)> = ins.iter().map(|(n, a)| (n.as_str(), *a)).collect();
                    let outs: Vec<(&str, u64)> = outs.iter().map(|(n, a)| (n.as_str(), *a)).collect();
                    gpu.borrow_dependent().synchronize_device()?;
                    // SAFETY: each address is a live, C-contiguous device array of
                    // its binding's type and size (checked above from its
                    // __cuda_array_interface__), kept alive by the caller's
                    // objects for this call, which waits for the work to finish.
                    unsafe { ctx.enqueue_device(&ins, &outs)? };
                    ctx.synchronize()
                })
                .map_err(errors::runtime)
            })
        })?;
        Ok(dict)
    }

    /// The engine this context runs.
    #[getter]
    fn engine(&self, py: Python<'_>) -> Py<PyAny> {
        self.engine.clone_ref(py)
    }

    /// `cpu` or `cuda:0`.
    #[getter]
    fn device(&self) -> &'static str {
        self.device
    }

    /// Threads each CPU layer may use (0 on a GPU).
    #[getter]
    fn threads(&self) -> usize {
        self.threads
    }

    /// Makes every run use optimization profile `index` (None: the first
    /// profile that admits a run's shapes), as TensorRT's
    /// `set_optimization_profile_async` does.
    #[pyo3(signature = (index))]
    fn set_profile(&self, index: Option<usize>) -> PyResult<()> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *inner {
            Inner::Cpu(c) => c.with_dependent_mut(|_, ctx| ctx.set_profile(index)).map_err(errors::runtime),
            Inner::Gpu(g) => g.with_dependent_mut(|_, ctx| ctx.set_profile(index)).map_err(errors::runtime),
        }
    }

    /// The profile set with `set_profile`, or None.
    #[getter]
    fn profile(&self) -> Option<usize> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match &*inner {
            Inner::Cpu(c) => c.with_dependent(|_, ctx| ctx.profile()),
            Inner::Gpu(g) => g.with_dependent(|_, ctx| ctx.profile()),
        }
    }

    fn __repr__(&self) -> String {
        format!("Context(device={:?}, threads={})", self.device, self.threads)
    }
}

/// Input shapes by binding name.
type Shapes = Vec<(String, Vec<usize>)>;

/// The inputs as C-contiguous arrays of their bindings' dtypes, by name.
/// Names that are not inputs are passed on for the executor to refuse with
/// its own message (fixed shape inputs are accepted there).
fn input_arrays<'py>(
    py: Python<'py>,
    engine: &trtc_runtime::Engine,
    inputs: &Bound<'py, PyAny>,
) -> PyResult<Vec<(String, trtc_runtime::DType, Bound<'py, PyAny>)>> {
    let plan = engine.plan();
    let dtype_of = |name: &str| -> Option<trtc_runtime::DType> {
        let bound = engine.inputs().iter().find(|b| b.name == name).map(|b| b.ty.dtype);
        bound.or_else(|| plan.fixed_inputs.iter().find(|f| f.name == name).map(|f| plan.tensors[f.value].ty.dtype))
    };
    let mut out = Vec::new();
    if let Ok(mapping) = inputs.cast::<PyMapping>() {
        for item in mapping.items()?.iter() {
            let (key, value): (Bound<'py, PyAny>, Bound<'py, PyAny>) = item.extract()?;
            let name: String = key.extract().map_err(|_| {
                errors::error(
                    Kind::Binding,
                    format!("input names are strings, not {}", key.get_type().name().map(|n| n.to_string()).unwrap_or_default()),
                )
            })?;
            let Some(dtype) = dtype_of(&name) else {
                let names: Vec<&str> = engine.inputs().iter().map(|b| b.name.as_str()).collect();
                return Err(errors::error(Kind::Binding, format!("unknown input '{name}'; the engine's inputs are {names:?}")));
            };
            let array = convert::input_array(py, &name, &value, dtype)?;
            out.push((name, dtype, array));
        }
    } else {
        let [only] = engine.inputs() else {
            return Err(errors::error(
                Kind::Binding,
                format!("this engine has {} inputs: pass a dict of arrays by input name", engine.inputs().len()),
            ));
        };
        let array = convert::input_array(py, &only.name, inputs, only.ty.dtype)?;
        out.push((only.name.clone(), only.ty.dtype, array));
    }
    Ok(out)
}
