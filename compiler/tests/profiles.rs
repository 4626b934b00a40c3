//! Optimization profiles (`--min-shapes`/`--opt-shapes`/`--max-shapes`):
//! models whose batch is symbolic build once and run at any batch in the
//! range, bit for bit as engines built for each shape; models whose values
//! depend on the input shapes are refused at build time, naming the node.

mod common;

use common::*;
use tract_onnx::pb;
use trtc::build::{build_graph, import, BuildOptions, ModelSource, ShapeProfile};
use trtc_runtime::{Engine, Tensor};

fn batch_dims(rest: &[i64]) -> Vec<pb::tensor_shape_proto::dimension::Value> {
    use pb::tensor_shape_proto::dimension::Value;
    std::iter::once(Value::DimParam("N".into())).chain(rest.iter().map(|&d| Value::DimValue(d))).collect()
}

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n).map(|i| ((i as u32).wrapping_mul(2654435761).wrapping_add(seed) % 1000) as f32 / 500.0 - 1.0).collect()
}

/// x[N,3,8,8] -> Conv 3x3 (4 channels) -> Relu -> GlobalAveragePool -> Flatten -> Gemm (5) -> y[N,5]
fn cnn() -> Vec<u8> {
    cnn_of(batch_dims(&[3, 8, 8]))
}

/// The same CNN over images of any size: x[N,3,H,W].
fn cnn_any_size() -> Vec<u8> {
    use pb::tensor_shape_proto::dimension::Value;
    cnn_of(vec![Value::DimParam("N".into()), Value::DimValue(3), Value::DimParam("H".into()), Value::DimParam("W".into())])
}

