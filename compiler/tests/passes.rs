//! Pass tests in the spirit of Cranelift's file tests: a small graph, its IR
//! text before and after one pass (insta snapshots), and a check that both
//! graphs compute the same outputs on random inputs. Plus a differential
//! test over every testdata model: all passes on vs all passes off.

mod common;

use trtc::build::{build_graph, BuildOptions};
use trtc::ir::Graph;
use trtc::passes::{self, Pass};
use trtc_runtime::ops::elementwise::{Binary, BinaryKind, Cast, Unary, UnaryKind};
use trtc_runtime::ops::movement::Reshape;
use trtc_runtime::{DType, Engine, Tensor, TensorType};

fn run(graph: &Graph, inputs: &[(String, Tensor)]) -> Vec<(String, Tensor)> {
    let mut opts = BuildOptions::default();
    opts.passes.disable_all = true;
    let built = build_graph(graph.clone(), &opts).unwrap();
    let engine = Engine::from_bytes(&built.engine).unwrap();
    let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    engine.create_context().unwrap().run(&refs).unwrap()
}

/// A random f32 tensor (test weights and inputs).
fn random(shape: &[usize], seed: u64) -> Tensor {
    trtc::random::tensor(&f32_ty(shape), seed).unwrap()
}

fn random_inputs(graph: &Graph) -> Vec<(String, Tensor)> {
    graph
        .inputs()
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let o = &graph.node(n).outputs[0];
            (o.name.clone(), trtc::random::tensor(&o.ty, i as u64 + 7).unwrap())
        })
        .collect()
}

/// How closely a rewritten graph must reproduce the original's outputs.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Bit-identical: the rewrite keeps every f32 operation as it was.
    Exact,
    /// Within this error relative to each output's scale: the rewrite
    /// reassociates arithmetic (folds scales into weights, merges GEMMs).
    Within(f64),
}

/// Applies `rewrite` (which must change something), removes dead nodes,
/// verifies the IR, checks the outputs against the original graph's on
/// random inputs, and returns the new graph with its "before\n---\nafter"
/// text for the snapshot.
fn check_rewrite(graph: Graph, expect: Expect, rewrite: impl FnOnce(&mut Graph) -> usize) -> (Graph, String) {
    let before = graph.dump();
    let inputs = random_inputs(&graph);
    let want = run(&graph, &inputs);
    let mut after = graph;
    assert!(rewrite(&mut after) > 0, "nothing was rewritten:\n{before}");
    passes::DeadNodes.run(&mut after).unwrap();
    trtc::ir::verify(&after).unwrap();
    let got = run(&after, &inputs);
    assert_eq!(want.len(), got.len());
    for ((name, w), (_, g)) in want.iter().zip(&got) {
        match expect {
            Expect::Exact => assert_eq!(w, g, "output {name} changed"),
            Expect::Within(tol) => {
                let d = trtc::compare::diff(name, g, w);
                assert!(d.shape_ok && d.max_rel_to_scale <= tol, "output {name} changed by {:.2e}", d.max_rel_to_scale);
            }
        }
    }
    let text = format!("{before}---\n{}", after.dump());
    (after, text)
}

/// [`check_rewrite`] with one exact pass.
fn check_pass(pass: &dyn Pass, graph: Graph) -> String {
    check_rewrite(graph, Expect::Exact, |g| pass.run(g).unwrap()).1
}

fn f32_ty(shape: &[usize]) -> TensorType {
    TensorType::new(DType::F32, shape.to_vec())
}

#[test]
fn constant_folding_folds_a_chain_of_constants() {
    let mut g = Graph::new();
    let x = g.add_input("x", f32_ty(&[4]));
    let a = g.add_constant("a", Tensor::from_vec(vec![4], vec![1f32, 2., 3., 4.]).unwrap());
    let b = g.add_constant("b", Tensor::from_vec(vec![4], vec![0.5f32; 4]).unwrap());
    let ab = g.add_op("a_times_b", Binary::new(BinaryKind::Mul).into(), &[Some(a), Some(b)]).unwrap()[0];
    let neg = g.add_op("neg", Unary::new(UnaryKind::Neg).into(), &[Some(ab)]).unwrap()[0];
    let y = g.add_op("y", Binary::new(BinaryKind::Add).into(), &[Some(x), Some(neg)]).unwrap()[0];
    g.add_output("y", y);
    insta::assert_snapshot!(check_pass(&passes::ConstantFolding::default(), g));
}

