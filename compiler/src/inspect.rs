//! `trtc inspect`: what an engine holds, without running it.

use serde::Serialize;
use std::fmt::Write;
use trtc_runtime::kernels::{BodyKernels, KernelTable, LayerKernels};
use trtc_runtime::ops::control::{ControlOp, SubPlan};
use trtc_runtime::plan::Storage;
use trtc_runtime::Engine;

/// How a layer runs: its tactic(s) and launch geometry on a GPU engine, the
/// host fallback with its reason, or the CPU reference.
fn execution(engine: &Engine, layer: usize) -> (String, Vec<String>) {
    let Some(k) = engine.kernels() else { return ("cpu reference".into(), Vec::new()) };
    match &k.layers[layer] {
        LayerKernels::Host { reason } => (format!("host fallback: {reason}"), Vec::new()),
        LayerKernels::Device(launches) => {
            let mut tactics: Vec<&str> = launches.iter().map(|l| k.modules[l.module as usize].tactic.as_str()).collect();
            tactics.dedup();
            let geometry = launches
                .iter()
                .map(|l| {
                    let m = &k.modules[l.module as usize];
                    format!("{} grid {:?} block {:?} smem {}", m.entry, l.grid, l.block, l.shared_bytes)
                })
                .collect();
            (if tactics.is_empty() { "no launch".into() } else { tactics.join(" + ") }, geometry)
        }
        LayerKernels::Control(_) => ("control on the host, sub-plans on the GPU".into(), Vec::new()),
    }
}

/// Bytes in the largest unit that keeps the number at least 1.
fn mib(b: u64) -> String {
    let b = b as f64;
    if b >= 1024.0 * 1024.0 {
        format!("{:.2} MiB", b / (1024.0 * 1024.0))
    } else if b >= 1024.0 {
        format!("{:.2} KiB", b / 1024.0)
    } else {
        format!("{b} B")
    }
}

