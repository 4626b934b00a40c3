//! `trtc.build`: the `trtc build` pipeline with calibration data from a
//! Python calibrator.

use crate::convert;
use crate::engine::Engine;
use crate::errors::{self, Kind};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyMapping, PyString, PyTuple};
use std::collections::HashMap;
use std::path::PathBuf;
use trtc::build::{BuildOptions, ModelSource, ShapeProfile};
use trtc::cuda::kernel_table::TargetSpec;
use trtc::precision::calib::{Batch, CalibrationCache, Calibrator};
use trtc_runtime::TensorType;

fn build_error(message: impl Into<String>) -> PyErr {
    errors::error(Kind::Build, message)
}

/// Builds an engine from an ONNX model (a path or the model's bytes), with
/// `trtc build`'s options and checks. See the package's stubs for each
/// argument.
#[pyfunction]
#[pyo3(signature = (
    model, *, fp16 = false, int8 = false, fp8 = false, calibrator = None, calib_cache = None, calib_batches = None,
    shapes = None, profiles = None, target = "cpu", opt_level = None, timing_cache = None, error_on_cache_miss = false,
    layer_precision = None, disable_passes = None, progress = None
))]
#[allow(clippy::too_many_arguments)]
pub fn build(
    py: Python<'_>,
    model: &Bound<'_, PyAny>,
    fp16: bool,
    int8: bool,
    fp8: bool,
    calibrator: Option<&Bound<'_, PyAny>>,
    calib_cache: Option<PathBuf>,
    calib_batches: Option<usize>,
    shapes: Option<HashMap<String, Vec<usize>>>,
    profiles: Option<&Bound<'_, PyAny>>,
    target: &str,
    opt_level: Option<u8>,
    timing_cache: Option<PathBuf>,
    error_on_cache_miss: bool,
    layer_precision: Option<&Bound<'_, PyAny>>,
    disable_passes: Option<Vec<String>>,
    progress: Option<bool>,
) -> PyResult<Engine> {
    let model = if let Ok(b) = model.cast::<PyBytes>() {
        ModelSource::Bytes(b.as_bytes().to_vec())
    } else {
        ModelSource::File(model.extract::<PathBuf>().map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err("model: expected a path (str or os.PathLike) or the model's bytes")
        })?)
    };
    let profiles = match profiles.filter(|p| !p.is_none()) {
        None => Vec::new(),
        Some(p) => profile_list(p)?,
    };
    let mut opts = BuildOptions { profiles, ..Default::default() };
    opts.import.shapes = shapes.unwrap_or_default().into_iter().collect();
    opts.target = match target.parse::<TargetSpec>().map_err(errors::build)? {
        TargetSpec::Cpu => trtc_runtime::Target::Cpu,
        TargetSpec::Sm(sm) => trtc_runtime::Target::Cuda { sm, gpu_name: None },
        TargetSpec::Cuda => {
            let gpu = py.detach(trtc::cuda::present_gpu).map_err(|e| {
                errors::error(
                    Kind::Device,
                    format!(
                        "target='cuda' compiles for the GPU of this machine (use target='sm_XX' to build for another): {e:#}"
                    ),
                )
            })?;
            trtc_runtime::Target::Cuda { sm: gpu.sm, gpu_name: Some(gpu.name) }
        }
    };
    if let Some(l) = opt_level {
        if l > 5 {
            return Err(build_error(format!("opt_level {l}: expected 0 to 5")));
        }
    }
    if matches!(opts.target, trtc_runtime::Target::Cuda { .. }) {
        opts.tuning = trtc::cuda::TuningOptions { opt_level, timing_cache, error_on_cache_miss };
    } else if opt_level.is_some() || timing_cache.is_some() || error_on_cache_miss {
        return Err(build_error(
            "opt_level, timing_cache and error_on_cache_miss tune GPU kernels: give target='cuda' or 'sm_XX'",
        ));
    }
    opts.passes.disabled = disable_passes.unwrap_or_default();
    opts.precision.fp16 = fp16;
    opts.precision.int8 = int8;
    opts.precision.fp8 = fp8;
    opts.precision.layer_precisions = layer_precisions(layer_precision)?;
    if int8 && fp8 {
        return Err(build_error("int8=True and fp8=True cannot be combined: give one"));
    }
    // Calibration scales feed int8 or FP8 layers alike.
    let quantized = int8 || fp8;
    if calib_cache.is_some() && !quantized {
        return Err(build_error("calib_cache needs int8=True or fp8=True"));
    }
    if calibrator.is_some() && !quantized && !fp16 {
        return Err(build_error(
            "a calibrator needs int8=True or fp8=True (or fp16=True, which observes tensor ranges on its batches)",
        ));
    }
    if calib_batches == Some(0) {
        return Err(build_error("calib_batches must be at least 1"));
    }
    opts.int8.calib.max_batches = calib_batches;
    opts.int8.calib.progress = progress.unwrap_or_else(|| std::io::IsTerminal::is_terminal(&std::io::stderr()));
    opts.int8.cache = calib_cache;
    opts.int8.calib.calibrator = match calibrator {
        Some(c) => algorithm(c, fp8)?,
        None if fp8 => Calibrator::MinMax,
        None => Calibrator::Entropy,
    };

    for p in &opts.profiles {
        if let Some((name, _)) = p.inputs.iter().find(|(n, _)| opts.import.shapes.contains_key(n)) {
            return Err(build_error(format!("input '{name}' has both a shape in shapes= and a range in profiles=")));
        }
    }
    let graph = py.detach(|| errors::no_panic(|| trtc::build::import(&model, &opts).map_err(errors::build)))?;

    // The calibrator's cache, else its batches (unless a cache file decides).
    if let Some(c) = calibrator {
        let cache_file_exists = opts.int8.cache.as_ref().is_some_and(|p| p.exists());
        if quantized {
            opts.int8.cache_given = read_calibration_cache(c)?;
        }
        if opts.int8.cache_given.is_none() && !(quantized && cache_file_exists) {
            let inputs = trtc::precision::calib::graph_inputs(&graph);
            opts.int8.batches = batches(py, c, &inputs, calib_batches)?;
            if opts.int8.batches.is_empty() {
                return Err(build_error("the calibrator's get_batch() gave no batch (it returned None at once)"));
            }
        }
    }

    let built = py.detach(|| errors::no_panic(|| trtc::build::build_graph(graph, &opts).map_err(errors::build)))?;
    if let (Some(c), Some((cache, false))) = (calibrator, &built.calibration) {
        if c.hasattr("write_calibration_cache")? {
            c.call_method1("write_calibration_cache", (PyBytes::new(py, cache.to_text().as_bytes()),))?;
        }
    }
    Engine::new(built.engine)
}

