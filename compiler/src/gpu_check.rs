//! The GPU test suite over the testdata models: each model is built for the
//! GPU of this machine in FP32 (TF32 tensor cores allowed) and FP16, each
//! Q/DQ model in INT8, each control-flow model of fixed shapes in FP32 (its
//! If and Loop layers on the host, some sized by the data), and run on the
//! CUDA executor and on the CPU executor (the same engine, same inputs).
//! Models whose shapes vary (`testdata/dynamic`'s and
//! `testdata/dynamic_more`'s legacy exports, `testdata/control_flow`'s
//! `_dynamic` ones) are built once with their manifest's profile and run at
//! every recorded shape on one context (mode `dyn`), then at the first
//! shape again, which must replay that shape's CUDA graph to the same bits.
//! Outputs must agree within 3e-3 (FP32) or 1e-2 (FP16, INT8) of the CPU
//! output's largest magnitude. On a mismatch, the engine is run again layer
//! by layer on both executors and the first
//! layer that differs is named.
//!
//! With `--conformance ROOT`, it also runs ONNX's backend conformance cases
//! under ROOT: each case that passes on the CPU is run on the GPU and
//! compared with the CPU executor.
//!
//! Usage: `trtc gpu-check [--filter SUBSTR] [--json FILE] [--conformance ROOT]
//! [--no-models] [--list] [--opt-level N]` (a hidden subcommand of the `trtc` binary, so the
//! device check carries one binary); exit status 1 when any model or case
//! fails.
//! `--list` prints the model cases (`PATH MODE`, one a line) so that a script
//! can run each in its own process: a kernel fault makes the CUDA context of
//! its process unusable, and would fail every later case with it.

use crate::build::{build_graph, BuildOptions};
use crate::conformance::GpuBuild;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use trtc_runtime::{Engine, Target, Tensor};

struct Case {
    model: PathBuf,
    mode: &'static str,
}

fn onnx_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "onnx")).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Named input tensors, one set per run.
type InputSet = Vec<(String, Tensor)>;

/// The recorded input sets of a model of `testdata/dynamic`,
/// `testdata/dynamic_more` or `testdata/control_flow` (`<stem>.<k>.npz`, onnxruntime's outputs left
/// out) and the profile its folder's manifest gives it.
fn recorded(model: &Path) -> Result<(crate::build::ShapeProfile, Vec<InputSet>)> {
    let dir = model.parent().unwrap_or(Path::new("."));
    let file = model.file_name().unwrap_or_default().to_string_lossy();
    let manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json"))?)?;
    let entry = manifest["models"]
        .as_array()
        .and_then(|ms| ms.iter().find(|m| m["file"] == *file))
        .ok_or_else(|| anyhow::anyhow!("{file} is not in its folder's manifest.json"))?;
    let ranges = entry["profile"].as_object().ok_or_else(|| anyhow::anyhow!("{file} has no profile in manifest.json"))?;
    let dims = |v: &serde_json::Value| -> Vec<usize> {
        v.as_array().map(|a| a.iter().filter_map(|d| d.as_u64()).map(|d| d as usize).collect()).unwrap_or_default()
    };
    let at = |which: &str| -> Vec<(String, Vec<usize>)> { ranges.iter().map(|(n, r)| (n.clone(), dims(&r[which]))).collect() };
    let profile = crate::build::ShapeProfile::from_flags(&at("min"), &at("opt"), &at("max"))?;
    let mut sets = Vec::new();
    for case in entry["cases"].as_array().into_iter().flatten() {
        sets.push(recorded_inputs(&dir.join(case["file"].as_str().unwrap_or_default()))?);
    }
    anyhow::ensure!(!sets.is_empty(), "{file} has no recorded cases");
    Ok((profile, sets))
}

