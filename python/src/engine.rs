//! `trtc.Engine` and `trtc.Binding`: a loaded engine, shared by the
//! contexts that run it.

use crate::convert;
use crate::errors::{self, Kind};
use crate::gpu::GpuEngine;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::sync::{Arc, Mutex};
use trtc_runtime::profile::ProfilePoint;

/// One input or output of an engine.
#[pyclass(module = "trtc", name = "Binding", frozen, get_all)]
pub struct Binding {
    /// The ONNX name.
    name: String,
    /// The numpy dtype that holds its values.
    dtype: Py<PyAny>,
    /// trtc's name of the element type (`f32`, `bf16`, ...): differs from
    /// the numpy dtype's where numpy has no such type.
    element_type: String,
    /// The shape; -1 on the axes that vary within the engine's profile (as
    /// TensorRT reports them).
    shape: Py<PyTuple>,
    /// The profile's smallest, optimum and largest shapes (all equal to
    /// `shape` when nothing varies).
    min_shape: Py<PyTuple>,
    opt_shape: Py<PyTuple>,
    max_shape: Py<PyTuple>,
}

#[pymethods]
impl Binding {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let name = pyo3::types::PyString::new(py, &self.name);
        Ok(format!("Binding(name={}, dtype={}, shape={})", name.repr()?, self.dtype.bind(py).str()?, self.shape.bind(py).repr()?))
    }
}

/// A binding whose shape lies between `min` and `max` (the profile's
/// range, or the one shape).
fn binding(py: Python<'_>, b: &trtc_runtime::BindingInfo, [min, opt, max]: [&[usize]; 3]) -> PyResult<Binding> {
    let shape: Vec<i64> = min.iter().zip(max).map(|(&lo, &hi)| if lo == hi { hi as i64 } else { -1 }).collect();
    Ok(Binding {
        name: b.name.clone(),
        dtype: convert::numpy_dtype(py, b.ty.dtype)?.unbind(),
        element_type: b.ty.dtype.to_string(),
        shape: PyTuple::new(py, &shape)?.unbind(),
        min_shape: PyTuple::new(py, min)?.unbind(),
        opt_shape: PyTuple::new(py, opt)?.unbind(),
        max_shape: PyTuple::new(py, max)?.unbind(),
    })
}

/// Every tensor's type with the inputs at one point of the profile (`None`
/// without a profile whose shapes vary).
fn bound_at(engine: &trtc_runtime::Engine, at: ProfilePoint) -> Option<Vec<trtc_runtime::TensorType>> {
    engine.profiles().first().filter(|p| p.is_dynamic())?.bind_at(engine.plan(), at).ok()
}

/// A loaded engine (`trtc.Engine.load`, `from_bytes`, or `trtc.build`).
/// Shared by any number of contexts and threads.
#[pyclass(module = "trtc", name = "Engine", frozen)]
pub struct Engine {
    pub engine: Arc<trtc_runtime::Engine>,
    /// The engine file's bytes, for `save` and `serialize`.
    bytes: Arc<Vec<u8>>,
    /// The engine on GPU 0, made by the first GPU context.
    gpu: Mutex<Option<Arc<GpuEngine>>>,
}

impl Engine {
    pub fn new(bytes: Vec<u8>) -> PyResult<Engine> {
        let engine = trtc_runtime::Engine::from_bytes(&bytes).map_err(errors::runtime)?;
        Ok(Engine { engine: Arc::new(engine), bytes: Arc::new(bytes), gpu: Mutex::new(None) })
    }

    /// The engine on GPU 0, loaded once.
    pub fn gpu(&self) -> PyResult<Arc<GpuEngine>> {
        let mut gpu = self.gpu.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(g) = gpu.as_ref() {
            return Ok(g.clone());
        }
        let loaded = Arc::new(
            GpuEngine::try_new(self.engine.clone(), |e| {
                trtc::cuda::load(e, 0).map_err(|e| trtc_runtime::Error::Device(format!("{e:#}")))
            })
            .map_err(errors::runtime)?,
        );
        *gpu = Some(loaded.clone());
        Ok(loaded)
    }
}

#[pymethods]
impl Engine {
    /// Loads an engine file (as written by `trtc build` or `Engine.save`).
    #[staticmethod]
    fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Engine> {
        py.detach(|| errors::no_panic(|| Engine::new(trtc_runtime::file::read(&path).map_err(|e| errors::runtime(e.into()))?)))
    }

