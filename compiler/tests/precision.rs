//! Reduced precision on the CPU executor, which emulates the GPU kernels'
//! f16 and int8 arithmetic exactly:
//! - `--fp16` keeps cosine similarity >= 0.9999 with FP32 on every output of
//!   every testdata model, and keeps layers whose observed tensors overflow
//!   f16 in f32;
//! - `--int8` with entropy calibration (calibration and evaluation batches
//!   disjoint) keeps the CNN logits' cosine >= 0.99;
//! - explicitly quantized (Q/DQ) models from onnxruntime's quantization tool
//!   match onnxruntime's int8 output within one quantization step;
//! - pins, calibration caches and bad input behave.

mod common;

use common::{stem, testdata_models, testdata_npz, TempDir};
use std::path::{Path, PathBuf};
use trtc::accuracy::{evaluate, AccuracyReport};
use trtc::build::{build_file, engine_of, BuildOptions, Built};
use trtc::precision::calib::{self, Batch, Calibrator};
use trtc::precision::PrecisionConfig;
use trtc_runtime::ops::precision::Precision;
use trtc_runtime::{DType, Engine, Tensor, TensorType};

/// Batches for a model (see `calib::synthetic_batches`).
fn batches(model: &Path, inputs: &[(String, TensorType)], seeds: std::ops::Range<u64>) -> Vec<Batch> {
    calib::synthetic_batches(inputs, &testdata_npz(model, "inputs"), seeds).unwrap()
}

fn reference_engine(built: &Built) -> Engine {
    Engine::from_bytes(&engine_of(&built.reference, Default::default(), vec![]).unwrap()).unwrap()
}

fn report(built: &Built, eval: &[Batch]) -> AccuracyReport {
    evaluate(&reference_engine(built), &Engine::from_bytes(&built.engine).unwrap(), eval, false).unwrap()
}

fn worst_cosine(r: &AccuracyReport) -> f64 {
    r.outputs.iter().map(|o| if o.cosine.is_nan() { -1.0 } else { o.cosine }).fold(1.0, f64::min)
}

/// A CNN: one 4-D float input.
fn is_cnn(model: &Path) -> bool {
    let inputs = testdata_npz(model, "inputs");
    inputs.len() == 1 && inputs[0].1.dtype() == DType::F32 && inputs[0].1.shape().len() == 4
}

fn opts(fp16: bool, int8: bool) -> BuildOptions {
    BuildOptions { precision: PrecisionConfig { fp16, int8, ..Default::default() }, ..Default::default() }
}

