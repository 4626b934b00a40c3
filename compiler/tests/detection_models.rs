//! torchvision's detectors (Faster R-CNN, RetinaNet, FCOS, SSD, Mask R-CNN), scaled
//! down by `testdata/export_detection.py` but keeping their whole
//! post-processing: score filters (NonZero), top-k whose `k` is read from
//! the filtered tensor's shape, ConstantOfShape / Reshape / Range sized by
//! those counts, an If around batched NMS, RoiAlign over the proposals kept.
//! Each is built once and run on every recorded image (several detections,
//! and none at all) against onnxruntime's outputs, in the exact and the
//! fast CPU modes, for the CPU target and for sm_90 (whose layers sized by
//! the data run on the host; the engine runs here on the CPU executor).
//!
//! Detections are compared as sets: a box whose score ties another's to the
//! last bits may come out one row earlier or later, so each of
//! onnxruntime's rows must match a row of ours with the same label, its
//! score within 1e-4 and its corners within 1e-4 of the image's scale, and
//! the counts must be equal.

mod common;
mod recorded;

use std::collections::HashMap;
use trtc::build::{build_file, BuildOptions};
use trtc_runtime::math::Math;
use trtc_runtime::{Engine, Target, Tensor};

fn by_name(outputs: Vec<(String, Tensor)>) -> HashMap<String, Tensor> {
    outputs.into_iter().collect()
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.as_slice::<f32>().unwrap().to_vec()
}

/// Checks that `ours` holds the detections of `reference` (see the module
/// comment); `what` names the case in the error.
fn same_detections(ours: &HashMap<String, Tensor>, reference: &HashMap<String, Tensor>, what: &str) -> Result<(), String> {
    for (name, r) in reference {
        let o = ours.get(name).ok_or(format!("{what}: no output {name}"))?;
        if o.shape() != r.shape() {
            return Err(format!("{what}: {name} is {:?}, onnxruntime's {:?}", o.shape(), r.shape()));
        }
    }
    let (rb, ob) = (f32s(&reference["boxes"]), f32s(&ours["boxes"]));
    let (rs, os) = (f32s(&reference["scores"]), f32s(&ours["scores"]));
    let (rl, ol) = (reference["labels"].as_slice::<i64>().unwrap(), ours["labels"].as_slice::<i64>().unwrap());
    let scale = rb.iter().fold(1f32, |m, v| m.max(v.abs()));
    let mut used = vec![false; os.len()];
    for i in 0..rs.len() {
        let close = |j: usize| {
            !used[j]
                && ol[j] == rl[i]
                && (os[j] - rs[i]).abs() <= 1e-4
                && (0..4).all(|c| (ob[4 * j + c] - rb[4 * i + c]).abs() <= 1e-4 * scale)
        };
        let j = (0..os.len()).find(|&j| close(j)).ok_or_else(|| {
            format!(
                "{what}: onnxruntime's detection {i} (label {}, score {}, box {:?}) has no match",
                rl[i],
                rs[i],
                &rb[4 * i..4 * i + 4]
            )
        })?;
        used[j] = true;
        // Mask R-CNN: each detection's mask, pasted into the image.
        if let (Some(rm), Some(om)) = (reference.get("masks"), ours.get("masks")) {
            let n = rm.len() / rs.len().max(1);
            let (rm, om) = (f32s(rm), f32s(om));
            let worst = (0..n).map(|k| (rm[i * n + k] - om[j * n + k]).abs()).fold(0f32, f32::max);
            if worst > 1e-4 {
                return Err(format!("{what}: the mask of onnxruntime's detection {i} differs by {worst} from ours"));
            }
        }
    }
    Ok(())
}

#[test]
fn torchvision_detectors_build_once_and_match_onnxruntime_on_every_image() {
    let models = detectors(false);
    assert_eq!(models.len(), 5, "expected the 5 detectors of testdata/export_detection.py");
    check_detectors(&models);
}

