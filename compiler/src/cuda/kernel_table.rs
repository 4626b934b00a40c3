//! From a lowered plan to the kernel table of a GPU engine: for every layer,
//! the candidate the kernel families (crate `trtc_kernels`) offer for it —
//! chosen by a [`TacticChooser`] (the heuristic, or the autotuner) — then
//! every distinct kernel source compiled once by NVRTC to a cubin for the
//! target SM, in parallel on the CPU's threads.
//!
//! A layer no family handles runs on the host (the CPU reference op); the
//! build reports those layers with the reason, and `inspect` lists them.
//!
//! For an engine whose shapes vary, the kernels must serve every shape of
//! its profiles, not only the largest the plan holds: each layer's tactic
//! is one the family offers at sampled shapes of every profile
//! ([`profile_points`]), chosen at the first profile's optimum, and every
//! source that tactic uses at those shapes is compiled (families specialize
//! sources on a copy's collapsed rank or a broadcast's pattern, which change
//! with the shapes). The CUDA executor computes launches at a run's bound
//! shapes with the same tactic and finds their modules by source digest.

use super::nvrtc;
use crate::tuning::TacticChooser;
use anyhow::{anyhow, Result};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use trtc_kernels::Candidate;
use trtc_kernels::{KernelSource, LayerIo, SmLimits};
use trtc_runtime::kernels::{source_digest, BodyKernels, KernelArg, KernelModule, KernelTable, Launch, LayerKernels};
use trtc_runtime::ops::control::ControlOp;
use trtc_runtime::ops::Op;
use trtc_runtime::plan::{Layer, Plan};
use trtc_runtime::profile::Profile;
use trtc_runtime::TensorType;

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

/// The layer with its tensors of types `types` (one per tensor of the plan).
fn layer_io_at<'a>(layer: &'a Layer, types: &'a [TensorType]) -> LayerIo<'a> {
    LayerIo {
        op: &layer.op,
        inputs: layer.inputs.iter().map(|i| i.map(|i| &types[i])).collect(),
        outputs: layer.outputs.iter().map(|&o| &types[o]).collect(),
    }
}

/// Every tensor's type at shapes the kernels of an engine with `profiles`
/// must serve, besides the plan's own (the largest): the first profile's
/// optimum first (where tactics are chosen), then each profile's optimum,
/// minimum and maximum, and sizes swept through each varying dimension's
/// range in lockstep (its low end and high end one by one, where
/// alignments and unit dimensions change a kernel's source, and evenly
/// spaced points between). Axes that share a model dimension take the same
/// size; a point the model does not take (a layer does not infer) is left
/// out, as any run there fails on every executor alike.
pub fn profile_points(plan: &Plan, profiles: &[Profile]) -> Vec<Vec<TensorType>> {
    let mut shapes: Vec<Vec<Vec<usize>>> = Vec::new();
    for p in profiles {
        let pick = |f: &dyn Fn(usize, usize, usize) -> usize| -> Vec<Vec<usize>> {
            let mut s: Vec<Vec<usize>> = p
                .inputs
                .iter()
                .map(|r| r.min.iter().zip(&r.opt).zip(&r.max).map(|((&lo, &opt), &hi)| f(lo, opt, hi).clamp(lo, hi)).collect())
                .collect();
            for d in &p.shared {
                let (i0, a0) = d.axes[0];
                let v = s[i0][a0];
                for &(i, a) in &d.axes[1..] {
                    s[i][a] = v;
                }
            }
            s
        };
        let mut add = |s: Vec<Vec<usize>>| {
            if !shapes.contains(&s) {
                shapes.push(s);
            }
        };
        add(pick(&|_, opt, _| opt));
        add(pick(&|lo, _, _| lo));
        add(pick(&|_, _, hi| hi));
        for j in 1..=8 {
            add(pick(&|lo, _, _| lo + j));
            add(pick(&|_, _, hi| hi.saturating_sub(j)));
            add(pick(&|lo, _, hi| lo + (hi - lo) * j / 9));
        }
        for j in 1..=2 {
            add(pick(&|_, opt, _| opt + j));
            add(pick(&|_, opt, _| opt.saturating_sub(j)));
        }
    }
    let mut points = Vec::new();
    for s in shapes {
        let refs: Vec<&[usize]> = s.iter().map(|v| v.as_slice()).collect();
        let admitted = profiles
            .iter()
            .any(|p| p.consistent(&refs).is_ok() && p.inputs.iter().zip(&refs).all(|(r, v)| p.admits(&r.name, v).is_ok()));
        if !admitted {
            continue;
        }
        let inputs: Vec<TensorType> =
            plan.inputs.iter().zip(&s).map(|(&id, shape)| TensorType::new(plan.tensors[id].ty.dtype, shape.clone())).collect();
        if let Ok(types) = trtc_runtime::profile::bind(plan, &inputs) {
            points.push(types);
        }
    }
    points
}