#[test]
fn fp16_keeps_every_output_of_every_testdata_model_within_cosine_0_9999() {
    let models = testdata_models();
    assert!(models.len() >= 29);
    let mut failures = Vec::new();
    for m in &models {
        let built = build_file(m, &opts(true, false)).unwrap_or_else(|e| panic!("{}: {e:#}", stem(m)));
        let fp16_layers = built.precision.layers.get(&Precision::Fp16).copied().unwrap_or(0);
        let all_layers: usize = built.precision.layers.values().sum();
        let eval = batches(m, &calib::graph_inputs(&built.reference), 100..102);
        let r = report(&built, &eval);
        let worst = worst_cosine(&r);
        println!("{:<28} fp16 layers {fp16_layers:3}/{all_layers:3}  worst cosine {worst:.7}", stem(m));
        if worst < 0.9999 {
            failures.push(format!("{}: cosine {worst}", stem(m)));
        }
        // Most layers run in f16 (casts at the boundaries stay f32).
        if fp16_layers * 2 < all_layers {
            failures.push(format!("{}: only {fp16_layers} of {all_layers} layers in fp16", stem(m)));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn int8_entropy_calibration_keeps_cnn_logits_within_cosine_0_99() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for m in testdata_models().iter().filter(|m| is_cnn(m)) {
        let fp32 = build_file(m, &BuildOptions::default()).unwrap();
        let inputs = calib::graph_inputs(&fp32.reference);
        let dir = TempDir::new(&format!("calib-{}", stem(m)));
        write_batches(&dir.0, &batches(m, &inputs, 0..8));
        let mut o = opts(false, true);
        o.int8.calib_dir = Some(dir.0.clone());
        o.int8.calib.calibrator = Calibrator::Entropy;
        let built = build_file(m, &o).unwrap_or_else(|e| panic!("{}: {e:#}", stem(m)));
        let int8_layers = built.precision.layers.get(&Precision::Int8).copied().unwrap_or(0);
        let r = report(&built, &batches(m, &inputs, 100..108));
        let worst = worst_cosine(&r);
        println!(
            "{:<28} int8 layers {int8_layers:3}, fallbacks {:2}, logits cosine {worst:.6}, top-1 {:?}",
            stem(m),
            built.precision.int8_fallbacks.len(),
            r.outputs[0].top1
        );
        if worst < 0.99 {
            failures.push(format!("{}: cosine {worst}", stem(m)));
        }
        if int8_layers == 0 || !built.precision.int8_fallbacks.is_empty() {
            failures.push(format!("{}: {int8_layers} int8 layers, fallbacks {:?}", stem(m), built.precision.int8_fallbacks));
        }
        checked += 1;
    }
    assert!(checked >= 10, "expected the testdata CNNs, checked {checked}");
    assert!(failures.is_empty(), "{failures:#?}");
}

fn write_batches(dir: &Path, batches: &[Batch]) {
    for (i, b) in batches.iter().enumerate() {
        trtc::npz::write_npz(&dir.join(format!("batch_{i:03}.npz")), b).unwrap();
    }
}

fn qdq_models() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/qdq");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("testdata/qdq")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    v.sort();
    v
}

/// The quantization step of a dequantized output: the smallest gap between
/// its distinct values (None when it has too few values to tell).
fn quantization_step(t: &Tensor) -> Option<f64> {
    let mut v = t.to_f64_vec();
    v.sort_by(f64::total_cmp);
    v.dedup();
    v.windows(2).map(|w| w[1] - w[0]).filter(|d| *d > 0.0).min_by(f64::total_cmp)
}

#[test]
fn qdq_models_match_onnxruntime_int8_within_one_quantization_step() {
    let models = qdq_models();
    assert!(models.len() >= 3, "testdata/qdq holds the onnxruntime QDQ exports");
    for m in &models {
        let built = build_file(m, &BuildOptions::default()).unwrap_or_else(|e| panic!("{}: {e:#}", stem(m)));
        let int8 = built.precision.layers.get(&Precision::Int8).copied().unwrap_or(0);
        assert!(int8 > 0, "{}: no int8 layer", stem(m));
        if stem(m) == "example_cnn_qdq" {
            // Its Relus sit between Q/DQ pairs of one scale: they fold into
            // the int8 convolutions' epilogues.
            let dump = built.graph.dump();
            assert!(!dump.contains("= Relu "), "{dump}");
        }
        let engine = Engine::from_bytes(&built.engine).unwrap();
        let inputs = testdata_npz(m, "inputs");
        let expected = testdata_npz(m, "outputs");
        let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let outputs = engine.create_context().unwrap().run(&refs).unwrap();
        for (name, theirs) in &expected {
            let ours = &outputs.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{}: no output {name}", stem(m))).1;
            let d = trtc::compare::diff(name, ours, theirs);
            assert!(d.shape_ok);
            // A dequantized output has few distinct values, one step apart,
            // and may differ by a step where a value lies on a rounding
            // boundary; a float output (BERT's LayerNorm) must match to
            // float precision.
            let scale = theirs.to_f64_vec().iter().fold(0f64, |m, x| m.max(x.abs()));
            let tol = match quantization_step(theirs) {
                Some(step) if step > 1e-4 * scale => step,
                _ => 1e-5 * scale,
            };
            println!("{:<22} {name:<20} int8 layers {int8:3}  max abs err {:.3e}  tolerance {tol:.3e}", stem(m), d.max_abs);
            assert!(d.max_abs <= tol, "{}: {name} differs by {} (tolerance {tol})", stem(m), d.max_abs);
        }
    }
}

fn example_cnn() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/models/example_cnn.onnx")
}

