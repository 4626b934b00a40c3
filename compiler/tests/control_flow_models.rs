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

mod recorded;

use recorded::{manifest, profile, testdata, worst_error};
use trtc::build::{build_file, BuildOptions, VaryingSizes};
use trtc_runtime::Engine;

#[test]
fn models_with_run_time_control_flow_match_onnxruntime_on_every_path() {
    every_model_matches_onnxruntime(VaryingSizes::Generalized);
}

/// The three with profiles again, with their sizes computed at run time
/// (the fallback where no profile rule generalizes): branches and loop
/// bodies then take tensors sized at run time.
#[test]
fn models_with_run_time_control_flow_and_sizes_computed_at_run_time_match_onnxruntime() {
    every_model_matches_onnxruntime(VaryingSizes::AtRunTime);
}

fn every_model_matches_onnxruntime(varying_sizes: VaryingSizes) {
    let dir = testdata("control_flow");
    let manifest = manifest(&dir);
    let models = manifest["models"].as_array().unwrap();
    assert!(models.len() >= 9, "expected the exported models in testdata/control_flow, found {}", models.len());
    let (mut passed, mut failures) = (0, Vec::new());
    for m in models {
        let name = m["name"].as_str().unwrap();
        if m["status"] != "ok" {
            failures.push(format!("{name}: not exported: {}", m["error"]));
            continue;
        }
        let path = dir.join(m["file"].as_str().unwrap());
        let profiles: Vec<_> = profile(m).into_iter().collect();
        if varying_sizes == VaryingSizes::AtRunTime && profiles.is_empty() {
            continue;
        }
        let opts = BuildOptions { profiles, varying_sizes, ..BuildOptions::default() };
        let result = build_file(&path, &opts)
            .and_then(|built| Ok(Engine::from_bytes(&built.engine)?))
            .and_then(|engine| worst_error(&engine, m, &dir));
        match result {
            Ok(err) if err <= 1e-4 => {
                eprintln!("{name}: worst error {err:.1e} of scale over {} cases", m["cases"].as_array().unwrap().len());
                passed += 1;
            }
            Ok(err) => failures.push(format!("{name}: error {err:.2e} of scale")),
            Err(e) => failures.push(format!("{name}: {e:#}")),
        }
    }
    eprintln!("control-flow models ({varying_sizes:?}): {passed} passed, {} failed", failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Branches get the passes the model gets: `gate`'s branches are a
/// convolution followed by a ReLU (fused into it) and a convolution times
/// 0.5 (folded into its weights).
#[test]
fn branches_are_optimized_like_the_model() {
    use trtc_runtime::ops::control::ControlOp;
    let built = build_file(&testdata("control_flow").join("gate.onnx"), &BuildOptions::default()).unwrap();
    let engine = Engine::from_bytes(&built.engine).unwrap();
    let layer = engine.plan().layers.iter().find(|l| l.op.name() == "If").expect("an If layer");
    let trtc_runtime::Op::Control(ControlOp::If(op)) = &layer.op else { unreachable!() };
    let names = |s: &trtc_runtime::ops::control::SubPlan| s.steps.iter().map(|s| s.op.name()).collect::<Vec<_>>();
    assert_eq!(names(&op.then_branch), ["FusedConv"]);
    assert_eq!(names(&op.else_branch), ["Conv"]);
    // inspect lists them, as text and as JSON.
    assert!(trtc::inspect::text(&engine).contains("then_branch: 1 step on the host, f32 (FusedConv)"));
    let json: serde_json::Value = serde_json::from_str(&trtc::inspect::json(&engine)).unwrap();
    let layer = json["layers"].as_array().unwrap().iter().find(|l| l["op"] == "If").unwrap();
    assert_eq!(layer["sub_plans"][1]["name"], "else_branch");
    assert_eq!(layer["sub_plans"][1]["steps"], serde_json::json!(["Conv"]));
    // Unoptimized (every pass disabled), the branches keep their nodes.
    let mut opts = BuildOptions::default();
    opts.passes.disable_all = true;
    let built = build_file(&testdata("control_flow").join("gate.onnx"), &opts).unwrap();
    let engine = Engine::from_bytes(&built.engine).unwrap();
    let layer = engine.plan().layers.iter().find(|l| l.op.name() == "If").expect("an If layer");
    let trtc_runtime::Op::Control(ControlOp::If(op)) = &layer.op else { unreachable!() };
    assert_eq!(names(&op.then_branch), ["Conv", "Relu"]);
}