/// An input's min, opt and max shapes.
type ShapeRange = (Vec<usize>, Vec<usize>, Vec<usize>);

/// `profiles`: a list of dicts {input name: (min, opt, max) shapes}, one per
/// optimization profile, as repeated `--min-shapes`/`--opt-shapes`/
/// `--max-shapes` give them.
fn profile_list(value: &Bound<'_, PyAny>) -> PyResult<Vec<ShapeProfile>> {
    let shape_error =
        || pyo3::exceptions::PyTypeError::new_err("profiles: expected [{input name: (min shape, opt shape, max shape)}, ...]");
    let list: Vec<Bound<'_, PyAny>> = value.extract().map_err(|_| shape_error())?;
    if list.is_empty() {
        return Err(build_error("profiles: an empty list (give None for an engine without profiles)"));
    }
    let profiles = list.iter().map(|one| profile(one, &shape_error)).collect::<PyResult<Vec<_>>>()?;
    trtc::build::check_profiles(&profiles).map_err(errors::build)?;
    Ok(profiles)
}

/// One profile's dict.
fn profile(one: &Bound<'_, PyAny>, shape_error: &dyn Fn() -> PyErr) -> PyResult<ShapeProfile> {
    let ranges: HashMap<String, ShapeRange> = one.extract().map_err(|_| shape_error())?;
    let mut names: Vec<&String> = ranges.keys().collect();
    names.sort();
    let side = |which: usize| -> Vec<(String, Vec<usize>)> {
        names
            .iter()
            .map(|n| {
                let (lo, mid, hi) = &ranges[*n];
                ((*n).clone(), [lo, mid, hi][which].clone())
            })
            .collect()
    };
    ShapeProfile::from_flags(&side(0), &side(1), &side(2)).map_err(errors::build)
}

/// `layer_precision`: a dict {pattern: "fp32"|"fp16"|"int8"} (later entries
/// win, as later `--layer-precision` flags do) or a list of
/// "PATTERN=PRECISION" strings.
fn layer_precisions(value: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, trtc_runtime::ops::precision::Precision)>> {
    let Some(value) = value else { return Ok(Vec::new()) };
    let pins: Vec<String> = if let Ok(m) = value.cast::<PyMapping>() {
        let mut v = Vec::new();
        for item in m.items()?.iter() {
            let (k, p): (String, String) = item.extract().map_err(|_| {
                pyo3::exceptions::PyTypeError::new_err(
                    "layer_precision: expected {pattern: 'fp32'|'fp16'|'int8'|'fp8'} (strings)",
                )
            })?;
            v.push(format!("{k}={p}"));
        }
        v
    } else {
        value.extract().map_err(|_| {
            pyo3::exceptions::PyTypeError::new_err(
                "layer_precision: expected a dict {pattern: precision} or a list of 'PATTERN=PRECISION'",
            )
        })?
    };
    pins.iter().map(|p| trtc::precision::PrecisionConfig::parse_pin(p).map_err(errors::build)).collect()
}

