//! From a lowered plan to the kernel table of a GPU engine: for every layer,
//! the candidate the kernel families (crate `trtc_kernels`) offer for it —
//! chosen by a [`TacticChooser`] (the heuristic, or the autotuner) — then
//! every distinct kernel source compiled once by NVRTC to a cubin for the
//! target SM, in parallel on the CPU's threads.
//!
//! A layer no family handles runs on the host (the CPU reference op); the
//! build reports those layers with the reason, and `inspect` lists them.

use super::nvrtc;
use crate::tuning::TacticChooser;
use anyhow::{anyhow, Result};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use trtc_kernels::{KernelSource, LayerIo, SmLimits};
use trtc_runtime::kernels::{KernelModule, KernelTable, Launch, LayerKernels};
use trtc_runtime::plan::{Layer, Plan};

/// What building the kernel table did, for the build's report.
#[derive(Clone, Debug, Default)]
pub struct KernelReport {
    /// Layers that run as kernels.
    pub device_layers: usize,
    /// Layers that run on the host, with the reason.
    pub host_layers: Vec<(String, String)>,
    /// Distinct kernels compiled and their total cubin size.
    pub modules: usize,
    pub cubin_bytes: usize,
    /// Kernels ptxas reported register spills for (tactic, bytes of spill
    /// stores).
    pub spills: Vec<(String, u64)>,
    pub compile_time: Duration,
    /// With tuning: how long choosing took (timings included) and the
    /// per-layer summary.
    pub tuning_time: Option<Duration>,
    pub tuning_summary: String,
    /// Things the user should know (a timing cache ignored, ...).
    pub warnings: Vec<String>,
}

/// The layer as the kernel families see it.
pub fn layer_io<'a>(plan: &'a Plan, layer: &'a Layer) -> LayerIo<'a> {
    LayerIo {
        op: &layer.op,
        inputs: layer.inputs.iter().map(|i| i.map(|i| &plan.tensors[i].ty)).collect(),
        outputs: layer.outputs.iter().map(|&o| &plan.tensors[o].ty).collect(),
    }
}

/// The kernels chosen for a plan, before compiling.
#[derive(Clone, Debug, Default)]
pub struct Selected {
    pub layers: Vec<LayerKernels>,
    /// Distinct kernel sources in order of first use (the module index of
    /// each launch), with the tactic and the first layer that uses them.
    pub sources: Vec<(KernelSource, String, String)>,
    pub host_layers: Vec<(String, String)>,
}

/// Chooses every layer's candidate for `sm_<sm>`.
pub fn select(plan: &Plan, sm: u32, chooser: &mut dyn TacticChooser) -> Result<Selected> {
    let limits = SmLimits::for_sm(sm);
    let mut out = Selected::default();
    // Module indices follow first use, so they (and so the engine bytes)
    // depend only on the plan and the choices.
    let mut index: HashMap<(String, String), u32> = HashMap::new();
    // Tensors whose size depends on the data: a data-sized layer's outputs
    // and everything computed from them. Their layers run on the host,
    // which sizes them in each run (the kernels' launch geometry is fixed).
    let mut sized = vec![false; plan.tensors.len()];
    for layer in &plan.layers {
        let after = layer.inputs.iter().flatten().find(|&&id| sized[id]);
        if layer.op.as_impl().data_dependent() || after.is_some() {
            for &o in &layer.outputs {
                sized[o] = true;
            }
            let reason = match after {
                Some(&id) => format!("its input '{}' is sized by the data", plan.tensors[id].name),
                None => "its output sizes depend on the data".to_string(),
            };
            out.host_layers.push((layer.name.clone(), reason.clone()));
            out.layers.push(LayerKernels::Host { reason });
            continue;
        }
        let io = layer_io(plan, layer);
        let candidates = match trtc_kernels::candidates(&io, &limits) {
            Ok(c) if !c.is_empty() => c,
            Ok(_) => {
                out.host_layers.push((layer.name.clone(), "no valid tactic".into()));
                out.layers.push(LayerKernels::Host { reason: "no valid tactic".into() });
                continue;
            }
            Err(why) => {
                out.host_layers.push((layer.name.clone(), why.0.clone()));
                out.layers.push(LayerKernels::Host { reason: why.0 });
                continue;
            }
        };
        let chosen = chooser.choose(layer, &io, &candidates)?;
        let candidate = candidates
            .into_iter()
            .nth(chosen)
            .ok_or_else(|| anyhow!("layer {}: the tactic chooser picked candidate {chosen}, which does not exist", layer.name))?;
        let mut launches = Vec::with_capacity(candidate.launches.len());
        for l in candidate.launches {
            let key = (l.kernel.entry.clone(), l.kernel.source.clone());
            let module = *index.entry(key).or_insert_with(|| {
                out.sources.push((l.kernel.clone(), candidate.tactic.to_string(), layer.name.clone()));
                (out.sources.len() - 1) as u32
            });
            launches.push(Launch { module, grid: l.grid, block: l.block, shared_bytes: l.shared_bytes, args: l.args });
        }
        out.layers.push(LayerKernels::Device(launches));
    }
    Ok(out)
}