    /// Loads an engine from its bytes.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: Vec<u8>) -> PyResult<Engine> {
        py.detach(|| errors::no_panic(|| Engine::new(data)))
    }

    /// Writes the engine file.
    fn save(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        py.detach(|| trtc_runtime::file::write(&path, &self.bytes).map_err(|e| errors::runtime(e.into())))
    }

    /// The engine file's bytes.
    fn serialize<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.bytes)
    }

    /// The input bindings, in order.
    #[getter]
    fn inputs(&self, py: Python<'_>) -> PyResult<Vec<Binding>> {
        let profile = self.engine.profiles().first();
        self.engine
            .inputs()
            .iter()
            .map(|b| {
                let fixed = b.ty.shape.as_slice();
                match profile.and_then(|p| p.inputs.iter().find(|r| r.name == b.name)) {
                    Some(r) => binding(py, b, [&r.min, &r.opt, &r.max]),
                    None => binding(py, b, [fixed, fixed, fixed]),
                }
            })
            .collect()
    }

    /// The output bindings, in order.
    #[getter]
    fn outputs(&self, py: Python<'_>) -> PyResult<Vec<Binding>> {
        let (at_min, at_opt) = (bound_at(&self.engine, ProfilePoint::Min), bound_at(&self.engine, ProfilePoint::Opt));
        let plan = self.engine.plan();
        // An output sized by the data (a detector's boxes) may be empty on
        // any axis: its shape is -1 there, as TensorRT reports it.
        let sized = plan.data_sized();
        let zeros = vec![0usize; plan.tensors.iter().map(|t| t.ty.shape.len()).max().unwrap_or(0)];
        self.engine
            .outputs()
            .iter()
            .zip(&plan.outputs)
            .map(|(b, (_, id))| {
                let fixed = b.ty.shape.as_slice();
                let min =
                    if sized[*id] { &zeros[..fixed.len()] } else { at_min.as_ref().map_or(fixed, |t| t[*id].shape.as_slice()) };
                let opt = at_opt.as_ref().map_or(fixed, |t| t[*id].shape.as_slice());
                binding(py, b, [min, opt, fixed])
            })
            .collect()
    }

    /// What the engine runs on: `cpu`, or `sm_XX` with the GPU's name.
    #[getter]
    fn target(&self) -> String {
        self.engine.header().target.to_string()
    }

    /// The `trtc build` flags the engine was built with.
    #[getter]
    fn build_flags(&self) -> Vec<String> {
        self.engine.header().build_flags.clone()
    }

    #[getter]
    fn format_version(&self) -> u32 {
        self.engine.format_version()
    }

    #[getter]
    fn trtc_version(&self) -> String {
        self.engine.header().trtc_version.clone()
    }

    /// What `trtc inspect --json` prints, as a dict: bindings, memory,
    /// and each layer's op, precision and tactic.
    fn inspect<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let text = trtc::inspect::json(&self.engine);
        py.import("json")?.getattr("loads")?.call1((text,))
    }

    /// A context that runs the engine: `device` is "auto" (the GPU when the
    /// engine has kernels for the GPU present, else the CPU), "cpu" or
    /// "cuda"; `threads` is how many threads each CPU layer may use (default:
    /// every core; outputs do not depend on it); `exact` picks the CPU
    /// executor's bit-reproducible f32 arithmetic over its faster kernels.
    #[pyo3(signature = (*, device = "auto", threads = None, exact = false))]
    fn create_context(
        slf: &Bound<'_, Engine>,
        device: &str,
        threads: Option<usize>,
        exact: bool,
    ) -> PyResult<crate::context::Context> {
        let py = slf.py();
        let this = slf.get();
        let place = match device {
            "cpu" => crate::context::Place::Cpu,
            "cuda" | "cuda:0" => crate::context::Place::Gpu(this.gpu()?),
            "auto" if this.engine.kernels().is_some() => match this.gpu() {
                Ok(g) => crate::context::Place::Gpu(g),
                Err(e) => {
                    // As `trtc run` says why on stderr, say why as a warning.
                    let why = format!("running on the cpu: {}", e.value(py));
                    PyErr::warn(py, &py.get_type::<pyo3::exceptions::PyRuntimeWarning>(), &std::ffi::CString::new(why)?, 1)?;
                    crate::context::Place::Cpu
                }
            },
            "auto" => crate::context::Place::Cpu,
            other => {
                return Err(errors::error(Kind::Argument, format!("device '{other}': expected 'auto', 'cpu' or 'cuda'")));
            }
        };
        if let Some(t) = threads {
            let max = trtc_runtime::parallel::MAX_THREADS;
            if t == 0 || t > max {
                return Err(errors::error(Kind::Argument, format!("threads must be between 1 and {max}, got {t}")));
            }
        }
        let options = crate::context::CpuOptions { threads, exact };
        let owner = slf.clone().into_any().unbind();
        let engine = this.engine.clone();
        py.detach(|| errors::no_panic(|| crate::context::Context::new(owner, engine, place, options)))
    }

    fn __repr__(&self) -> String {
        let names =
            |v: &[trtc_runtime::BindingInfo]| v.iter().map(|b| format!("{}: {}", b.name, b.ty)).collect::<Vec<_>>().join(", ");
        format!(
            "Engine(target={}, inputs=[{}], outputs=[{}])",
            self.target(),
            names(self.engine.inputs()),
            names(self.engine.outputs())
        )
    }
}