/// A model case's first inputs: its `.inputs.npz`, or the first recorded
/// case of testdata/control_flow (`NAME.0.npz`).
fn inputs_of(model: &Path) -> Result<InputSet> {
    let stem = model.file_stem().unwrap_or_default().to_string_lossy();
    let inputs = model.with_file_name(format!("{stem}.inputs.npz"));
    if inputs.exists() {
        return crate::npz::read_npz(&inputs);
    }
    recorded_inputs(&model.with_file_name(format!("{stem}.0.npz")))
}

/// Every input set a model case runs on: its `.inputs.npz`, or each
/// recorded case of testdata/control_flow (`NAME.0.npz`, `NAME.1.npz`, ...;
/// their inputs differ in value, such as a Loop's trip count, not in shape).
fn input_sets(model: &Path) -> Result<Vec<InputSet>> {
    let stem = model.file_stem().unwrap_or_default().to_string_lossy();
    let mut sets = vec![inputs_of(model)?];
    if !model.with_file_name(format!("{stem}.inputs.npz")).exists() {
        for k in 1.. {
            let path = model.with_file_name(format!("{stem}.{k}.npz"));
            if !path.exists() {
                break;
            }
            sets.push(recorded_inputs(&path)?);
        }
    }
    Ok(sets)
}

/// A recorded case's inputs, without onnxruntime's outputs (`out:NAME`).
fn recorded_inputs(path: &Path) -> Result<InputSet> {
    let mut arrays = crate::npz::read_npz(path)?;
    arrays.retain(|(name, _)| !name.starts_with("out:"));
    Ok(arrays)
}

/// The largest |gpu - cpu| over all elements, relative to max |cpu|
/// (`compare::diff`); infinite when the types differ, and for integer and
/// boolean tensors (indices, labels, counts, masks) when any element does:
/// those must be equal, and an index one off is a tiny fraction of its
/// scale.
fn relative_error(gpu: &Tensor, cpu: &Tensor) -> f64 {
    if gpu.dtype() != cpu.dtype() || gpu.shape() != cpu.shape() {
        return f64::INFINITY;
    }
    if !gpu.dtype().is_float() {
        return if gpu.bytes() == cpu.bytes() { 0.0 } else { f64::INFINITY };
    }
    let d = crate::compare::diff("", gpu, cpu);
    if !d.shape_ok {
        return f64::INFINITY;
    }
    d.max_rel_to_scale
}

/// The first layer whose GPU outputs differ from the CPU's by more than
/// `tol`, with its error.
fn first_bad_layer(engine: &Engine, inputs: &[(String, Tensor)], tol: f64) -> Result<Option<String>> {
    let table = engine.kernels().ok_or_else(|| anyhow::anyhow!("not a GPU engine"))?;
    let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut cpu_layers: Vec<Vec<trtc_runtime::Result<Tensor>>> = Vec::new();
    engine.create_context()?.run_observed(&refs, |_, outs| {
        cpu_layers.push(outs.iter().map(|v| Tensor::from_bytes(v.ty(), v.bytes)).collect());
    })?;
    let cpu_layers: Vec<Vec<Tensor>> = cpu_layers
        .into_iter()
        .map(|l| l.into_iter().collect::<trtc_runtime::Result<Vec<_>>>())
        .collect::<trtc_runtime::Result<_>>()?;
    let gpu = crate::cuda::load(engine, 0)?;
    let mut found = None;
    gpu.create_context()?.run_layers(&refs, |i, outs| {
        if found.is_none() {
            let err = outs.iter().zip(&cpu_layers[i]).map(|(g, c)| relative_error(g, c)).fold(0.0, f64::max);
            if err > tol {
                let l = &engine.plan().layers[i];
                let tactic = match &table.layers[i] {
                    trtc_runtime::kernels::LayerKernels::Device(ls) => {
                        ls.iter().map(|x| table.modules[x.module as usize].tactic.clone()).collect::<Vec<_>>().join(" + ")
                    }
                    trtc_runtime::kernels::LayerKernels::Host { .. } => "host".into(),
                    trtc_runtime::kernels::LayerKernels::Control(_) => "sub-plans on the GPU".into(),
                };
                found = Some(format!("layer {i} {} ({}, {tactic}): error {err:.3e}", l.name, l.op.display_name()));
            }
        }
        Ok(())
    })?;
    Ok(found)
}