fn cnn_of(x: Vec<pb::tensor_shape_proto::dimension::Value>) -> Vec<u8> {
    let mut conv = node("Conv", "conv", &["x", "w", "b"], &["c"]);
    conv.attribute.push(pb::AttributeProto { name: "pads".into(), r#type: 7, ints: vec![1, 1, 1, 1], ..Default::default() });
    let mut gemm = node("Gemm", "fc", &["f", "g"], &["y"]);
    gemm.attribute.push(int_attr("transB", 1));
    encode(&model(
        vec![
            conv,
            node("Relu", "relu", &["c"], &["r"]),
            node("GlobalAveragePool", "pool", &["r"], &["p"]),
            node("Flatten", "flatten", &["p"], &["f"]),
            gemm,
        ],
        vec![value_info_dims("x", F32, x)],
        vec![value_info_dims("y", F32, batch_dims(&[5]))],
        vec![
            f32_tensor("w", &[4, 3, 3, 3], &values(108, 1)),
            f32_tensor("b", &[4], &values(4, 2)),
            f32_tensor("g", &[5, 4], &values(20, 3)),
        ],
    ))
}

/// s[N,4,6] -> Reshape(s, Concat(Shape(s)[0], -1)) -> o[N,24]: the
/// exporters' spelling of a flatten that keeps the batch.
fn shape_chain() -> Vec<u8> {
    let mut gather = node("Gather", "gather", &["sh", "zero"], &["n"]);
    gather.attribute.push(int_attr("axis", 0));
    let mut concat = node("Concat", "concat", &["n", "minus_one"], &["target"]);
    concat.attribute.push(int_attr("axis", 0));
    encode(&model(
        vec![node("Shape", "shape", &["s"], &["sh"]), gather, concat, node("Reshape", "reshape", &["s", "target"], &["o"])],
        vec![value_info_dims("s", F32, batch_dims(&[4, 6]))],
        vec![value_info_dims("o", F32, batch_dims(&[24]))],
        vec![i64_tensor("zero", &[1], &[0]), i64_tensor("minus_one", &[1], &[-1])],
    ))
}

/// y = x + (the batch size, as a float): a value computed from the shape.
/// `y = x + float(shape(x)[index])` (`index` names a one-element int64
/// initializer): a value the model computes from its input's size.
fn plus_size(index: &str) -> Vec<pb::NodeProto> {
    let mut gather = node("Gather", "gather", &["sh", index], &["n"]);
    gather.attribute.push(int_attr("axis", 0));
    let mut cast = node("Cast", "cast", &["n"], &["nf"]);
    cast.attribute.push(int_attr("to", F32 as i64));
    vec![node("Shape", "shape", &["x"], &["sh"]), gather, cast, node("Add", "add", &["x", "nf"], &["y"])]
}

fn shape_as_data() -> Vec<u8> {
    encode(&model(
        plus_size("zero"),
        vec![value_info_dims("x", F32, batch_dims(&[2]))],
        vec![value_info_dims("y", F32, batch_dims(&[2]))],
        vec![i64_tensor("zero", &[1], &[0])],
    ))
}

fn profile(name: &str, rest: &[usize], [lo, mid, hi]: [usize; 3]) -> ShapeProfile {
    let at = |n: usize| vec![(name.to_string(), std::iter::once(n).chain(rest.iter().copied()).collect::<Vec<_>>())];
    ShapeProfile::from_flags(&at(lo), &at(mid), &at(hi)).unwrap()
}

fn build(model: &[u8], opts: &BuildOptions) -> anyhow::Result<Engine> {
    let graph = import(&ModelSource::Bytes(model.to_vec()), opts)?;
    Ok(Engine::from_bytes(&build_graph(graph, opts)?.engine)?)
}

fn at_shape(model: &[u8], name: &str, shape: Vec<usize>) -> Engine {
    let mut opts = BuildOptions::default();
    opts.import.shapes.insert(name.into(), shape);
    build(model, &opts).unwrap()
}

#[test]
fn a_cnn_with_a_symbolic_batch_runs_at_every_batch_of_its_profile() {
    let model = cnn();
    let opts = BuildOptions { profiles: vec![profile("x", &[3, 8, 8], [1, 3, 6])], ..Default::default() };
    let engine = build(&model, &opts).unwrap();
    assert_eq!(engine.profiles().len(), 1);
    assert_eq!(engine.header().build_flags[..3], ["--min-shapes x:1x3x8x8", "--opt-shapes x:3x3x8x8", "--max-shapes x:6x3x8x8"]);
    let mut ctx = engine.create_context().unwrap();
    for n in [2usize, 6, 1, 4, 2] {
        let x = Tensor::from_vec(vec![n, 3, 8, 8], values(n * 192, n as u32)).unwrap();
        let got = ctx.run(&[("x", &x)]).unwrap();
        let fixed = at_shape(&model, "x", vec![n, 3, 8, 8]);
        let want = fixed.create_context().unwrap().run(&[("x", &x)]).unwrap();
        assert_eq!(got[0].1.shape(), &[n, 5]);
        assert_eq!(got[0].1, want[0].1, "batch {n}");
    }
    let x = Tensor::from_vec(vec![7, 3, 8, 8], vec![0f32; 7 * 192]).unwrap();
    let err = ctx.run(&[("x", &x)]).unwrap_err().to_string();
    assert_eq!(err, "outside its profile: input 'x' axis 0 is 7: allowed 1 to 6");
}

#[test]
fn a_reshape_computed_from_the_input_shape_follows_it() {
    let model = shape_chain();
    let opts = BuildOptions { profiles: vec![profile("s", &[4, 6], [1, 2, 5])], ..Default::default() };
    let engine = build(&model, &opts).unwrap();
    let mut ctx = engine.create_context().unwrap();
    for n in [1usize, 5, 3] {
        let v = values(n * 24, 9);
        let out = ctx.run(&[("s", &Tensor::from_vec(vec![n, 4, 6], v.clone()).unwrap())]).unwrap();
        assert_eq!(out[0].1.shape(), &[n, 24]);
        assert_eq!(out[0].1.as_slice::<f32>().unwrap(), v.as_slice());
    }
}

#[test]
fn a_value_computed_from_the_input_shape_is_computed_at_run_time() {
    // No profile rule gives `x + batch` at every shape; the engine reads
    // the batch when it runs.
    let opts = BuildOptions { profiles: vec![profile("x", &[2], [1, 2, 4])], ..Default::default() };
    let engine = build(&shape_as_data(), &opts).unwrap();
    let mut ctx = engine.create_context().unwrap();
    for n in [3usize, 1, 4, 2] {
        let x = Tensor::from_vec(vec![n, 2], values(n * 2, 5)).unwrap();
        let y = ctx.run(&[("x", &x)]).unwrap().remove(0).1;
        let want: Vec<f32> = x.as_slice::<f32>().unwrap().iter().map(|v| v + n as f32).collect();
        assert_eq!(y.shape(), &[n, 2]);
        assert_eq!(y.as_slice::<f32>().unwrap(), want.as_slice(), "batch {n}");
    }
    // At one shape, the shape is a constant.
    let opts = BuildOptions { profiles: vec![profile("x", &[2], [3, 3, 3])], ..Default::default() };
    let engine = build(&shape_as_data(), &opts).unwrap();
    assert!(engine.plan().layers.iter().all(|l| l.op.name() != "SizeOf"));
    let x = Tensor::from_vec(vec![3, 2], vec![0f32; 6]).unwrap();
    assert_eq!(engine.create_context().unwrap().run(&[("x", &x)]).unwrap()[0].1.as_slice::<f32>().unwrap(), &[3f32; 6]);
}

#[test]
fn sizes_computed_at_run_time_that_a_layer_fixed_at_the_imported_shape_are_refused() {
    // `x + batch` computes sizes at run time, but Split's equal halves of
    // the batch are fixed at the largest shape when imported: the engine
    // is refused instead of failing (or running wrong) at other shapes.
    let mut split = node("Split", "halves", &["y"], &["a", "b"]);
    split.attribute.push(int_attr("axis", 0));
    let model = encode(&model(
        [plus_size("zero"), vec![split]].concat(),
        vec![value_info_dims("x", F32, batch_dims(&[2]))],
        vec![value_info_dims("a", F32, batch_dims(&[2])), value_info_dims("b", F32, batch_dims(&[2]))],
        vec![i64_tensor("zero", &[1], &[0])],
    ));
    let opts = BuildOptions { profiles: vec![profile("x", &[2], [2, 4, 8])], ..Default::default() };
    let err = format!("{:#}", build(&model, &opts).unwrap_err());
    assert!(err.contains("computing its sizes at run time instead: "), "{err}");
    assert!(err.contains("layer halves (Split) does not take these input shapes"), "{err}");
}

/// `x + length`, which makes the sizes computed at run time, then `op` (a
/// 1-D window of 3, stride 2, SAME_UPPER padding) over it.
fn length_then_same_window(op: &str, extra: Vec<pb::AttributeProto>) -> Vec<u8> {
    use pb::tensor_shape_proto::dimension::Value;
    let inputs: &[&str] = if op == "Conv" { &["y", "w"] } else { &["y"] };
    let mut window = node(op, "window", inputs, &["z"]);
    window.attribute.push(ints_attr("kernel_shape", &[3]));
    window.attribute.push(ints_attr("strides", &[2]));
    window.attribute.push(pb::AttributeProto {
        name: "auto_pad".into(),
        r#type: 3,
        s: b"SAME_UPPER".to_vec(),
        ..Default::default()
    });
    window.attribute.extend(extra);
    let dims = || vec![Value::DimValue(1), Value::DimValue(1), Value::DimParam("L".into())];
    encode(&model(
        [plus_size("two"), vec![window]].concat(),
        vec![value_info_dims("x", F32, dims())],
        vec![value_info_dims("z", F32, dims())],
        vec![i64_tensor("two", &[1], &[2]), f32_tensor("w", &[1, 1, 3], &[0.5, -1.0, 2.0])],
    ))
}

fn length_profile() -> BuildOptions {
    let at = |n: usize| vec![("x".to_string(), vec![1, 1, n])];
    BuildOptions { profiles: vec![ShapeProfile::from_flags(&at(4), &at(5), &at(8)).unwrap()], ..Default::default() }
}

#[test]
fn same_padding_over_sizes_computed_at_run_time_pads_each_length_as_the_model_does() {
    // One pad at length 8, two at length 5: the pads are computed from each
    // run's length (TensorFlow exports with symbolic sizes keep SAME).
    for (op, extra) in [("Conv", vec![]), ("MaxPool", vec![]), ("AveragePool", vec![int_attr("count_include_pad", 1)])] {
        let model = length_then_same_window(op, extra);
        let engine = build(&model, &length_profile()).unwrap();
        let mut ctx = engine.create_context().unwrap();
        for n in [5usize, 8, 4, 7, 6] {
            let x = Tensor::from_vec(vec![1, 1, n], values(n, 11)).unwrap();
            let got = ctx.run(&[("x", &x)]).unwrap().remove(0).1;
            let fixed = at_shape(&model, "x", vec![1, 1, n]);
            let want = fixed.create_context().unwrap().run(&[("x", &x)]).unwrap().remove(0).1;
            assert_eq!(got.shape(), &[1, 1, n.div_ceil(2)], "{op} at length {n}");
            assert_eq!(got, want, "{op} at length {n}");
        }
    }
}

#[test]
fn an_upsample_of_sizes_computed_at_run_time_follows_each_length() {
    // Opset 9's Upsample (a Resize by constant scales) after `x + length`.
    use pb::tensor_shape_proto::dimension::Value;
    let dims = || vec![Value::DimValue(1), Value::DimValue(1), Value::DimParam("L".into())];
    let mut m = model(
        [plus_size("two"), vec![node("Upsample", "up", &["y", "scales"], &["z"])]].concat(),
        vec![value_info_dims("x", F32, dims())],
        vec![value_info_dims("z", F32, dims())],
        vec![i64_tensor("two", &[1], &[2]), f32_tensor("scales", &[3], &[1.0, 1.0, 2.0])],
    );
    m.opset_import[0].version = 9;
    let model = encode(&m);
    let engine = build(&model, &length_profile()).unwrap();
    let mut ctx = engine.create_context().unwrap();
    for n in [5usize, 8, 4] {
        let x = Tensor::from_vec(vec![1, 1, n], values(n, 3)).unwrap();
        let got = ctx.run(&[("x", &x)]).unwrap().remove(0).1;
        let want: Vec<f32> = x.as_slice::<f32>().unwrap().iter().flat_map(|v| [v + n as f32; 2]).collect();
        assert_eq!(got.shape(), &[1, 1, 2 * n]);
        assert_eq!(got.as_slice::<f32>().unwrap(), want.as_slice(), "length {n}");
    }
}

#[test]
fn sizes_a_layer_fixed_at_the_imported_shape_that_run_wrong_elsewhere_are_refused() {
    // An average that leaves SAME padding out of its count cannot pad its
    // input instead, so its pads stay fixed at the largest length when
    // imported (one pad at length 8, two at length 5): the engine would
    // give a shorter output at odd lengths. The check against the model
    // imported at the profile's other points refuses it, naming the output
    // and both shapes.
    let model = length_then_same_window("AveragePool", vec![]);
    let err = format!("{:#}", build(&model, &length_profile()).unwrap_err());
    assert!(err.contains("computing its sizes at run time instead: at x:1x1x5, inside the profile"), "{err}");
    assert!(err.contains("gives output 'z' the shape [1, 1, 2] where the model gives it [1, 1, 3]"), "{err}");
}

#[test]
fn profiles_are_checked_before_building() {
    let at = |n: usize| vec![("x".to_string(), vec![n, 3, 8, 8])];
    let err = ShapeProfile::from_flags(&at(4), &at(2), &at(8)).unwrap_err().to_string();
    assert_eq!(err, "input 'x' axis 0: min 4 <= opt 2 <= max 8 does not hold");
    let err = ShapeProfile::from_flags(&at(0), &at(2), &at(8)).unwrap_err().to_string();
    assert!(err.contains("may not be 0"), "{err}");
    let other = vec![("y".to_string(), vec![1])];
    assert!(ShapeProfile::from_flags(&at(1), &other, &at(8)).is_err());
}

#[test]
fn several_profiles_each_run_their_shapes_and_a_run_takes_the_first_that_fits() {
    let model = cnn();
    let (small, large) = (profile("x", &[3, 8, 8], [1, 2, 2]), profile("x", &[3, 8, 8], [4, 6, 8]));
    let engine = build(&model, &BuildOptions { profiles: vec![small, large], ..Default::default() }).unwrap();
    assert_eq!(engine.profiles().len(), 2);
    assert_eq!(
        engine.header().build_flags[..6],
        [
            "--min-shapes x:1x3x8x8",
            "--opt-shapes x:2x3x8x8",
            "--max-shapes x:2x3x8x8",
            "--min-shapes x:4x3x8x8",
            "--opt-shapes x:6x3x8x8",
            "--max-shapes x:8x3x8x8"
        ]
    );
    let mut ctx = engine.create_context().unwrap();
    for n in [8usize, 1, 5, 2, 4] {
        let x = Tensor::from_vec(vec![n, 3, 8, 8], values(n * 192, n as u32)).unwrap();
        let got = ctx.run(&[("x", &x)]).unwrap();
        let want = at_shape(&model, "x", vec![n, 3, 8, 8]).create_context().unwrap().run(&[("x", &x)]).unwrap();
        assert_eq!(got[0].1, want[0].1, "batch {n}");
    }
    let x = Tensor::from_vec(vec![3, 3, 8, 8], vec![0f32; 3 * 192]).unwrap();
    let err = ctx.run(&[("x", &x)]).unwrap_err().to_string();
    assert_eq!(
        err,
        "outside each of its 2 profiles (profile 0: input 'x' axis 0 is 3: allowed 1 to 2; \
         profile 1: input 'x' axis 0 is 3: allowed 4 to 8)"
    );

    // Every profile ranges the same inputs.
    let other = ShapeProfile::from_flags(&[("y".into(), vec![1])], &[("y".into(), vec![1])], &[("y".into(), vec![2])]).unwrap();
    let opts = BuildOptions { profiles: vec![profile("x", &[3, 8, 8], [1, 2, 2]), other], ..Default::default() };
    let err = build(&model, &opts).unwrap_err().to_string();
    assert!(err.contains("profile 1 ranges other inputs"), "{err}");
}

#[test]
fn the_cli_takes_one_profile_per_repetition_of_the_three_flags() {
    let dir = std::env::temp_dir().join(format!("trtc-profiles-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let onnx = dir.join("cnn.onnx");
    std::fs::write(&onnx, cnn()).unwrap();
    let engine = dir.join("cnn.engine");
    let trtc = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_trtc")).args(args).output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout))
    };
    let (onnx_s, engine_s) = (onnx.to_str().unwrap(), engine.to_str().unwrap());
    let mut two = vec!["build", onnx_s, "-o", engine_s];
    two.extend(["--min-shapes", "x:1x3x8x8", "--opt-shapes", "x:2x3x8x8", "--max-shapes", "x:2x3x8x8"]);
    two.extend(["--min-shapes", "x:4x3x8x8", "--opt-shapes", "x:8x3x8x8", "--max-shapes", "x:8x3x8x8"]);
    let (ok, out) = trtc(&two);
    assert!(ok, "{out}");
    assert_eq!(Engine::load(&engine).unwrap().profiles().len(), 2);
    let (ok, out) = trtc(&["inspect", engine_s]);
    assert!(ok && out.contains("profiles (2,") && out.contains("1: x min 4x3x8x8 opt 8x3x8x8 max 8x3x8x8"), "{out}");

    // The k-th of each flag belongs to profile k: the counts must agree.
    let (ok, out) = trtc(&two[..two.len() - 2]);
    assert!(!ok && out.contains("given 2, 2 and 1 times"), "{out}");
    let mut bad = vec!["build", onnx_s, "-o", engine_s];
    bad.extend(["--min-shapes", "x:1x3x8x8", "--opt-shapes", "x:2x3x8x8", "--max-shapes", "x:2x3x8x8"]);
    bad.extend(["--min-shapes", "x:4x3x8x8", "--opt-shapes", "x:2x3x8x8", "--max-shapes", "x:8x3x8x8"]);
    let (ok, out) = trtc(&bad);
    assert!(!ok && out.contains("profile 1") && out.contains("does not hold"), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");

    // Random inputs of a shape inside a profile (--shapes), for run and bench.
    let (ok, out) = trtc(&["run", engine_s, "--shapes", "x:5x3x8x8"]);
    assert!(ok && out.contains("y: f32[5,5]"), "{out}");
    let (ok, out) = trtc(&["bench", engine_s, "--shapes", "x:1x3x8x8", "--iterations", "2", "--warmup", "0"]);
    assert!(ok, "{out}");
    let (ok, out) = trtc(&["run", engine_s, "--shapes", "x:3x3x8x8"]);
    assert!(!ok && out.contains("outside each of its 2 profiles"), "{out}");
    let (ok, out) = trtc(&["run", engine_s, "--shapes", "z:3x3x8x8"]);
    assert!(!ok && out.contains("unknown input 'z'"), "{out}");

    // FP16's random range batches at --calib-shapes, inside a profile.
    let mut fp16 = two.clone();
    fp16.extend(["--fp16", "--calib-shapes", "x:5x3x8x8"]);
    let (ok, out) = trtc(&fp16);
    assert!(ok, "{out}");
    let last = fp16.len() - 1;
    for (shapes, want) in [
        ("x:3x3x8x8", "x:3x3x8x8 lies inside no profile"),
        ("y:5x3x8x8", "--calib-shapes names 'y', which is not an input"),
        ("x:5x3x8", "x:5x3x8 lies inside no profile"),
    ] {
        fp16[last] = shapes;
        let (ok, out) = trtc(&fp16);
        assert!(!ok && out.contains(want) && out.lines().count() == 1, "{shapes}: {out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn int8_and_fp16_builds_calibrate_on_batches_of_any_shape_inside_the_profile() {
    let model = cnn();
    let profiles = vec![profile("x", &[3, 8, 8], [1, 3, 6])];
    let fp32 = build(&model, &BuildOptions { profiles: profiles.clone(), ..Default::default() }).unwrap();
    // Calibration batches of batch 2 and 5: neither the opt nor the max.
    let batch = |n: usize, seed: u32| vec![("x".to_string(), Tensor::from_vec(vec![n, 3, 8, 8], values(n * 192, seed)).unwrap())];
    let mut opts = BuildOptions { profiles: profiles.clone(), ..Default::default() };
    opts.precision.int8 = true;
    opts.int8.batches = vec![batch(2, 11), batch(5, 12)];
    let int8 = build(&model, &opts).unwrap();
    let mut fp16_opts = BuildOptions { profiles, ..Default::default() };
    fp16_opts.precision.fp16 = true;
    let fp16 = build(&model, &fp16_opts).unwrap();
    for n in [1usize, 4, 6] {
        let x = Tensor::from_vec(vec![n, 3, 8, 8], values(n * 192, 40 + n as u32)).unwrap();
        let want = fp32.create_context().unwrap().run(&[("x", &x)]).unwrap().remove(0).1.to_f64_vec();
        for (mode, engine) in [("int8", &int8), ("fp16", &fp16)] {
            let got = engine.create_context().unwrap().run(&[("x", &x)]).unwrap().remove(0).1.to_f64_vec();
            let dot: f64 = got.iter().zip(&want).map(|(a, b)| a * b).sum();
            let norm = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>().sqrt();
            let cosine = dot / (norm(&got) * norm(&want));
            assert!(cosine > 0.99, "{mode} at batch {n}: cosine {cosine}");
        }
    }
}

/// x[N,T,2], y[N,S,2] -> z = x[:, :S] + y and w = x[:, -S:] + y: slices
/// whose bounds are another input's length, as decoders crop to a skip
/// connection's size.
fn crop() -> Vec<u8> {
    use pb::tensor_shape_proto::dimension::Value;
    let dims = |t: &str| vec![Value::DimParam("N".into()), Value::DimParam(t.into()), Value::DimValue(2)];
    let take = |name: &str, ins: &[&str], out: &str, op: &str| node(op, name, ins, &[out]);
    encode(&model(
        vec![
            take("shape", &["y"], "sh", "Shape"),
            take("length", &["sh", "one", "two", "zero"], "s", "Slice"),
            take("head", &["x", "zero", "s", "one"], "xh", "Slice"),
            take("neg", &["s"], "minus_s", "Neg"),
            take("tail", &["x", "minus_s", "big", "one"], "xt", "Slice"),
            take("z", &["xh", "y"], "z", "Add"),
            take("w", &["xt", "y"], "w", "Add"),
        ],
        vec![value_info_dims("x", F32, dims("T")), value_info_dims("y", F32, dims("S"))],
        vec![value_info_dims("z", F32, dims("S")), value_info_dims("w", F32, dims("S"))],
        vec![
            i64_tensor("zero", &[1], &[0]),
            i64_tensor("one", &[1], &[1]),
            i64_tensor("two", &[1], &[2]),
            i64_tensor("big", &[1], &[i64::MAX]),
        ],
    ))
}

#[test]
fn slices_bounded_by_another_inputs_length_follow_it() {
    let at = |t: usize, s: usize| vec![("x".to_string(), vec![2, t, 2]), ("y".to_string(), vec![2, s, 2])];
    let profile = ShapeProfile::from_flags(&at(4, 2), &at(8, 4), &at(16, 8)).unwrap();
    let engine = build(&crop(), &BuildOptions { profiles: vec![profile], ..Default::default() }).unwrap();
    let mut ctx = engine.create_context().unwrap();
    for (t, s) in [(9usize, 3usize), (16, 8), (5, 5), (12, 7)] {
        let xv = values(2 * t * 2, t as u32);
        let yv = values(2 * s * 2, s as u32 + 100);
        let x = Tensor::from_vec(vec![2, t, 2], xv.clone()).unwrap();
        let y = Tensor::from_vec(vec![2, s, 2], yv.clone()).unwrap();
        let out = ctx.run(&[("x", &x), ("y", &y)]).unwrap();
        let expect = |first: usize| -> Vec<f32> {
            let mut v = Vec::new();
            for n in 0..2 {
                for i in 0..s {
                    for c in 0..2 {
                        v.push(xv[(n * t + first + i) * 2 + c] + yv[(n * s + i) * 2 + c]);
                    }
                }
            }
            v
        };
        assert_eq!(out[0].1.shape(), &[2, s, 2]);
        assert_eq!(out[0].1.as_slice::<f32>().unwrap(), expect(0).as_slice(), "head at {t}x{s}");
        assert_eq!(out[1].1.as_slice::<f32>().unwrap(), expect(t - s).as_slice(), "tail at {t}x{s}");
    }
}

#[test]
fn a_global_pool_over_images_of_any_size_becomes_a_reduction() {
    let model = cnn_any_size();
    let at = |n: usize, h: usize, w: usize| vec![("x".to_string(), vec![n, 3, h, w])];
    let profile = ShapeProfile::from_flags(&at(1, 8, 8), &at(2, 16, 16), &at(4, 32, 24)).unwrap();
    let engine = build(&model, &BuildOptions { profiles: vec![profile], ..Default::default() }).unwrap();
    assert!(engine.plan().layers.iter().any(|l| l.op.name() == "ReduceMean"), "the global pool is a reduction");
    let mut ctx = engine.create_context().unwrap();
    for (n, h, w) in [(1usize, 8usize, 8usize), (3, 13, 21), (4, 32, 24)] {
        let x = Tensor::from_vec(vec![n, 3, h, w], values(n * 3 * h * w, h as u32)).unwrap();
        let got = ctx.run(&[("x", &x)]).unwrap().remove(0).1;
        let want = at_shape(&model, "x", vec![n, 3, h, w]).create_context().unwrap().run(&[("x", &x)]).unwrap().remove(0).1;
        let (g, w_) = (got.as_slice::<f32>().unwrap(), want.as_slice::<f32>().unwrap());
        let worst = g.iter().zip(w_).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(worst < 1e-5, "{n}x{h}x{w}: {worst}");
    }
}

/// Runs `engine` (built with a profile) at each input shape and checks that
/// it gives an engine built for that one shape's output, bit for bit, of
/// shape `out(shape)`.
fn runs_like_static_engines(model: &[u8], engine: &Engine, shapes: &[Vec<usize>], out: impl Fn(&[usize]) -> Vec<usize>) {
    let mut ctx = engine.create_context().unwrap();
    for shape in shapes {
        let n: usize = shape.iter().product();
        let x = Tensor::from_vec(shape.clone(), values(n, shape[shape.len() - 1] as u32)).unwrap();
        let got = ctx.run(&[("x", &x)]).unwrap().remove(0).1;
        let want = at_shape(model, "x", shape.clone()).create_context().unwrap().run(&[("x", &x)]).unwrap().remove(0).1;
        assert_eq!(got.shape(), out(shape).as_slice(), "{shape:?}");
        assert_eq!(got.as_slice::<f32>().unwrap(), want.as_slice::<f32>().unwrap(), "{shape:?}");
    }
}

/// x[N,3,H,W] -> MaxPool 2x2 stride 2 -> Resize back to Shape(x): a
/// decoder upsampling to its input's size (`F.interpolate(y,
/// size=x.shape[-2:])`).
fn upsample_to_input() -> Vec<u8> {
    use pb::tensor_shape_proto::dimension::Value;
    let mut pool = node("MaxPool", "pool", &["x"], &["p"]);
    pool.attribute.push(pb::AttributeProto { name: "kernel_shape".into(), r#type: 7, ints: vec![2, 2], ..Default::default() });
    pool.attribute.push(pb::AttributeProto { name: "strides".into(), r#type: 7, ints: vec![2, 2], ..Default::default() });
    let dims = |h: &str, w: &str| {
        vec![Value::DimParam("N".into()), Value::DimValue(3), Value::DimParam(h.into()), Value::DimParam(w.into())]
    };
    encode(&model(
        vec![pool, node("Shape", "shape", &["x"], &["sh"]), node("Resize", "resize", &["p", "", "", "sh"], &["y"])],
        vec![value_info_dims("x", F32, dims("H", "W"))],
        vec![value_info_dims("y", F32, dims("H", "W"))],
        vec![],
    ))
}

/// x[N,3,H,W] -> f = MaxPool 8x8 stride 8 -> GlobalAveragePool -> Resize to
/// Shape(f) -> + f: an ASPP pooling branch (DeepLabV3) upsampled to the
/// size of a stride-8 feature map.
fn pooled_branch() -> Vec<u8> {
    use pb::tensor_shape_proto::dimension::Value;
    let mut pool = node("MaxPool", "pool", &["x"], &["f"]);
    pool.attribute.push(pb::AttributeProto { name: "kernel_shape".into(), r#type: 7, ints: vec![8, 8], ..Default::default() });
    pool.attribute.push(pb::AttributeProto { name: "strides".into(), r#type: 7, ints: vec![8, 8], ..Default::default() });
    let dims = |h: &str, w: &str| {
        vec![Value::DimParam("N".into()), Value::DimValue(3), Value::DimParam(h.into()), Value::DimParam(w.into())]
    };
    encode(&model(
        vec![
            pool,
            node("GlobalAveragePool", "gap", &["f"], &["g"]),
            node("Shape", "shape", &["f"], &["sh"]),
            node("Resize", "resize", &["g", "", "", "sh"], &["u"]),
            node("Add", "add", &["u", "f"], &["y"]),
        ],
        vec![value_info_dims("x", F32, dims("H", "W"))],
        vec![value_info_dims("y", F32, dims("h", "w"))],
        vec![],
    ))
}

#[test]
fn sizes_read_from_axes_a_square_profile_cannot_tell_apart_follow_the_right_axis() {
    // Every profile point is square: only a point where height and width
    // differ tells which axis the output's width comes from.
    let model = upsample_to_input();
    let at = |n: usize, h: usize| vec![("x".to_string(), vec![n, 3, h, h])];
    let profile = ShapeProfile::from_flags(&at(1, 8), &at(2, 16), &at(3, 32)).unwrap();
    let engine = build(&model, &BuildOptions { profiles: vec![profile], ..Default::default() }).unwrap();
    let shapes = [vec![2, 3, 12, 20], vec![1, 3, 30, 8], vec![3, 3, 16, 16]];
    runs_like_static_engines(&model, &engine, &shapes, |s| s.to_vec());
    // Also where the model divides the sizes first: the stride-8 feature
    // maps of the distinct point must differ too.
    let model = pooled_branch();
    let profile = ShapeProfile::from_flags(&at(1, 32), &at(1, 64), &at(2, 128)).unwrap();
    let engine = build(&model, &BuildOptions { profiles: vec![profile], ..Default::default() }).unwrap();
    let shapes = [vec![2, 3, 96, 64], vec![1, 3, 40, 120], vec![2, 3, 128, 128]];
    runs_like_static_engines(&model, &engine, &shapes, |s| vec![s[0], 3, s[2] / 8, s[3] / 8]);
}

/// x[N,S] -> Flatten(axis 2) -> Relu -> Reshape to Shape(x): a Flatten that
/// is the identity where S is 1 (transformers' attention-mask code does
/// this to `[batch, sequence]`).
fn flatten_of_a_sequence() -> Vec<u8> {
    use pb::tensor_shape_proto::dimension::Value;
    let mut flatten = node("Flatten", "flatten", &["x"], &["f"]);
    flatten.attribute.push(int_attr("axis", 2));
    let dims = || vec![Value::DimParam("N".into()), Value::DimParam("S".into())];
    encode(&model(
        vec![
            flatten,
            node("Relu", "relu", &["f"], &["r"]),
            node("Shape", "shape", &["x"], &["sh"]),
            node("Reshape", "reshape", &["r", "sh"], &["y"]),
        ],
        vec![value_info_dims("x", F32, dims())],
        vec![value_info_dims("y", F32, dims())],
        vec![],
    ))
}

#[test]
fn a_reshape_that_is_the_identity_at_some_shapes_of_the_profile_is_kept_there() {
    // At S = 1 the Flatten is the identity; the profile still gives one
    // engine, which runs every shape as engines built for each do.
    let model = flatten_of_a_sequence();
    let at = |n: usize, s: usize| vec![("x".to_string(), vec![n, s])];
    let profile = ShapeProfile::from_flags(&at(1, 1), &at(2, 4), &at(4, 8)).unwrap();
    let engine = build(&model, &BuildOptions { profiles: vec![profile], ..Default::default() }).unwrap();
    let shapes = [vec![3, 1], vec![1, 1], vec![2, 5], vec![4, 8]];
    runs_like_static_engines(&model, &engine, &shapes, |s| s.to_vec());
}

/// x[N,S,4] -> y = Concat(Tile(cls[1,1,4], [N,1,1]), x) on axis 1: a class
/// token repeated per batch row (`cls.repeat(batch, 1, 1)`).
fn class_token() -> Vec<u8> {
    use pb::tensor_shape_proto::dimension::Value;
    let dims = |s: Value| vec![Value::DimParam("N".into()), s, Value::DimValue(4)];
    let mut gather = node("Gather", "batch", &["sh", "zero"], &["n"]);
    gather.attribute.push(int_attr("axis", 0));
    let mut counts = node("Concat", "counts", &["n", "one", "one"], &["repeats"]);
    counts.attribute.push(int_attr("axis", 0));
    let mut join = node("Concat", "join", &["tiled", "x"], &["y"]);
    join.attribute.push(int_attr("axis", 1));
    encode(&model(
        vec![
            node("Shape", "shape", &["x"], &["sh"]),
            gather,
            counts,
            node("Tile", "tile", &["cls", "repeats"], &["tiled"]),
            join,
        ],
        vec![value_info_dims("x", F32, dims(Value::DimParam("S".into())))],
        vec![value_info_dims("y", F32, dims(Value::DimParam("S1".into())))],
        vec![f32_tensor("cls", &[1, 1, 4], &[1.0, 2.0, 3.0, 4.0]), i64_tensor("zero", &[1], &[0]), i64_tensor("one", &[1], &[1])],
    ))
}

#[test]
fn a_tile_repeated_per_batch_row_follows_the_batch() {
    let at = |n: usize, s: usize| vec![("x".to_string(), vec![n, s, 4])];
    let profile = ShapeProfile::from_flags(&at(1, 2), &at(2, 4), &at(4, 8)).unwrap();
    let engine = build(&class_token(), &BuildOptions { profiles: vec![profile], ..Default::default() }).unwrap();
    let mut ctx = engine.create_context().unwrap();
    for (n, s) in [(1usize, 2usize), (3, 5), (4, 8)] {
        let x = Tensor::from_vec(vec![n, s, 4], values(n * s * 4, 3)).unwrap();
        let y = ctx.run(&[("x", &x)]).unwrap().remove(0).1;
        assert_eq!(y.shape(), &[n, s + 1, 4]);
        let v = y.as_slice::<f32>().unwrap();
        for row in 0..n {
            assert_eq!(&v[row * (s + 1) * 4..][..4], &[1.0, 2.0, 3.0, 4.0], "row {row} at {n}x{s}");
        }
    }
}
