//! Models exported with onnxruntime's outputs recorded (`testdata/dynamic`,
//! `testdata/control_flow`): a folder's `manifest.json`, the profile it
//! gives a model whose dimensions are symbolic, and the worst error of a
//! built engine over the model's recorded cases.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use trtc::build::ShapeProfile;
use trtc_runtime::math::Math;
use trtc_runtime::{Engine, Tensor};

type Named = (String, Tensor);

/// `testdata/<name>`.
pub fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata").join(name)
}

pub fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

pub fn dims(v: &serde_json::Value) -> Vec<usize> {
    v.as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect()
}

/// The profile the manifest gives a model, if any.
pub fn profile(model: &serde_json::Value) -> Option<ShapeProfile> {
    let p = model.get("profile")?.as_object()?;
    let at = |which: &str| -> Vec<(String, Vec<usize>)> { p.iter().map(|(name, r)| (name.clone(), dims(&r[which]))).collect() };
    Some(ShapeProfile::from_flags(&at("min"), &at("opt"), &at("max")).unwrap())
}

/// Runs every recorded case of a built model (inputs by name, onnxruntime's
/// outputs as `out:NAME`); the worst error relative to scale over the exact
/// mode on one thread and the fast mode on two.
pub fn worst_error(engine: &Engine, model: &serde_json::Value, dir: &Path) -> anyhow::Result<f64> {
    let mut worst = 0f64;
    for (math, threads) in [(Math::Exact, 1), (Math::Fast, 2)] {
        let mut ctx = engine.create_context()?;
        ctx.set_math(math);
        ctx.set_threads(threads)?;
        for case in model["cases"].as_array().unwrap() {
            let file = case["file"].as_str().unwrap();
            let arrays = trtc::npz::read_npz(&dir.join(file))?;
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
