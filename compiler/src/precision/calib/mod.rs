//! INT8 calibration: runs an FP32 engine on calibration batches, collects
//! per-tensor statistics of |x| and turns them into scales with a
//! calibrator (entropy, min-max or percentile), stored in a calibration
//! cache in TensorRT's text format.
//!
//! Statistics take two passes over the data, like TensorRT: the first finds
//! each tensor's max |x|, the second fills a 2048-bin histogram over
//! `[0, max]` (min-max needs only the first).

pub mod calibrator;

use crate::ir::Graph;
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use trtc_runtime::executor::cuda::CudaEngine;
use trtc_runtime::{DType, Engine, Tensor, TensorType};

pub use calibrator::{CalibrationCache, Calibrator, Histogram};

/// One batch: a tensor per input binding, by name.
pub type Batch = Vec<(String, Tensor)>;

/// How to calibrate.
#[derive(Clone, Debug)]
pub struct CalibOptions {
    pub calibrator: Calibrator,
    /// Use at most this many batches (all when `None`).
    pub max_batches: Option<usize>,
    /// Show a progress bar on stderr.
    pub progress: bool,
}

impl Default for CalibOptions {
    fn default() -> CalibOptions {
        CalibOptions { calibrator: Calibrator::Entropy, max_batches: None, progress: false }
    }
}

/// Loads calibration (or evaluation) batches from a folder: one batch per
/// `.npz` file (keys are input names) or `.npy` file (for a single-input
/// model), taken in file-name order. Every batch must match the inputs'
/// dtypes and shapes exactly, since engines have static shapes.
/// With `any_shape` (an engine whose shapes vary), each array need only have
/// its input's dtype and rank: the engine's profiles check the shapes.
pub fn load_batches(dir: &Path, inputs: &[(String, TensorType)], max: Option<usize>, any_shape: bool) -> Result<Vec<Batch>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read the calibration folder {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("npz" | "npy")))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("{}: no .npz or .npy batches found", dir.display());
    }
    if let Some(m) = max {
        files.truncate(m);
    }
    // Every batch counts against the memory available, since all are kept.
    let mut budget = crate::npz::Budget::available_memory();
    files.iter().map(|f| load_batch(f, inputs, any_shape, &mut budget)).collect()
}

/// Reads the arrays named like the inputs (others are never inflated),
/// each checked against its input's type from its header alone.
fn load_batch(file: &Path, inputs: &[(String, TensorType)], any_shape: bool, budget: &mut crate::npz::Budget) -> Result<Batch> {
    let is_npy = file.extension().and_then(|e| e.to_str()) == Some("npy");
    if is_npy && inputs.len() != 1 {
        bail!("{}: a .npy batch only works for a model with one input; this one has {} (use .npz)", file.display(), inputs.len());
    }
    let mut npz = if is_npy { None } else { Some(crate::npz::Npz::open(file)?) };
    let mut batch = Vec::with_capacity(inputs.len());
    for (name, ty) in inputs {
        let t = match &mut npz {
            None => crate::npz::read_npy_file_with(file, &mut InputCheck { expected: ty, any_shape, budget })?,
            Some(npz) => {
                if !npz.names().any(|n| n == name) {
                    bail!("{}: no array named '{name}' (the model's inputs: {})", file.display(), names(inputs));
                }
                npz.read(name, &mut InputCheck { expected: ty, any_shape, budget })?
            }
        };
        let t = if t.dtype() == DType::F64 && ty.dtype == DType::F32 {
            // numpy's default dtype; narrowing is what the user means.
            let v: Vec<f32> = t.to_f64_vec().iter().map(|&x| x as f32).collect();
            Tensor::from_vec(t.shape().to_vec(), v)?
        } else {
            t
        };
        batch.push((name.clone(), t));
    }
    Ok(batch)
}

/// Accepts an array of an input's type (numpy's default float64 too, for
/// an f32 input: narrowed after reading) within the memory budget.
struct InputCheck<'a> {
    expected: &'a TensorType,
    /// Only the dtype and rank must match.
    any_shape: bool,
    budget: &'a mut crate::npz::Budget,
}

