//! The models of `testdata/export_dynamic.py` and
//! `testdata/export_dynamic_more.py` (transformers 5's own models, resizes
//! to the input's size under square profiles), exported with symbolic
//! batch, sequence or image dimensions by both torch exporters, are each
//! built ONCE with the profile their folder's `manifest.json` gives, and
//! run at every recorded shape (the profile's minimum, its maximum and odd
//! sizes in between) against onnxruntime's outputs: max |ours - ort| /
//! max |ort| <= 1e-4, as for the static testdata models, in the exact and
//! the fast CPU modes. A model that fails to build counts as a failure.
//! Every model is built twice: with its sizes generalized (the default)
//! and with them computed at run time (the fallback where no rule
//! generalizes).

mod common;
mod recorded;

use std::path::PathBuf;
use trtc::build::{build_file, BuildOptions, ShapeProfile, VaryingSizes};
use trtc_runtime::{Engine, Tensor};

fn dir() -> PathBuf {
    recorded::testdata("dynamic")
}

/// Every recorded model of both folders, with its folder.
fn all_models() -> Vec<(PathBuf, serde_json::Value)> {
    let mut all = Vec::new();
    for folder in ["dynamic", "dynamic_more"] {
        let dir = recorded::testdata(folder);
        let manifest = recorded::manifest(&dir);
        all.extend(manifest["models"].as_array().unwrap().iter().map(|m| (dir.clone(), m.clone())));
    }
    all
}

fn manifest() -> serde_json::Value {
    recorded::manifest(&dir())
}

/// The profile the manifest gives a model.
fn profile(model: &serde_json::Value) -> ShapeProfile {
    recorded::profile(model).expect("every model of testdata/dynamic has a profile")
}

#[test]
fn models_with_symbolic_dimensions_build_once_and_match_onnxruntime_at_every_shape() {
    every_model_matches_onnxruntime(VaryingSizes::Generalized);
}

/// The fallback for models no profile rule generalizes, taken by every
/// model: its shape computations run at run time on each run's shapes.
#[test]
fn models_with_their_sizes_computed_at_run_time_match_onnxruntime_at_every_shape() {
    every_model_matches_onnxruntime(VaryingSizes::AtRunTime);
}

fn every_model_matches_onnxruntime(varying_sizes: VaryingSizes) {
    let models = all_models();
    assert!(models.len() >= 20, "expected the exported models in testdata/dynamic and dynamic_more, found {}", models.len());
    let (mut passed, mut failures) = (0, Vec::new());
    for (dir, m) in &models {
        let name = m["name"].as_str().unwrap();
        if m["status"] != "ok" {
            failures.push(format!("{name}: not exported: {}", m["error"]));
            continue;
        }
        let opts = BuildOptions { profiles: vec![profile(m)], varying_sizes, ..Default::default() };
        let result = build_file(&dir.join(m["file"].as_str().unwrap()), &opts)
            .and_then(|built| {
                // Every model here generalizes: a regression in the
                // generalizer must not hide behind the fallback.
                let at_run_time = built.sizes_at_run_time.is_some();
                anyhow::ensure!(
                    at_run_time == (varying_sizes == VaryingSizes::AtRunTime),
                    "sizes computed at run time: {:?}",
                    built.sizes_at_run_time
                );
                Ok(Engine::from_bytes(&built.engine)?)
            })
            .and_then(|engine| recorded::worst_error(&engine, m, dir));
        let cases = m["cases"].as_array().unwrap().len();
        match result {
            Ok(err) if err <= 1e-4 => {
                passed += 1;
                println!("ok   {name}: {cases} shapes, max err / max |ref| = {err:.2e}");
            }
            Ok(err) => failures.push(format!("{name}: max err / max |ref| = {err:.2e} > 1e-4")),
            Err(e) => failures.push(format!("{name}: {e:#}")),
        }
    }
    for f in &failures {
        println!("FAIL {f}");
    }
    println!("dynamic models ({varying_sizes:?}): {passed} passed, {} failed", failures.len());
    assert!(failures.is_empty(), "{} models failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn shapes_outside_the_profile_or_inconsistent_are_refused_with_one_line_errors() {
    let manifest = manifest();
    let bert = manifest["models"].as_array().unwrap().iter().find(|m| m["name"] == "bert_legacy").unwrap();
    let opts = BuildOptions { profiles: vec![profile(bert)], ..Default::default() };
    let engine = Engine::from_bytes(&build_file(&dir().join("bert_legacy.onnx"), &opts).unwrap().engine).unwrap();
    let report = trtc::inspect::text(&engine);
    assert!(report.contains("dimension 'sequence': input_ids axis 1, attention_mask axis 1, token_type_ids axis 1"), "{report}");
    let mut ctx = engine.create_context().unwrap();
    let ids = |b: usize, s: usize| Tensor::from_vec(vec![b, s], vec![1i64; b * s]).unwrap();
    let run = |ctx: &mut trtc_runtime::ExecutionContext, a: Tensor, m: Tensor, t: Tensor| {
        ctx.run(&[("input_ids", &a), ("attention_mask", &m), ("token_type_ids", &t)]).unwrap_err().to_string()
    };
    let err = run(&mut ctx, ids(2, 33), ids(2, 33), ids(2, 33));
    assert_eq!(err, "outside its profile: input 'input_ids' axis 1 is 33: allowed 2 to 32");
    let err = run(&mut ctx, Tensor::from_vec(vec![2, 4, 1], vec![1i64; 8]).unwrap(), ids(2, 4), ids(2, 4));
    assert!(err.contains("input 'input_ids' has rank 3"), "{err}");
    let err = run(&mut ctx, ids(2, 7), ids(2, 9), ids(2, 7));
    assert_eq!(
        err,
        "outside its profile: input 'input_ids' axis 1 is 7 but input 'attention_mask' axis 1 is 9: both are the model's dimension 'sequence'"
    );
    // After refusals the context still runs a good shape.
    assert!(ctx.run(&[("input_ids", &ids(3, 5)), ("attention_mask", &ids(3, 5)), ("token_type_ids", &ids(3, 5))]).is_ok());
}

/// How many layers of each fused kind an engine has.
fn fused_layers(engine: &Engine) -> std::collections::BTreeMap<&'static str, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for layer in &engine.plan().layers {
        let name = layer.op.name();
        if name.starts_with("Fused") || name == "Attention" {
            *counts.entry(name).or_insert(0) += 1;
        }
    }
    counts
}

#[test]
fn a_profile_engine_fuses_what_an_engine_for_one_shape_fuses() {
    for (dir, m) in all_models().iter().filter(|(_, m)| m["status"] == "ok") {
        let path = dir.join(m["file"].as_str().unwrap());
        let profiled = BuildOptions { profiles: vec![profile(m)], ..Default::default() };
        let dynamic = Engine::from_bytes(&build_file(&path, &profiled).unwrap().engine).unwrap();
        let mut fixed = BuildOptions::default();
        for (name, r) in m["profile"].as_object().unwrap() {
            fixed.import.shapes.insert(name.clone(), recorded::dims(&r["opt"]));
        }
        let fixed = Engine::from_bytes(&build_file(&path, &fixed).unwrap().engine).unwrap();
        assert_eq!(fused_layers(&dynamic), fused_layers(&fixed), "{}", m["name"]);
    }
}