/// The kernels chosen for a plan, before compiling.
#[derive(Clone, Debug, Default)]
pub struct Selected {
    pub layers: Vec<LayerKernels>,
    /// Distinct kernel sources in order of first use (the module index of
    /// each launch), with the tactic and the first layer that uses them.
    pub sources: Vec<(KernelSource, String, String)>,
    pub host_layers: Vec<(String, String)>,
    /// Per layer, its tactic (empty for host layers).
    pub tactics: Vec<String>,
}

/// A layer's candidates at the plan's types, and, for a layer whose types
/// vary, at each sampled shape where they differ: only tactics offered at
/// every one remain.
struct Offered<'a> {
    /// The candidates at the plan's types, in the family's order.
    base: Vec<Candidate>,
    /// Per sampled point whose types differ: the layer there and its
    /// candidates.
    varying: Vec<(LayerIo<'a>, Vec<Candidate>)>,
    /// Whether the first sampled point (the optimum) is `varying[0]`.
    opt_varies: bool,
}

impl Offered<'_> {
    /// The candidates a tactic is chosen from (at the optimum when the
    /// layer's types vary there): those offered at every point.
    fn choosable(&self) -> Vec<Candidate> {
        let everywhere = |c: &Candidate| self.varying.iter().all(|(_, at)| at.iter().any(|a| a.tactic == c.tactic));
        let from = if self.opt_varies { &self.varying[0].1 } else { &self.base };
        from.iter().filter(|c| everywhere(c) && self.base.iter().any(|b| b.tactic == c.tactic)).cloned().collect()
    }
}