impl crate::npz::Accept for InputCheck<'_> {
    fn accept(&mut self, name: &str, ty: &TensorType) -> Result<()> {
        let e = self.expected;
        let shape_ok = if self.any_shape { ty.shape.len() == e.shape.len() } else { ty.shape == e.shape };
        let dtype_ok = ty.dtype == e.dtype || (ty.dtype == DType::F64 && e.dtype == DType::F32);
        if !(shape_ok && dtype_ok) {
            let e = if self.any_shape { format!("{} of rank {}", e.dtype, e.shape.len()) } else { e.to_string() };
            bail!("'{name}' is {ty}, but the engine's input is {e}");
        }
        self.budget.accept(name, ty)
    }
}

fn names(inputs: &[(String, TensorType)]) -> String {
    inputs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
}

/// The graph's input bindings (fixed inputs excluded).
pub fn graph_inputs(graph: &Graph) -> Vec<(String, TensorType)> {
    graph
        .inputs()
        .iter()
        .map(|&n| graph.node(n).outputs[0].clone())
        .filter(|o| !graph.fixed_inputs().iter().any(|(f, _)| f == &o.name))
        .map(|o| (o.name, o.ty))
        .collect()
}

/// Runs an FP32 engine over the batches and calls `f(tensor name, values)`
/// for every f32 input binding and every f32 layer output; on the GPU when
/// `gpu` is given (layer by layer, each output downloaded), else on the CPU
/// executor.
fn for_each_tensor(
    engine: &Engine,
    gpu: Option<&CudaEngine<'_>>,
    batches: &[Batch],
    bar: &Option<indicatif::ProgressBar>,
    mut f: impl FnMut(&str, &[f32]),
) -> Result<()> {
    let plan = engine.plan();
    // Calibration on the CPU uses every core: results do not depend on it.
    let mut cpu_ctx = match gpu {
        None => {
            let mut ctx = engine.create_context()?;
            ctx.set_threads(trtc_runtime::parallel::machine_threads())?;
            Some(ctx)
        }
        Some(_) => None,
    };
    let mut gpu_ctx = match gpu {
        Some(g) => Some(g.create_context()?),
        None => None,
    };
    for batch in batches {
        for (name, t) in batch {
            if t.dtype() == DType::F32 {
                f(name, t.as_slice::<f32>()?);
            }
        }
        let refs: Vec<(&str, &Tensor)> = batch.iter().map(|(n, t)| (n.as_str(), t)).collect();
        if let Some(ctx) = gpu_ctx.as_mut() {
            ctx.run_layers(&refs, |i, outs| {
                for (id, t) in plan.layers[i].outputs.iter().zip(outs) {
                    if let Ok(values) = t.as_slice::<f32>() {
                        f(&plan.tensors[*id].name, values);
                    }
                }
                Ok(())
            })?;
        } else if let Some(ctx) = cpu_ctx.as_mut() {
            ctx.run_observed(&refs, |layer, outs| {
                for (id, v) in layer.outputs.iter().zip(outs) {
                    if v.dtype == DType::F32 {
                        if let Ok(values) = v.as_slice::<f32>() {
                            f(&plan.tensors[*id].name, values);
                        }
                    }
                }
            })?;
        }
        if let Some(b) = bar {
            b.inc(1);
        }
    }
    Ok(())
}

/// The largest |x| (NaN ignored) of every f32 input and layer output over
/// the batches.
fn max_abs(
    engine: &Engine,
    gpu: Option<&CudaEngine<'_>>,
    batches: &[Batch],
    bar: &Option<indicatif::ProgressBar>,
) -> Result<BTreeMap<String, f32>> {
    let mut max_abs: BTreeMap<String, f32> = BTreeMap::new();
    for_each_tensor(engine, gpu, batches, bar, |name, v| {
        let m = v.iter().fold(0f32, |m, x| if x.is_nan() { m } else { m.max(x.abs()) });
        let e = max_abs.entry(name.to_string()).or_insert(0.0);
        *e = e.max(m);
    })?;
    Ok(max_abs)
}

/// The observed range (max |x|) of every f32 tensor of an FP32 engine over
/// the batches, on GPU 0 when the engine loads there: what keeps tensors
/// that overflow f16 in f32 (`precision::to_fp16`).
pub fn observe_ranges(engine: &Engine, batches: &[Batch]) -> Result<BTreeMap<String, f32>> {
    max_abs(engine, engine.cuda(0).ok().as_ref(), batches, &None)
}