/// Chooses every layer's kernels and compiles them for `sm_<sm>`.
pub fn build(plan: &Plan, sm: u32, chooser: &mut dyn TacticChooser) -> Result<(KernelTable, KernelReport)> {
    let selected = select(plan, sm, chooser)?;
    let mut report = KernelReport {
        device_layers: plan.layers.len() - selected.host_layers.len(),
        host_layers: selected.host_layers,
        ..Default::default()
    };
    let start = Instant::now();
    let compiled = compile_all(&selected.sources, sm)?;
    report.compile_time = start.elapsed();
    let mut modules = Vec::with_capacity(compiled.len());
    for ((src, tactic, _), c) in selected.sources.iter().zip(compiled) {
        let spill = c.spill_store_bytes();
        if spill > 0 {
            report.spills.push((tactic.clone(), spill));
        }
        report.cubin_bytes += c.cubin.len();
        modules.push(KernelModule { entry: src.entry.clone(), tactic: tactic.clone(), cubin: c.cubin });
    }
    report.modules = modules.len();
    let (major, minor) = nvrtc::version()?;
    let table = KernelTable { sm, nvrtc_version: format!("{major}.{minor}"), modules, layers: selected.layers };
    table.validate(plan).map_err(|e| anyhow!("internal error: the kernel table is invalid: {e}"))?;
    Ok((table, report))
}

/// Compiles every source on all CPU threads; the results are in the order of
/// `sources`. The first failure names the layer and tactic.
pub fn compile_all(sources: &[(KernelSource, String, String)], sm: u32) -> Result<Vec<nvrtc::Compiled>> {
    if sources.is_empty() {
        return Ok(Vec::new());
    }
    nvrtc::library()?;
    let jobs = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(sources.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<nvrtc::Compiled>>>> =
        sources.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((src, tactic, layer)) = sources.get(i) else { break };
                let r = nvrtc::compile(&src.source, &src.entry, sm)
                    .map_err(|e| anyhow!("layer {layer}: kernel {} ({tactic}) does not compile: {e:#}", src.entry));
                *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
            });
        }
    });
    results
        .into_iter()
        .map(|m| {
            m.into_inner().unwrap_or_else(|p| p.into_inner()).unwrap_or_else(|| Err(anyhow!("a compile job did not finish")))
        })
        .collect()
}

/// Parses `--target`: `cpu`, `cuda` (the GPU present) or `sm_XX`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum TargetSpec {
    #[default]
    Cpu,
    /// The compute capability of the GPU this machine has.
    Cuda,
    Sm(u32),
}

impl std::str::FromStr for TargetSpec {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<TargetSpec> {
        match s {
            "cpu" => Ok(TargetSpec::Cpu),
            "cuda" => Ok(TargetSpec::Cuda),
            _ => {
                let sm = s.strip_prefix("sm_").and_then(|n| n.parse::<u32>().ok());
                match sm {
                    // mma.sync with f16/tf32/s8 operands, ldmatrix and
                    // cp.async need sm_80 (Ampere) or newer.
                    Some(sm) if sm >= 80 => Ok(TargetSpec::Sm(sm)),
                    Some(sm) => Err(anyhow!("--target sm_{sm}: trtc's kernels need sm_80 (Ampere) or newer")),
                    None => Err(anyhow!("--target {s}: expected cpu, cuda or sm_XX (e.g. sm_80, sm_86, sm_89, sm_90)")),
                }
            }
        }
    }
}