/// The human-readable report.
pub fn text(engine: &Engine) -> String {
    let h = engine.header();
    let plan = engine.plan();
    let mut s = String::new();
    let _ = writeln!(s, "engine format {}, built by trtc {}", engine.format_version(), h.trtc_version);
    let _ = writeln!(s, "target: {}", h.target);
    let _ = writeln!(s, "build flags: {}", h.build_flags.join(" "));
    let _ = writeln!(s, "inputs:");
    let profile = engine.profiles().first();
    for b in engine.inputs() {
        match profile.and_then(|p| p.inputs.iter().find(|r| r.name == b.name).filter(|r| r.min != r.max)) {
            Some(r) => {
                let ty = profile.and_then(|p| p.describe(&b.name, b.ty.dtype)).unwrap_or_default();
                let dims = |d: &[usize]| d.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("x");
                let _ = writeln!(s, "  {}: {ty} (min {}, opt {}, max {})", b.name, dims(&r.min), dims(&r.opt), dims(&r.max));
            }
            None => {
                let _ = writeln!(s, "  {}: {}", b.name, b.ty);
            }
        }
    }
    for f in engine.fixed_inputs() {
        let _ = writeln!(s, "  {f}: fixed at build time");
    }
    if engine.profiles().len() > 1 {
        // The inputs above show profile 0; a run takes the first that fits.
        let dims = |d: &[usize]| d.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("x");
        let _ = writeln!(s, "profiles ({}, a run takes the first that admits its shapes):", engine.profiles().len());
        for (k, p) in engine.profiles().iter().enumerate() {
            let ranges: Vec<String> = p
                .inputs
                .iter()
                .map(|r| format!("{} min {} opt {} max {}", r.name, dims(&r.min), dims(&r.opt), dims(&r.max)))
                .collect();
            let _ = writeln!(s, "  {k}: {}", ranges.join(", "));
        }
    }
    if let Some(p) = profile {
        for d in &p.shared {
            let axes: Vec<String> = d.axes.iter().map(|&(i, a)| format!("{} axis {a}", p.inputs[i].name)).collect();
            let _ = writeln!(s, "  dimension '{}': {} (must agree)", d.name, axes.join(", "));
        }
    }
    let _ = writeln!(s, "outputs:");
    // Outputs sized by the data: the layers that decide them.
    let data_sized: Vec<&str> = plan.layers.iter().filter(|l| l.op.as_impl().data_dependent()).map(|l| l.name.as_str()).collect();
    // With a profile, each output's range: its shape at the min and max.
    let at_min = profile.filter(|p| p.is_dynamic()).and_then(|p| p.bind_at(plan, trtc_runtime::profile::ProfilePoint::Min).ok());
    for (b, (_, id)) in engine.outputs().iter().zip(&plan.outputs) {
        let ty = match &at_min {
            Some(types) => {
                let dims: Vec<String> =
                    b.ty.shape
                        .iter()
                        .zip(&types[*id].shape)
                        .map(|(&hi, &lo)| if lo == hi { hi.to_string() } else { format!("{lo}..{hi}") })
                        .collect();
                format!("{}[{}]", b.ty.dtype, dims.join(","))
            }
            None => b.ty.to_string(),
        };
        let _ = writeln!(s, "  {}: {ty}", b.name);
    }
    if !data_sized.is_empty() {
        // A detector has some per class: the first few, then a count.
        const LISTED: usize = 8;
        let mut names = data_sized.iter().take(LISTED).copied().collect::<Vec<_>>().join(", ");
        if data_sized.len() > LISTED {
            names.push_str(&format!(" and {} more", data_sized.len() - LISTED));
        }
        let _ = writeln!(
            s,
            "  (sizes depend on the data after layer{} {names}: the shapes above are the rooms the engine plans, a run's may differ)",
            if data_sized.len() == 1 { "" } else { "s" },
        );
    }
    let _ = writeln!(s, "memory:");
    let _ = writeln!(s, "  weights: {}", mib(engine.weights().len() as u64));
    let _ = writeln!(
        s,
        "  activations: {} peak with buffer reuse ({} without)",
        mib(plan.arena_bytes),
        mib(plan.arena_bytes_without_reuse)
    );
    let mut by_precision = std::collections::BTreeMap::new();
    for l in &plan.layers {
        *by_precision.entry(plan.layer_precision(l)).or_insert(0usize) += 1;
    }
    let counts: Vec<String> = by_precision.iter().map(|(p, n)| format!("{n} {}", p.name())).collect();
    let _ = writeln!(s, "precision: {} layers", counts.join(", "));
    if let Some(k) = engine.kernels() {
        let host = k.host_layers(plan).count();
        let bytes: usize = k.modules.iter().map(|m| m.cubin.len()).sum();
        let _ = writeln!(
            s,
            "kernels: {} cubins for sm_{} ({}, NVRTC {}); {} layers on the GPU, {host} on the host",
            k.modules.len(),
            k.sm,
            mib(bytes as u64),
            k.nvrtc_version,
            plan.layers.len() - host
        );
        if engine.shapes_vary() {
            let _ = writeln!(
                s,
                "  launches below are those of the largest shapes; a run computes its own from its shapes (every tactic's sources for the profiles compiled)"
            );
        }
    }
    let _ = writeln!(s, "layers ({}):", plan.layers.len());
    for (i, l) in plan.layers.iter().enumerate() {
        let ins: Vec<String> = l
            .inputs
            .iter()
            .map(|t| match t {
                Some(id) => {
                    let d = &plan.tensors[*id];
                    match d.storage {
                        Storage::Weight { .. } => format!("w:{}", d.ty),
                        Storage::Arena { .. } => d.ty.to_string(),
                    }
                }
                None => "_".into(),
            })
            .collect();
        let outs: Vec<String> = l.outputs.iter().map(|&o| plan.tensors[o].ty.to_string()).collect();
        let (tactic, geometry) = execution(engine, i);
        let _ = writeln!(
            s,
            "  {i:4} {:<20} {}  ({}) -> {}  [{tactic}, {}]",
            l.op.display_name(),
            l.name,
            ins.join(", "),
            outs.join(", "),
            plan.layer_precision(l).name()
        );
        for g in geometry {
            let _ = writeln!(s, "         {g}");
        }
        let bodies = match engine.kernels().map(|k| (k, &k.layers[i])) {
            Some((k, LayerKernels::Control(bodies))) => Some((k, bodies)),
            _ => None,
        };
        for (b, (what, sub)) in sub_plans(&l.op).into_iter().enumerate() {
            let line = match bodies {
                Some((k, bodies)) => describe_device_sub_plan(sub, &bodies[b], k),
                None => describe_sub_plan(sub),
            };
            let _ = writeln!(s, "         {what}: {line}");
        }
    }
    s
}

/// The sub-plans a control-flow layer runs, by name.
fn sub_plans(op: &trtc_runtime::Op) -> Vec<(&'static str, &SubPlan)> {
    match op {
        trtc_runtime::Op::Control(ControlOp::If(i)) => vec![("then_branch", &i.then_branch), ("else_branch", &i.else_branch)],
        trtc_runtime::Op::Control(ControlOp::Loop(l)) => vec![("body", &l.body)],
        trtc_runtime::Op::Control(ControlOp::Scan(s)) => vec![("body", &s.body)],
        _ => Vec::new(),
    }
}