/// Calibrates an FP32 engine (of the optimized graph; the build makes it,
/// see `build::calibrate`): returns the cache with a scale for every f32
/// activation (inputs and layer outputs). A GPU engine runs on GPU 0 (GEMMs
/// and convolutions may round their inputs to TF32 there); a CPU engine,
/// or a GPU engine that does not load, runs on the CPU executor.
pub fn calibrate(engine: &Engine, batches: &[Batch], opts: &CalibOptions) -> Result<CalibrationCache> {
    let mut caches = calibrate_each(engine, batches, opts, &[opts.calibrator])?;
    Ok(caches.remove(0))
}

/// Calibrates once for several calibrators (one pass for the maxima, one
/// for the histograms when any calibrator needs them): one cache each, in
/// the order given.
pub fn calibrate_each(
    engine: &Engine,
    batches: &[Batch],
    opts: &CalibOptions,
    calibrators: &[Calibrator],
) -> Result<Vec<CalibrationCache>> {
    if batches.is_empty() {
        bail!("calibration needs at least one batch");
    }
    let gpu = engine.cuda(0).ok();
    let passes = if calibrators.iter().all(|c| matches!(c, Calibrator::MinMax)) { 1 } else { 2 };
    let bar = opts.progress.then(|| {
        let b = indicatif::ProgressBar::new((batches.len() * passes) as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("calibrating [{bar:30}] {pos}/{len} batches ({elapsed})")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        b
    });
    let max_abs = max_abs(engine, gpu.as_ref(), batches, &bar)?;
    let mut caches: Vec<CalibrationCache> = calibrators.iter().map(CalibrationCache::new).collect();
    let mut hists: BTreeMap<String, Histogram> = BTreeMap::new();
    if passes == 2 {
        hists = max_abs.iter().map(|(n, &m)| (n.clone(), Histogram::with_range(m))).collect();
        for_each_tensor(engine, gpu.as_ref(), batches, &bar, |name, v| {
            if let Some(h) = hists.get_mut(name) {
                h.add(v);
            }
        })?;
    }
    for (c, cache) in calibrators.iter().zip(&mut caches) {
        for (name, &m) in &max_abs {
            let amax = match (c, hists.get(name)) {
                (Calibrator::MinMax, _) | (_, None) => calibrator::minmax_amax(m),
                (c, Some(h)) => c.amax(h, m),
            };
            cache.insert_amax(name, amax);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(caches)
}

/// Reads a calibration cache file (TensorRT's text format).
pub fn read_cache(path: &Path) -> Result<CalibrationCache> {
    let text = trtc_runtime::file::read_to_string(path).context("cannot read the calibration cache")?;
    CalibrationCache::parse(&text).with_context(|| format!("calibration cache {}", path.display()))
}

/// Writes a calibration cache file.
pub fn write_cache(path: &Path, cache: &CalibrationCache) -> Result<()> {
    trtc_runtime::file::write(path, cache.to_text().as_bytes()).context("cannot write the calibration cache")
}

/// Synthetic batches for tests and benchmarks, one per seed: float inputs
/// uniform in [-1, 1) (`crate::random`), integer inputs (token ids, masks)
/// copied from `template` (e.g. a model's recorded inputs), with tensors
/// named `*input_ids*` shuffled by the seed so that batches differ but stay
/// valid ids.
pub fn synthetic_batches(
    inputs: &[(String, TensorType)],
    template: &[(String, Tensor)],
    seeds: std::ops::Range<u64>,
) -> Result<Vec<Batch>> {
    let mut out = Vec::new();
    for seed in seeds {
        let mut batch = Vec::with_capacity(inputs.len());
        for (name, ty) in inputs {
            if ty.dtype.is_float() {
                batch.push((name.clone(), crate::random::tensor(ty, seed)?));
                continue;
            }
            let Some((_, t)) = template.iter().find(|(n, _)| n == name) else {
                bail!("no template value for the integer input '{name}'");
            };
            if !name.contains("input_ids") || t.dtype() != DType::I64 {
                batch.push((name.clone(), t.clone()));
                continue;
            }
            let mut v = t.as_slice::<i64>()?.to_vec();
            let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            for i in (1..v.len()).rev() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                v.swap(i, (state % (i as u64 + 1)) as usize);
            }
            batch.push((name.clone(), Tensor::from_vec(t.shape().to_vec(), v)?));
        }
        out.push(batch);
    }
    Ok(out)
}