#[test]
fn layer_precision_pins_override_the_build_flags() {
    let m = example_cnn();
    let mut o = opts(true, false);
    o.precision.layer_precisions = vec![("*".into(), Precision::Fp32)];
    let built = build_file(&m, &o).unwrap();
    assert_eq!(built.precision.layers.get(&Precision::Fp16), None, "{:?}", built.precision.layers);
    // Pin one layer back to fp32 in an fp16 build: exactly it stays f32.
    o.precision.layer_precisions = vec![("/fc/*".into(), Precision::Fp32)];
    let built = build_file(&m, &o).unwrap();
    let dump = built.graph.dump();
    let fc: Vec<&str> = dump.lines().filter(|l| l.contains("# /fc/")).collect();
    assert_eq!(fc.len(), 1, "{dump}");
    assert!(!fc[0].contains("@fp16") && fc[0].contains(": f32["), "{}", fc[0]);
    assert!(dump.lines().any(|l| l.contains("FusedConv@fp16")), "{dump}");
    // Fp16 pins alone give an fp16 layer in an otherwise fp32 build.
    let mut o = BuildOptions::default();
    o.precision.layer_precisions = vec![("/conv1/*".into(), Precision::Fp16)];
    let built = build_file(&m, &o).unwrap();
    assert!(built.precision.layers.get(&Precision::Fp16).copied().unwrap_or(0) >= 1);
    let e = PrecisionConfig::parse_pin("x=bf16").map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("not a precision"), "{e}");
}

#[test]
fn calibration_cache_is_written_then_reused_for_an_identical_engine() {
    let m = example_cnn();
    let fp32 = build_file(&m, &BuildOptions::default()).unwrap();
    let dir = TempDir::new("cache");
    let data = dir.path("data");
    std::fs::create_dir_all(&data).unwrap();
    write_batches(&data, &batches(&m, &calib::graph_inputs(&fp32.reference), 0..4));
    let cache = dir.path("model.cache");
    let mut o = opts(false, true);
    o.int8.calib_dir = Some(data.clone());
    o.int8.cache = Some(cache.clone());
    let first = build_file(&m, &o).unwrap();
    assert_eq!(first.calibration.as_ref().map(|c| c.1), Some(false));
    let text = std::fs::read_to_string(&cache).unwrap();
    assert!(text.starts_with("TRT-") && text.lines().next().unwrap().ends_with("-EntropyCalibration2"), "{text}");
    // Reused without calibration data: the same engine, byte for byte.
    o.int8.calib_dir = None;
    let second = build_file(&m, &o).unwrap();
    assert_eq!(second.calibration.as_ref().map(|c| c.1), Some(true));
    assert_eq!(first.engine, second.engine);
    // A cache as TensorRT 8.6 writes it (its header) works the same.
    let trt = text.replacen(text.lines().next().unwrap(), "TRT-8601-EntropyCalibration2", 1);
    std::fs::write(&cache, trt).unwrap();
    assert_eq!(build_file(&m, &o).unwrap().engine, first.engine);
    // A corrupted cache is an error naming the line.
    std::fs::write(&cache, "TRT-8601-EntropyCalibration2\ninput: xyz\n").unwrap();
    let e = format!("{:#}", build_file(&m, &o).err().expect("corrupt cache"));
    assert!(e.contains("line 2"), "{e}");
}

#[test]
fn int8_without_data_or_with_mismatched_batches_is_a_clear_error() {
    let m = example_cnn();
    let e = format!("{:#}", build_file(&m, &opts(false, true)).err().expect("no calibration data"));
    assert!(e.contains("--calib"), "{e}");
    let dir = TempDir::new("badcalib");
    let bad = Tensor::from_vec(vec![1, 3, 8, 8], vec![0f32; 192]).unwrap();
    trtc::npz::write_npz(&dir.path("b0.npz"), &[("input".to_string(), bad)]).unwrap();
    let mut o = opts(false, true);
    o.int8.calib_dir = Some(dir.0.clone());
    let e = format!("{:#}", build_file(&m, &o).err().expect("wrong shape"));
    assert!(e.contains("b0.npz") && e.contains("input"), "{e}");
    let empty = TempDir::new("emptycalib");
    o.int8.calib_dir = Some(empty.0.clone());
    let e = format!("{:#}", build_file(&m, &o).err().expect("empty folder"));
    assert!(e.contains("no .npz or .npy"), "{e}");
}