/// Faster R-CNN and FCOS exported with a symbolic image height and width:
/// their transform resizes by a scale computed from the image's sizes and
/// pads to a multiple of 32, which no profile rule generalizes, so the
/// engine computes those sizes at run time. One engine per target, run at
/// four image sizes of its profile.
#[test]
fn detectors_whose_image_size_varies_build_once_and_match_onnxruntime_at_every_size() {
    let models = detectors(true);
    assert_eq!(models.len(), 2, "expected the 2 detectors with symbolic image sizes of testdata/export_detection.py");
    check_detectors(&models);
}

/// The recorded detectors, those built with a profile or the others.
fn detectors(with_profile: bool) -> Vec<serde_json::Value> {
    let manifest = recorded::manifest(&recorded::testdata("detection"));
    manifest["models"].as_array().unwrap().iter().filter(|m| recorded::profile(m).is_some() == with_profile).cloned().collect()
}

/// Builds each model for the CPU and for sm_90 and runs every recorded
/// image in the exact and the fast modes (see the module comment).
fn check_detectors(models: &[serde_json::Value]) {
    let dir = recorded::testdata("detection");
    assert!(trtc::cuda::nvrtc::available(), "NVRTC is needed: run scripts/test.sh ({:?})", trtc::cuda::nvrtc::library().err());
    let (mut passed, mut failures, mut cases, mut empty) = (0, Vec::new(), 0, 0);
    for m in models {
        let name = m["name"].as_str().unwrap();
        for target in [Target::Cpu, Target::Cuda { sm: 90, gpu_name: None }] {
            let opts = BuildOptions {
                target: target.clone(),
                profiles: recorded::profile(m).into_iter().collect(),
                ..Default::default()
            };
            let engine = match build_file(&dir.join(m["file"].as_str().unwrap()), &opts) {
                Ok(built) => {
                    // Only the resize by a computed scale needs sizes computed at run time.
                    assert_eq!(built.sizes_at_run_time.is_some(), !opts.profiles.is_empty(), "{name}");
                    Engine::from_bytes(&built.engine).unwrap()
                }
                Err(e) => {
                    failures.push(format!("{name} ({target}): {e:#}"));
                    continue;
                }
            };
            let report = trtc::inspect::text(&engine);
            assert!(report.contains("sizes depend on the data after layers"), "{name}: {report}");
            let mut ok = true;
            for (math, threads) in [(Math::Exact, 1), (Math::Fast, 2)] {
                let mut ctx = engine.create_context().unwrap();
                ctx.set_math(math);
                ctx.set_threads(threads).unwrap();
                for case in m["cases"].as_array().unwrap() {
                    let file = case["file"].as_str().unwrap();
                    let arrays = trtc::npz::read_npz(&dir.join(file)).unwrap();
                    let (expected, inputs): (Vec<_>, Vec<_>) = arrays.into_iter().partition(|(n, _)| n.starts_with("out:"));
                    let expected = by_name(expected.into_iter().map(|(n, t)| (n["out:".len()..].to_string(), t)).collect());
                    let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
                    let what = format!("{name} ({target}, {math:?}) {file}");
                    let result = ctx
                        .run(&refs)
                        .map_err(|e| format!("{what}: {e}"))
                        .and_then(|out| same_detections(&by_name(out), &expected, &what));
                    cases += 1;
                    empty += usize::from(expected["scores"].shape() == [0]);
                    if let Err(e) = result {
                        failures.push(e);
                        ok = false;
                    }
                }
            }
            if ok {
                passed += 1;
                println!("ok   {name} ({target})");
            }
        }
    }
    for f in &failures {
        println!("FAIL {f}");
    }
    println!("detectors: {passed} of {} builds match on all {cases} runs ({empty} with no detection)", 2 * models.len());
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert!(empty > 0, "no recorded image without detections");
}
