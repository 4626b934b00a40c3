//! Layers whose output sizes depend on the data (NonMaxSuppression,
//! NonZero on a runtime tensor): the engine holds room for the most there
//! can be, and the layers after them take the actual sizes at run time, as
//! a detector's post-processing does (NMS, then the kept boxes gathered).

mod common;

use common::*;
use tract_onnx::pb;
use trtc::build::{build_graph, import, BuildOptions, ModelSource};
use trtc_runtime::{Engine, Tensor};

const BOXES: usize = 6;

/// boxes[1,6,4], scores[1,1,6] -> NMS (at most 4, IoU 0.5, score > 0.3) ->
/// selected[n,3] -> its box column -> kept[n,4] (the boxes it keeps); and
/// positive[1,m] = NonZero(scores > 0.5) of the flattened scores.
fn detector(extra: Vec<pb::NodeProto>, extra_outputs: Vec<pb::ValueInfoProto>) -> Vec<u8> {
    detector_with(extra, extra_outputs, vec![])
}

/// [`detector`] with more nodes, outputs and initializers.
fn detector_with(extra: Vec<pb::NodeProto>, extra_outputs: Vec<pb::ValueInfoProto>, inits: Vec<pb::TensorProto>) -> Vec<u8> {
    let mut column = node("Gather", "column", &["selected", "two"], &["box_ids"]);
    column.attribute.push(int_attr("axis", 1));
    let mut squeeze_boxes = node("Squeeze", "squeeze", &["boxes", "zero_axis"], &["flat_boxes"]);
    squeeze_boxes.name = "squeeze".into();
    let mut kept = node("Gather", "kept", &["flat_boxes", "box_ids"], &["kept"]);
    kept.attribute.push(int_attr("axis", 0));
    let mut nodes = vec![
        node("NonMaxSuppression", "nms", &["boxes", "scores", "max_out", "iou", "score_min"], &["selected"]),
        column,
        squeeze_boxes,
        kept,
        node("Reshape", "flat_scores", &["scores", "minus_one"], &["flat"]),
        node("Greater", "greater", &["flat", "half"], &["is_high"]),
        node("NonZero", "positive", &["is_high"], &["positive"]),
    ];
    nodes.extend(extra);
    let mut outputs = vec![
        value_info_dims("selected", I64, vec![pb::tensor_shape_proto::dimension::Value::DimParam("n".into()), dim(3)]),
        value_info_dims("kept", F32, vec![pb::tensor_shape_proto::dimension::Value::DimParam("n".into()), dim(4)]),
        value_info_dims("positive", I64, vec![dim(1), pb::tensor_shape_proto::dimension::Value::DimParam("m".into())]),
    ];
    outputs.extend(extra_outputs);
    let mut initializers = vec![
        i64_tensor("max_out", &[1], &[4]),
        f32_tensor("iou", &[1], &[0.5]),
        f32_tensor("score_min", &[1], &[0.3]),
        i64_tensor("two", &[], &[2]),
        i64_tensor("zero_axis", &[1], &[0]),
        i64_tensor("minus_one", &[1], &[-1]),
        f32_tensor("half", &[], &[0.5]),
    ];
    initializers.extend(inits);
    let inputs = vec![value_info("boxes", F32, &[1, BOXES as i64, 4]), value_info("scores", F32, &[1, 1, BOXES as i64])];
    encode(&model(nodes, inputs, outputs, initializers))
}

fn dim(d: i64) -> pb::tensor_shape_proto::dimension::Value {
    pb::tensor_shape_proto::dimension::Value::DimValue(d)
}

fn build(model: &[u8], opts: &BuildOptions) -> anyhow::Result<Engine> {
    let graph = import(&ModelSource::Bytes(model.to_vec()), opts)?;
    Ok(Engine::from_bytes(&build_graph(graph, opts)?.engine)?)
}

/// Six unit boxes: 0, 1 and 2 overlap (shifted by 0.1), 3 and 4 overlap,
/// 5 stands alone.
fn boxes() -> Tensor {
    let corners = |y: f32, x: f32| [y, x, y + 1.0, x + 1.0];
    let v: Vec<f32> =
        [corners(0.0, 0.0), corners(0.0, 0.1), corners(0.1, 0.0), corners(5.0, 5.0), corners(5.1, 5.0), corners(9.0, 9.0)]
            .concat();
    Tensor::from_vec(vec![1, BOXES, 4], v).unwrap()
}

