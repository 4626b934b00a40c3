//! Engines whose outputs are sized by the data (a detector's boxes): the
//! configuration the server completes from the engine gives those outputs
//! `-1` on every axis, as Triton does, and such an engine is not batched (its
//! rows do not follow the batch), also when its inputs have a batch profile.

use std::path::Path;
use trtc_runtime::Engine;
use trtc_server::model_config::ModelConfig;
use trtc_server::shapes::EngineShapes;

fn testdata(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata").join(rel)
}

fn build(onnx: &Path, opts: &trtc::build::BuildOptions) -> Engine {
    Engine::from_bytes(&trtc::build::build_file(onnx, opts).unwrap().engine).unwrap()
}

#[test]
fn a_detectors_outputs_are_dynamic_in_the_completed_configuration() {
    let engine = build(&testdata("detection/faster_rcnn.onnx"), &Default::default());
    let shapes = EngineShapes::of(&engine);
    assert_eq!(shapes.data_sized_outputs, ["boxes", "labels", "scores"]);
    let mut config = ModelConfig::empty("faster_rcnn");
    config.complete(&shapes).unwrap();
    let dims: Vec<(&str, &[i64])> = config.outputs.iter().map(|t| (t.name.as_str(), t.dims.as_slice())).collect();
    assert_eq!(dims, [("boxes", &[-1, -1][..]), ("labels", &[-1]), ("scores", &[-1])]);
    // The input keeps its one shape.
    assert_eq!(config.inputs[0].dims, [3, 64, 64]);
    // A configuration that writes the boxes as [-1, 4] is accepted.
    let text = "output { name: \"boxes\" data_type: TYPE_FP32 dims: [ -1, 4 ] }";
    let (mut listed, _) = ModelConfig::parse(Path::new("config.pbtxt"), text, "faster_rcnn").unwrap();
    listed.complete(&shapes).unwrap();
}

#[test]
fn a_batch_profile_engine_ending_in_nms_is_not_batched() {
    let dims = |b: usize, h: usize, w: usize| vec![b, 3, h, w];
    let profile =
        trtc::build::ShapeProfile { inputs: vec![("input".into(), [dims(1, 32, 32), dims(1, 64, 64), dims(2, 128, 96)])] };
    let opts = trtc::build::BuildOptions { profiles: vec![profile], ..Default::default() };
    let engine = build(&testdata("dynamic/detector_legacy.onnx"), &opts);
    let shapes = EngineShapes::of(&engine);
    assert_eq!(shapes.max_batch, None);
    let mut auto = ModelConfig::empty("detector");
    auto.complete(&shapes).unwrap();
    assert_eq!(auto.max_batch_size, 0);
    let (mut batched, _) = ModelConfig::parse(Path::new("config.pbtxt"), "max_batch_size: 2", "detector").unwrap();
    let err = batched.complete(&shapes).unwrap_err();
    assert!(err.contains("sized by the data") && err.contains("max_batch_size: 0"), "{err}");
}