#[test]
fn no_op_removal_drops_same_shape_reshape_and_same_type_cast() {
    let mut g = Graph::new();
    let x = g.add_input("x", f32_ty(&[2, 3]));
    let r1 = g.add_op("r1", Reshape { shape: vec![6] }.into(), &[Some(x)]).unwrap()[0];
    let r2 = g.add_op("r2", Reshape { shape: vec![3, 2] }.into(), &[Some(r1)]).unwrap()[0];
    let c = g.add_op("cast", Cast { to: DType::F32 }.into(), &[Some(r2)]).unwrap()[0];
    let same = g.add_op("same", Reshape { shape: vec![3, 2] }.into(), &[Some(c)]).unwrap()[0];
    let y = g.add_op("y", Unary::new(UnaryKind::Relu).into(), &[Some(same)]).unwrap()[0];
    g.add_output("y", y);
    insta::assert_snapshot!(check_pass(&passes::NoOpRemoval, g));
}

#[test]
fn cse_merges_identical_ops() {
    let mut g = Graph::new();
    let x = g.add_input("x", f32_ty(&[3]));
    let a = g.add_op("relu_a", Unary::new(UnaryKind::Relu).into(), &[Some(x)]).unwrap()[0];
    let b = g.add_op("relu_b", Unary::new(UnaryKind::Relu).into(), &[Some(x)]).unwrap()[0];
    let y = g.add_op("y", Binary::new(BinaryKind::Mul).into(), &[Some(a), Some(b)]).unwrap()[0];
    g.add_output("y", y);
    insta::assert_snapshot!(check_pass(&passes::CommonSubexpressions, g));
}

#[test]
fn all_passes_preserve_outputs_of_every_testdata_model() {
    let mut checked = 0;
    for m in common::testdata_models() {
        let stem = common::stem(&m);
        let inputs = common::testdata_npz(&m, "inputs");
        let graph = trtc::frontend::onnx::import_file(&m, &Default::default()).unwrap();
        let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let mut outs = Vec::new();
        for disable_all in [true, false] {
            let mut opts = BuildOptions::default();
            opts.passes.disable_all = disable_all;
            let built = build_graph(graph.clone(), &opts).unwrap();
            let engine = Engine::from_bytes(&built.engine).unwrap();
            outs.push((built.graph.op_count(), engine.create_context().unwrap().run(&refs).unwrap()));
        }
        let (n_off, off) = &outs[0];
        let (n_on, on) = &outs[1];
        assert!(n_on <= n_off, "{stem}: passes grew the graph from {n_off} to {n_on} nodes");
        for ((name, a), (_, b)) in off.iter().zip(on) {
            let d = trtc::compare::diff(name, b, a);
            assert!(
                d.shape_ok && d.max_rel_to_scale <= 1e-5,
                "{stem}/{name}: passes changed outputs by {:.2e}",
                d.max_rel_to_scale
            );
        }
        println!("{stem}: {n_off} -> {n_on} nodes, outputs preserved");
        checked += 1;
    }
    assert!(checked >= 29);
}

