//! FP8 (E4M3) on the CPU executor, which computes what the GPU kernels
//! compute (E4M3 operands decoded exactly, products summed in f64 where the
//! tensor cores accumulate in f32):
//! - `--fp8` with min-max calibration keeps every testdata CNN's logits
//!   within cosine 0.99 of FP32 (the threshold doc/precision.md states),
//!   with every Conv, Gemm and MatMul in FP8;
//! - an FP8 Q/DQ model, in the standard domain or in TensorRT's `trt`
//!   domain as NVIDIA's ModelOpt exports one, runs as one FP8 layer that
//!   computes what its Q/DQ graph means;
//! - the IR of an FP8 build, calibration caches shared with INT8, and the
//!   errors of flags that do not go together.

mod common;

use common::{stem, testdata_models, testdata_npz, TempDir};
use std::collections::BTreeMap;
use std::path::Path;
use tract_onnx::pb;
use trtc::accuracy::evaluate;
use trtc::build::{build_file, build_graph, engine_of, BuildOptions, ModelSource};
use trtc::precision::calib::{self, Batch};
use trtc::precision::PrecisionConfig;
use trtc_runtime::float8::Float8;
use trtc_runtime::ops::precision::Precision;
use trtc_runtime::{DType, Engine, Target, Tensor, TensorType};

fn batches(model: &Path, inputs: &[(String, TensorType)], seeds: std::ops::Range<u64>) -> Vec<Batch> {
    calib::synthetic_batches(inputs, &testdata_npz(model, "inputs"), seeds).unwrap()
}

fn write_batches(dir: &Path, batches: &[Batch]) {
    for (i, b) in batches.iter().enumerate() {
        trtc::npz::write_npz(&dir.join(format!("batch_{i:03}.npz")), b).unwrap();
    }
}

fn fp8_opts() -> BuildOptions {
    BuildOptions { precision: PrecisionConfig { fp8: true, ..Default::default() }, ..Default::default() }
}

fn engine(bytes: &[u8]) -> Engine {
    Engine::from_bytes(bytes).unwrap()
}

/// The f32 output of an engine whose one input is `x`.
fn run_x(bytes: &[u8], x: &Tensor) -> Vec<f32> {
    let out = engine(bytes).create_context().unwrap().run(&[("x", x)]).unwrap();
    out[0].1.as_slice::<f32>().unwrap().to_vec()
}

fn is_cnn(model: &Path) -> bool {
    let inputs = testdata_npz(model, "inputs");
    inputs.len() == 1 && inputs[0].1.dtype() == DType::F32 && inputs[0].1.shape().len() == 4
}

