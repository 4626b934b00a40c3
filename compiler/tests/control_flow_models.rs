//! The models of `testdata/export_control_flow.py`, whose control flow is
//! decided at run time (an If on a graph input or on computed values, a
//! Loop whose trip count or condition comes from the data, nested control
//! flow with stacked scan outputs), are built with default options (and
//! the profile the manifest gives the three whose dimensions are symbolic:
//! one engine for every length and batch in it) and run
//! on every recorded input against onnxruntime's outputs: max |ours - ort|
//! / max |ort| <= 1e-4, in the exact and the fast CPU modes. Several inputs
//! take different branches or iteration counts, so a layer that ran one
//! path only would fail. A model that fails to build counts as a failure.

mod common;

use std::path::{Path, PathBuf};
use trtc::build::{build_file, BuildOptions, ShapeProfile};
use trtc_runtime::math::Math;
use trtc_runtime::{Engine, Tensor};

type Named = (String, Tensor);

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/control_flow")
}

fn manifest() -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir().join("manifest.json")).unwrap()).unwrap()
}

fn dims(v: &serde_json::Value) -> Vec<usize> {
    v.as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect()
}

/// The profile the manifest gives a model whose dimensions are symbolic.
fn profile(model: &serde_json::Value) -> Option<ShapeProfile> {
    let p = model.get("profile")?.as_object()?;
    let at = |which: &str| -> Vec<(String, Vec<usize>)> { p.iter().map(|(name, r)| (name.clone(), dims(&r[which]))).collect() };
    Some(ShapeProfile::from_flags(&at("min"), &at("opt"), &at("max")).unwrap())
}

/// Runs every recorded case of a built model; the worst error relative to
/// scale over both CPU modes.
fn worst_error(engine: &Engine, model: &serde_json::Value) -> anyhow::Result<f64> {
    let mut worst = 0f64;
    for (math, threads) in [(Math::Exact, 1), (Math::Fast, 2)] {
        let mut ctx = engine.create_context()?;
        ctx.set_math(math);
        ctx.set_threads(threads)?;
        for case in model["cases"].as_array().unwrap() {
            let file = case["file"].as_str().unwrap();
            let arrays = trtc::npz::read_npz(&dir().join(file))?;
            let (expected, inputs): (Vec<Named>, Vec<Named>) = arrays.into_iter().partition(|(n, _)| n.starts_with("out:"));
            let expected: Vec<Named> = expected.into_iter().map(|(n, t)| (n.trim_start_matches("out:").to_string(), t)).collect();
            let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
            let outputs = ctx.run(&refs).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
            anyhow::ensure!(
                outputs.len() == expected.len(),
                "{file}: {} outputs, onnxruntime has {}",
                outputs.len(),
                expected.len()
            );
            for d in trtc::compare::diff_all(&outputs, &expected)? {
                anyhow::ensure!(d.shape_ok, "{file}: output {} has the wrong shape", d.name);
                worst = worst.max(d.max_rel_to_scale);
            }
        }
    }
    Ok(worst)
}

#[test]
fn models_with_run_time_control_flow_match_onnxruntime_on_every_path() {
    let manifest = manifest();
    let models = manifest["models"].as_array().unwrap();
    assert!(models.len() >= 9, "expected the exported models in testdata/control_flow, found {}", models.len());
    let (mut passed, mut failures) = (0, Vec::new());
    for m in models {
        let name = m["name"].as_str().unwrap();
        if m["status"] != "ok" {
            failures.push(format!("{name}: not exported: {}", m["error"]));
            continue;
        }
        let path = dir().join(m["file"].as_str().unwrap());
        let opts = BuildOptions { profiles: profile(m).into_iter().collect(), ..BuildOptions::default() };
        let result = build_file(&path, &opts)
            .and_then(|built| Ok(Engine::from_bytes(&built.engine)?))
            .and_then(|engine| worst_error(&engine, m));
        match result {
            Ok(err) if err <= 1e-4 => {
                eprintln!("{name}: worst error {err:.1e} of scale over {} cases", m["cases"].as_array().unwrap().len());
                passed += 1;
            }
            Ok(err) => failures.push(format!("{name}: error {err:.2e} of scale")),
            Err(e) => failures.push(format!("{name}: {e:#}")),
        }
    }
    eprintln!("control-flow models: {passed} passed, {} failed", failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Branches get the passes the model gets: `gate`'s branches are a
/// convolution followed by a ReLU (fused into it) and a convolution times
/// 0.5 (folded into its weights).
#[test]
fn branches_are_optimized_like_the_model() {
    use trtc_runtime::ops::control::ControlOp;
    let built = build_file(&dir().join("gate.onnx"), &BuildOptions::default()).unwrap();
    let engine = Engine::from_bytes(&built.engine).unwrap();
    let layer = engine.plan().layers.iter().find(|l| l.op.name() == "If").expect("an If layer");
    let trtc_runtime::Op::Control(ControlOp::If(op)) = &layer.op else { unreachable!() };
    let names = |s: &trtc_runtime::ops::control::SubPlan| s.steps.iter().map(|s| s.op.name()).collect::<Vec<_>>();
    assert_eq!(names(&op.then_branch), ["FusedConv"]);
    assert_eq!(names(&op.else_branch), ["Conv"]);
    // Unoptimized (every pass disabled), the branches keep their nodes.
    let mut opts = BuildOptions::default();
    opts.passes.disable_all = true;
    let built = build_file(&dir().join("gate.onnx"), &opts).unwrap();
    let engine = Engine::from_bytes(&built.engine).unwrap();
    let layer = engine.plan().layers.iter().find(|l| l.op.name() == "If").expect("an If layer");
    let trtc_runtime::Op::Control(ControlOp::If(op)) = &layer.op else { unreachable!() };
    assert_eq!(names(&op.then_branch), ["Conv", "Relu"]);
}
