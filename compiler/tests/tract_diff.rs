//! Differential test against tract: the testdata models run through
//! tract-onnx's own optimized runner agree with trtc's CPU executor.

mod common;

use common::{stem, testdata_models, testdata_npz};
use std::path::Path;
use tract_onnx::prelude::*;
use trtc::build::{build_file, BuildOptions};
use trtc_runtime::{DType, Engine, Tensor};

fn to_tract(t: &Tensor) -> anyhow::Result<tract_onnx::prelude::Tensor> {
    let shape = t.shape().to_vec();
    Ok(match t.dtype() {
        DType::F32 => tract_ndarray::ArrayD::from_shape_vec(shape, t.as_slice::<f32>()?.to_vec())?.into_tensor(),
        DType::I64 => tract_ndarray::ArrayD::from_shape_vec(shape, t.as_slice::<i64>()?.to_vec())?.into_tensor(),
        DType::I32 => tract_ndarray::ArrayD::from_shape_vec(shape, t.as_slice::<i32>()?.to_vec())?.into_tensor(),
        d => anyhow::bail!("input dtype {d} not handled by this test"),
    })
}

fn tract_outputs(model: &Path, inputs: &[(String, Tensor)]) -> anyhow::Result<Vec<Vec<f64>>> {
    let plan = tract_onnx::onnx().model_for_path(model)?.into_optimized()?.into_runnable()?;
    let ins: TVec<TValue> = inputs.iter().map(|(_, t)| to_tract(t).map(|t| t.into_tvalue())).collect::<anyhow::Result<_>>()?;
    let outs = plan.run(ins)?;
    outs.iter()
        .map(|o| {
            let o = o.cast_to::<f64>()?.into_owned();
            Ok(o.to_plain_array_view::<f64>()?.iter().copied().collect())
        })
        .collect()
}

/// Models tract 0.23.9 computes wrongly, each checked to still be wrong (so
/// the list cannot outlive the bug) and counted as skipped. trtc matches
/// onnxruntime on them in `models.rs`.
const TRACT_KNOWN_WRONG: &[(&str, &str)] = &[(
    "timeseries_gru_legacy",
    "its ReLU RNN node: the dynamo export of the same network, which unrolls the RNN into MatMul/Add/Relu, agrees",
)];

#[test]
fn trtc_agrees_with_tract_on_testdata_models() {
    let (mut agreed, mut tract_failed, mut disagreed, mut known_wrong) = (0, Vec::new(), Vec::new(), Vec::new());
    for model in testdata_models() {
        let stem = stem(&model);
        let built = build_file(&model, &BuildOptions::default()).unwrap_or_else(|e| panic!("{stem}: {e:#}"));
        let engine = Engine::from_bytes(&built.engine).unwrap();
        // npz archives are not ordered; tract takes inputs by position, so
        // put them (and the expected outputs) in the model's binding order.
        let by_binding = |named: Vec<(String, Tensor)>, bindings: &[trtc_runtime::BindingInfo]| -> Vec<(String, Tensor)> {
            bindings
                .iter()
                .map(|b| named.iter().find(|(n, _)| *n == b.name).cloned().unwrap_or_else(|| panic!("{stem}: no {}", b.name)))
                .collect()
        };
        let inputs = by_binding(testdata_npz(&model, "inputs"), engine.inputs());
        // tract panics on some graphs; that is tract's limitation, reported as skipped.
        let theirs = match std::panic::catch_unwind(|| tract_outputs(&model, &inputs))
            .unwrap_or_else(|_| Err(anyhow::anyhow!("tract panicked")))
        {
            Ok(o) => o,
            Err(e) => {
                tract_failed.push(format!("{stem}: {e}"));
                continue;
            }
        };
        // Where tract itself disagrees with onnxruntime's recorded outputs,
        // the comparison says nothing about trtc: report it as skipped.
        let expected = by_binding(testdata_npz(&model, "outputs"), engine.outputs());
        let tract_vs_ort = expected.iter().zip(&theirs).fold(0f64, |m, ((_, e), t)| {
            let e = e.to_f64_vec();
            let scale = e.iter().fold(0f64, |a, v| a.max(v.abs())).max(1e-30);
            m.max(e.iter().zip(t).fold(0f64, |a, (x, y)| a.max((x - y).abs())) / scale)
        });
        if let Some((_, why)) = TRACT_KNOWN_WRONG.iter().find(|(m, _)| *m == stem) {
            assert!(tract_vs_ort > 1e-4, "{stem} is listed as computed wrongly by tract, but tract now agrees with onnxruntime");
            known_wrong.push(format!("{stem}: tract differs from onnxruntime by {tract_vs_ort:.2e} ({why})"));
            continue;
        }
        if tract_vs_ort > 1e-4 {
            tract_failed.push(format!("{stem}: tract differs from onnxruntime by {tract_vs_ort:.2e}"));
            continue;
        }
        let result: anyhow::Result<f64> = (|| {
            let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
            let ours = engine.create_context()?.run(&refs)?;
            anyhow::ensure!(ours.len() == theirs.len(), "{} outputs vs tract's {}", ours.len(), theirs.len());
            let mut worst = 0f64;
            for ((_, o), t) in ours.iter().zip(&theirs) {
                let o = o.to_f64_vec();
                anyhow::ensure!(o.len() == t.len(), "output sizes differ");
                let scale = t.iter().fold(0f64, |m, v| m.max(v.abs())).max(1e-30);
                let err = o.iter().zip(t).fold(0f64, |m, (a, b)| m.max((a - b).abs()));
                worst = worst.max(err / scale);
            }
            Ok(worst)
        })();
        match result {
            Ok(err) if err <= 1e-4 => {
                agreed += 1;
                println!("ok   {stem}: max err / max |tract| = {err:.2e}");
            }
            Ok(err) => disagreed.push(format!("{stem}: max err / max |tract| = {err:.2e}")),
            Err(e) => disagreed.push(format!("{stem}: trtc failed: {e:#}")),
        }
    }
    for f in &tract_failed {
        println!("skipped (tract failed or disagrees with onnxruntime): {f}");
    }
    for f in &known_wrong {
        println!("skipped (a known tract bug): {f}");
    }
    let skipped = tract_failed.len() + known_wrong.len();
    println!("tract differential: {agreed} passed, {} failed, {skipped} skipped", disagreed.len());
    assert!(disagreed.is_empty(), "{}", disagreed.join("\n"));
    // Every other committed model runs on tract 0.23.9 and matches
    // onnxruntime there; a skip here is a regression to look at, not noise.
    assert!(tract_failed.is_empty(), "tract could not be compared on: {tract_failed:?}");
}