/// Chooses every layer's candidate for `sm_<sm>`; `points` are the types of
/// the plan's tensors at the other shapes its kernels must serve
/// ([`profile_points`]; empty for an engine of one shape).
pub fn select(plan: &Plan, sm: u32, points: &[Vec<TensorType>], chooser: &mut dyn TacticChooser) -> Result<Selected> {
    let limits = SmLimits::for_sm(sm);
    let mut out = Selected::default();
    // Module indices follow first use, so they (and so the engine bytes)
    // depend only on the plan and the choices.
    let mut index: HashMap<(String, String), u32> = HashMap::new();
    // Tensors whose size depends on the data: the layers that read them run
    // on the host, which sizes them in each run (the kernels' launch
    // geometry is fixed). A layer that sizes its output itself runs on the
    // GPU where its family counts the rows there (NonMaxSuppression).
    let sized = plan.data_sized();
    for layer in &plan.layers {
        let host = |out: &mut Selected, why: String| {
            out.host_layers.push((layer.name.clone(), why.clone()));
            out.layers.push(LayerKernels::Host { reason: why });
            out.tactics.push(String::new());
        };
        if let Some(&id) = layer.inputs.iter().flatten().find(|&&id| sized[id]) {
            host(&mut out, format!("its input '{}' is sized by the data", plan.tensors[id].name));
            continue;
        }
        let io = layer_io(plan, layer);
        if let Op::Control(ControlOp::If(_) | ControlOp::Loop(_)) = &layer.op {
            match control_candidates(layer, &io, points, &limits, chooser)? {
                Ok(chosen) => {
                    let mut bodies = Vec::with_capacity(chosen.len());
                    for steps in &chosen {
                        let mut body = BodyKernels { steps: Vec::with_capacity(steps.len()) };
                        for (tactic, launches) in steps {
                            let step =
                                launches.iter().map(|l| launch(l, module_index(&mut index, &mut out, l, tactic, &layer.name)));
                            body.steps.push(step.collect());
                        }
                        bodies.push(body);
                    }
                    out.tactics.push(String::new());
                    out.layers.push(LayerKernels::Control(bodies));
                }
                Err(why) => host(&mut out, why),
            }
            continue;
        }
        let sizes_itself = layer.op.as_impl().data_dependent();
        let base = match trtc_kernels::candidates(&io, &limits) {
            Ok(c) if !c.is_empty() => c,
            Ok(_) => {
                host(&mut out, "no valid tactic".into());
                continue;
            }
            Err(why) if sizes_itself => {
                host(&mut out, format!("its output sizes depend on the data ({why})"));
                continue;
            }
            Err(why) => {
                host(&mut out, why.0);
                continue;
            }
        };
        let counts = |c: &Candidate| c.launches.iter().flat_map(|l| &l.args).any(|a| matches!(a, KernelArg::Counts(_)));
        if sizes_itself && !base.iter().all(counts) {
            host(&mut out, "its output sizes depend on the data, which its kernels do not count".into());
            continue;
        }
        let mut offered = Offered { base, varying: Vec::new(), opt_varies: false };
        let mut refused = None;
        for (k, types) in points.iter().enumerate() {
            let at = layer_io_at(layer, types);
            if at.inputs == io.inputs && at.outputs == io.outputs {
                continue;
            }
            match trtc_kernels::candidates(&at, &limits) {
                Ok(c) => {
                    offered.opt_varies |= k == 0;
                    offered.varying.push((at, c));
                }
                Err(why) => {
                    let shapes: Vec<String> = at.inputs.iter().flatten().map(|t| t.to_string()).collect();
                    refused = Some(format!("no kernel at inputs {}: {why}", shapes.join(", ")));
                    break;
                }
            }
        }
        if let Some(why) = refused {
            host(&mut out, why);
            continue;
        }
        let choosable = offered.choosable();
        if choosable.is_empty() {
            host(&mut out, "no tactic serves every shape of the profiles".into());
            continue;
        }
        let choose_io = if offered.opt_varies { &offered.varying[0].0 } else { &io };
        let chosen = chooser.choose(layer, choose_io, &choosable)?;
        let tactic = choosable
            .get(chosen)
            .map(|c| c.tactic.clone())
            .ok_or_else(|| anyhow!("layer {}: the tactic chooser picked candidate {chosen}, which does not exist", layer.name))?;
        let candidate =
            offered.base.iter().find(|c| c.tactic == tactic).expect("choosable tactics are offered at the plan's types");
        let tactic_name = tactic.to_string();
        let mut module_of =
            |l: &trtc_kernels::KernelLaunch, out: &mut Selected| module_index(&mut index, out, l, &tactic_name, &layer.name);
        let mut launches = Vec::with_capacity(candidate.launches.len());
        for l in &candidate.launches {
            let module = module_of(l, &mut out);
            launches.push(launch(l, module));
        }
        // The sources the tactic uses at the other shapes, for the executor
        // to find when it computes launches there.
        for (_, at) in &offered.varying {
            for l in at.iter().filter(|c| c.tactic == tactic).flat_map(|c| &c.launches) {
                module_of(l, &mut out);
            }
        }
        out.tactics.push(tactic.to_string());
        out.layers.push(LayerKernels::Device(launches));
    }
    Ok(out)
}

/// The module index of a launch's source, registering it in `out` (with the
/// tactic and the layer that first uses it) when it is new.
fn module_index(
    index: &mut HashMap<(String, String), u32>,
    out: &mut Selected,
    l: &trtc_kernels::KernelLaunch,
    tactic: &str,
    layer: &str,
) -> u32 {
    let key = (l.kernel.entry.clone(), l.kernel.source.clone());
    *index.entry(key).or_insert_with(|| {
        out.sources.push((l.kernel.clone(), tactic.to_string(), layer.to_string()));
        (out.sources.len() - 1) as u32
    })
}

