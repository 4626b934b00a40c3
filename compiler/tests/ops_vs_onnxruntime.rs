//! Every single-op model `testdata/export_ops.py` wrote into `testdata/ops`
//! (the recurrent layers over every attribute the spec defines, GridSample,
//! DFT, STFT, Col2Im, RoiAlign, Scan, DeformConv, round trips through the 8-bit floats and
//! 4-bit integers) builds,
//! runs on the CPU executor and matches the recorded outputs (onnxruntime's;
//! for the 8-bit float cases onnx's evaluator's, see the script):
//! max |ours - ref| / max |ref| <= 1e-5 on every output, same shapes, no
//! output missing and none extra.

mod common;

use std::path::{Path, PathBuf};
use trtc::build::{build_graph, BuildOptions};
use trtc::frontend::onnx::{import_bytes, proto::ExternalDataRoot, ImportOptions};

const TOLERANCE: f64 = 1e-5;

fn op_models() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/ops");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("testdata/ops")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_op_model_matches_onnxruntime() {
    let models = op_models();
    assert!(models.len() >= 85, "expected the models of testdata/export_ops.py in testdata/ops, found {}", models.len());
    let mut failures = Vec::new();
    for m in &models {
        let name = common::stem(m);
        match common::worst_error_against_recorded(m) {
            Ok(err) if err <= TOLERANCE => println!("ok   {name}: max err / max |ref| = {err:.2e}"),
            Ok(err) => failures.push(format!("{name}: max err / max |ref| = {err:.2e} > {TOLERANCE:e}")),
            Err(e) => failures.push(format!("{name}: {e:#}")),
        }
    }
    for f in &failures {
        println!("FAIL {f}");
    }
    println!("op models: {} passed, {} failed", models.len() - failures.len(), failures.len());
    assert!(failures.is_empty(), "{} op models failed:\n{}", failures.len(), failures.join("\n"));
}

/// Attribute AttributeProto types, as ONNX numbers them.
const FLOAT: i32 = 1;
const INT: i32 = 2;
const STRING: i32 = 3;
const STRINGS: i32 = 8;

#[test]
fn bad_recurrent_attributes_are_errors_naming_the_node() {
    use prost::Message;
    use tract_onnx::pb;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/ops/lstm_forward.onnx");
    let original = pb::ModelProto::decode(std::fs::read(&path).unwrap().as_slice()).unwrap();
    let attr = |name: &str, r#type: i32| pb::AttributeProto { name: name.into(), r#type, ..Default::default() };
    let cases: Vec<(pb::AttributeProto, &str)> = vec![
        (pb::AttributeProto { s: b"sideways".to_vec(), ..attr("direction", STRING) }, "direction 'sideways'"),
        (pb::AttributeProto { i: 6, ..attr("hidden_size", INT) }, "hidden_size 6 does not match"),
        (pb::AttributeProto { i: 2, ..attr("layout", INT) }, "layout 2 is not 0 or 1"),
        (pb::AttributeProto { f: -1.0, ..attr("clip", FLOAT) }, "clip -1 must be a non-negative number"),
        (
            pb::AttributeProto {
                strings: vec![b"Sigmoid".to_vec(), b"Gelu".to_vec(), b"Tanh".to_vec()],
                ..attr("activations", STRINGS)
            },
            "activation 'Gelu'",
        ),
        (
            pb::AttributeProto { strings: vec![b"Sigmoid".to_vec()], ..attr("activations", STRINGS) },
            "1 activations given, 3 expected",
        ),
        (pb::AttributeProto { f: 1.0, ..attr("direction", FLOAT) }, "direction"),
    ];
    for (bad, needle) in cases {
        let mut m = original.clone();
        let node = &mut m.graph.as_mut().unwrap().node[0];
        node.attribute.retain(|a| a.name != bad.name);
        node.attribute.push(bad);
        let imported = import_bytes(&m.encode_to_vec(), ExternalDataRoot::default(), &ImportOptions::default());
        let err = match imported.and_then(|g| build_graph(g, &BuildOptions::default())) {
            Ok(_) => panic!("a model with a bad attribute built ({needle})"),
            Err(e) => format!("{e:#}"),
        };
        assert!(err.contains("lstm_forward_node") && err.contains(needle), "expected '{needle}' and the node's name in: {err}");
    }
}
