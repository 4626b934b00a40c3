//! `--accuracy-target cosine=0.999` on every testdata CNN, in INT8 (the
//! default entropy calibrator) and FP8 (min-max), each with `--fp16` so
//! that a pinned layer may step up to fp16: the cosine before and after,
//! whether the target was met, how many layers were kept in higher
//! precision and how many builds it took. Calibration uses 8 synthetic
//! batches (seeds 0-7), the target is measured on 8 others (seeds
//! 100-107), as `precision_report` does.
//!
//! `cargo run --release -p trtc --example accuracy_target_report [FILTER]`

use std::path::PathBuf;
use trtc::accuracy_target::{build_to_target, AccuracyTarget};
use trtc::build::{build_file, engine_of, BuildOptions};
use trtc::precision::calib::{self, Calibrator};
use trtc_runtime::Engine;

fn main() -> anyhow::Result<()> {
    let filter = std::env::args().nth(1).unwrap_or_default();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/models");
    let mut models: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .filter(|p| p.to_string_lossy().contains(&filter))
        .collect();
    models.sort();
    let target: AccuracyTarget = "cosine=0.999".parse()?;
    println!("| model | mode | cosine without target | cosine with target | met | layers kept higher | builds |");
    println!("|---|---|---|---|---|---|---|");
    for m in &models {
        let name = m.file_stem().unwrap_or_default().to_string_lossy().to_string();
        let template = trtc::npz::read_npz(&m.with_file_name(format!("{name}.inputs.npz")))?;
        let is_cnn = template.len() == 1 && template[0].1.dtype().is_float() && template[0].1.shape().len() == 4;
        if !is_cnn {
            continue;
        }
        let fp32 = build_file(m, &BuildOptions::default())?;
        let inputs = calib::graph_inputs(&fp32.reference);
        let reference = Engine::from_bytes(&engine_of(&fp32.reference, Default::default(), vec![])?)?;
        let eval = calib::synthetic_batches(&inputs, &template, 100..108)?;
        let tmp = std::env::temp_dir().join(format!("trtc-accuracy-target-{name}"));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)?;
        for (i, b) in calib::synthetic_batches(&inputs, &template, 0..8)?.iter().enumerate() {
            trtc::npz::write_npz(&tmp.join(format!("batch_{i:03}.npz")), b)?;
        }
        for mode in ["int8", "fp8"] {
            let mut o = BuildOptions::default();
            o.precision.fp16 = true;
            o.int8.calib_dir = Some(tmp.clone());
            if mode == "int8" {
                o.precision.int8 = true;
                o.int8.calib.calibrator = Calibrator::Entropy;
            } else {
                o.precision.fp8 = true;
                o.int8.calib.calibrator = Calibrator::MinMax;
            }
            let plain = build_file(m, &o)?;
            let before = trtc::accuracy::evaluate(&reference, &Engine::from_bytes(&plain.engine)?, &eval, false)?;
            let worst = before.outputs.iter().map(|o| o.cosine).fold(1.0f64, f64::min);
            let graph = trtc::build::import(&trtc::build::ModelSource::File(m.clone()), &o)?;
            let outcome = build_to_target(graph, &o, target, &eval)?;
            println!(
                "| {name} | {mode} | {worst:.6} | {:.6} | {} | {} | {} |",
                outcome.achieved,
                if outcome.met { "yes" } else { "NO" },
                outcome.pins.len(),
                outcome.rounds
            );
        }
        let _ = std::fs::remove_dir_all(&tmp);
    }
    Ok(())
}