/// The calibrator's `algorithm` attribute ("entropy", "minmax",
/// "percentile=P"); entropy, TensorRT's default, when it has none.
fn algorithm(c: &Bound<'_, PyAny>, fp8: bool) -> PyResult<Calibrator> {
    if !c.hasattr("algorithm")? {
        return Ok(if fp8 { Calibrator::MinMax } else { Calibrator::Entropy });
    }
    let a = c.getattr("algorithm")?;
    let name: String =
        a.extract().map_err(|_| build_error("the calibrator's algorithm must be a string: entropy, minmax or percentile=P"))?;
    name.parse::<Calibrator>().map_err(|e| build_error(format!("the calibrator's algorithm '{name}': {e}")))
}

/// The scales of the calibrator's `read_calibration_cache()`, when it has
/// the method and it returns a cache (bytes or str; `None` or empty for
/// none).
fn read_calibration_cache(c: &Bound<'_, PyAny>) -> PyResult<Option<CalibrationCache>> {
    if !c.hasattr("read_calibration_cache")? {
        return Ok(None);
    }
    let got = c.call_method0("read_calibration_cache")?;
    if got.is_none() {
        return Ok(None);
    }
    let text = if let Ok(b) = got.cast::<PyBytes>() {
        String::from_utf8(b.as_bytes().to_vec())
            .map_err(|_| build_error("read_calibration_cache() returned bytes that are not text"))?
    } else if let Ok(s) = got.cast::<PyString>() {
        s.to_string()
    } else {
        return Err(build_error("read_calibration_cache() must return bytes, str or None"));
    };
    if text.is_empty() {
        return Ok(None);
    }
    CalibrationCache::parse(&text).map(Some).map_err(|e| build_error(format!("the cache from read_calibration_cache(): {e:#}")))
}

/// Calls `get_batch()` until it returns `None` (or `max` batches came),
/// each batch checked against the model's inputs like a `--calib` file.
fn batches(py: Python<'_>, c: &Bound<'_, PyAny>, inputs: &[(String, TensorType)], max: Option<usize>) -> PyResult<Vec<Batch>> {
    if !c.hasattr("get_batch")? {
        return Err(build_error("the calibrator has no get_batch() method"));
    }
    let names = || inputs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ");
    let get_batch = c.getattr("get_batch")?;
    // TensorRT's calibrators take the input names: get_batch(names).
    let wants_names: bool = py.import("trtc.calibration")?.getattr("_wants_names")?.call1((&get_batch,))?.extract()?;
    let name_list = PyList::new(py, inputs.iter().map(|(n, _)| n.as_str()))?;
    let mut out = Vec::new();
    while max.is_none_or(|m| out.len() < m) {
        let got = if wants_names { get_batch.call1((&name_list,))? } else { get_batch.call0()? };
        if got.is_none() {
            break;
        }
        let index = out.len();
        let mut batch = Vec::with_capacity(inputs.len());
        let in_order = wants_names && (got.is_instance_of::<PyList>() || got.is_instance_of::<PyTuple>());
        if in_order {
            let arrays: Vec<Bound<'_, PyAny>> = got.extract()?;
            if arrays.len() != inputs.len() {
                return Err(build_error(format!(
                    "calibration batch {index}: get_batch(names) returned {} arrays for {} inputs ({})",
                    arrays.len(),
                    inputs.len(),
                    names()
                )));
            }
            for ((name, ty), value) in inputs.iter().zip(&arrays) {
                batch.push((name.clone(), batch_tensor(py, index, name, value, ty)?));
            }
        } else if let Ok(m) = got.cast::<PyMapping>() {
            for key in m.keys()?.iter() {
                let key: String =
                    key.extract().map_err(|_| build_error(format!("calibration batch {index}: keys must be input names")))?;
                if !inputs.iter().any(|(n, _)| *n == key) {
                    return Err(build_error(format!(
                        "calibration batch {index}: no input named '{key}' (the model's inputs: {})",
                        names()
                    )));
                }
            }
            for (name, ty) in inputs {
                let Ok(value) = m.get_item(name) else {
                    return Err(build_error(format!("calibration batch {index}: no array for the input '{name}'")));
                };
                batch.push((name.clone(), batch_tensor(py, index, name, &value, ty)?));
            }
        } else {
            let [(name, ty)] = inputs else {
                return Err(build_error(format!(
                    "calibration batch {index}: the model has {} inputs ({}): get_batch() must return a dict of arrays by input name",
                    inputs.len(),
                    names()
                )));
            };
            batch.push((name.clone(), batch_tensor(py, index, name, &got, ty)?));
        }
        out.push(batch);
    }
    Ok(out)
}

fn batch_tensor(
    py: Python<'_>,
    index: usize,
    name: &str,
    value: &Bound<'_, PyAny>,
    ty: &TensorType,
) -> PyResult<trtc_runtime::Tensor> {
    let t = convert::tensor(py, name, value, ty.dtype)
        .map_err(|e| build_error(format!("calibration batch {index}: {}", e.value(py))))?;
    if t.ty() != ty {
        return Err(build_error(format!("calibration batch {index}: '{name}' is {}, but the engine's input is {ty}", t.ty())));
    }
    Ok(t)
}