/// The build options of a model case. FP8 cases calibrate (min-max) on the
/// model's recorded inputs.
fn build_options(case: &Case, gpu: GpuBuild) -> Result<BuildOptions> {
    let mut opts = BuildOptions::default();
    opts.precision.fp16 = case.mode == "fp16";
    if case.mode == "fp8" {
        opts.precision.fp8 = true;
        opts.int8.calib.calibrator = crate::precision::calib::Calibrator::MinMax;
        opts.int8.batches = vec![inputs_of(&case.model)?];
    }
    opts.target = Target::Cuda { sm: gpu.sm, gpu_name: None };
    opts.tuning.opt_level = gpu.opt_level;
    Ok(opts)
}

/// The largest error relative to the output's scale a mode may show
/// against the CPU executor: tf32 and f32 arithmetic in another order for
/// fp32; fp16 and int8 round the same values the same way; FP8 sums in f32
/// where the CPU sums in f64, so a value next to a rounding midpoint may
/// requantize to the neighbouring E4M3 code (one eighth of it) and carry
/// that to the logits.
fn tolerance(mode: &str) -> f64 {
    match mode {
        "fp32" | "dyn" => 3e-3,
        "fp8" => 2e-2,
        _ => 1e-2,
    }
}

/// Whether a model case builds in FP8: the CNNs (one 4-D float input) of
/// the legacy exports and the example, a spread of layer kinds without
/// repeating each model's dynamo twin.
fn fp8_case(model: &Path) -> bool {
    let name = model.file_stem().unwrap_or_default().to_string_lossy();
    let cnn = inputs_of(model).is_ok_and(|i| i.len() == 1 && i[0].1.dtype().is_float() && i[0].1.shape().len() == 4);
    cnn && (name.ends_with("_legacy") || name == "example_cnn")
}

/// A model whose shapes vary, built once with its profile: the CUDA
/// executor against the CPU executor at every recorded shape on one
/// context, then at the first shape again (its launches and CUDA graph
/// kept), which must give the first run's bits. Layers that fall back to
/// the host at some shape count as host layers.
fn check_dynamic(case: &Case, gpu: GpuBuild) -> Result<(f64, f64, usize, usize)> {
    let (profile, sets) = recorded(&case.model)?;
    let mut opts = build_options(case, gpu)?;
    opts.profiles = vec![profile];
    let built = crate::build::build_file(&case.model, &opts)?;
    let engine = Engine::from_bytes(&built.engine)?;
    let gpu_engine = crate::cuda::load(&engine, 0)?;
    let mut ctx = gpu_engine.create_context()?;
    let mut cpu_ctx = engine.create_context()?;
    let (mut err, mut fallbacks, mut first) = (0f64, 0, None);
    for (k, inputs) in sets.iter().enumerate() {
        let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let cpu = cpu_ctx.run(&refs)?;
        let gpu = ctx.run(&refs).with_context(|| format!("recorded case {k}"))?;
        fallbacks = fallbacks.max(ctx.host_fallbacks().len());
        err = gpu.iter().zip(&cpu).map(|((_, g), (_, c))| relative_error(g, c)).fold(err, f64::max);
        first.get_or_insert(gpu);
    }
    let refs: Vec<(&str, &Tensor)> = sets[0].iter().map(|(n, t)| (n.as_str(), t)).collect();
    let again = ctx.run(&refs).context("the first shape again (its CUDA graph replayed)")?;
    let first = first.expect("at least one case");
    let replay_err = again.iter().zip(&first).map(|((_, r), (_, g))| relative_error(r, g)).fold(0.0, f64::max);
    if sets.len() >= 2 {
        let name = case.model.file_stem().unwrap_or_default().to_string_lossy();
        println!("    {name}: {}", shape_switch_cost(&gpu_engine, &sets[0], &sets[1])?);
    }
    let k = built.kernels.unwrap_or_default();
    Ok((err, replay_err, k.device_layers, k.host_layers.len() + fallbacks))
}