#[test]
fn fp8_minmax_calibration_keeps_cnn_logits_within_cosine_0_99() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for m in testdata_models().iter().filter(|m| is_cnn(m)) {
        let fp32 = build_file(m, &BuildOptions::default()).unwrap();
        let inputs = calib::graph_inputs(&fp32.reference);
        let dir = TempDir::new(&format!("fp8-calib-{}", stem(m)));
        write_batches(&dir.0, &batches(m, &inputs, 0..8));
        let mut o = fp8_opts();
        o.int8.calib_dir = Some(dir.0.clone());
        o.int8.calib.calibrator = calib::Calibrator::MinMax;
        let built = build_file(m, &o).unwrap_or_else(|e| panic!("{}: {e:#}", stem(m)));
        let fp8_layers = built.precision.layers.get(&Precision::Fp8).copied().unwrap_or(0);
        let reference = engine(&engine_of(&built.reference, Default::default(), vec![]).unwrap());
        let r = evaluate(&reference, &engine(&built.engine), &batches(m, &inputs, 100..108), false).unwrap();
        let worst = r.outputs.iter().map(|o| if o.cosine.is_nan() { -1.0 } else { o.cosine }).fold(1.0, f64::min);
        println!(
            "{:<28} fp8 layers {fp8_layers:3}, fallbacks {:2}, logits cosine {worst:.6}, top-1 {:?}",
            stem(m),
            built.precision.int8_fallbacks.len(),
            r.outputs[0].top1
        );
        if worst < 0.99 {
            failures.push(format!("{}: cosine {worst}", stem(m)));
        }
        if fp8_layers == 0 || !built.precision.int8_fallbacks.is_empty() {
            failures.push(format!("{}: {fp8_layers} fp8 layers, fallbacks {:?}", stem(m), built.precision.int8_fallbacks));
        }
        if built.precision.layers.contains_key(&Precision::Int8) {
            failures.push(format!("{}: int8 layers in an FP8 build", stem(m)));
        }
        checked += 1;
    }
    assert!(checked >= 10, "expected the testdata CNNs, checked {checked}");
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The IR of the test MLP after `--fp8` (its input's calibrated int8 scale
/// 1/127, so amax 1), and the engine agrees with FP32.
#[test]
fn ir_after_fp8() {
    let bytes = common::encode(&common::mlp());
    let import = || {
        let mut g = trtc::frontend::onnx::import_bytes(&bytes, Default::default(), &Default::default()).unwrap();
        trtc::passes::optimize(&mut g, &Default::default()).unwrap();
        g
    };
    let fp32 = import();
    let mut fp8 = import();
    let scales = BTreeMap::from([("x".to_string(), 1.0f32 / 127.0)]);
    let cfg = PrecisionConfig { fp8: true, ..Default::default() };
    let report = trtc::precision::apply(&mut fp8, &cfg, &scales, &BTreeMap::new()).unwrap();
    assert!(report.int8_fallbacks.is_empty(), "{:?}", report.int8_fallbacks);
    assert_eq!(report.layers.get(&Precision::Fp8), Some(&1), "{:?}", report.layers);
    insta::assert_snapshot!("mlp_fp8", fp8.dump());
    let engine_of_graph = |g: &trtc::ir::Graph| engine(&engine_of(g, Default::default(), vec![]).unwrap());
    let eval: Vec<Batch> = (0..4)
        .map(|s| vec![("x".to_string(), trtc::random::tensor(&TensorType::new(DType::F32, vec![2, 3]), s).unwrap())])
        .collect();
    let r = evaluate(&engine_of_graph(&fp32), &engine_of_graph(&fp8), &eval, true).unwrap();
    assert!(r.outputs[0].cosine > 0.999, "{}", r.text(10));
    assert!(r.outputs[0].max_rel_err > 0.0, "FP8 changes the result a little");
    // The per-layer report isolates the FP8 layer.
    assert!(r.layers.iter().any(|l| l.precision == Precision::Fp8 && l.isolated.is_some()), "{}", r.text(10));
}

const FP8: i32 = 17;

fn e4m3(v: f32) -> u8 {
    Float8::E4M3FN.encode(f64::from(v), true)
}

fn fp8_tensor(name: &str, dims: &[i64], bytes: Vec<u8>) -> pb::TensorProto {
    pb::TensorProto { name: name.into(), dims: dims.to_vec(), data_type: FP8, raw_data: bytes, ..Default::default() }
}

/// x[2, 32] → QuantizeLinear/DequantizeLinear (E4M3FN, per tensor) →
/// MatMul with DequantizeLinear(w: E4M3FN[32, 8], per-column scales) → Add
/// bias → Relu → y: the pattern ModelOpt exports for an FP8 linear layer.
/// Returns the model and its FP8 weight and scales.
fn fp8_qdq_mlp() -> (pb::ModelProto, Vec<u8>, Vec<f32>, f32) {
    use common::{f32_tensor, int_attr, model, node, value_info, F32};
    let (k, n) = (32usize, 8usize);
    let w_scale: Vec<f32> = (0..n).map(|c| 0.001 * (c + 1) as f32).collect();
    let w: Vec<u8> = (0..k * n).map(|i| e4m3((((i * 37) % 29) as f32 - 14.0) * 9.5)).collect();
    let x_scale = 1.0 / 448.0;
    let bias: Vec<f32> = (0..n).map(|c| 0.05 * c as f32 - 0.2).collect();
    let mut dq_w = node("DequantizeLinear", "w_dq", &["w_q", "w_scale", "w_zero"], &["w"]);
    dq_w.attribute.push(int_attr("axis", 1));
    let mut m = model(
        vec![
            node("QuantizeLinear", "x_q", &["x", "x_scale", "x_zero"], &["xq"]),
            node("DequantizeLinear", "x_dq", &["xq", "x_scale", "x_zero"], &["xd"]),
            dq_w,
            node("MatMul", "fc", &["xd", "w"], &["h"]),
            node("Add", "fc_bias", &["h", "b"], &["hb"]),
            node("Relu", "relu", &["hb"], &["y"]),
        ],
        vec![value_info("x", F32, &[2, k as i64])],
        vec![value_info("y", F32, &[2, n as i64])],
        vec![
            f32_tensor("x_scale", &[], &[x_scale]),
            fp8_tensor("x_zero", &[], vec![0]),
            fp8_tensor("w_q", &[k as i64, n as i64], w.clone()),
            f32_tensor("w_scale", &[n as i64], &w_scale),
            fp8_tensor("w_zero", &[n as i64], vec![0; n]),
            f32_tensor("b", &[n as i64], &bias),
        ],
    );
    m.opset_import[0].version = 21;
    (m, w, w_scale, x_scale)
}

#[test]
fn an_fp8_qdq_model_runs_as_one_fp8_layer_that_computes_what_its_graph_means() {
    let (model, w, w_scale, x_scale) = fp8_qdq_mlp();
    let (k, n) = (32usize, 8usize);
    let bytes = common::encode(&model);
    let build = |opts: &BuildOptions| {
        let g = trtc::build::import(&ModelSource::Bytes(bytes.clone()), opts).unwrap();
        build_graph(g, opts).unwrap()
    };
    // No flag needed: the model carries its scales.
    let built = build(&BuildOptions::default());
    assert_eq!(built.precision.layers.get(&Precision::Fp8), Some(&1), "{}", built.graph.dump());
    assert!(built.graph.dump().contains("Fp8MatMul"), "{}", built.graph.dump());
    // The same model with the layer pinned to fp32 runs the Q/DQ graph as
    // written, in f32.
    let mut pinned = BuildOptions::default();
    pinned.precision.layer_precisions = vec![("*".into(), Precision::Fp32)];
    let unfused = build(&pinned);
    assert_eq!(unfused.precision.layers.get(&Precision::Fp8), None);
    // x spans beyond the quantizer's range (448 * x_scale = 1), so some
    // values saturate.
    let x: Vec<f32> = (0..2 * k).map(|i| ((i * 13) % 23) as f32 / 10.0 - 1.15).collect();
    let input = Tensor::from_vec(vec![2, k], x.clone()).unwrap();
    let run = |bytes: &[u8]| run_x(bytes, &input);
    // What the ONNX graph means, in f64: dequantized operands, their
    // product, the bias, the Relu.
    let decode = |b: u8| f64::from(Float8::E4M3FN.decode(b));
    let xd: Vec<f64> = x.iter().map(|&v| decode(e4m3(v / x_scale)) * f64::from(x_scale)).collect();
    let mut expected = vec![0f64; 2 * n];
    for r in 0..2 {
        for c in 0..n {
            let dot: f64 = (0..k).map(|i| xd[r * k + i] * decode(w[i * n + c]) * f64::from(w_scale[c])).sum();
            expected[r * n + c] = (dot + (0.05 * c as f64 - 0.2)).max(0.0);
        }
    }
    let saturated = x.iter().filter(|v| v.abs() > 1.0).count();
    assert!(saturated > 0, "the test input should reach past the FP8 range");
    for (what, got) in [("fp8 layer", run(&built.engine)), ("q/dq graph in f32", run(&unfused.engine))] {
        let scale = expected.iter().fold(0f64, |m, v| m.max(v.abs()));
        let err = got.iter().zip(&expected).map(|(&g, e)| (f64::from(g) - e).abs()).fold(0f64, f64::max);
        assert!(err <= 1e-5 * scale, "{what}: max error {err:e} of {scale:e}: {got:?} vs {expected:?}");
    }
}

#[test]
fn an_int8_calibration_cache_serves_an_fp8_build() {
    let m = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/models/example_cnn.onnx");
    let fp32 = build_file(&m, &BuildOptions::default()).unwrap();
    let dir = TempDir::new("fp8-cache");
    let data = dir.path("data");
    std::fs::create_dir_all(&data).unwrap();
    write_batches(&data, &batches(&m, &calib::graph_inputs(&fp32.reference), 0..4));
    let cache = dir.path("model.cache");
    let mut o = BuildOptions { precision: PrecisionConfig { int8: true, ..Default::default() }, ..Default::default() };
    o.int8.calib_dir = Some(data.clone());
    o.int8.cache = Some(cache.clone());
    build_file(&m, &o).unwrap();
    // FP8 from the cache alone, twice: the same engine.
    let mut f = fp8_opts();
    f.int8.cache = Some(cache.clone());
    let first = build_file(&m, &f).unwrap();
    assert_eq!(first.calibration.as_ref().map(|c| c.1), Some(true));
    assert!(first.precision.layers.get(&Precision::Fp8).copied().unwrap_or(0) > 0);
    assert_eq!(build_file(&m, &f).unwrap().engine, first.engine);
}

#[test]
fn fp8_flags_that_do_not_go_together_are_clear_errors() {
    let m = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/models/example_cnn.onnx");
    let e = format!("{:#}", build_file(&m, &fp8_opts()).err().expect("no calibration data"));
    assert!(e.contains("--fp8") && e.contains("--calib"), "{e}");
    let mut both = fp8_opts();
    both.precision.int8 = true;
    let e = format!("{:#}", build_file(&m, &both).err().expect("--int8 with --fp8"));
    assert!(e.contains("--int8") && e.contains("--fp8"), "{e}");
    let mut ampere = fp8_opts();
    ampere.target = Target::Cuda { sm: 86, gpu_name: None };
    let e = format!("{:#}", build_file(&m, &ampere).err().expect("FP8 on sm_86"));
    assert!(e.contains("sm_89") && e.contains("sm_86"), "{e}");
    assert_eq!(PrecisionConfig::parse_pin("/fc/*=fp8").unwrap().1, Precision::Fp8);
}

/// The same FP8 linear layer as ModelOpt exports it, with TensorRT's `trt`
/// domain ops (`TRT_FP8QuantizeLinear`/`TRT_FP8DequantizeLinear`, no zero
/// point) and the weight as f32 quantized in the graph: one FP8 layer,
/// whose output equals the same graph's Q/DQ run unfused in f32.
#[test]
fn modelopt_trt_domain_fp8_qdq_builds_the_same_fp8_layer() {
    use common::{f32_tensor, model, node, value_info, F32};
    let (_, w_q, w_scale, x_scale) = fp8_qdq_mlp();
    let (k, n) = (32usize, 8usize);
    // The f32 weight whose per-tensor quantization gives back w_q's values
    // (one scale: the largest of the per-column ones).
    let s = w_scale.iter().copied().fold(0f32, f32::max);
    let w: Vec<f32> = w_q.iter().enumerate().map(|(i, &b)| Float8::E4M3FN.decode(b) * w_scale[i % n]).collect();
    let trt = |op: &str, name: &str, ins: &[&str], out: &str| {
        let mut nd = node(op, name, ins, &[out]);
        nd.domain = "trt".into();
        nd
    };
    let bias: Vec<f32> = (0..n).map(|c| 0.05 * c as f32 - 0.2).collect();
    let mut m = model(
        vec![
            trt("TRT_FP8QuantizeLinear", "x_q", &["x", "x_scale"], "xq"),
            trt("TRT_FP8DequantizeLinear", "x_dq", &["xq", "x_scale"], "xd"),
            trt("TRT_FP8QuantizeLinear", "w_q", &["w_f32", "w_scale"], "wq"),
            trt("TRT_FP8DequantizeLinear", "w_dq", &["wq", "w_scale"], "w"),
            node("MatMul", "fc", &["xd", "w"], &["h"]),
            node("Add", "fc_bias", &["h", "b"], &["hb"]),
            node("Relu", "relu", &["hb"], &["y"]),
        ],
        vec![value_info("x", F32, &[2, k as i64])],
        vec![value_info("y", F32, &[2, n as i64])],
        vec![
            f32_tensor("x_scale", &[], &[x_scale]),
            f32_tensor("w_f32", &[k as i64, n as i64], &w),
            f32_tensor("w_scale", &[], &[s]),
            f32_tensor("b", &[n as i64], &bias),
        ],
    );
    m.opset_import.push(pb::OperatorSetIdProto { domain: "trt".into(), version: 1 });
    let build = |model: &pb::ModelProto| {
        let o = BuildOptions::default();
        let g = trtc::build::import(&ModelSource::Bytes(common::encode(model)), &o).unwrap();
        build_graph(g, &o).unwrap()
    };
    let built = build(&m);
    assert_eq!(built.precision.layers.get(&Precision::Fp8), Some(&1), "{}", built.graph.dump());
    // The Q/DQ graph as written, in f32: the layer pinned to fp32.
    let mut pinned = BuildOptions::default();
    pinned.precision.layer_precisions = vec![("*".into(), Precision::Fp32)];
    let g = trtc::build::import(&ModelSource::Bytes(common::encode(&m)), &pinned).unwrap();
    let unfused = build_graph(g, &pinned).unwrap();
    let x: Vec<f32> = (0..2 * k).map(|i| ((i * 13) % 23) as f32 / 10.0 - 1.15).collect();
    let input = Tensor::from_vec(vec![2, k], x).unwrap();
    let run = |bytes: &[u8]| run_x(bytes, &input);
    let (fused, reference) = (run(&built.engine), run(&unfused.engine));
    let scale = reference.iter().fold(0f32, |m, v| m.max(v.abs()));
    for (a, b) in fused.iter().zip(&reference) {
        assert!((a - b).abs() <= 1e-5 * scale, "{fused:?} vs {reference:?}");
    }
    // A trt-domain op trtc does not know is named with its domain.
    let mut unknown = m.clone();
    unknown.graph.as_mut().unwrap().node[4] = {
        let mut nd = node("TRT_FP4QuantizeLinear", "fp4", &["xd", "w"], &["h"]);
        nd.domain = "trt".into();
        nd
    };
    let e = format!(
        "{:#}",
        trtc::build::import(&ModelSource::Bytes(common::encode(&unknown)), &BuildOptions::default()).unwrap_err()
    );
    assert!(e.contains("trt:TRT_FP4QuantizeLinear"), "{e}");
}

/// `--fp8 --fp16`: the layers FP8 does not take run in fp16, and FP8
/// layers write their float outputs as f16 for them (as INT8 ones do),
/// with the logits still within the FP8 threshold.
#[test]
fn fp8_with_fp16_writes_f16_between_fp8_layers_and_fp16_ones() {
    let m = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/models/resnet18_legacy.onnx");
    let fp32 = build_file(&m, &BuildOptions::default()).unwrap();
    let inputs = calib::graph_inputs(&fp32.reference);
    let mut o = fp8_opts();
    o.precision.fp16 = true;
    o.int8.batches = batches(&m, &inputs, 0..4);
    let built = build_file(&m, &o).unwrap();
    let dump = built.graph.dump();
    let fp8_f16: Vec<&str> = dump.lines().filter(|l| l.contains("Fp8Conv") && l.contains(": f16[")).collect();
    assert!(!fp8_f16.is_empty(), "{dump}");
    assert!(built.precision.layers.get(&Precision::Fp16).copied().unwrap_or(0) > 0, "{:?}", built.precision.layers);
    let reference = engine(&engine_of(&built.reference, Default::default(), vec![]).unwrap());
    let r = evaluate(&reference, &engine(&built.engine), &batches(&m, &inputs, 100..104), false).unwrap();
    assert!(r.outputs[0].cosine >= 0.99, "{}", r.text(0));
}