/// The IR of a small MLP after `--fp16` and after `--int8` (with a given
/// scale for its input), and both engines agree with FP32.
#[test]
fn ir_after_fp16_and_int8() {
    use std::collections::BTreeMap;
    let bytes = common::encode(&common::mlp());
    let import = || {
        let mut g = trtc::frontend::onnx::import_bytes(
            &bytes,
            trtc::frontend::onnx::proto::ExternalDataRoot::default(),
            &Default::default(),
        )
        .unwrap();
        trtc::passes::optimize(&mut g, &Default::default()).unwrap();
        g
    };
    let fp32 = import();
    let mut fp16 = import();
    trtc::precision::apply(&mut fp16, &PrecisionConfig { fp16: true, ..Default::default() }, &BTreeMap::new(), &BTreeMap::new())
        .unwrap();
    insta::assert_snapshot!("mlp_fp16", fp16.dump());
    let mut int8 = import();
    let scales = BTreeMap::from([("x".to_string(), 1.0f32 / 127.0)]);
    let report =
        trtc::precision::apply(&mut int8, &PrecisionConfig { int8: true, ..Default::default() }, &scales, &BTreeMap::new())
            .unwrap();
    assert!(report.int8_fallbacks.is_empty(), "{:?}", report.int8_fallbacks);
    insta::assert_snapshot!("mlp_int8", int8.dump());
    let engine = |g: &trtc::ir::Graph| Engine::from_bytes(&engine_of(g, Default::default(), vec![]).unwrap()).unwrap();
    let eval: Vec<Batch> = (0..4)
        .map(|s| vec![("x".to_string(), trtc::random::tensor(&TensorType::new(DType::F32, vec![2, 3]), s).unwrap())])
        .collect();
    for g in [&fp16, &int8] {
        let r = evaluate(&engine(&fp32), &engine(g), &eval, true).unwrap();
        assert!(r.outputs[0].cosine > 0.999, "{}", r.text(10));
        assert!(r.outputs[0].max_rel_err > 0.0, "reduced precision changes the result a little");
    }
}

/// x[1, 8] -> MatMul(w1) -> Relu -> MatMul(w2) -> Mul(1e-5) -> y: the
/// middle tensor reaches about 1e6 (beyond f16's 65504) while x and y stay
/// small, as in a CNN whose activations grow before a normalization.
fn overflowing_mlp() -> tract_onnx::pb::ModelProto {
    use common::{f32_tensor, model, node, value_info, F32};
    let w1: Vec<f32> = (0..64).map(|i| if i % 9 == 0 { 300.0 } else { 10.0 }).collect();
    let w2: Vec<f32> = (0..64).map(|i| if i % 9 == 0 { 400.0 } else { -20.0 }).collect();
    model(
        vec![
            node("MatMul", "fc1", &["x", "w1"], &["h1"]),
            node("Relu", "relu", &["h1"], &["r"]),
            node("MatMul", "fc2", &["r", "w2"], &["h2"]),
            node("Mul", "scale_down", &["h2", "k"], &["y"]),
        ],
        vec![value_info("x", F32, &[1, 8])],
        vec![value_info("y", F32, &[1, 8])],
        vec![f32_tensor("w1", &[8, 8], &w1), f32_tensor("w2", &[8, 8], &w2), f32_tensor("k", &[], &[1e-5])],
    )
}