/// A family's launch as the kernel table stores it.
fn launch(l: &trtc_kernels::KernelLaunch, module: u32) -> Launch {
    Launch { module, grid: l.grid, block: l.block, shared_bytes: l.shared_bytes, args: l.args.clone() }
}

/// A sub-plan step's chosen tactic and its launches.
type ChosenStep = (String, Vec<trtc_kernels::KernelLaunch>);

/// The chosen candidate of every step of a control layer's sub-plans, as
/// (tactic, launches) per step per sub-plan; or why the layer runs on the
/// host: sub-plans the GPU cannot run (`device_bodies`: sizes that depend
/// on the data, say), a step without a kernel (a nested If or Loop), or
/// types that vary with the profiles (the sub-plans' kernels are compiled
/// at the planned shapes only). Steps are tuned like layers, under the name
/// `LAYER/STEP`.
fn control_candidates(
    layer: &Layer,
    io: &LayerIo<'_>,
    points: &[Vec<TensorType>],
    limits: &SmLimits,
    chooser: &mut dyn TacticChooser,
) -> Result<std::result::Result<Vec<Vec<ChosenStep>>, String>> {
    let bodies = match trtc_runtime::kernels::device_bodies(&layer.op, &io.inputs, &io.outputs) {
        Ok(bodies) => bodies,
        Err(why) => return Ok(Err(why)),
    };
    for types in points {
        let at = layer_io_at(layer, types);
        if at.inputs != io.inputs || at.outputs != io.outputs {
            return Ok(Err("its sub-plans' kernels are compiled at one shape, and its tensors' shapes vary".into()));
        }
    }
    let mut chosen = Vec::with_capacity(bodies.len());
    for body in &bodies {
        let mut steps = Vec::with_capacity(body.steps.len());
        for step in &body.steps {
            let step_io = LayerIo {
                op: &step.op,
                inputs: step.inputs.iter().map(|i| i.map(|v| &body.values[v].1)).collect(),
                outputs: step.outputs.iter().map(|&v| &body.values[v].1).collect(),
            };
            let candidates = match trtc_kernels::candidates(&step_io, limits) {
                Ok(c) if !c.is_empty() => c,
                Ok(_) => return Ok(Err(format!("its step {} has no valid tactic", step.name))),
                Err(why) => return Ok(Err(format!("its step {} has no kernel ({why})", step.name))),
            };
            let named =
                Layer { name: format!("{}/{}", layer.name, step.name), op: step.op.clone(), inputs: vec![], outputs: vec![] };
            let pick = chooser.choose(&named, &step_io, &candidates)?;
            let c = candidates.into_iter().nth(pick).ok_or_else(|| {
                anyhow!("step {}: the tactic chooser picked candidate {pick}, which does not exist", named.name)
            })?;
            steps.push((c.tactic.to_string(), c.launches));
        }
        chosen.push(steps);
    }
    Ok(Ok(chosen))
}

/// Chooses every layer's kernels and compiles them for `sm_<sm>` (and the
/// shapes `points`, see [`select`]).
pub fn build(
    plan: &Plan,
    sm: u32,
    points: &[Vec<TensorType>],
    chooser: &mut dyn TacticChooser,
) -> Result<(KernelTable, KernelReport)> {
    let selected = select(plan, sm, points, chooser)?;
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
        modules.push(KernelModule {
            entry: src.entry.clone(),
            tactic: tactic.clone(),
            cubin: c.cubin,
            digest: source_digest(&src.entry, &src.source),
        });
    }
    report.modules = modules.len();
    let (major, minor) = nvrtc::version()?;
    let table = KernelTable {
        sm,
        nvrtc_version: format!("{major}.{minor}"),
        modules,
        layers: selected.layers,
        tactics: selected.tactics,
    };
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