/// What changing shapes costs on one context, end to end (`run`, copies
/// included): the first run at a shape new to a context (launches computed,
/// CUDA graph captured) against a run there later, and runs that alternate
/// between two shapes against runs that stay (medians of 21).
fn shape_switch_cost(gpu: &trtc_runtime::executor::cuda::CudaEngine<'_>, a: &InputSet, b: &InputSet) -> Result<String> {
    let ra: Vec<(&str, &Tensor)> = a.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let rb: Vec<(&str, &Tensor)> = b.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut ctx = gpu.create_context()?;
    let timed = |ctx: &mut trtc_runtime::executor::cuda::CudaExecutionContext<'_>, r: &[(&str, &Tensor)]| -> Result<f64> {
        let t = std::time::Instant::now();
        ctx.run(r)?;
        Ok(t.elapsed().as_secs_f64() * 1e3)
    };
    let first = timed(&mut ctx, &ra)?;
    timed(&mut ctx, &rb)?;
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (mut stay, mut alternate) = (Vec::new(), Vec::new());
    for _ in 0..21 {
        // The second of two runs at a shape stays there.
        timed(&mut ctx, &ra)?;
        let y = timed(&mut ctx, &ra)?;
        timed(&mut ctx, &rb)?;
        let w = timed(&mut ctx, &rb)?;
        stay.push((y + w) / 2.0);
        let (p, q) = (timed(&mut ctx, &ra)?, timed(&mut ctx, &rb)?);
        alternate.push((p + q) / 2.0);
    }
    let (stay, alternate) = (median(stay), median(alternate));
    Ok(format!(
        "first run at a new shape {first:.3} ms; runs that stay {stay:.3} ms, that alternate between two shapes {alternate:.3} ms ({:+.1} us per switch)",
        (alternate - stay) * 1e3
    ))
}

fn check(case: &Case, gpu: GpuBuild) -> Result<(f64, f64, usize, usize)> {
    if case.mode == "dyn" {
        return check_dynamic(case, gpu);
    }
    let opts = build_options(case, gpu)?;
    let graph = crate::frontend::onnx::import_file(&case.model, &opts.import)?;
    let built = build_graph(graph, &opts)?;
    let engine = Engine::from_bytes(&built.engine)?;
    // Every input set on one context, then the first again (its CUDA graph
    // replayed where the engine has one).
    let sets = input_sets(&case.model)?;
    let mut cpu_ctx = engine.create_context()?;
    let gpu_engine = crate::cuda::load(&engine, 0)?;
    let mut ctx = gpu_engine.create_context()?;
    let (mut err, mut first) = (0f64, None);
    for (k, inputs) in sets.iter().enumerate() {
        let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let cpu = cpu_ctx.run(&refs)?;
        let gpu = ctx.run(&refs).with_context(|| format!("input set {k} (the first run captures a CUDA graph)"))?;
        err = gpu.iter().zip(&cpu).map(|((_, g), (_, c))| relative_error(g, c)).fold(err, f64::max);
        first.get_or_insert(gpu);
    }
    let refs: Vec<(&str, &Tensor)> = sets[0].iter().map(|(n, t)| (n.as_str(), t)).collect();
    let replay = ctx.run(&refs).context("the first inputs again (CUDA graph replay)")?;
    let gpu = first.expect("at least one input set");
    let replay_err = replay.iter().zip(&gpu).map(|((_, r), (_, g))| relative_error(r, g)).fold(0.0, f64::max);
    let k = built.kernels.unwrap_or_default();
    Ok((err, replay_err, k.device_layers, k.host_layers.len()))
}