#[test]
fn fp16_keeps_layers_whose_observed_range_overflows_f16_in_fp32() {
    let dir = TempDir::new("fp16-range");
    let path = dir.path("overflow.onnx");
    std::fs::write(&path, common::encode(&overflowing_mlp())).unwrap();
    let x = Tensor::from_vec(vec![1, 8], vec![1f32, 2., 3., 4., 5., 6., 7., 8.]).unwrap();
    let run = |built: &Built| -> Vec<f32> {
        let engine = Engine::from_bytes(&built.engine).unwrap();
        let out = engine.create_context().unwrap().run(&[("x", &x)]).unwrap();
        out[0].1.as_slice::<f32>().unwrap().to_vec()
    };
    let fp32 = run(&build_file(&path, &opts(false, false)).unwrap());
    assert!(fp32.iter().all(|v| v.is_finite()), "{fp32:?}");
    // Observed on random batches (no --calib): h2 reaches beyond f16's safe
    // range, so fc2 (which writes it) and scale_down (which reads it) stay
    // in f32, and the output is finite and close to FP32's.
    let built = build_file(&path, &opts(true, false)).unwrap();
    let source = built.precision.fp16_range_source.clone().unwrap();
    assert!(source.starts_with("tensor ranges observed on 4 random batches"), "{source}");
    let kept: Vec<&str> = built.precision.fp16_range_fallbacks.iter().map(|(l, _)| l.as_str()).collect();
    assert!(kept.contains(&"fc2") && kept.contains(&"scale_down"), "{kept:?}");
    assert!(built.precision.fp16_range_fallbacks.iter().all(|(_, why)| why.contains("beyond f16's safe range")));
    let fp16 = run(&built);
    for (a, b) in fp16.iter().zip(&fp32) {
        assert!(a.is_finite() && (a - b).abs() <= 1e-2 * b.abs(), "fp16 {fp16:?} vs fp32 {fp32:?}");
    }
    // Observed on calibration data instead: the same decision, and said so.
    let data = dir.path("calib");
    std::fs::create_dir_all(&data).unwrap();
    write_batches(&data, &[vec![("x".to_string(), x.clone())]]);
    let mut with_data = opts(true, false);
    with_data.int8.calib_dir = Some(data);
    let built = build_file(&path, &with_data).unwrap();
    let source = built.precision.fp16_range_source.clone().unwrap();
    assert!(source.starts_with("tensor ranges observed on 1 batch of"), "{source}");
    assert_eq!(built.precision.fp16_range_fallbacks.len(), 2);
    // Pinning the layers to fp16 overrides the ranges: the overflow the
    // check prevents is real.
    let mut pinned = opts(true, false);
    pinned.precision.layer_precisions = vec![("*".into(), Precision::Fp16)];
    let built = build_file(&path, &pinned).unwrap();
    assert!(built.precision.fp16_range_fallbacks.is_empty());
    assert!(run(&built).iter().any(|v| !v.is_finite()), "pinned to fp16, h2 overflows");
}

/// x[4, 8] -> fc1 -> relu1 -> fc2 -> relu2 -> fc3 -> y, three int8-capable
/// MatMuls.
fn three_layer_mlp() -> tract_onnx::pb::ModelProto {
    use common::{f32_tensor, model, node, value_info, F32};
    let w = |seed: usize| -> Vec<f32> { (0..64).map(|i| (((i * 37 + seed * 11) % 17) as f32 - 8.0) / 8.0).collect() };
    model(
        vec![
            node("MatMul", "fc1", &["x", "w1"], &["h1"]),
            node("Relu", "relu1", &["h1"], &["r1"]),
            node("MatMul", "fc2", &["r1", "w2"], &["h2"]),
            node("Relu", "relu2", &["h2"], &["r2"]),
            node("MatMul", "fc3", &["r2", "w3"], &["y"]),
        ],
        vec![value_info("x", F32, &[4, 8])],
        vec![value_info("y", F32, &[4, 8])],
        vec![f32_tensor("w1", &[8, 8], &w(1)), f32_tensor("w2", &[8, 8], &w(2)), f32_tensor("w3", &[8, 8], &w(3))],
    )
}

