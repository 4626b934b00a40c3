//! Every model exported by `testdata/export_models.py` builds, runs on the
//! CPU executor and matches onnxruntime's recorded outputs:
//! max |ours - ort| / max |ort| <= 1e-4 on every output.

mod common;

use common::{testdata_models, testdata_npz};
use std::path::Path;
use trtc::build::{build_file, BuildOptions};
use trtc_runtime::{Engine, Tensor};

/// Builds and runs one model; returns the worst output error relative to scale.
fn check(model: &Path) -> anyhow::Result<f64> {
    let inputs = testdata_npz(model, "inputs");
    let expected = testdata_npz(model, "outputs");
    let built = build_file(model, &BuildOptions::default())?;
    let engine = Engine::from_bytes(&built.engine)?;
    let mut ctx = engine.create_context()?;
    let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let outputs = ctx.run(&refs)?;
    let diffs = trtc::compare::diff_all(&outputs, &expected)?;
    let mut worst = 0f64;
    for d in diffs {
        anyhow::ensure!(d.shape_ok, "output {} has the wrong shape", d.name);
        worst = worst.max(d.max_rel_to_scale);
    }
    Ok(worst)
}

#[test]
fn every_testdata_model_matches_onnxruntime() {
    let models = testdata_models();
    assert!(models.len() >= 29, "expected the exported models in testdata/models, found {}", models.len());
    let mut failures = Vec::new();
    let mut passed = 0;
    for m in &models {
        let name = m.file_name().unwrap().to_string_lossy().to_string();
        match check(m) {
            Ok(err) if err <= 1e-4 => {
                passed += 1;
                println!("ok   {name}: max err / max |ref| = {err:.2e}");
            }
            Ok(err) => failures.push(format!("{name}: max err / max |ref| = {err:.2e} > 1e-4")),
            Err(e) => failures.push(format!("{name}: {e:#}")),
        }
    }
    for f in &failures {
        println!("FAIL {f}");
    }
    println!("models: {passed} passed, {} failed", failures.len());
    assert!(failures.is_empty(), "{} models failed:\n{}", failures.len(), failures.join("\n"));
}