#[test]
fn linear_epilogue_fusion_absorbs_bias_residual_and_activation() {
    use trtc_runtime::ops::linalg::{Conv, MatMul};
    let mut g = Graph::new();
    let x = g.add_input("x", f32_ty(&[1, 2, 4, 4]));
    let w = g.add_constant("w", random(&[2, 2, 3, 3], 1));
    let b = g.add_constant("b", random(&[1, 2, 1, 1], 2));
    let conv = g.add_op("conv", Conv::new_2d([3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1).into(), &[Some(x), Some(w)]).unwrap()[0];
    let biased = g.add_op("bias", Binary::new(BinaryKind::Add).into(), &[Some(conv), Some(b)]).unwrap()[0];
    let res = g.add_op("residual", Binary::new(BinaryKind::Add).into(), &[Some(x), Some(biased)]).unwrap()[0];
    let relu = g.add_op("relu", Unary::new(UnaryKind::Relu).into(), &[Some(res)]).unwrap()[0];
    // A MatMul + bias + SiLU (Sigmoid then Mul) head on the flattened map.
    let flat = g.add_op("flatten", Reshape { shape: vec![1, 32] }.into(), &[Some(relu)]).unwrap()[0];
    let fw = g.add_constant("fw", random(&[32, 5], 3));
    let fb = g.add_constant("fb", random(&[5], 4));
    let mm = g.add_op("fc", MatMul::default().into(), &[Some(flat), Some(fw)]).unwrap()[0];
    let mb = g.add_op("fc_bias", Binary::new(BinaryKind::Add).into(), &[Some(mm), Some(fb)]).unwrap()[0];
    let sig = g.add_op("sigmoid", Unary::new(UnaryKind::Sigmoid).into(), &[Some(mb)]).unwrap()[0];
    let y = g.add_op("silu", Binary::new(BinaryKind::Mul).into(), &[Some(mb), Some(sig)]).unwrap()[0];
    g.add_output("y", y);
    let (after, text) =
        check_rewrite(g, Expect::Within(1e-6), |g| (0..4).map(|_| passes::LinearEpilogueFusion.run(g).unwrap()).sum());
    assert_eq!(after.op_count(), 3, "{}", after.dump());
    insta::assert_snapshot!(text);
}

#[test]
fn transpose_cancellation_composes_and_cancels() {
    use trtc_runtime::ops::movement::Transpose;
    let mut g = Graph::new();
    let x = g.add_input("x", f32_ty(&[2, 3, 4]));
    let t1 = g.add_op("t1", Transpose { perm: vec![0, 2, 1] }.into(), &[Some(x)]).unwrap()[0];
    let t2 = g.add_op("t2", Transpose { perm: vec![0, 2, 1] }.into(), &[Some(t1)]).unwrap()[0];
    let a = g.add_op("relu", Unary::new(UnaryKind::Relu).into(), &[Some(t2)]).unwrap()[0];
    let t3 = g.add_op("t3", Transpose { perm: vec![1, 0, 2] }.into(), &[Some(a)]).unwrap()[0];
    let t4 = g.add_op("t4", Transpose { perm: vec![2, 0, 1] }.into(), &[Some(t3)]).unwrap()[0];
    g.add_output("y", t4);
    insta::assert_snapshot!(check_pass(&passes::TransposeCancellation, g));
}

#[test]
fn pad_folding_moves_zero_padding_into_the_conv() {
    use trtc_runtime::ops::linalg::Conv;
    use trtc_runtime::ops::movement::{Pad, PadMode};
    let mut g = Graph::new();
    let x = g.add_input("x", f32_ty(&[1, 2, 5, 5]));
    let p = g.add_op("pad", Pad { pads: vec![0, 0, 1, 2, 0, 0, 1, 0], mode: PadMode::Constant }.into(), &[Some(x)]).unwrap()[0];
    let w = g.add_constant("w", random(&[3, 2, 3, 3], 5));
    let y = g.add_op("conv", Conv::new_2d([3, 3], [2, 2], [0, 0, 0, 0], [1, 1], 1).into(), &[Some(p), Some(w)]).unwrap()[0];
    g.add_output("y", y);
    insta::assert_snapshot!(check_pass(&passes::PadFolding, g));
}

#[test]
fn gelu_pattern_recognizes_the_erf_form() {
    let mut g = Graph::new();
    let x = g.add_input("x", f32_ty(&[2, 8]));
    let c = |g: &mut Graph, name: &str, v: f32| g.add_constant(name, Tensor::from_vec(Vec::<usize>::new(), vec![v]).unwrap());
    let sqrt2 = c(&mut g, "sqrt2", std::f32::consts::SQRT_2);
    let one = c(&mut g, "one", 1.0);
    let half = c(&mut g, "half", 0.5);
    let d = g.add_op("div", Binary::new(BinaryKind::Div).into(), &[Some(x), Some(sqrt2)]).unwrap()[0];
    let e = g.add_op("erf", Unary::new(UnaryKind::Erf).into(), &[Some(d)]).unwrap()[0];
    let a = g.add_op("add", Binary::new(BinaryKind::Add).into(), &[Some(e), Some(one)]).unwrap()[0];
    let m = g.add_op("mul", Binary::new(BinaryKind::Mul).into(), &[Some(x), Some(a)]).unwrap()[0];
    let y = g.add_op("mul_half", Binary::new(BinaryKind::Mul).into(), &[Some(m), Some(half)]).unwrap()[0];
    g.add_output("y", y);
    let (after, text) = check_rewrite(g, Expect::Within(1e-6), |g| passes::GeluPattern.run(g).unwrap());
    assert_eq!(after.op_count(), 1, "{}", after.dump());
    insta::assert_snapshot!(text);
}

#[test]
fn attention_pattern_fuses_the_exported_spelling() {
    use trtc_runtime::ops::elementwise::{ElementwiseOp, IsNaN, Where};
    use trtc_runtime::ops::linalg::MatMul;
    use trtc_runtime::ops::movement::Transpose;
    use trtc_runtime::ops::reduce::Softmax;
    let (b, s, h, d) = (1, 4, 2, 4);
    let mut g = Graph::new();
    let q = g.add_input("q", f32_ty(&[b, s, h * d]));
    let k = g.add_input("k", f32_ty(&[b, s, h * d]));
    let v = g.add_input("v", f32_ty(&[b, s, h * d]));
    let mask = g.add_input("mask", f32_ty(&[b, 1, 1, s]));
    let scale = g.add_constant("scale", Tensor::scalar((d as f32).powf(-0.25)));
    let zero = g.add_constant("zero", Tensor::scalar(0f32));
    let split = |g: &mut Graph, x, name: &str, perm: Vec<usize>| {
        let r = g.add_op(&format!("{name}_reshape"), Reshape { shape: vec![b, s, h, d] }.into(), &[Some(x)]).unwrap()[0];
        g.add_op(&format!("{name}_transpose"), Transpose { perm }.into(), &[Some(r)]).unwrap()[0]
    };
    let qh = split(&mut g, q, "q", vec![0, 2, 1, 3]);
    let qs = g.add_op("q_scale", Binary::new(BinaryKind::Mul).into(), &[Some(qh), Some(scale)]).unwrap()[0];
    let kh = split(&mut g, k, "k", vec![0, 2, 3, 1]);
    let ks = g.add_op("k_scale", Binary::new(BinaryKind::Mul).into(), &[Some(kh), Some(scale)]).unwrap()[0];
    let vh = split(&mut g, v, "v", vec![0, 2, 1, 3]);
    let scores = g.add_op("scores", MatMul::default().into(), &[Some(qs), Some(ks)]).unwrap()[0];
    let masked = g.add_op("masked", Binary::new(BinaryKind::Add).into(), &[Some(scores), Some(mask)]).unwrap()[0];
    let p = g.add_op("softmax", Softmax::new(3).into(), &[Some(masked)]).unwrap()[0];
    let nan = g.add_op("isnan", trtc_runtime::Op::Elementwise(ElementwiseOp::IsNaN(IsNaN)), &[Some(p)]).unwrap()[0];
    let guarded = g
        .add_op("guard", trtc_runtime::Op::Elementwise(ElementwiseOp::Where(Where)), &[Some(nan), Some(zero), Some(p)])
        .unwrap()[0];
    let o = g.add_op("context", MatMul::default().into(), &[Some(guarded), Some(vh)]).unwrap()[0];
    let t = g.add_op("merge_transpose", Transpose { perm: vec![0, 2, 1, 3] }.into(), &[Some(o)]).unwrap()[0];
    let y = g.add_op("merge", Reshape { shape: vec![b, s, h * d] }.into(), &[Some(t)]).unwrap()[0];
    g.add_output("y", y);
    let (after, text) = check_rewrite(g, Expect::Exact, |g| passes::AttentionPattern.run(g).unwrap());
    assert_eq!(after.op_count(), 1, "{}", after.dump());
    insta::assert_snapshot!(text);
}

#[test]
fn sibling_matmuls_merge_into_one_with_a_split() {
    use trtc_runtime::ops::linalg::MatMul;
    let mut g = Graph::new();
    let x = g.add_input("x", f32_ty(&[2, 3, 4]));
    let mut outs = Vec::new();
    for (i, n) in [4usize, 4, 6].iter().enumerate() {
        let w = g.add_constant(&format!("w{i}"), random(&[4, *n], 10 + i as u64));
        let b = g.add_constant(&format!("b{i}"), random(&[*n], 20 + i as u64));
        let m = g.add_op(&format!("proj{i}"), MatMul::default().into(), &[Some(x), Some(w)]).unwrap()[0];
        outs.push(g.add_op(&format!("bias{i}"), Binary::new(BinaryKind::Add).into(), &[Some(m), Some(b)]).unwrap()[0]);
    }
    for (i, o) in outs.iter().enumerate() {
        g.add_output(&format!("y{i}"), *o);
    }
    passes::LinearEpilogueFusion.run(&mut g).unwrap();
    let (after, text) = check_rewrite(g, Expect::Within(1e-6), |g| passes::SiblingMatMulMerge.run(g).unwrap());
    assert_eq!(after.op_count(), 2, "{}", after.dump());
    insta::assert_snapshot!(text);
}

#[test]
fn gemm_between_reshapes_becomes_a_matmul() {
    use trtc_runtime::ops::linalg::Gemm;
    let mut g = Graph::new();
    let x = g.add_input("x", f32_ty(&[2, 3, 4]));
    let r = g.add_op("flatten", Reshape { shape: vec![6, 4] }.into(), &[Some(x)]).unwrap()[0];
    let w = g.add_constant("w", random(&[5, 4], 3));
    let c = g.add_constant("c", random(&[5], 4));
    let gemm = Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: true };
    let y = g.add_op("gemm", gemm.into(), &[Some(r), Some(w), Some(c)]).unwrap()[0];
    let y = g.add_op("unflatten", Reshape { shape: vec![2, 3, 5] }.into(), &[Some(y)]).unwrap()[0];
    g.add_output("y", y);
    let (after, text) = check_rewrite(g, Expect::Within(1e-6), |g| passes::GemmToMatMul.run(g).unwrap());
    assert_eq!(after.op_count(), 1, "{}", after.dump());
    insta::assert_snapshot!(text);
}

