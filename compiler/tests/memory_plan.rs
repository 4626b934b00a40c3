//! The memory plan of a built engine: an input binding keeps its bytes for
//! the whole run (no activation reuses them), so a context can execute
//! again without copying its inputs in, as a CUDA graph replay does.

mod common;

use common::*;
use trtc::build::{build_graph, BuildOptions};
use trtc::frontend::onnx::{import_bytes, proto::ExternalDataRoot, ImportOptions};
use trtc_runtime::plan::Storage;
use trtc_runtime::Engine;

/// The arena bytes `[start, end)` of a tensor, if it lives in the arena.
fn arena_range(engine: &Engine, id: usize) -> Option<(u64, u64)> {
    let t = &engine.plan().tensors[id];
    match t.storage {
        Storage::Arena { offset } => Some((offset, offset + t.ty.bytes() as u64)),
        _ => None,
    }
}

#[test]
fn no_activation_reuses_an_input_binding() {
    // x -> Softmax -> Softmax -> Softmax -> Softmax -> y, every tensor the same size: with
    // lifetimes alone, the third activation would take x's bytes.
    let nodes = (0..4)
        .map(|i| {
            let input = if i == 0 { "x".to_string() } else { format!("t{}", i - 1) };
            node("Softmax", &format!("n{i}"), &[&input], &[&format!("t{i}")])
        })
        .collect();
    let m = model(nodes, vec![value_info("x", F32, &[64, 64])], vec![value_info("t3", F32, &[64, 64])], vec![]);
    let g = import_bytes(&encode(&m), ExternalDataRoot::default(), &ImportOptions::default()).unwrap();
    let engine = Engine::from_bytes(&build_graph(g, &BuildOptions::default()).unwrap().engine).unwrap();
    let plan = engine.plan();
    assert_eq!(plan.layers.len(), 4, "the chain must stay four layers for this test to mean anything");
    let (xs, xe) = arena_range(&engine, plan.inputs[0]).expect("the input lives in the arena");
    for id in 0..plan.tensors.len() {
        if id == plan.inputs[0] {
            continue;
        }
        if let Some((s, e)) = arena_range(&engine, id) {
            assert!(e <= xs || xe <= s, "tensor {} at [{s}, {e}) overlaps the input at [{xs}, {xe})", plan.tensors[id].name);
        }
    }
}