/// What `trtc gpu-check` runs.
#[derive(Clone, Debug, Default)]
pub struct GpuCheckOptions {
    /// Only the cases whose `MODEL MODE` (or conformance name) contains this.
    pub filter: String,
    /// Skip the testdata models.
    pub no_models: bool,
    /// List the model cases and exit.
    pub list: bool,
    /// Also run the ONNX conformance suite found in this folder on the GPU.
    pub conformance: Option<PathBuf>,
    /// Write the model results as JSON to this file.
    pub json: Option<PathBuf>,
    /// The tuning level of every build (`--opt-level`); `None` tunes as
    /// `trtc build` does by default, 0 takes the heuristic tactics (fast).
    pub opt_level: Option<u8>,
    /// Run only the conformance cases whose index in the sorted list is
    /// `index` modulo `count`, so that parallel processes share the suite
    /// evenly (`--shard 3/16`).
    pub shard: Option<Shard>,
}

/// One of `count` equal parts of the conformance suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let bad = || format!("expected K/N with 0 <= K < N (e.g. 3/16), got '{s}'");
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (k.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

/// One model case's result in the JSON file.
#[derive(serde::Serialize)]
struct CaseReport<'a> {
    model: &'a str,
    mode: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_rel_err: Option<f64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    error: bool,
    ok: bool,
}

