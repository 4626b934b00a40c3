//! Every model exported by `testdata/export_models.py` builds, runs on the
//! CPU executor and matches onnxruntime's recorded outputs:
//! max |ours - ort| / max |ort| <= 1e-4 on every output.

mod common;

use common::{testdata_models, worst_error_against_recorded};

#[test]
fn every_testdata_model_matches_onnxruntime() {
    let models = testdata_models();
    assert!(models.len() >= 33, "expected the exported models in testdata/models, found {}", models.len());
    let mut failures = Vec::new();
    let mut passed = 0;
    for m in &models {
        let name = m.file_name().unwrap().to_string_lossy().to_string();
        match worst_error_against_recorded(m) {
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
