//! The build pipeline: ONNX file → engine bytes.
//!
//! import → optimize (FP32) → calibrate (with `--int8`) → precision
//! (explicit Q/DQ, INT8, FP16) → lower → kernels (GPU targets: tactic
//! choice and NVRTC) → serialize.

use crate::frontend::onnx::{self, ImportOptions};
use crate::ir::Graph;
use crate::lower::{self, LowerOptions};
use crate::precision::calib::{self, Batch, CalibOptions, CalibrationCache};
use crate::precision::{PrecisionConfig, PrecisionReport};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use trtc_runtime::ops::precision::Precision;
use trtc_runtime::{Engine, Target};

/// Where INT8 scales come from.
#[derive(Clone, Debug, Default)]
pub struct Int8Options {
    /// A folder of calibration batches (`--calib DIR`).
    pub calib_dir: Option<PathBuf>,
    pub calib: CalibOptions,
    /// A calibration cache (`--calib-cache FILE`): read when it exists
    /// (no calibration runs), written after calibrating otherwise.
    pub cache: Option<PathBuf>,
    /// Batches given in memory (the Python API's calibrators), used when
    /// there is no `calib_dir`.
    pub batches: Vec<Batch>,
    /// Scales given in memory (a Python calibrator's
    /// `read_calibration_cache`), used as an existing cache file would be.
    pub cache_given: Option<CalibrationCache>,
}

impl Int8Options {
    /// The calibration batches: `calib_dir`'s files, else those given in
    /// memory (maybe none).
    fn load_batches(&self, inputs: &[(String, trtc_runtime::TensorType)]) -> Result<Vec<Batch>> {
        match &self.calib_dir {
            Some(dir) => calib::load_batches(dir, inputs, self.calib.max_batches),
            None => Ok(self.batches.iter().take(self.calib.max_batches.unwrap_or(usize::MAX)).cloned().collect()),
        }
    }
}

/// Everything `trtc build` can be asked.
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    pub import: ImportOptions,
    pub lower: LowerOptions,
    pub passes: crate::passes::PassOptions,
    pub precision: PrecisionConfig,
    pub int8: Int8Options,
    /// What the engine runs on: the CPU only, or a GPU of one compute
    /// capability (its kernels compiled in).
    pub target: Target,
    /// How GPU targets choose their tactics.
    pub tuning: crate::cuda::TuningOptions,
}

impl BuildOptions {
    /// The provenance the engine records (`trtc inspect` shows it): what
    /// changes the engine, spelled as the `trtc build` flags that ask for
    /// it, derived from the options so that a library build records the
    /// same as the CLI. Never file paths, so the same model and options give
    /// byte-identical engines wherever the files live; maps in name order.
    pub fn provenance_flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        let mut shapes: Vec<_> = self.import.shapes.iter().collect();
        shapes.sort();
        for (name, dims) in shapes {
            let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            flags.push(format!("--shape {name}:{}", dims.join("x")));
        }
        let mut values: Vec<&String> = self.import.input_values.keys().collect();
        values.sort();
        flags.extend(values.into_iter().map(|name| format!("--input-value {name}")));
        flags.extend(self.passes.disabled.iter().map(|p| format!("--disable-pass {p}")));
        if self.passes.disable_all && !self.passes.disabled.iter().any(|p| p == "all") {
            flags.push("--disable-pass all".into());
        }
        if !self.lower.reuse_buffers {
            flags.push("--no-buffer-reuse".into());
        }
        if let Target::Cuda { sm, .. } = &self.target {
            flags.push(format!("--target sm_{sm}"));
            if let Some(l) = self.tuning.opt_level {
                flags.push(format!("--opt-level {l}"));
            }
            if self.tuning.timing_cache.is_some() {
                flags.push("--timing-cache".into());
            }
        }
        if self.precision.fp16 {
            flags.push("--fp16".into());
        }
        if self.precision.int8 {
            flags.push("--int8".into());
            // With a cache the scales are the cache's, whether made by this
            // build or reused, so both give the same engine.
            if self.int8.cache.is_some() || self.int8.cache_given.is_some() {
                flags.push("--calib-cache".into());
            } else {
                flags.push(format!("--calibrator {}", self.int8.calib.calibrator));
            }
        }
        for (pattern, p) in &self.precision.layer_precisions {
            flags.push(format!("--layer-precision {pattern}={}", p.name()));
        }
        flags
    }
}