/// Runs the check; returns the exit status.
pub fn main(opts: &GpuCheckOptions) -> i32 {
    let filter = &opts.filter;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata");
    let root = if root.exists() { root } else { PathBuf::from("testdata") };
    let mut cases = Vec::new();
    if !opts.no_models {
        for m in onnx_files(&root.join("models")) {
            cases.push(Case { model: m.clone(), mode: "fp32" });
            cases.push(Case { model: m.clone(), mode: "fp16" });
            if fp8_case(&m) {
                cases.push(Case { model: m, mode: "fp8" });
            }
        }
        for m in onnx_files(&root.join("qdq")) {
            cases.push(Case { model: m, mode: "int8" });
        }
        // Control flow decided at run time (host layers, some sized by the
        // data); those whose shapes vary with their profiles.
        for m in onnx_files(&root.join("control_flow")) {
            let mode = if m.to_string_lossy().contains("_dynamic") { "dyn" } else { "fp32" };
            cases.push(Case { model: m, mode });
        }
        for folder in ["dynamic", "dynamic_more"] {
            for m in onnx_files(&root.join(folder)) {
                if m.to_string_lossy().contains("_legacy") {
                    cases.push(Case { model: m, mode: "dyn" });
                }
            }
        }
    }
    if opts.list {
        for c in &cases {
            println!("{} {}", c.model.display(), c.mode);
        }
        return 0;
    }
    let gpu = match crate::cuda::present_gpu() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e:#}");
            return 1;
        }
    };
    println!("GPU: {} (sm_{}), driver {}", gpu.name, gpu.sm, gpu.driver_version);
    let build = GpuBuild { sm: gpu.sm, opt_level: opts.opt_level };
    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let mut json: Vec<CaseReport> = Vec::new();
    println!("{:<28} {:<5} {:>10} {:>8} {:>6} {:>5}  result", "model", "mode", "max err", "replay", "gpu", "host");
    let names: Vec<String> =
        cases.iter().map(|c| c.model.file_stem().unwrap_or_default().to_string_lossy().to_string()).collect();
    for (case, name) in cases.iter().zip(&names).filter(|(c, _)| format!("{} {}", c.model.display(), c.mode).contains(filter)) {
        let tol = tolerance(case.mode);
        if case.mode == "fp8" && gpu.sm < crate::build::FP8_MIN_SM {
            println!("{name:<28} {:<5} SKIPPED (FP8 tensor cores need sm_{})", case.mode, crate::build::FP8_MIN_SM);
            skipped += 1;
            continue;
        }
        let start = std::time::Instant::now();
        let r = std::panic::catch_unwind(|| check(case, build))
            .unwrap_or_else(|p| Err(anyhow::anyhow!("PANIC: {}", crate::panic_message(p.as_ref()))));
        let (line, ok) = match r {
            Ok((err, replay, dev, host)) => {
                let ok = err <= tol && replay == 0.0;
                let mut line = format!(
                    "{name:<28} {:<5} {err:>10.3e} {replay:>8.1e} {dev:>6} {host:>5}  {}",
                    case.mode,
                    if ok { "PASS" } else { "FAIL" }
                );
                if !ok && case.mode == "dyn" {
                    line.push_str("\n    (run `trtc run --device cuda --shapes ...` at the failing shape to narrow it down)");
                } else if !ok {
                    // Name the first layer that differs.
                    let bad = build_options(case, build)
                        .and_then(|o| crate::build::build_file(&case.model, &o))
                        .and_then(|b| Ok(Engine::from_bytes(&b.engine)?))
                        .and_then(|e| first_bad_layer(&e, &inputs_of(&case.model)?, tol));
                    line.push_str(&match bad {
                        Ok(Some(l)) => format!("\n    first differing {l}"),
                        Ok(None) => "\n    every layer matches alone (the difference accumulates)".into(),
                        Err(e) => format!("\n    layer-by-layer run failed: {e:#}"),
                    });
                }
                json.push(CaseReport { model: name, mode: case.mode, max_rel_err: Some(err), error: false, ok });
                (line, ok)
            }
            Err(e) => {
                json.push(CaseReport { model: name, mode: case.mode, max_rel_err: None, error: true, ok: false });
                (format!("{name:<28} {:<5} ERROR {}", case.mode, format!("{e:#}").replace('\n', " ")), false)
            }
        };
        println!("{line}  ({:.1} s)", start.elapsed().as_secs_f64());
        if ok {
            passed += 1;
        } else {
            failed += 1;
        }
    }
    if !cases.is_empty() {
        println!("gpu-check: {passed} passed, {failed} failed, {skipped} skipped");
    }
    if let Some(root) = &opts.conformance {
        let cases = crate::conformance::list_cases(root, crate::conformance::SUBSETS).unwrap_or_else(|e| {
            eprintln!("error: {e:#}");
            std::process::exit(1)
        });
        let (mut ok, mut bad, mut skipped) = (0, 0, 0);
        let in_shard = |i: usize| opts.shard.is_none_or(|s| i % s.count == s.index);
        let selected = cases.iter().filter(|(n, _)| n.contains(filter.as_str())).enumerate();
        for (_, (name, dir)) in selected.filter(|(i, _)| in_shard(*i)) {
            match crate::conformance::run_case_on(dir, crate::conformance::Tolerance::default(), Some(build)) {
                crate::conformance::Outcome::Passed => ok += 1,
                crate::conformance::Outcome::Skipped(_) => skipped += 1,
                crate::conformance::Outcome::Failed(why) => {
                    let why: String = why.chars().take(240).collect();
                    // Cases that fail on the CPU too are not GPU failures.
                    if why.contains("on the GPU") || why.contains("building for the GPU") || why.contains("CUDA") {
                        bad += 1;
                        println!("conformance FAIL {name}: {why}");
                    } else {
                        skipped += 1;
                    }
                }
            }
        }
        println!("conformance on the GPU: {ok} passed, {bad} failed, {skipped} skipped (out of scope or failing on the CPU too)");
        failed += bad;
    }
    if let Some(p) = &opts.json {
        let text = serde_json::to_string_pretty(&json).expect("the report serializes");
        if let Err(e) = std::fs::write(p, text + "\n") {
            eprintln!("error: cannot write {}: {e}", p.display());
            failed += 1;
        }
    }
    i32::from(failed > 0)
}

#[cfg(test)]
mod tests {
    use super::Shard;

    #[test]
    fn shards_parse_and_reject_out_of_range_indices() {
        assert_eq!("3/16".parse::<Shard>(), Ok(Shard { index: 3, count: 16 }));
        for bad in ["16/16", "3", "a/2", "1/0", "-1/4"] {
            let err = bad.parse::<Shard>().unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
    }
}