#[test]
fn layernorm_pattern_recognizes_the_spelled_out_form() {
    use trtc_runtime::ops::elementwise::{ElementwiseOp, Pow};
    use trtc_runtime::ops::reduce::{Reduce, ReduceKind};
    let mut g = Graph::new();
    let x = g.add_input("x", f32_ty(&[2, 3, 8]));
    let two = g.add_constant("two", Tensor::scalar(2f32));
    let eps = g.add_constant("eps", Tensor::scalar(1e-5f32));
    let gamma = g.add_constant("gamma", random(&[8], 8));
    let beta = g.add_constant("beta", random(&[8], 9));
    let mean = |g: &mut Graph, name: &str, x| {
        g.add_op(name, Reduce { kind: ReduceKind::Mean, axes: vec![2], keepdims: true }.into(), &[Some(x)]).unwrap()[0]
    };
    let m = mean(&mut g, "mean", x);
    let d = g.add_op("sub", Binary::new(BinaryKind::Sub).into(), &[Some(x), Some(m)]).unwrap()[0];
    let sq = g.add_op("pow", trtc_runtime::Op::Elementwise(ElementwiseOp::Pow(Pow)), &[Some(d), Some(two)]).unwrap()[0];
    let var = mean(&mut g, "var", sq);
    let ve = g.add_op("add_eps", Binary::new(BinaryKind::Add).into(), &[Some(var), Some(eps)]).unwrap()[0];
    let std = g.add_op("sqrt", Unary::new(UnaryKind::Sqrt).into(), &[Some(ve)]).unwrap()[0];
    let n = g.add_op("div", Binary::new(BinaryKind::Div).into(), &[Some(d), Some(std)]).unwrap()[0];
    let s = g.add_op("scale", Binary::new(BinaryKind::Mul).into(), &[Some(n), Some(gamma)]).unwrap()[0];
    let y = g.add_op("shift", Binary::new(BinaryKind::Add).into(), &[Some(s), Some(beta)]).unwrap()[0];
    g.add_output("y", y);
    let (after, text) = check_rewrite(g, Expect::Within(1e-5), |g| passes::LayerNormPattern.run(g).unwrap());
    assert_eq!(after.op_count(), 1, "{}", after.dump());
    insta::assert_snapshot!(text);
}