/// The result of a build: the engine bytes and the graph they came from.
pub struct Built {
    /// The graph after optimization and precision.
    pub graph: Graph,
    /// The optimized graph before precision (FP32), the reference for
    /// accuracy reports.
    pub reference: Graph,
    /// Op nodes right after import.
    pub imported_nodes: usize,
    pub pass_stats: Vec<crate::passes::PassStats>,
    pub precision: PrecisionReport,
    /// The calibration used by an INT8 build, and whether it was read from a
    /// cache file rather than computed.
    pub calibration: Option<(CalibrationCache, bool)>,
    /// For GPU targets, what the kernel table holds.
    pub kernels: Option<crate::cuda::kernel_table::KernelReport>,
    pub engine: Vec<u8>,
}

/// Calibration scales for an INT8 build of the optimized FP32 `graph`.
fn calibration(graph: &Graph, opts: &Int8Options) -> Result<(CalibrationCache, bool)> {
    if let Some(cache) = &opts.cache_given {
        return Ok((cache.clone(), true));
    }
    if let Some(path) = &opts.cache {
        if path.exists() {
            return Ok((calib::read_cache(path)?, true));
        }
    }
    if opts.calib_dir.is_none() && opts.batches.is_empty() {
        match &opts.cache {
            Some(p) => bail!("--int8: the calibration cache {} does not exist; give --calib DIR to create it", p.display()),
            None => bail!("--int8 needs calibration data: --calib DIR (batches as .npz/.npy), or --calib-cache FILE"),
        }
    }
    let batches = opts.load_batches(&calib::graph_inputs(graph))?;
    let cache = calibrate(graph, &batches, &opts.calib)?;
    if let Some(path) = &opts.cache {
        calib::write_cache(path, &cache)?;
    }
    Ok((cache, false))
}

/// Calibrates an optimized FP32 graph (see [`calib::calibrate`]): on the GPU
/// of this machine when there is one and NVRTC can build for it, else on
/// the CPU executor.
pub fn calibrate(graph: &Graph, batches: &[Batch], opts: &CalibOptions) -> Result<CalibrationCache> {
    let engine = Engine::from_bytes(&calibration_engine(graph)?)?;
    calib::calibrate(&engine, batches, opts)
}

/// The observed max |x| of every f32 tensor of the FP32 graph, for FP16
/// builds, and what it was observed on: the calibration batches when
/// `--calib DIR` (or batches in memory) are given; else 4 random batches (uniform in [-1, 1)) when
/// every input is a float; else nothing.
fn observe_ranges(graph: &Graph, data: &Int8Options) -> Result<(BTreeMap<String, f32>, String)> {
    let inputs = calib::graph_inputs(graph);
    if data.calib_dir.is_some() || !data.batches.is_empty() {
        let batches = data.load_batches(&inputs)?;
        let engine = Engine::from_bytes(&calibration_engine(graph)?)?;
        let ranges = calib::observe_ranges(&engine, &batches).context("observing tensor ranges for FP16")?;
        let n = batches.len();
        let source = match &data.calib_dir {
            Some(dir) => dir.display().to_string(),
            None => "the calibrator's data".into(),
        };
        return Ok((ranges, format!("tensor ranges observed on {n} batch{} of {source}", if n == 1 { "" } else { "es" })));
    }
    if !inputs.iter().all(|(_, t)| t.dtype.is_float()) {
        return Ok((
            BTreeMap::new(),
            "no tensor ranges observed (the model has non-float inputs: give --calib DIR to observe them on data)".into(),
        ));
    }
    // Random data may make the FP32 engine fail where real data would not
    // (an index computed from the inputs, say): then nothing is observed,
    // and the build says so.
    let observed = calib::synthetic_batches(&inputs, &[], 0..RANDOM_RANGE_BATCHES)
        .and_then(|batches| calib::observe_ranges(&Engine::from_bytes(&calibration_engine(graph)?)?, &batches));
    Ok(match observed {
        Ok(ranges) => (
            ranges,
            format!("tensor ranges observed on {RANDOM_RANGE_BATCHES} random batches (uniform in [-1, 1); give --calib DIR to observe real data)"),
        ),
        Err(e) => (BTreeMap::new(), format!("no tensor ranges observed (the FP32 engine failed on random inputs: {e:#})")),
    })
}

/// Random batches FP16 builds observe ranges on without `--calib`.
const RANDOM_RANGE_BATCHES: u64 = 4;

