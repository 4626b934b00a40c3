//! The accuracy table of benches/RESULTS.md: every testdata model built in
//! FP16, in INT8 with each calibrator and in FP8 (min-max, `--fp8`'s
//! default), compared with its FP32 engine on
//! the CPU executor (which emulates the GPU kernels' arithmetic exactly).
//! Calibration uses 8 synthetic batches (seeds 0-7), evaluation 8 others
//! (seeds 100-107): float inputs uniform in [-1, 1), token ids shuffled
//! from the recorded inputs.
//!
//! `cargo run --release -p trtc --example precision_report [FILTER]`

use std::path::PathBuf;
use trtc::build::{build_file, engine_of, BuildOptions};
use trtc::precision::calib::{self, Calibrator};
use trtc_runtime::ops::precision::Precision;
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
    let calibrators = [Calibrator::Entropy, Calibrator::MinMax, Calibrator::Percentile(99.99), Calibrator::Auto];
    println!(
        "| model | fp16 cosine | int8 entropy | int8 minmax | int8 percentile 99.99 | int8 auto | int8 layers | top-1 (entropy) | fp8 minmax | fp8 auto | fp8 layers | top-1 (fp8) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for m in &models {
        let name = m.file_stem().unwrap_or_default().to_string_lossy().to_string();
        let template = trtc::npz::read_npz(&m.with_file_name(format!("{name}.inputs.npz")))?;
        let mut base = BuildOptions::default();
        base.precision.fp16 = true;
        let fp16 = build_file(m, &base)?;
        let inputs = calib::graph_inputs(&fp16.reference);
        let reference = Engine::from_bytes(&engine_of(&fp16.reference, Default::default(), vec![])?)?;
        let eval = calib::synthetic_batches(&inputs, &template, 100..108)?;
        let worst = |r: &trtc::accuracy::AccuracyReport| r.outputs.iter().map(|o| o.cosine).fold(1.0f64, f64::min);
        let r16 = trtc::accuracy::evaluate(&reference, &Engine::from_bytes(&fp16.engine)?, &eval, false)?;
        let tmp = std::env::temp_dir().join(format!("trtc-precision-report-{name}"));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)?;
        for (i, b) in calib::synthetic_batches(&inputs, &template, 0..8)?.iter().enumerate() {
            trtc::npz::write_npz(&tmp.join(format!("batch_{i:03}.npz")), b)?;
        }
        let mut cells = Vec::new();
        let mut layers = String::new();
        let mut top1 = String::from("-");
        for c in &calibrators {
            let mut o = BuildOptions::default();
            o.precision.int8 = true;
            o.int8.calib_dir = Some(tmp.clone());
            o.int8.calib.calibrator = *c;
            let built = build_file(m, &o)?;
            let r = trtc::accuracy::evaluate(&reference, &Engine::from_bytes(&built.engine)?, &eval, false)?;
            cells.push(format!("{:.6}", worst(&r)));
            if matches!(c, Calibrator::Entropy) {
                let n8 = built.precision.layers.get(&Precision::Int8).copied().unwrap_or(0);
                let all: usize = built.precision.layers.values().sum();
                layers = format!("{n8}/{all}");
                if let Some((a, n)) = r.outputs.iter().find_map(|o| o.top1) {
                    top1 = format!("{a}/{n}");
                }
            }
        }
        let mut o = BuildOptions::default();
        o.precision.fp8 = true;
        o.int8.calib_dir = Some(tmp.clone());
        o.int8.calib.calibrator = Calibrator::MinMax;
        let fp8 = build_file(m, &o)?;
        let r8 = trtc::accuracy::evaluate(&reference, &Engine::from_bytes(&fp8.engine)?, &eval, false)?;
        o.int8.calib.calibrator = Calibrator::Auto;
        let fp8_auto = build_file(m, &o)?;
        let r8a = trtc::accuracy::evaluate(&reference, &Engine::from_bytes(&fp8_auto.engine)?, &eval, false)?;
        let n8 = fp8.precision.layers.get(&Precision::Fp8).copied().unwrap_or(0);
        let all: usize = fp8.precision.layers.values().sum();
        let top1_fp8 = r8.outputs.iter().find_map(|o| o.top1).map_or("-".to_string(), |(a, n)| format!("{a}/{n}"));
        let _ = std::fs::remove_dir_all(&tmp);
        println!(
            "| {name} | {:.7} | {} | {layers} | {top1} | {:.6} | {:.6} | {n8}/{all} | {top1_fp8} |",
            worst(&r16),
            cells.join(" | "),
            worst(&r8),
            worst(&r8a)
        );
    }
    Ok(())
}