/// A sub-plan in one line: its step count and ops in order (nested
/// control flow in brackets).
fn describe_sub_plan(sub: &SubPlan) -> String {
    let ops: Vec<String> = sub
        .steps
        .iter()
        .map(|step| {
            let inner: Vec<String> =
                sub_plans(&step.op).into_iter().map(|(what, s)| format!("{what}: {}", describe_sub_plan(s))).collect();
            if inner.is_empty() {
                step.op.display_name()
            } else {
                format!("{} [{}]", step.op.display_name(), inner.join("; "))
            }
        })
        .collect();
    let n = sub.steps.len();
    format!("{n} step{} on the host, f32 ({})", if n == 1 { "" } else { "s" }, ops.join(", "))
}

/// A sub-plan whose steps run as kernels in one line: each step's op and
/// tactic.
fn describe_device_sub_plan(sub: &SubPlan, kernels: &BodyKernels, table: &KernelTable) -> String {
    let steps: Vec<String> = sub
        .steps
        .iter()
        .zip(&kernels.steps)
        .map(|(step, launches)| {
            let mut tactics: Vec<&str> = launches.iter().map(|l| table.modules[l.module as usize].tactic.as_str()).collect();
            tactics.dedup();
            let tactics = if tactics.is_empty() { "no launch".to_string() } else { tactics.join(" + ") };
            format!("{} [{tactics}]", step.op.display_name())
        })
        .collect();
    let n = sub.steps.len();
    format!("{n} step{} on the GPU ({})", if n == 1 { "" } else { "s" }, steps.join(", "))
}

/// One binding in the JSON report.
#[derive(Serialize)]
struct BindingReport<'a> {
    name: &'a str,
    dtype: String,
    shape: &'a [usize],
}

/// One layer in the JSON report.
#[derive(Serialize)]
struct LayerReport<'a> {
    name: &'a str,
    op: &'static str,
    tactic: String,
    launches: Vec<String>,
    precision: &'static str,
    /// A control-flow layer's branches or body, by name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    sub_plans: Vec<SubPlanReport>,
}

/// A sub-plan in the JSON report: its steps' ops in order, and the
/// sub-plans nested in them.
#[derive(Serialize)]
struct SubPlanReport {
    name: &'static str,
    steps: Vec<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    nested: Vec<SubPlanReport>,
}

fn sub_plan_reports(op: &trtc_runtime::Op) -> Vec<SubPlanReport> {
    sub_plans(op)
        .into_iter()
        .map(|(name, sub)| SubPlanReport {
            name,
            steps: sub.steps.iter().map(|s| s.op.name()).collect(),
            nested: sub.steps.iter().flat_map(|s| sub_plan_reports(&s.op)).collect(),
        })
        .collect()
}

/// The JSON report; fields in this order.
#[derive(Serialize)]
struct Report<'a> {
    format_version: u32,
    trtc_version: &'a str,
    target: String,
    inputs: Vec<BindingReport<'a>>,
    outputs: Vec<BindingReport<'a>>,
    /// The optimization profiles (empty when every shape is fixed); the
    /// bindings' shapes above are at the profile's max.
    profiles: &'a [trtc_runtime::profile::Profile],
    weights_bytes: usize,
    activation_bytes: u64,
    activation_bytes_without_reuse: u64,
    layers: Vec<LayerReport<'a>>,
}

/// The machine-readable report (JSON).
pub fn json(engine: &Engine) -> String {
    let h = engine.header();
    let plan = engine.plan();
    fn bind(v: &[trtc_runtime::BindingInfo]) -> Vec<BindingReport<'_>> {
        v.iter().map(|b| BindingReport { name: &b.name, dtype: b.ty.dtype.to_string(), shape: &b.ty.shape }).collect()
    }
    let layers = plan
        .layers
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let (tactic, launches) = execution(engine, i);
            LayerReport {
                name: &l.name,
                op: l.op.name(),
                tactic,
                launches,
                precision: plan.layer_precision(l).name(),
                sub_plans: sub_plan_reports(&l.op),
            }
        })
        .collect();
    let report = Report {
        format_version: engine.format_version(),
        trtc_version: &h.trtc_version,
        target: h.target.to_string(),
        inputs: bind(engine.inputs()),
        outputs: bind(engine.outputs()),
        profiles: engine.profiles(),
        weights_bytes: engine.weights().len(),
        activation_bytes: plan.arena_bytes,
        activation_bytes_without_reuse: plan.arena_bytes_without_reuse,
        layers,
    };
    // Plain data (strings and numbers) always serializes.
    serde_json::to_string(&report).expect("the report serializes")
}
