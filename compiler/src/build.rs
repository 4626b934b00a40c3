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
use anyhow::{bail, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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
    /// The flags as the user wrote them, recorded in the engine.
    pub flags: Vec<String>,
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
    if let Some(path) = &opts.cache {
        if path.exists() {
            return Ok((calib::read_cache(path)?, true));
        }
    }
    let Some(dir) = &opts.calib_dir else {
        match &opts.cache {
            Some(p) => bail!("--int8: the calibration cache {} does not exist; give --calib DIR to create it", p.display()),
            None => bail!("--int8 needs calibration data: --calib DIR (batches as .npz/.npy), or --calib-cache FILE"),
        }
    };
    let batches = calib::load_batches(dir, &calib::graph_inputs(graph), opts.calib.max_batches)?;
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
    let imported_nodes = graph.op_count();
    let pass_stats = crate::passes::optimize(&mut graph, &opts.passes)?;
    let reference = graph.clone();
    let calibration = if opts.precision.int8 { Some(calibration(&graph, &opts.int8)?) } else { None };
    let scales: BTreeMap<String, f32> = calibration.as_ref().map(|(c, _)| c.scales.clone()).unwrap_or_default();
    let precision = crate::precision::apply(&mut graph, &opts.precision, &scales)?;
    let lowered = lower::lower(&graph, opts.lower)?;
    let (table, kernels) = match &opts.target {
        Target::Cpu => (None, None),
        Target::Cuda { sm, .. } => {
            let (table, report) = crate::cuda::build_kernels(&lowered.plan, *sm, &opts.tuning)?;
            (Some(table), Some(report))
        }
    };
    let engine = Engine::serialize(opts.target.clone(), opts.flags.clone(), &lowered.plan, &lowered.weights, table.as_ref())?;
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
