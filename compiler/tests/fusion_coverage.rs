//! Fusion coverage on the real exports, checked so it cannot regress: the
//! node counts after optimization, and the properties issue 3 asks for
//! (no BatchNormalization or standalone activation after a conv, at most 8
//! nodes per transformer layer, no shape arithmetic left).

use std::collections::BTreeMap;
use trtc::build::{build_graph, BuildOptions};
use trtc::ir::{Graph, NodeKind, Port};
use trtc_runtime::DType;

fn optimized(name: &str) -> Graph {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../testdata/models/{name}.onnx"));
    let g = trtc::frontend::onnx::import_file(&path, &Default::default()).unwrap();
    build_graph(g, &BuildOptions::default()).unwrap().graph
}

fn op_counts(g: &Graph) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for n in g.nodes() {
        if let NodeKind::Op(op) = &n.kind {
            *m.entry(op.name().to_string()).or_default() += 1;
        }
    }
    m
}

/// Op nodes whose input 0 comes straight from a (fused) convolution and
/// that are activations: what fusion should have absorbed.
fn activations_after_conv(g: &Graph) -> Vec<String> {
    let mut v = Vec::new();
    for n in g.node_ids() {
        let Some(op) = g.node(n).op() else { continue };
        if !matches!(op.name(), "Relu" | "Clip" | "Sigmoid" | "HardSwish" | "HardSigmoid" | "Tanh" | "LeakyRelu" | "Gelu") {
            continue;
        }
        let Some(src) = g.inputs_of(n)[0] else { continue };
        let from_conv = g.node(src.node).op().is_some_and(|o| matches!(o.name(), "Conv" | "FusedConv"));
        // A second reader of the conv output (SE blocks, residuals) makes the
        // activation legitimately separate.
        if from_conv && g.consumers(src).len() == 1 {
            v.push(format!("{} after {}", g.node(n).name, g.node(src.node).name));
        }
    }
    v
}

/// The largest node count each model may have after optimization. A change
/// that lowers one should lower its line here.
const MAX_NODES: &[(&str, usize)] = &[
    ("resnet50_legacy", 57),
    ("resnet50_dynamo", 57),
    ("resnet18_legacy", 25),
    ("resnet18_dynamo", 25),
    ("mobilenet_v2_legacy", 55),
    ("mobilenet_v2_dynamo", 55),
    ("mobilenet_v3_small_legacy", 74),
    ("mobilenet_v3_small_dynamo", 74),
    ("efficientnet_b0_legacy", 74),
    ("efficientnet_b0_dynamo", 74),
    ("bert_legacy", 29),
    ("bert_dynamo", 27),
    ("gpt2_legacy", 26),
    ("gpt2_dynamo", 24),
    ("vit_legacy", 74),
    ("vit_dynamo", 72),
];

#[test]
fn node_counts_do_not_regress() {
    for (name, max) in MAX_NODES {
        let n = optimized(name).op_count();
        println!("{name}: {n} nodes (limit {max})");
        assert!(n <= *max, "{name}: {n} nodes after optimization, more than {max}");
    }
}

#[test]
fn resnet50_has_no_batchnorm_and_no_standalone_relu_or_add() {
    for name in ["resnet50_legacy", "resnet50_dynamo"] {
        let g = optimized(name);
        let c = op_counts(&g);
        for op in ["BatchNormalization", "Relu", "Add"] {
            assert!(!c.contains_key(op), "{name}: {op} left: {c:?}");
        }
        assert!(g.op_count() <= 60, "{name}: {} nodes", g.op_count());
    }
}

#[test]
fn cnns_have_no_standalone_activation_after_a_conv() {
    for name in [
        "mobilenet_v2_legacy",
        "mobilenet_v2_dynamo",
        "mobilenet_v3_small_legacy",
        "mobilenet_v3_small_dynamo",
        "efficientnet_b0_legacy",
        "efficientnet_b0_dynamo",
        "resnet50_legacy",
        "resnet50_dynamo",
    ] {
        let left = activations_after_conv(&optimized(name));
        assert!(left.is_empty(), "{name}: {left:?}");
    }
}

#[test]
fn transformer_layers_are_at_most_eight_nodes_with_no_shape_arithmetic() {
    // (model, layers, nodes outside the layers: embeddings, mask, head).
    for (name, layers, overhead) in [
        ("bert_legacy", 2, 13), // word+type Gather, 2 Add, LayerNorm; Cast, Reshape, Gather, Reshape, And, Where; pooler Gather, Gemm.
        ("bert_dynamo", 2, 11), // the same with the mask as Cast, GatherND, And, Where.
        ("gpt2_legacy", 2, 10), // wte Gather, Add; 6 mask nodes; final LayerNorm, lm head MatMul.
        ("gpt2_dynamo", 2, 8),
    ] {
        let g = optimized(name);
        let c = op_counts(&g);
        assert_eq!(c.get("Attention"), Some(&layers), "{name}: {c:?}");
        let per_layer = (g.op_count() - overhead) as f64 / layers as f64;
        assert!(per_layer <= 8.0, "{name}: {per_layer} nodes per layer: {c:?}");
        for op in ["Concat", "Range", "Expand", "ConstantOfShape", "Slice"] {
            assert!(!c.contains_key(op), "{name}: {op} left: {c:?}");
        }
        // Shape arithmetic works on integers; nothing integer is computed at run time.
        for n in g.node_ids() {
            if g.node(n).op().is_some() {
                for (i, o) in g.node(n).outputs.iter().enumerate() {
                    let dt = g.ty(Port { node: n, port: i }).dtype;
                    assert!(matches!(dt, DType::F32 | DType::Bool), "{name}: {} computes {} at run time", o.name, dt);
                }
            }
        }
    }
}
