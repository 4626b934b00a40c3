//! Snapshot tests of the IR text dump and of `trtc inspect`: the readable
//! forms a newcomer and a reviewer look at. Update with `cargo insta review`
//! (or INSTA_UPDATE=always).

mod common;

use common::*;
use trtc::frontend::onnx::{import_bytes, proto::ExternalDataRoot, ImportOptions};

fn import(m: &tract_onnx::pb::ModelProto) -> trtc::ir::Graph {
    import_bytes(&encode(m), ExternalDataRoot::default(), &ImportOptions::default()).unwrap()
}

#[test]
fn ir_dump_of_a_small_mlp() {
    let g = import(&mlp());
    insta::assert_snapshot!(g.dump());
}

#[test]
fn ir_dump_of_example_cnn() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/models/example_cnn.onnx");
    let g = trtc::frontend::onnx::import_file(&path, &ImportOptions::default()).unwrap();
    insta::assert_snapshot!(g.dump());
}

#[test]
fn inspect_of_the_mlp_engine() {
    let g = import(&mlp());
    let opts = trtc::build::BuildOptions::default();
    let built = trtc::build::build_graph(g, &opts).unwrap();
    let engine = trtc_runtime::Engine::from_bytes(&built.engine).unwrap();
    // The version line changes with every release; keep it out of the snapshot.
    let text = trtc::inspect::text(&engine);
    let text: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
    insta::assert_snapshot!(text);
}

#[test]
fn inspect_json_of_the_mlp_engine() {
    let g = import(&mlp());
    let built = trtc::build::build_graph(g, &Default::default()).unwrap();
    let engine = trtc_runtime::Engine::from_bytes(&built.engine).unwrap();
    let mut report: serde_json::Value = serde_json::from_str(&trtc::inspect::json(&engine)).unwrap();
    assert_eq!(report["trtc_version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(report["layers"].as_array().unwrap().len(), engine.plan().layers.len());
    // The version changes with every release; keep it out of the snapshot.
    report["trtc_version"] = "VERSION".into();
    insta::assert_snapshot!(serde_json::to_string_pretty(&report).unwrap());
}

#[test]
fn engines_are_byte_identical_across_builds() {
    let a = trtc::build::build_graph(import(&mlp()), &Default::default()).unwrap().engine;
    let b = trtc::build::build_graph(import(&mlp()), &Default::default()).unwrap().engine;
    assert_eq!(a, b);
}