#[test]
fn layers_after_nms_and_nonzero_take_the_counts_of_each_run() {
    let engine = build(&detector(vec![], vec![]), &BuildOptions::default()).unwrap();
    let report = trtc::inspect::text(&engine);
    assert!(report.contains("sizes depend on the data after layers nms, positive"), "{report}");
    let mut ctx = engine.create_context().unwrap();
    let run = |ctx: &mut trtc_runtime::ExecutionContext, scores: [f32; BOXES]| {
        let s = Tensor::from_vec(vec![1, 1, BOXES], scores.to_vec()).unwrap();
        let out = ctx.run(&[("boxes", &boxes()), ("scores", &s)]).unwrap();
        out.into_iter().map(|(_, t)| t).collect::<Vec<_>>()
    };
    // Box 1 beats 0 and 2, box 4 beats 3, box 5 is kept: three boxes.
    let out = run(&mut ctx, [0.9, 0.95, 0.8, 0.6, 0.7, 0.4]);
    assert_eq!(out[0].shape(), &[3, 3]);
    assert_eq!(out[0].as_slice::<i64>().unwrap(), &[0, 0, 1, 0, 0, 4, 0, 0, 5]);
    assert_eq!(out[1].shape(), &[3, 4]);
    assert_eq!(&out[1].as_slice::<f32>().unwrap()[..4], &[0.0, 0.1, 1.0, 1.1]);
    assert_eq!(out[2].as_slice::<i64>().unwrap(), &[0, 1, 2, 3, 4]);
    // Everything under the score threshold: empty outputs, and the next
    // run with more boxes is right again.
    let out = run(&mut ctx, [0.1; BOXES]);
    assert_eq!((out[0].shape(), out[1].shape(), out[2].shape()), (&[0, 3][..], &[0, 4][..], &[1, 0][..]));
    let out = run(&mut ctx, [0.35, 0.0, 0.0, 0.9, 0.0, 0.6]);
    assert_eq!(out[0].as_slice::<i64>().unwrap(), &[0, 0, 3, 0, 0, 5, 0, 0, 0]);
    assert_eq!(out[1].shape(), &[3, 4]);
    assert_eq!(out[2].as_slice::<i64>().unwrap(), &[3, 5]);
}

fn named(d: &str) -> pb::tensor_shape_proto::dimension::Value {
    pb::tensor_shape_proto::dimension::Value::DimParam(d.into())
}

/// Sizes read from a tensor sized by the data decide later shapes at run
/// time, as in torchvision's detectors (`k = min(k, number of boxes)`):
/// Shape(kept) -> n, then TopK with k = min(n, 2), ConstantOfShape [n, 2],
/// Reshape to [n, 2, 2], Range(0, n) and Flatten, each sized in every run.
#[test]
fn sizes_read_from_a_data_sized_tensor_decide_shapes_at_run_time() {
    let mut count = node("Gather", "count", &["kept_shape", "zero"], &["n"]);
    count.attribute.push(int_attr("axis", 0));
    let mut kept_scores = node("Gather", "kept_scores", &["flat", "box_ids"], &["kept_scores"]);
    kept_scores.attribute.push(int_attr("axis", 0));
    let mut n_and_two = node("Concat", "n_and_two", &["n1", "two1"], &["n_and_two"]);
    n_and_two.attribute.push(int_attr("axis", 0));
    let mut n_two_two = node("Concat", "n_two_two", &["n1", "two1", "two1"], &["n_two_two"]);
    n_two_two.attribute.push(int_attr("axis", 0));
    let mut flatten = node("Flatten", "flatten", &["kept"], &["flat_kept"]);
    flatten.attribute.push(int_attr("axis", 0));
    let mut fill = node("ConstantOfShape", "fill", &["n_and_two"], &["fill"]);
    fill.attribute.push(pb::AttributeProto {
        name: "value".into(),
        r#type: pb::attribute_proto::AttributeType::Tensor as i32,
        t: Some(f32_tensor("seven", &[1], &[7.0])),
        ..Default::default()
    });
    let extra = vec![
        node("Shape", "kept_shape", &["kept"], &["kept_shape"]),
        count,
        node("Unsqueeze", "n1", &["n", "zero_axis"], &["n1"]),
        node("Min", "k", &["n1", "two1"], &["k"]),
        kept_scores,
        node("TopK", "top", &["kept_scores", "k"], &["top", "top_ids"]),
        n_and_two,
        fill,
        n_two_two,
        node("Reshape", "pairs", &["kept", "n_two_two"], &["pairs"]),
        node("Range", "range", &["zero", "n", "one"], &["range"]),
        flatten,
    ];
    let outputs = vec![
        value_info_dims("top", F32, vec![named("k")]),
        value_info_dims("fill", F32, vec![named("n"), dim(2)]),
        value_info_dims("pairs", F32, vec![named("n"), dim(2), dim(2)]),
        value_info_dims("range", I64, vec![named("n")]),
        value_info_dims("flat_kept", F32, vec![dim(1), named("n4")]),
    ];
    let inits = vec![i64_tensor("zero", &[], &[0]), i64_tensor("one", &[], &[1]), i64_tensor("two1", &[1], &[2])];
    let model = detector_with(extra, outputs, inits);
    let engine = build(&model, &BuildOptions::default()).unwrap();
    let mut ctx = engine.create_context().unwrap();
    let mut run = |scores: [f32; BOXES]| {
        let s = Tensor::from_vec(vec![1, 1, BOXES], scores.to_vec()).unwrap();
        let out = ctx.run(&[("boxes", &boxes()), ("scores", &s)]).unwrap();
        out.into_iter().collect::<std::collections::HashMap<_, _>>()
    };
    // Boxes 1, 4 and 5 kept (scores 0.95, 0.7, 0.4).
    let out = run([0.9, 0.95, 0.8, 0.6, 0.7, 0.4]);
    assert_eq!(out["top"].as_slice::<f32>().unwrap(), &[0.95, 0.7]);
    assert_eq!(out["fill"].shape(), &[3, 2]);
    assert!(out["fill"].as_slice::<f32>().unwrap().iter().all(|&v| v == 7.0));
    assert_eq!(out["pairs"].shape(), &[3, 2, 2]);
    assert_eq!(out["pairs"].as_slice::<f32>().unwrap(), out["kept"].as_slice::<f32>().unwrap());
    assert_eq!(out["range"].as_slice::<i64>().unwrap(), &[0, 1, 2]);
    assert_eq!(out["flat_kept"].shape(), &[1, 12]);
    // None kept: every size is 0; then two kept.
    let out = run([0.1; BOXES]);
    let shapes: Vec<&[usize]> = ["top", "fill", "pairs", "range", "flat_kept"].iter().map(|n| out[*n].shape()).collect();
    assert_eq!(shapes, [&[0][..], &[0, 2], &[0, 2, 2], &[0], &[1, 0]]);
    let out = run([0.0, 0.0, 0.0, 0.9, 0.0, 0.6]);
    assert_eq!(out["top"].as_slice::<f32>().unwrap(), &[0.9, 0.6]);
    assert_eq!(out["range"].as_slice::<i64>().unwrap(), &[0, 1]);
    assert_eq!(out["pairs"].shape(), &[2, 2, 2]);
    let report = trtc::inspect::text(&engine);
    assert!(report.contains("data after layers nms, positive, top, fill, pairs, range:"), "{report}");
    assert!(report.contains("TopK@values") && report.contains("Range@values"), "{report}");
}