#[test]
fn per_layer_isolation_points_at_the_first_layer_that_goes_wrong() {
    use std::collections::BTreeMap;
    let bytes = common::encode(&three_layer_mlp());
    let import = || {
        let mut g = trtc::frontend::onnx::import_bytes(&bytes, Default::default(), &Default::default()).unwrap();
        trtc::passes::optimize(&mut g, &Default::default()).unwrap();
        g
    };
    let engine = |g: &trtc::ir::Graph| Engine::from_bytes(&engine_of(g, Default::default(), vec![]).unwrap()).unwrap();
    let fp32 = engine(&import());
    let eval: Vec<Batch> = (0..4)
        .map(|s| vec![("x".to_string(), trtc::random::tensor(&TensorType::new(DType::F32, vec![4, 8]), s).unwrap())])
        .collect();
    // Good scales for every int8 input but x's, 100 times too small: fc1
    // saturates, and everything after it inherits the damage.
    let observed = calib::observe_ranges(&fp32, &eval).unwrap();
    let mut scales: BTreeMap<String, f32> = observed.iter().map(|(n, &m)| (n.clone(), m / 127.0)).collect();
    *scales.get_mut("x").unwrap() /= 100.0;
    let mut int8 = import();
    trtc::precision::apply(&mut int8, &PrecisionConfig { int8: true, ..Default::default() }, &scales, &BTreeMap::new()).unwrap();
    let r = evaluate(&fp32, &engine(&int8), &eval, true).unwrap();
    // Fusion names the layers "fc1 + relu1", "fc2 + relu2", "fc3".
    let layer =
        |name: &str| r.layers.iter().find(|l| l.layer.starts_with(name)).unwrap_or_else(|| panic!("{name}: {}", r.text(20)));
    let iso = |name: &str| layer(name).isolated.unwrap_or_else(|| panic!("{name} not isolated: {}", r.text(20)));
    assert!(iso("fc1").cosine < 0.95, "{}", r.text(20));
    for downstream in ["fc2", "fc3"] {
        assert!(iso(downstream).cosine > 0.99, "{}", r.text(20));
        assert!(layer(downstream).cosine < iso(downstream).cosine, "{}", r.text(20));
    }
    assert!(r.layers[0].layer.starts_with("fc1"), "worst isolated first: {}", r.text(20));
    // The JSON form carries both figures.
    let json = r.json();
    let first = &json["layers"][0];
    assert!(first["layer"].as_str().unwrap().starts_with("fc1"), "{json}");
    assert!(first["isolated"]["cosine"].as_f64().unwrap() < 0.95 && first["cosine"].is_number(), "{json}");
}

#[test]
fn an_accuracy_target_keeps_the_most_sensitive_layers_in_higher_precision() {
    use trtc::accuracy_target::{build_to_target, AccuracyTarget};
    let dir = TempDir::new("accuracy-target");
    let bytes = common::encode(&three_layer_mlp());
    let graph = trtc::frontend::onnx::import_bytes(&bytes, Default::default(), &Default::default()).unwrap();
    let mut optimized = graph.clone();
    trtc::passes::optimize(&mut optimized, &Default::default()).unwrap();
    let fp32 = Engine::from_bytes(&engine_of(&optimized, Default::default(), vec![]).unwrap()).unwrap();
    let eval: Vec<Batch> = (0..4)
        .map(|s| vec![("x".to_string(), trtc::random::tensor(&TensorType::new(DType::F32, vec![4, 8]), s).unwrap())])
        .collect();
    // A calibration cache whose scale for x is 100 times too small.
    let mut cache = calib::CalibrationCache::new(&Calibrator::MinMax);
    for (name, m) in calib::observe_ranges(&fp32, &eval).unwrap() {
        cache.insert_amax(&name, if name == "x" { m / 100.0 } else { m });
    }
    let cache_path = dir.path("bad.cache");
    calib::write_cache(&cache_path, &cache).unwrap();
    let mut o = opts(false, true);
    o.int8.cache = Some(cache_path);
    let outcome = build_to_target(graph.clone(), &o, AccuracyTarget::Cosine(0.999), &eval).unwrap();
    assert!(outcome.met && outcome.achieved >= 0.999, "{}", outcome.achieved);
    // fc1 (fused with relu1) is the layer to blame, so it goes first, to
    // fp32 (the build does not allow fp16).
    let (first, p) = &outcome.pins[0];
    assert!(first.starts_with("fc1") && *p == Precision::Fp32, "{:?}", outcome.pins);
    assert_eq!(outcome.rounds, outcome.pins.len() + 1);
    assert!(outcome.flags().starts_with("--layer-precision 'fc1"), "{}", outcome.flags());
    // Deterministic, and the pins reproduce the engine.
    let again = build_to_target(graph.clone(), &o, AccuracyTarget::Cosine(0.999), &eval).unwrap();
    assert_eq!(again.pins, outcome.pins);
    assert_eq!(again.built.engine, outcome.built.engine);
    let mut pinned = o.clone();
    pinned.precision.layer_precisions = outcome.pins.clone();
    assert_eq!(trtc::build::build_graph(graph.clone(), &pinned).unwrap().engine, outcome.built.engine);
    // A target already met pins nothing; top1 needs class scores (y has 8).
    let easy = build_to_target(graph, &o, AccuracyTarget::Top1(0.0), &eval).unwrap();
    assert!(easy.met && easy.pins.is_empty() && easy.rounds == 1);
}