#[test]
fn pointwise_fusion_makes_one_node_of_a_dag() {
    let mut g = Graph::new();
    let x = g.add_input("x", f32_ty(&[2, 5]));
    let b = g.add_input("b", f32_ty(&[5]));
    let three = g.add_constant("three", Tensor::scalar(3f32));
    let sq = g.add_op("square", Binary::new(BinaryKind::Mul).into(), &[Some(x), Some(x)]).unwrap()[0];
    let t = g.add_op("tanh", Unary::new(UnaryKind::Tanh).into(), &[Some(sq)]).unwrap()[0];
    let s = g.add_op("shift", Binary::new(BinaryKind::Add).into(), &[Some(t), Some(b)]).unwrap()[0];
    let y = g.add_op("scale", Binary::new(BinaryKind::Div).into(), &[Some(s), Some(three)]).unwrap()[0];
    g.add_output("y", y);
    let (after, text) = check_rewrite(g, Expect::Exact, |g| passes::PointwiseFusion.run(g).unwrap());
    assert_eq!(after.op_count(), 1, "{}", after.dump());
    insta::assert_snapshot!(text);
}

#[test]
fn affine_folding_scales_conv_weights_and_bias() {
    use trtc_runtime::ops::linalg::Conv;
    let mut g = Graph::new();
    let x = g.add_input("x", f32_ty(&[1, 2, 4, 4]));
    let w = g.add_constant("w", random(&[3, 2, 3, 3], 1));
    let b = g.add_constant("b", random(&[3], 2));
    let s = g.add_constant("s", random(&[1, 3, 1, 1], 3));
    let c = g.add_constant("c", random(&[3, 1, 1], 4));
    let conv =
        g.add_op("conv", Conv::new_2d([3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1).into(), &[Some(x), Some(w), Some(b)]).unwrap()[0];
    let m = g.add_op("scale", Binary::new(BinaryKind::Mul).into(), &[Some(conv), Some(s)]).unwrap()[0];
    let y = g.add_op("shift", Binary::new(BinaryKind::Add).into(), &[Some(c), Some(m)]).unwrap()[0];
    g.add_output("y", y);
    let (after, text) = check_rewrite(g, Expect::Within(1e-6), |g| (0..2).map(|_| passes::AffineFolding.run(g).unwrap()).sum());
    assert_eq!(after.op_count(), 1, "{}", after.dump());
    insta::assert_snapshot!(text);
}

#[test]
fn softmax_pattern_recognizes_the_spelled_out_form() {
    use trtc_runtime::ops::reduce::{Reduce, ReduceKind};
    let mut g = Graph::new();
    let x = g.add_input("x", f32_ty(&[3, 5]));
    let red = |g: &mut Graph, name: &str, kind, x| {
        g.add_op(name, Reduce { kind, axes: vec![1], keepdims: true }.into(), &[Some(x)]).unwrap()[0]
    };
    let m = red(&mut g, "max", ReduceKind::Max, x);
    let d = g.add_op("sub", Binary::new(BinaryKind::Sub).into(), &[Some(x), Some(m)]).unwrap()[0];
    let e = g.add_op("exp", Unary::new(UnaryKind::Exp).into(), &[Some(d)]).unwrap()[0];
    let s = red(&mut g, "sum", ReduceKind::Sum, e);
    let y = g.add_op("div", Binary::new(BinaryKind::Div).into(), &[Some(e), Some(s)]).unwrap()[0];
    g.add_output("y", y);
    let (after, text) = check_rewrite(g, Expect::Within(1e-6), |g| passes::SoftmaxPattern.run(g).unwrap());
    assert_eq!(after.op_count(), 1, "{}", after.dump());
    insta::assert_snapshot!(text);
}