/// The FP32 engine calibration runs: for the GPU of this machine when there
/// is one (heuristic tactics, no tuning), else for the CPU.
fn calibration_engine(graph: &Graph) -> Result<Vec<u8>> {
    if let Ok(gpu) = crate::cuda::present_gpu() {
        let lowered = lower::lower(graph, Default::default())?;
        let tuning = crate::cuda::TuningOptions { opt_level: Some(0), ..Default::default() };
        if let Ok((table, _)) = crate::cuda::build_kernels(&lowered.plan, gpu.sm, &tuning) {
            let target = Target::Cuda { sm: gpu.sm, gpu_name: Some(gpu.name) };
            return Ok(Engine::serialize(target, vec![], &lowered.plan, &lowered.weights, Some(&table))?);
        }
    }
    engine_of(graph, Default::default(), vec![])
}

/// Optimizes an imported graph and compiles it into engine bytes.
pub fn build_graph(mut graph: Graph, opts: &BuildOptions) -> Result<Built> {
    let flags = opts.provenance_flags();
    let imported_nodes = graph.op_count();
    let pass_stats = crate::passes::optimize(&mut graph, &opts.passes)?;
    let reference = graph.clone();
    let calibration = if opts.precision.int8 { Some(calibration(&graph, &opts.int8)?) } else { None };
    let scales: BTreeMap<String, f32> = calibration.as_ref().map(|(c, _)| c.scales.clone()).unwrap_or_default();
    let fp16_wanted = opts.precision.fp16 || opts.precision.layer_precisions.iter().any(|(_, p)| *p == Precision::Fp16);
    let (ranges, range_source) = if fp16_wanted { observe_ranges(&graph, &opts.int8)? } else { (BTreeMap::new(), String::new()) };
    let mut precision = crate::precision::apply(&mut graph, &opts.precision, &scales, &ranges)?;
    if fp16_wanted {
        precision.fp16_range_source = Some(range_source);
    }
    let lowered = lower::lower(&graph, opts.lower)?;
    let (table, kernels) = match &opts.target {
        Target::Cpu => (None, None),
        Target::Cuda { sm, .. } => {
            let (table, report) = crate::cuda::build_kernels(&lowered.plan, *sm, &opts.tuning)?;
            (Some(table), Some(report))
        }
    };
    let engine = Engine::serialize(opts.target.clone(), flags, &lowered.plan, &lowered.weights, table.as_ref())?;
    Ok(Built { graph, reference, imported_nodes, pass_stats, precision, calibration, kernels, engine })
}

/// Compiles an ONNX file into engine bytes.
pub fn build_file(model: &Path, opts: &BuildOptions) -> Result<Built> {
    let graph = onnx::import_file(model, &opts.import)?;
    build_graph(graph, opts)
}

/// Engine bytes of a graph as it is (no passes), e.g. the FP32 reference.
pub fn engine_of(graph: &Graph, opts: LowerOptions, flags: Vec<String>) -> Result<Vec<u8>> {
    let lowered = lower::lower(graph, opts)?;
    Ok(Engine::serialize(Target::Cpu, flags, &lowered.plan, &lowered.weights, None)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::precision::calib::Calibrator;
    use trtc_runtime::ops::precision::Precision;

    #[test]
    fn provenance_flags_spell_the_options_in_a_fixed_order() {
        assert!(BuildOptions::default().provenance_flags().is_empty());
        let mut opts = BuildOptions::default();
        opts.import.shapes.insert("y".into(), vec![4]);
        opts.import.shapes.insert("x".into(), vec![1, 3, 224, 224]);
        opts.import.input_values.insert("shape".into(), trtc_runtime::Tensor::scalar(1i64));
        opts.passes.disabled = vec!["cse".into()];
        opts.lower.reuse_buffers = false;
        opts.target = Target::Cuda { sm: 90, gpu_name: None };
        opts.tuning.opt_level = Some(2);
        opts.tuning.timing_cache = Some("/somewhere/t.cache".into());
        opts.precision.fp16 = true;
        opts.precision.int8 = true;
        opts.int8.calib.calibrator = Calibrator::Percentile(99.9);
        opts.precision.layer_precisions.push(("/fc/*".into(), Precision::Fp32));
        assert_eq!(
            opts.provenance_flags(),
            [
                "--shape x:1x3x224x224",
                "--shape y:4",
                "--input-value shape",
                "--disable-pass cse",
                "--no-buffer-reuse",
                "--target sm_90",
                "--opt-level 2",
                "--timing-cache",
                "--fp16",
                "--int8",
                "--calibrator percentile=99.9",
                "--layer-precision /fc/*=fp32",
            ]
        );
    }
}
