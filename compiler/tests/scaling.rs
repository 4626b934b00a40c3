//! Graphs of 100k nodes build through the real command line (the process's
//! own main-thread stack, every pass on) without overflowing the stack,
//! and in time that grows linearly or as n·log n: each shape is built at
//! n/10 and at n nodes, and the larger build may take at most 30 times as
//! long (10 is linear, 100 quadratic). The bound on each build's time is
//! generous; what the test pins is the absence of crashes and of
//! quadratic behaviour.

mod common;

use common::*;
use std::process::Command;
use std::time::{Duration, Instant};
use tract_onnx::pb;

const N: usize = 100_000;

fn x_to_y(nodes: Vec<pb::NodeProto>, last: &str) -> pb::ModelProto {
    let mut m = model(nodes, vec![value_info("x", F32, &[2, 3])], vec![value_info(last, F32, &[2, 3])], vec![]);
    // The output's declared type is informative; trtc infers it.
    m.graph.as_mut().unwrap().output[0].r#type = None;
    m
}

/// x -> op -> op -> ... -> y, n nodes.
fn chain(op: &str, n: usize) -> pb::ModelProto {
    let nodes = (0..n)
        .map(|i| {
            let mut nd =
                node(op, &format!("n{i}"), &[&if i == 0 { "x".to_string() } else { format!("t{}", i - 1) }], &[&format!("t{i}")]);
            if op == "Transpose" {
                nd.attribute.push(pb::AttributeProto { name: "perm".into(), r#type: 7, ints: vec![1, 0], ..Default::default() });
            }
            nd
        })
        .collect();
    x_to_y(nodes, &format!("t{}", n - 1))
}

/// n Relus of x summed by one Sum node with n inputs.
fn wide_sum(n: usize) -> pb::ModelProto {
    let mut nodes: Vec<pb::NodeProto> = (0..n).map(|i| node("Relu", &format!("r{i}"), &["x"], &[&format!("r{i}")])).collect();
    let names: Vec<String> = (0..n).map(|i| format!("r{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    nodes.push(node("Sum", "sum", &refs, &["y"]));
    x_to_y(nodes, "y")
}

/// One Sum node reading x n times (each of the Adds it becomes reads x:
/// one node with n consumers).
fn sum_of_one_input(n: usize) -> pb::ModelProto {
    let refs = vec!["x"; n];
    x_to_y(vec![node("Sum", "sum", &refs, &["y"])], "y")
}

/// n/3 diamonds in a row: a -> (Relu, Neg) -> Add -> next a.
fn diamonds(n: usize) -> pb::ModelProto {
    let mut nodes = Vec::with_capacity(n);
    let mut prev = "x".to_string();
    for i in 0..n / 3 {
        let (l, r, s) = (format!("l{i}"), format!("r{i}"), format!("s{i}"));
        nodes.push(node("Relu", &l, &[&prev], &[&l]));
        nodes.push(node("Neg", &r, &[&prev], &[&r]));
        nodes.push(node("Add", &s, &[&l, &r], &[&s]));
        prev = s;
    }
    x_to_y(nodes, &prev)
}

/// A chain written in reverse file order (ONNX wants producers first; trtc
/// sorts, and must not do it in quadratic time).
fn reversed_chain(n: usize) -> pb::ModelProto {
    let mut m = chain("Relu", n);
    m.graph.as_mut().unwrap().node.reverse();
    m
}

/// Builds the model with the release-style CLI and returns the build time.
fn build(dir: &TempDir, tag: &str, m: &pb::ModelProto) -> Duration {
    let model = dir.path(&format!("{tag}.onnx"));
    std::fs::write(&model, encode(m)).unwrap();
    let engine = dir.path(&format!("{tag}.engine"));
    let start = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_trtc"))
        .args(["build", model.to_str().unwrap(), "-o", engine.to_str().unwrap()])
        .output()
        .unwrap();
    let took = start.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{tag}: exit {:?} (a signal means a crash: stack overflow or abort): {err}", out.status);
    trtc_runtime::Engine::load(&engine).unwrap_or_else(|e| panic!("{tag}: {e}"));
    took
}

fn check_scaling(tag: &str, make: impl Fn(usize) -> pb::ModelProto) {
    let dir = TempDir::new(&format!("scaling-{tag}"));
    let small = build(&dir, &format!("{tag}-small"), &make(N / 10));
    let large = build(&dir, tag, &make(N));
    eprintln!("{tag}: {} nodes {:.2} s, {} nodes {:.2} s", N / 10, small.as_secs_f64(), N, large.as_secs_f64());
    assert!(large < Duration::from_secs(120), "{tag}: {N} nodes took {large:?}");
    // Small builds are dominated by process start-up; compare from 0.2 s.
    let ratio = large.as_secs_f64() / small.as_secs_f64().max(0.2);
    assert!(ratio < 30.0, "{tag}: 10x the nodes took {ratio:.1}x the time ({small:?} -> {large:?}): worse than n log n");
}

#[test]
fn long_relu_chain() {
    check_scaling("relu-chain", |n| chain("Relu", n));
}

#[test]
fn long_transpose_chain() {
    check_scaling("transpose-chain", |n| chain("Transpose", n));
}

#[test]
fn wide_sum_node() {
    check_scaling("wide-sum", wide_sum);
}

#[test]
fn sum_reading_one_input_n_times() {
    check_scaling("sum-of-x", sum_of_one_input);
}

#[test]
fn many_diamonds() {
    check_scaling("diamonds", diamonds);
}

#[test]
fn chain_in_reverse_file_order() {
    check_scaling("reversed-chain", reversed_chain);
}