/// A size that no room bounds is refused, naming the node: a Range whose
/// limit is computed from the data's values, not from sizes.
#[test]
fn a_shape_computed_from_values_without_room_is_refused() {
    let extra =
        vec![node("ReduceMax", "most", &["scores"], &["most"]), node("Range", "range", &["zero_f", "most", "one_f"], &["range"])];
    let inits = vec![f32_tensor("zero_f", &[], &[0.0]), f32_tensor("one_f", &[], &[1.0])];
    let model = detector_with(extra, vec![value_info_dims("range", F32, vec![named("r")])], inits);
    let err = format!("{:#}", build(&model, &BuildOptions::default()).unwrap_err());
    assert!(err.contains("'range' (Range)") && err.contains("computed at run time"), "{err}");
}

/// On GPU targets, NonMaxSuppression runs as kernels that count its rows
/// (read back in each run) and every layer computed from its outputs runs
/// on the host (which sizes them in each run); the layers before it keep
/// their kernels. Needs libnvrtc (no GPU).
#[test]
fn gpu_targets_run_the_layers_sized_by_the_data_on_the_host() {
    assert!(trtc::cuda::nvrtc::available(), "NVRTC is needed: run scripts/test.sh ({:?})", trtc::cuda::nvrtc::library().err());
    let gpu = BuildOptions { target: trtc_runtime::Target::Cuda { sm: 90, gpu_name: None }, ..Default::default() };
    let engine = build(&detector(vec![], vec![]), &gpu).unwrap();
    let table = engine.kernels().expect("a GPU engine has kernels");
    let host: Vec<(&str, &str)> = table.host_layers(engine.plan()).collect();
    let names: Vec<&str> = host.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, ["column", "kept", "positive"], "{host:?}");
    assert!(host[0].1.contains("its input 'selected' is sized by the data"), "{host:?}");
    let nms = engine.plan().layers.iter().position(|l| l.name == "nms").expect("the NMS layer");
    let trtc_runtime::kernels::LayerKernels::Device(launches) = &table.layers[nms] else { panic!("NMS runs on the host") };
    let counters = trtc_runtime::kernels::counters(&engine.plan().layers[nms], launches).unwrap();
    assert_eq!(counters, 2, "the row count and one class's");
    let device = engine.plan().layers.len() - host.len();
    assert!(device >= 2, "the reshape and comparison keep their kernels: {device} device layers");
    // The CPU executor runs any engine: the GPU engine's plan gives the
    // counts of each run too.
    let s = Tensor::from_vec(vec![1, 1, BOXES], vec![0.9f32, 0.95, 0.8, 0.6, 0.7, 0.4]).unwrap();
    let out = engine.create_context().unwrap().run(&[("boxes", &boxes()), ("scores", &s)]).unwrap();
    assert_eq!(out[0].1.shape(), &[3, 3]);
}
