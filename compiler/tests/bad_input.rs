//! Bad input gets one clear error line and a non-zero exit, never a panic:
//! malformed ONNX, unsupported ops, unresolved shapes, unsafe external data,
//! corrupted, truncated, foreign or future-version engines, bad flag values.
//! (Also the CLI's machine-readable output, which shares the helpers.)

mod common;

use common::*;
use std::process::Command;

fn trtc(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_trtc")).args(args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// Runs `trtc` and expects a failure whose stderr is one line containing `needle`.
fn expect_error(args: &[&str], needle: &str) {
    let (code, _, err) = trtc(args);
    assert_eq!(code, 1, "expected exit 1 for {args:?}, stderr: {err}");
    assert!(!err.contains("panicked"), "panic for {args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "expected one line for {args:?}, got: {err}");
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
}

fn build_mlp(dir: &TempDir) -> std::path::PathBuf {
    let model = dir.path("mlp.onnx");
    std::fs::write(&model, encode(&mlp())).unwrap();
    let engine = dir.path("mlp.engine");
    let (code, _, err) = trtc(&["build", model.to_str().unwrap(), "-o", engine.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    engine
}

#[test]
fn truncated_onnx_is_refused() {
    let dir = TempDir::new("trunc-onnx");
    let bytes = encode(&mlp());
    let path = dir.path("t.onnx");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    expect_error(&["build", path.to_str().unwrap(), "-o", dir.path("t.engine").to_str().unwrap()], "not a valid ONNX model");
}

#[test]
fn garbage_file_is_refused() {
    let dir = TempDir::new("garbage-onnx");
    let path = dir.path("g.onnx");
    std::fs::write(&path, b"this is not a protobuf at all \xff\xff\xff\xff").unwrap();
    expect_error(&["build", path.to_str().unwrap(), "-o", dir.path("g.engine").to_str().unwrap()], "not a valid ONNX model");
}

#[test]
fn unsupported_ops_are_listed_with_a_node_each() {
    let dir = TempDir::new("unsupported");
    let m = model(
        vec![
            node("FrobnicateA", "first_a", &["x"], &["a"]),
            node("FrobnicateA", "second_a", &["a"], &["b"]),
            node("FrobnicateB", "the_b", &["b"], &["y"]),
        ],
        vec![value_info("x", F32, &[2])],
        vec![value_info("y", F32, &[2])],
        vec![],
    );
    let path = dir.path("u.onnx");
    std::fs::write(&path, encode(&m)).unwrap();
    expect_error(
        &["build", path.to_str().unwrap(), "-o", dir.path("u.engine").to_str().unwrap()],
        "unsupported ONNX ops: FrobnicateA (node 'first_a'), FrobnicateB (node 'the_b')",
    );
}

#[test]
fn unresolved_symbolic_dimension_names_the_input() {
    use tract_onnx::pb::tensor_shape_proto::dimension::Value;
    let dir = TempDir::new("symbolic");
    let mut m = mlp();
    m.graph.as_mut().unwrap().input[0] = value_info_dims("x", F32, vec![Value::DimParam("batch".into()), Value::DimValue(3)]);
    let path = dir.path("s.onnx");
    std::fs::write(&path, encode(&m)).unwrap();
    let engine = dir.path("s.engine");
    expect_error(
        &["build", path.to_str().unwrap(), "-o", engine.to_str().unwrap()],
        "input 'x' has a symbolic dimension 'batch'",
    );
    let (code, _, err) = trtc(&["build", path.to_str().unwrap(), "-o", engine.to_str().unwrap(), "--shape", "x:2x3"]);
    assert_eq!(code, 0, "{err}");
    // trtexec's list form, and dims separated by commas.
    for shape in ["x:2x3", "x:2,3"] {
        let (code, _, err) = trtc(&["build", path.to_str().unwrap(), "-o", engine.to_str().unwrap(), "--shape", shape]);
        assert_eq!(code, 0, "{shape}: {err}");
    }
    // A name that is no input is refused before any symbolic dimension,
    // also inside a list.
    expect_error(
        &["build", path.to_str().unwrap(), "-o", engine.to_str().unwrap(), "--shape", "x:2x3,z:4"],
        "--shape names 'z', which is not an input of the model",
    );
    expect_error(
        &["build", path.to_str().unwrap(), "-o", engine.to_str().unwrap(), "--shape", "xx:2x3"],
        "--shape names 'xx', which is not an input of the model",
    );
    expect_error(&["build", path.to_str().unwrap(), "-o", engine.to_str().unwrap(), "--shape", ":2x3"], "expected NAME:DIMS");
}

#[test]
fn external_data_outside_the_model_directory_is_refused() {
    let dir = TempDir::new("external");
    let mut m = mlp();
    let w = &mut m.graph.as_mut().unwrap().initializer[0];
    w.raw_data.clear();
    w.data_location = Some(1);
    w.external_data = vec![tract_onnx::pb::StringStringEntryProto { key: "location".into(), value: "../../etc/passwd".into() }];
    let path = dir.path("e.onnx");
    std::fs::write(&path, encode(&m)).unwrap();
    expect_error(
        &["build", path.to_str().unwrap(), "-o", dir.path("e.engine").to_str().unwrap()],
        "inside the model's directory",
    );
}

#[test]
fn external_data_is_read_when_safe_and_bounds_checked() {
    let dir = TempDir::new("external-ok");
    let mut m = mlp();
    let w = &mut m.graph.as_mut().unwrap().initializer[0];
    let bytes = std::mem::take(&mut w.raw_data);
    std::fs::write(dir.path("weights.bin"), [vec![0u8; 16], bytes.clone()].concat()).unwrap();
    w.data_location = Some(1);
    let entry = |k: &str, v: &str| tract_onnx::pb::StringStringEntryProto { key: k.into(), value: v.into() };
    w.external_data = vec![entry("location", "weights.bin"), entry("offset", "16"), entry("length", &bytes.len().to_string())];
    let path = dir.path("e.onnx");
    std::fs::write(&path, encode(&m)).unwrap();
    let (code, _, err) = trtc(&["build", path.to_str().unwrap(), "-o", dir.path("e.engine").to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    // Past the end of the file.
    let w = &mut m.graph.as_mut().unwrap().initializer[0];
    w.external_data[1] = entry("offset", "32");
    std::fs::write(&path, encode(&m)).unwrap();
    expect_error(&["build", path.to_str().unwrap(), "-o", dir.path("e.engine").to_str().unwrap()], "past the end");
}

#[test]
fn corrupted_engine_is_refused() {
    let dir = TempDir::new("bitflip");
    let engine = build_mlp(&dir);
    let mut bytes = std::fs::read(&engine).unwrap();
    let at = bytes.len() - 10;
    bytes[at] ^= 0x10;
    std::fs::write(&engine, &bytes).unwrap();
    expect_error(&["run", engine.to_str().unwrap()], "checksum mismatch");
    expect_error(&["inspect", engine.to_str().unwrap()], "checksum mismatch");
}

#[test]
fn truncated_engine_is_refused() {
    let dir = TempDir::new("trunc-engine");
    let engine = build_mlp(&dir);
    let bytes = std::fs::read(&engine).unwrap();
    std::fs::write(&engine, &bytes[..bytes.len() - 7]).unwrap();
    expect_error(&["run", engine.to_str().unwrap()], "truncated");
    std::fs::write(&engine, &bytes[..10]).unwrap();
    expect_error(&["inspect", engine.to_str().unwrap()], "too short");
}

#[test]
fn future_format_version_is_refused() {
    let dir = TempDir::new("future");
    let engine = build_mlp(&dir);
    let mut bytes = std::fs::read(&engine).unwrap();
    let future = trtc_runtime::engine::FORMAT_VERSION + 1;
    bytes[8..12].copy_from_slice(&future.to_le_bytes());
    std::fs::write(&engine, &bytes).unwrap();
    let refusal = format!("engine format version {future} is not supported");
    expect_error(&["run", engine.to_str().unwrap()], &refusal);
    expect_error(&["inspect", "--version-only", engine.to_str().unwrap()], &refusal);
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    std::fs::write(&engine, &bytes).unwrap();
    expect_error(&["run", engine.to_str().unwrap()], "engine format version 1 is not supported");
}

#[test]
fn the_previous_format_version_still_loads() {
    // Versions 3 and 4 only appended enum variants, so an engine without
    // them is also a version-2 engine.
    let dir = TempDir::new("previous");
    let engine = build_mlp(&dir);
    let mut bytes = std::fs::read(&engine).unwrap();
    bytes[8..12].copy_from_slice(&trtc_runtime::engine::OLDEST_READABLE_VERSION.to_le_bytes());
    std::fs::write(&engine, &bytes).unwrap();
    let (code, out, err) = trtc(&["inspect", engine.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("engine format 2,"), "{out}");
    let (code, _, err) = trtc(&["run", engine.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn foreign_file_is_refused_as_engine() {
    let dir = TempDir::new("foreign");
    let path = dir.path("model.onnx");
    std::fs::write(&path, encode(&mlp())).unwrap();
    expect_error(&["run", path.to_str().unwrap()], "not a trtc engine file");
}

#[test]
fn every_single_byte_corruption_is_an_error_or_harmless() {
    let dir = TempDir::new("every-byte");
    let engine = build_mlp(&dir);
    let bytes = std::fs::read(&engine).unwrap();
    let good = trtc_runtime::Engine::from_bytes(&bytes).unwrap();
    let x = trtc_runtime::Tensor::from_vec(vec![2, 3], vec![0.5f32, -1.0, 2.0, 0.0, 1.5, -0.5]).unwrap();
    let want = good.create_context().unwrap().run(&[("x", &x)]).unwrap();
    let mut refused = 0;
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0xA5;
        match trtc_runtime::Engine::from_bytes(&b) {
            Err(_) => refused += 1,
            // Only padding bytes may change without detection, and then
            // the engine must compute exactly the same thing.
            Ok(e) => assert_eq!(e.create_context().unwrap().run(&[("x", &x)]).unwrap()[0].1, want[0].1, "byte {i}"),
        }
    }
    assert!(refused > bytes.len() / 4, "only {refused} of {} corruptions detected", bytes.len());
}

#[test]
fn version_only_reads_the_header() {
    let dir = TempDir::new("version");
    let engine = build_mlp(&dir);
    let (code, out, err) = trtc(&["inspect", "--version-only", engine.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let expected = format!("engine format {}, built by trtc ", trtc_runtime::engine::FORMAT_VERSION);
    assert!(out.starts_with(&expected), "{out}");
}

#[test]
fn wrong_inputs_are_binding_errors() {
    let dir = TempDir::new("bindings");
    let engine = trtc_runtime::Engine::load(build_mlp(&dir)).unwrap();
    let mut ctx = engine.create_context().unwrap();
    let wrong_shape = trtc_runtime::Tensor::from_vec(vec![3, 2], vec![0f32; 6]).unwrap();
    let e = ctx.run(&[("x", &wrong_shape)]).unwrap_err().to_string();
    assert!(e.contains("input 'x' must be f32[2,3], got f32[3,2]"), "{e}");
    let e = ctx.run(&[]).unwrap_err().to_string();
    assert!(e.contains("missing input 'x'"), "{e}");
    let e = ctx.run(&[("x", &wrong_shape), ("nope", &wrong_shape)]).unwrap_err().to_string();
    assert!(e.contains("unknown input 'nope'"), "{e}");
}

#[test]
fn a_huge_constant_is_an_error_not_an_abort() {
    let dir = TempDir::new("huge");
    let m = model(
        vec![node("ConstantOfShape", "huge", &["shape"], &["big"]), node("Add", "add", &["x", "big"], &["y"])],
        vec![value_info("x", F32, &[1])],
        vec![value_info("y", F32, &[1])],
        vec![i64_tensor("shape", &[3], &[100_000, 100_000, 1000])],
    );
    let path = dir.path("h.onnx");
    std::fs::write(&path, encode(&m)).unwrap();
    expect_error(&["build", path.to_str().unwrap(), "-o", dir.path("h.engine").to_str().unwrap()], "node 'huge'");
}

#[test]
fn bad_flag_values_name_the_flag_and_the_choices() {
    let dir = TempDir::new("bad-flags");
    let engine = build_mlp(&dir);
    let engine = engine.to_str().unwrap();
    let model = dir.path("mlp.onnx");
    let model = model.to_str().unwrap();
    let out = dir.path("o.engine");
    let out = out.to_str().unwrap();
    expect_error(
        &["bench", engine, "--device", "gpu"],
        "invalid value 'gpu' for '--device <DEVICE>'; [possible values: auto, cpu, cuda]",
    );
    expect_error(&["run", engine, "--device", "tpu"], "[possible values: auto, cpu, cuda]");
    expect_error(&["build", model, "-o", out, "--int8", "--calibrator", "percentile=200"], "the percentile must be in (0, 100]");
    expect_error(
        &["build", model, "-o", out, "--int8", "--calibrator", "kl"],
        "expected entropy, minmax, percentile[=P] or auto",
    );
    expect_error(&["build", model, "-o", out, "--accuracy-target", "cosine=0.999"], "--accuracy-target needs reduced precision");
    expect_error(&["build", model, "-o", out, "--fp16", "--accuracy-target", "psnr=30"], "unknown metric 'psnr'");
    // Calibration data feeds INT8 scales or FP16 ranges; a cache only INT8.
    expect_error(&["build", model, "-o", out, "--calib", dir.0.to_str().unwrap()], "--calib needs --int8, --fp8 or --fp16");
    expect_error(&["build", model, "-o", out, "--fp16", "--calib-cache", "c.cache"], "--calib-cache needs --int8 or --fp8");
    expect_error(&["build", model, "-o", out, "--fp16", "--calibrator", "minmax"], "--calibrator needs --int8 or --fp8");
    expect_error(
        &["calibrate", model, "--calib", dir.0.to_str().unwrap(), "-o", out, "--calibrator", "auto"],
        "auto chooses per layer while building",
    );
    // FP8 is one quantized format per build, on GPUs that have it.
    expect_error(&["build", model, "-o", out, "--int8", "--fp8"], "'--int8' cannot be used with '--fp8'");
    expect_error(
        &["build", model, "-o", out, "--fp8", "--calib", dir.0.to_str().unwrap(), "--target", "sm_86"],
        "--fp8 needs FP8 tensor cores, sm_89 (Ada) or newer; the target is sm_86",
    );
    // The hidden GPU check refuses flags it does not know, like every subcommand.
    expect_error(&["gpu-check", "--list", "--bogus"], "unexpected argument '--bogus'");
}

#[test]
fn bench_json_is_one_valid_object() {
    let dir = TempDir::new("bench-json");
    let engine = build_mlp(&dir);
    let (code, out, err) =
        trtc(&["bench", engine.to_str().unwrap(), "--json", "--iterations", "7", "--warmup", "1", "--threads", "2"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["iterations"], 7);
    assert_eq!(v["device"], "cpu (fast f32, 2 threads)");
    assert!(v["gpu_compute"].is_null());
    let (min, median, max) = (v["min_ms"].as_f64().unwrap(), v["median_ms"].as_f64().unwrap(), v["max_ms"].as_f64().unwrap());
    assert!(0.0 < min && min <= median && median <= max, "{v}");
    assert!(v.get("profile").is_none(), "no profile unless asked: {v}");

    // --profile: every layer once, slowest first.
    let (code, out, err) = trtc(&["bench", engine.to_str().unwrap(), "--json", "--iterations", "3", "--profile", "--exact"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(v["device"].as_str().unwrap().starts_with("cpu (exact f32, "), "{v}");
    let (code, inspect, err) = trtc(&["inspect", engine.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{err}");
    let inspect: serde_json::Value = serde_json::from_str(inspect.trim()).unwrap();
    let mut expected: Vec<&str> = inspect["layers"].as_array().unwrap().iter().map(|l| l["name"].as_str().unwrap()).collect();
    let profile = v["profile"].as_array().unwrap();
    let times: Vec<f64> = profile.iter().map(|l| l["mean_ms"].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]) && times.iter().all(|&t| t >= 0.0), "{v}");
    let mut names: Vec<&str> = profile.iter().map(|l| l["layer"].as_str().unwrap()).collect();
    names.sort();
    expected.sort();
    assert_eq!(names, expected);
}

#[test]
fn a_shape_deciding_graph_input_names_the_flag_that_fixes_it() {
    let dir = TempDir::new("shape-input");
    let m = model(
        vec![node("Reshape", "reshape", &["x", "shape"], &["y"])],
        vec![value_info("x", 1, &[2, 3]), value_info("shape", 7, &[2])],
        vec![value_info("y", 1, &[3, 2])],
        vec![],
    );
    let path = dir.path("reshape.onnx");
    std::fs::write(&path, encode(&m)).unwrap();
    let out = dir.path("r.engine");
    expect_error(
        &["build", path.to_str().unwrap(), "-o", out.to_str().unwrap()],
        "node 'reshape' (Reshape): input 1 (shape, tensor 'shape') must be known when the engine is built; \
         it is a graph input: give its value with --input-value shape:FILE.npy",
    );
}

/// numpy has no 8-bit floats or 4-bit integers: `trtc run --inputs` takes
/// such bindings as the uint8 / int8 words that carry them, checks 4-bit
/// values against their range, and names the word type when given another.
#[test]
fn storage_type_inputs_arrive_as_numpy_words() {
    const FLOAT8E4M3FN: i32 = 17;
    const INT4: i32 = 22;
    let dir = TempDir::new("storage-types");
    let mut to_f32 = node("Cast", "f8_to_f32", &["x"], &["y"]);
    to_f32.attribute.push(int_attr("to", F32 as i64));
    let mut to_f32_4 = node("Cast", "i4_to_f32", &["n"], &["m"]);
    to_f32_4.attribute.push(int_attr("to", F32 as i64));
    let m = model(
        vec![to_f32, to_f32_4],
        vec![value_info("x", FLOAT8E4M3FN, &[4]), value_info("n", INT4, &[3])],
        vec![value_info("y", F32, &[4]), value_info("m", F32, &[3])],
        vec![],
    );
    let (onnx, engine) = (dir.path("s.onnx"), dir.path("s.engine"));
    std::fs::write(&onnx, encode(&m)).unwrap();
    let (code, _, err) = trtc(&["build", onnx.to_str().unwrap(), "-o", engine.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let write = |name: &str, n: trtc_runtime::Tensor| {
        let x = trtc_runtime::Tensor::from_vec(vec![4], vec![0x38u8, 0xc0, 0x7e, 0x7f]).unwrap();
        let p = dir.path(name);
        trtc::npz::write_npz(&p, &[("x".into(), x), ("n".into(), n)]).unwrap();
        p
    };
    let good = write("good.npz", trtc_runtime::Tensor::from_vec(vec![3], vec![-8i8, 0, 7]).unwrap());
    let out = dir.path("out.npz");
    let (code, _, err) =
        trtc(&["run", engine.to_str().unwrap(), "--inputs", good.to_str().unwrap(), "--save-outputs", out.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let outputs = trtc::npz::read_npz(&out).unwrap();
    let y = outputs.iter().find(|(n, _)| n == "y").unwrap().1.to_f64_vec();
    assert_eq!(&y[..3], &[1.0, -2.0, 448.0]);
    assert!(y[3].is_nan());
    assert_eq!(outputs.iter().find(|(n, _)| n == "m").unwrap().1.to_f64_vec(), vec![-8.0, 0.0, 7.0]);

    let out_of_range = write("range.npz", trtc_runtime::Tensor::from_vec(vec![3], vec![-9i8, 0, 7]).unwrap());
    expect_error(
        &["run", engine.to_str().unwrap(), "--inputs", out_of_range.to_str().unwrap()],
        "input 'n': holds -9, out of i4's range [-8, 7]",
    );
    let wrong = write("wrong.npz", trtc_runtime::Tensor::from_vec(vec![3], vec![0f32; 3]).unwrap());
    expect_error(
        &["run", engine.to_str().unwrap(), "--inputs", wrong.to_str().unwrap()],
        "must be i4[3] (numpy carries i4 as i8), got f32[3]",
    );
}