/// `--calibrator auto` on a one-layer model, calibrated and measured on the
/// same batches: the layer's error alone is the model's, so auto's engine
/// is the engine of whichever calibrator gives the model the best cosine
/// (the same graph, scales included; only the flags recorded differ), and
/// the cache says `AutoCalibration`.
#[test]
fn the_auto_calibrator_takes_the_best_candidate_for_a_single_layer() {
    use common::{f32_tensor, model, node, value_info, F32};
    use trtc::build::{build_graph, import, ModelSource};
    // Enough values per tensor for the histogram calibrators (4 x 16,384).
    let (rows, k, n) = (64usize, 256usize, 32usize);
    let w: Vec<f32> = (0..k * n).map(|i| (((i * 7919) % 101) as f32 - 50.0) / 50.0).collect();
    let bytes = common::encode(&model(
        vec![node("MatMul", "fc", &["x", "w"], &["y"])],
        vec![value_info("x", F32, &[rows as i64, k as i64])],
        vec![value_info("y", F32, &[rows as i64, n as i64])],
        vec![f32_tensor("w", &[k as i64, n as i64], &w)],
    ));
    // Heavy tails: most values in [-1, 1), one in 50 forty times larger.
    let batches: Vec<Batch> = (0..4u64)
        .map(|s| {
            let t = trtc::random::tensor(&TensorType::new(DType::F32, vec![rows, k]), s).unwrap();
            let v: Vec<f32> =
                t.as_slice::<f32>().unwrap().iter().enumerate().map(|(i, &x)| if i % 50 == 7 { 40.0 * x } else { x }).collect();
            vec![("x".to_string(), Tensor::from_vec(vec![rows, k], v).unwrap())]
        })
        .collect();
    let build = |c: Calibrator| {
        let mut o = opts(false, true);
        o.int8.batches = batches.clone();
        o.int8.calib.calibrator = c;
        build_graph(import(&ModelSource::Bytes(bytes.clone()), &o).unwrap(), &o).unwrap()
    };
    let auto = build(Calibrator::Auto);
    assert_eq!(auto.calibration.as_ref().map(|(c, _)| c.calibrator.as_str()), Some("AutoCalibration"));
    let reference = reference_engine(&auto);
    let mut best: Option<(f64, String)> = None;
    let mut cosines = Vec::new();
    for c in calib::calibrator::AUTO_CANDIDATES {
        let built = build(c);
        let cos = worst_cosine(&evaluate(&reference, &Engine::from_bytes(&built.engine).unwrap(), &batches, false).unwrap());
        cosines.push((c.to_string(), cos));
        if best.as_ref().is_none_or(|(b, _)| cos > *b) {
            best = Some((cos, built.graph.dump()));
        }
    }
    let (cos, ir) = best.unwrap();
    // The candidates differ on these tails, so the choice is not trivial.
    assert!(cosines.iter().any(|(_, c)| *c < cos - 1e-4), "{cosines:?}");
    assert!(auto.graph.dump() == ir, "auto did not take the best of {cosines:?}");
}
