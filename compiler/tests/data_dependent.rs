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
    encode(&model(
        nodes,
        vec![value_info("boxes", F32, &[1, BOXES as i64, 4]), value_info("scores", F32, &[1, 1, BOXES as i64])],
        outputs,
        vec![
            i64_tensor("max_out", &[1], &[4]),
            f32_tensor("iou", &[1], &[0.5]),
            f32_tensor("score_min", &[1], &[0.3]),
            i64_tensor("two", &[], &[2]),
            i64_tensor("zero_axis", &[1], &[0]),
            i64_tensor("minus_one", &[1], &[-1]),
            f32_tensor("half", &[], &[0.5]),
        ],
    ))
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

#[test]
fn reading_a_data_sized_shape_is_refused() {
    // Shape(selected) would be the room, not the count: refused naming both.
    let mut shape = node("Shape", "count", &["selected"], &["count"]);
    shape.name = "count".into();
    let model = detector(vec![shape], vec![value_info("count", I64, &[2])]);
    let err = format!("{:#}", build(&model, &BuildOptions::default()).unwrap_err());
    assert!(err.contains("count") && err.contains("depends on the data (NonMaxSuppression 'nms')"), "{err}");
}

/// On GPU targets, a layer sized by the data and every layer computed from
/// its outputs run on the host (which sizes them in each run); the layers
/// before it keep their kernels. Needs libnvrtc (no GPU).
#[test]
fn gpu_targets_run_the_layers_sized_by_the_data_on_the_host() {
    assert!(trtc::cuda::nvrtc::available(), "NVRTC is needed: run scripts/test.sh ({:?})", trtc::cuda::nvrtc::library().err());
    let gpu = BuildOptions { target: trtc_runtime::Target::Cuda { sm: 90, gpu_name: None }, ..Default::default() };
    let engine = build(&detector(vec![], vec![]), &gpu).unwrap();
    let table = engine.kernels().expect("a GPU engine has kernels");
    let host: Vec<(&str, &str)> = table.host_layers(engine.plan()).collect();
    let names: Vec<&str> = host.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, ["nms", "column", "kept", "positive"], "{host:?}");
    assert!(host[0].1.contains("its output sizes depend on the data"), "{host:?}");
    assert!(host[1].1.contains("its input 'selected' is sized by the data"), "{host:?}");
    let device = engine.plan().layers.len() - host.len();
    assert!(device >= 2, "the reshape and comparison keep their kernels: {device} device layers");
    // The CPU executor runs any engine: the GPU engine's plan gives the
    // counts of each run too.
    let s = Tensor::from_vec(vec![1, 1, BOXES], vec![0.9f32, 0.95, 0.8, 0.6, 0.7, 0.4]).unwrap();
    let out = engine.create_context().unwrap().run(&[("boxes", &boxes()), ("scores", &s)]).unwrap();
    assert_eq!(out[0].1.shape(), &[3, 3]);
}
