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

/// On GPU targets an If's branches and a Loop's body run as kernels (the
/// control decided on the host) where the layer's outputs keep their
/// planned sizes: `gate`'s If and `decoder`'s Loop. A body with a nested If
/// (`halving`) or a branch sized by the data (`vad`) keeps the layer on the
/// host. The engines load (their kernel tables validate) and the CPU
/// executor runs them as it runs CPU engines. Needs libnvrtc (no GPU).
#[test]
fn gpu_targets_run_sub_plans_as_kernels_where_sizes_are_fixed() {
    use trtc_runtime::kernels::LayerKernels;
    assert!(trtc::cuda::nvrtc::available(), "NVRTC is needed: run scripts/test.sh ({:?})", trtc::cuda::nvrtc::library().err());
    let dir = testdata("control_flow");
    let manifest = manifest(&dir);
    let models = manifest["models"].as_array().unwrap();
    let gpu = BuildOptions { target: trtc_runtime::Target::Cuda { sm: 90, gpu_name: None }, ..Default::default() };
    for (name, op, on_gpu) in [("gate", "If", true), ("decoder", "Loop", true), ("halving", "Loop", false), ("vad", "If", false)]
    {
        let m = models.iter().find(|m| m["name"] == name).unwrap_or_else(|| panic!("{name} in the manifest"));
        let built = build_file(&dir.join(m["file"].as_str().unwrap()), &gpu).unwrap();
        let engine = Engine::from_bytes(&built.engine).unwrap();
        let index = engine.plan().layers.iter().position(|l| l.op.name() == op).unwrap_or_else(|| panic!("{name}: an {op}"));
        let kernels = &engine.kernels().expect("a GPU engine has kernels").layers[index];
        match (kernels, on_gpu) {
            (LayerKernels::Control(bodies), true) => {
                let steps: usize = bodies.iter().map(|b| b.steps.len()).sum();
                let launches: usize = bodies.iter().flat_map(|b| &b.steps).map(Vec::len).sum();
                assert!(steps > 0 && launches >= steps, "{name}: {steps} steps, {launches} launches");
            }
            (LayerKernels::Host { reason }, false) => {
                let expected = if name == "halving" { "has no kernel" } else { "depend on the data" };
                assert!(reason.contains(expected), "{name}: {reason}");
            }
            (other, _) => panic!("{name}: {other:?}"),
        }
        let err = worst_error(&engine, m, &dir).unwrap();
        assert!(err <= 1e-4, "{name}: error {err:.2e} of scale on the CPU executor");
    }
    let built = build_file(&dir.join("gate.onnx"), &gpu).unwrap();
    let text = trtc::inspect::text(&Engine::from_bytes(&built.engine).unwrap());
    assert!(text.contains("control on the host, sub-plans on the GPU"), "{text}");
    assert!(text.contains("then_branch: 1 step on the GPU (FusedConv [conv_"), "{text}");
}
