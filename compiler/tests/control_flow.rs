//! Control flow. An If whose condition is known when the engine is built
//! is replaced by the branch it takes: the branch reads the outer scope
//! (even a tensor whose producer comes later in the file), nests, and its
//! outputs become the If's. Loops with known trip counts and Scans (static
//! sequence lengths) are unrolled, within bounds on iterations and added
//! nodes. A condition or trip count computed at run time, a loop or scan
//! too long to unroll, or a scan over a sequence whose length follows a
//! profile, makes a layer that runs its branches or body as sub-plans,
//! sizing the layers after it by what it gives.

mod common;

use common::{encode, f32_tensor, model, node, value_info, F32};
use std::collections::HashMap;
use tract_onnx::pb;
use trtc::build::{build_graph, BuildOptions};
use trtc::frontend::onnx::{import_bytes, proto::ExternalDataRoot, ImportOptions};
use trtc_runtime::{Engine, Tensor};

const BOOL: i32 = 9;
const GRAPH: i32 = 5;

fn bool_tensor(name: &str, v: bool) -> pb::TensorProto {
    pb::TensorProto { name: name.into(), data_type: BOOL, int32_data: vec![v as i32], ..Default::default() }
}

fn graph_attr(name: &str, g: pb::GraphProto) -> pb::AttributeProto {
    pb::AttributeProto { name: name.into(), r#type: GRAPH, g: Some(g), ..Default::default() }
}

/// A branch: no inputs, `nodes`, one output `out`.
fn branch(name: &str, nodes: Vec<pb::NodeProto>, out: &str, initializer: Vec<pb::TensorProto>) -> pb::GraphProto {
    pb::GraphProto { name: name.into(), node: nodes, initializer, output: vec![value_info(out, F32, &[2])], ..Default::default() }
}

/// `if cond then (x + 1) * 2 else (x + 1) - k`, where `x + 1` is computed
/// outside the If by a node that comes after it in the file, and `k` is the
/// else branch's own initializer.
fn if_model(cond: Option<bool>) -> pb::ModelProto {
    let mut if_node = node("If", "choose", &["cond"], &["y"]);
    if_node
        .attribute
        .push(graph_attr("then_branch", branch("then", vec![node("Mul", "double", &["x1", "two"], &["t"])], "t", vec![])));
    if_node.attribute.push(graph_attr(
        "else_branch",
        branch("else", vec![node("Sub", "minus_k", &["x1", "k"], &["e"])], "e", vec![f32_tensor("k", &[2], &[10.0, 20.0])]),
    ));
    let mut inputs = vec![value_info("x", F32, &[2])];
    let mut inits = vec![f32_tensor("one", &[2], &[1.0, 1.0]), f32_tensor("two", &[2], &[2.0, 2.0])];
    match cond {
        Some(c) => inits.push(bool_tensor("cond", c)),
        None => inputs.push(value_info("cond", BOOL, &[])),
    }
    model(vec![if_node, node("Add", "plus_one", &["x", "one"], &["x1"])], inputs, vec![value_info("y", F32, &[2])], inits)
}

fn run(m: &pb::ModelProto, opts: &ImportOptions) -> anyhow::Result<Vec<f32>> {
    let g = import_bytes(&encode(m), ExternalDataRoot::default(), opts)?;
    let built = build_graph(g, &BuildOptions::default())?;
    let engine = Engine::from_bytes(&built.engine)?;
    let x = Tensor::from_vec(vec![2], vec![3f32, 4.0])?;
    let mut inputs = vec![("x", &x)];
    let cond = opts.input_values.get("cond").cloned();
    if let Some(c) = &cond {
        inputs.push(("cond", c));
    }
    let out = engine.create_context()?.run(&inputs)?;
    Ok(out[0].1.as_slice::<f32>()?.to_vec())
}

#[test]
fn a_constant_condition_takes_its_branch() {
    let opts = ImportOptions::default();
    assert_eq!(run(&if_model(Some(true)), &opts).unwrap(), [8.0, 10.0]);
    assert_eq!(run(&if_model(Some(false)), &opts).unwrap(), [-6.0, -15.0]);
}

#[test]
fn a_run_time_condition_runs_the_branch_it_picks() {
    // The condition is a graph input: the engine holds both branches.
    let g = import_bytes(&encode(&if_model(None)), ExternalDataRoot::default(), &ImportOptions::default()).unwrap();
    let engine = Engine::from_bytes(&build_graph(g, &BuildOptions::default()).unwrap().engine).unwrap();
    assert!(engine.plan().layers.iter().any(|l| l.op.name() == "If"));
    let x = Tensor::from_vec(vec![2], vec![3f32, 4.0]).unwrap();
    let mut ctx = engine.create_context().unwrap();
    for (c, want) in [(true, [8.0, 10.0]), (false, [-6.0, -15.0])] {
        let cond = Tensor::from_bools(Vec::<usize>::new(), &[c]).unwrap();
        let out = ctx.run(&[("x", &x), ("cond", &cond)]).unwrap();
        assert_eq!(out[0].1.as_slice::<f32>().unwrap(), want);
    }
    // Fixed with --input-value, the If is replaced by its branch.
    let mut input_values = HashMap::new();
    input_values.insert("cond".to_string(), Tensor::from_bools(Vec::<usize>::new(), &[false]).unwrap());
    let opts = ImportOptions { input_values, ..Default::default() };
    assert_eq!(run(&if_model(None), &opts).unwrap(), [-6.0, -15.0]);
    let g = import_bytes(&encode(&if_model(None)), ExternalDataRoot::default(), &opts).unwrap();
    assert!(g.nodes().all(|n| n.op().is_none_or(|op| op.name() != "If")));
}

/// `if cond then x[0..2] * 2 else x` followed by `+ 1`: the branches'
/// outputs differ in shape, so the If's size depends on the data.
#[test]
fn branches_of_different_shapes_size_the_layers_after_them() {
    let mut if_node = node("If", "choose", &["cond"], &["y"]);
    let then_nodes = vec![node("Slice", "head", &["x", "zero", "two_i"], &["h"]), node("Mul", "double", &["h", "two"], &["t"])];
    let then =
        pb::GraphProto { name: "then".into(), node: then_nodes, output: vec![value_info("t", F32, &[2])], ..Default::default() };
    let els = pb::GraphProto {
        name: "else".into(),
        node: vec![node("Identity", "same", &["x"], &["e"])],
        output: vec![value_info("e", F32, &[5])],
        ..Default::default()
    };
    if_node.attribute.push(graph_attr("then_branch", then));
    if_node.attribute.push(graph_attr("else_branch", els));
    let i64s = |name: &str, v: i64| pb::TensorProto {
        name: name.into(),
        data_type: common::I64,
        dims: vec![1],
        int64_data: vec![v],
        ..Default::default()
    };
    let m = model(
        vec![if_node, node("Add", "plus_one", &["y", "one"], &["z"])],
        vec![value_info("x", F32, &[5]), value_info("cond", BOOL, &[])],
        vec![value_info("z", F32, &[5])],
        vec![f32_tensor("one", &[1], &[1.0]), f32_tensor("two", &[1], &[2.0]), i64s("zero", 0), i64s("two_i", 2)],
    );
    let g = import_bytes(&encode(&m), ExternalDataRoot::default(), &ImportOptions::default()).unwrap();
    let engine = Engine::from_bytes(&build_graph(g, &BuildOptions::default()).unwrap().engine).unwrap();
    let report = trtc::inspect::text(&engine);
    assert!(report.contains("sizes depend on the data after layer choose"), "{report}");
    let x = Tensor::from_vec(vec![5], vec![1f32, 2., 3., 4., 5.]).unwrap();
    let mut ctx = engine.create_context().unwrap();
    for (c, want) in [(true, vec![3f32, 5.]), (false, vec![2., 3., 4., 5., 6.]), (true, vec![3., 5.])] {
        let cond = Tensor::from_bools(Vec::<usize>::new(), &[c]).unwrap();
        let out = ctx.run(&[("x", &x), ("cond", &cond)]).unwrap();
        assert_eq!(out[0].1.shape(), [want.len()]);
        assert_eq!(out[0].1.as_slice::<f32>().unwrap(), want);
    }
}

#[test]
fn branches_nest_and_report_unsupported_ops_inside() {
    // The then branch is itself an If on a constant.
    let mut m = if_model(Some(true));
    let graph = m.graph.as_mut().unwrap();
    let inner = graph.node[0].clone();
    let mut outer = node("If", "outer", &["cond"], &["y"]);
    outer.attribute.push(graph_attr("then_branch", branch("then", vec![inner], "y", vec![])));
    outer.attribute.push(graph_attr("else_branch", branch("else", vec![node("Neg", "neg", &["x1"], &["n"])], "n", vec![])));
    // The inner If's output is `y` inside the branch; the outer If's too.
    graph.node[0] = outer;
    assert_eq!(run(&m, &ImportOptions::default()).unwrap(), [8.0, 10.0]);

    // An op trtc lacks, inside a branch that is not even taken, is reported
    // with its node before anything is built.
    let graph = m.graph.as_mut().unwrap();
    graph.node[0].attribute[1] =
        graph_attr("else_branch", branch("else", vec![node("NoSuchOp", "odd", &["x1"], &["n"])], "n", vec![]));
    let err = format!("{:#}", run(&m, &ImportOptions::default()).unwrap_err());
    assert!(err.contains("unsupported ONNX ops: NoSuchOp (node 'odd')"), "{err}");
}

fn i64_scalar(name: &str, v: i64) -> pb::TensorProto {
    pb::TensorProto { name: name.into(), data_type: common::I64, int64_data: vec![v], ..Default::default() }
}

/// `for i in 0..trips while cond: y = y + x * i; scan i-th y`, with the
/// body's condition `i < stop_after` (so the loop may end early).
fn loop_model(trips: i64, stop_after: i64) -> pb::ModelProto {
    let mut cast = node("Cast", "i_float", &["i"], &["fi"]);
    cast.attribute.push(common::int_attr("to", 1));
    let body = pb::GraphProto {
        name: "body".into(),
        node: vec![
            cast,
            node("Mul", "xi", &["x", "fi"], &["xi"]),
            node("Add", "acc", &["y_in", "xi"], &["y_out"]),
            node("Less", "go_on", &["i", "stop"], &["cond_out"]),
            node("Identity", "row", &["y_out"], &["scan"]),
        ],
        initializer: vec![i64_scalar("stop", stop_after)],
        input: vec![value_info("i", common::I64, &[]), value_info("cond_in", BOOL, &[]), value_info("y_in", F32, &[2])],
        output: vec![value_info("cond_out", BOOL, &[]), value_info("y_out", F32, &[2]), value_info("scan", F32, &[2])],
        ..Default::default()
    };
    let mut lp = node("Loop", "accumulate", &["trips", "", "y0"], &["y", "rows"]);
    lp.attribute.push(graph_attr("body", body));
    model(
        vec![lp],
        vec![value_info("x", F32, &[2])],
        vec![value_info("y", F32, &[2]), value_info("rows", F32, &[3, 2])],
        vec![i64_scalar("trips", trips), f32_tensor("y0", &[2], &[0.5, 0.5])],
    )
}

fn run_all(m: &pb::ModelProto) -> anyhow::Result<Vec<(Vec<usize>, Vec<f32>)>> {
    let g = import_bytes(&encode(m), ExternalDataRoot::default(), &ImportOptions::default())?;
    let engine = Engine::from_bytes(&build_graph(g, &BuildOptions::default())?.engine)?;
    let x = Tensor::from_vec(vec![2], vec![3f32, 4.0])?;
    let out = engine.create_context()?.run(&[("x", &x)])?;
    out.iter().map(|(_, t)| Ok((t.shape().to_vec(), t.as_slice::<f32>()?.to_vec()))).collect()
}

#[test]
fn a_loop_with_known_trips_is_unrolled_with_its_scan_outputs() {
    // Three iterations (i = 0, 1, 2): y = 0.5 + x * (0 + 1 + 2).
    let out = run_all(&loop_model(3, 100)).unwrap();
    assert_eq!(out[0], (vec![2], vec![9.5, 12.5]));
    assert_eq!(out[1], (vec![3, 2], vec![0.5, 0.5, 3.5, 4.5, 9.5, 12.5]));
    // The body's condition stops it after i = 1: two iterations.
    let out = run_all(&loop_model(3, 1)).unwrap();
    assert_eq!(out[0], (vec![2], vec![3.5, 4.5]));
    assert_eq!(out[1], (vec![2, 2], vec![0.5, 0.5, 3.5, 4.5]));
}

fn rows(out: &[(Vec<usize>, Vec<f32>)]) -> usize {
    out[1].0[0]
}

#[test]
fn a_loop_too_long_to_unroll_runs_as_a_layer() {
    // 5000 iterations (more than trtc unrolls): y = 0.5 + x * (0 + ... + 4999).
    let out = run_all(&loop_model(5000, 1 << 20)).unwrap();
    let mut y = [0.5f32, 0.5];
    for i in 0..5000 {
        y = [y[0] + 3.0 * i as f32, y[1] + 4.0 * i as f32];
    }
    assert_eq!(out[0], (vec![2], y.to_vec()));
    assert_eq!(rows(&out), 5000);
    assert_eq!(&out[1].1[..4], [0.5, 0.5, 3.5, 4.5]);
    // A trip count of 2^40 that the body's condition ends after i = 1.
    let out = run_all(&loop_model(1 << 40, 1)).unwrap();
    assert_eq!(out[0], (vec![2], vec![3.5, 4.5]));
    assert_eq!(out[1], (vec![2, 2], vec![0.5, 0.5, 3.5, 4.5]));
}

/// `loop_model`, its trip count and initial condition graph inputs, and
/// its stacked rows doubled after it (a layer sized by them).
fn loop_model_run_time() -> pb::ModelProto {
    let mut m = loop_model(0, 100);
    let g = m.graph.as_mut().unwrap();
    g.initializer.retain(|t| t.name != "trips");
    g.input.push(value_info("trips", common::I64, &[]));
    g.input.push(value_info("go", BOOL, &[]));
    g.node[0].input[1] = "go".into();
    g.node.push(node("Add", "twice", &["rows", "rows"], &["rows2"]));
    g.output.push(value_info("rows2", F32, &[3, 2]));
    m
}

#[test]
fn a_run_time_trip_count_sizes_the_scan_outputs_of_each_run() {
    let g = import_bytes(&encode(&loop_model_run_time()), ExternalDataRoot::default(), &ImportOptions::default()).unwrap();
    let engine = Engine::from_bytes(&build_graph(g, &BuildOptions::default()).unwrap().engine).unwrap();
    let x = Tensor::from_vec(vec![2], vec![3f32, 4.0]).unwrap();
    let mut ctx = engine.create_context().unwrap();
    // 0 iterations, then more than the engine planned room for (kept on
    // the heap), then few again (in the arena), then a false condition.
    for (trips, go, want_rows) in [(0i64, true, 0usize), (7, true, 7), (40, true, 40), (1, true, 1), (5, false, 0)] {
        let m = Tensor::scalar(trips);
        let cond = Tensor::from_bools(Vec::<usize>::new(), &[go]).unwrap();
        let out = ctx.run(&[("x", &x), ("trips", &m), ("go", &cond)]).unwrap();
        let y = out[0].1.as_slice::<f32>().unwrap();
        let sum = (0..want_rows).sum::<usize>() as f32;
        assert_eq!(y, [0.5 + 3.0 * sum, 0.5 + 4.0 * sum], "{trips} trips");
        assert_eq!(out[1].1.shape(), [want_rows, 2]);
        assert_eq!(out[2].1.shape(), [want_rows, 2]);
        let rows = out[1].1.as_slice::<f32>().unwrap();
        let doubled: Vec<f32> = rows.iter().map(|v| v * 2.0).collect();
        assert_eq!(out[2].1.as_slice::<f32>().unwrap(), doubled);
        if want_rows > 0 {
            assert_eq!(&rows[rows.len() - 2..], y);
        }
    }
}

#[test]
fn a_loop_that_never_ends_is_an_error_not_a_hang() {
    // No trip count and a condition that stays true: only the iteration
    // bound ends it.
    let mut m = loop_model(0, 1 << 40);
    let g = m.graph.as_mut().unwrap();
    g.node[0].input[0] = String::new();
    g.node[0].output.truncate(1);
    g.output.truncate(1);
    let err = format!("{:#}", run_all(&m).unwrap_err());
    assert!(err.contains("layer accumulate (Loop)") && err.contains("1048576 iterations"), "{err}");
}

#[test]
fn a_loop_of_many_body_nodes_runs_as_a_layer() {
    // 4000 iterations of a 301-node body would add 1.2 million nodes if
    // unrolled.
    let mut nodes = vec![node("Identity", "keep", &["cond_in"], &["cond_out"])];
    nodes.extend((0..300).map(|k| {
        let from = if k == 0 { "y_in".to_string() } else { format!("y{k}") };
        let to = if k == 299 { "y_out".to_string() } else { format!("y{}", k + 1) };
        node("Identity", &format!("pass{k}"), &[&from], &[&to])
    }));
    let body = pb::GraphProto {
        name: "body".into(),
        node: nodes,
        input: vec![value_info("i", common::I64, &[]), value_info("cond_in", BOOL, &[]), value_info("y_in", F32, &[2])],
        output: vec![value_info("cond_out", BOOL, &[]), value_info("y_out", F32, &[2])],
        ..Default::default()
    };
    let mut lp = node("Loop", "long", &["trips", "", "x"], &["y"]);
    lp.attribute.push(graph_attr("body", body));
    let m = model(vec![lp], vec![value_info("x", F32, &[2])], vec![value_info("y", F32, &[2])], vec![i64_scalar("trips", 4000)]);
    let out = run_all(&m).unwrap();
    assert_eq!(out[0], (vec![2], vec![3.0, 4.0]));
}

/// A Scan summing the rows of `x[steps, 2]` into a state, its body `y = s + row`.
fn scan_model(steps: i64, num_scan_inputs: i64, directions: Option<Vec<i64>>) -> pb::ModelProto {
    let body = pb::GraphProto {
        name: "body".into(),
        node: vec![node("Add", "acc", &["s_in", "row"], &["s_out"]), node("Identity", "copy", &["s_out"], &["y"])],
        input: vec![value_info("s_in", F32, &[2]), value_info("row", F32, &[2])],
        output: vec![value_info("s_out", F32, &[2]), value_info("y", F32, &[2])],
        ..Default::default()
    };
    let mut scan = node("Scan", "running_sum", &["s0", "x"], &["s", "ys"]);
    scan.attribute.push(graph_attr("body", body));
    scan.attribute.push(common::int_attr("num_scan_inputs", num_scan_inputs));
    if let Some(d) = directions {
        scan.attribute.push(pb::AttributeProto {
            name: "scan_input_directions".into(),
            r#type: 7,
            ints: d,
            ..Default::default()
        });
    }
    let mut m = model(
        vec![scan],
        vec![value_info("x", F32, &[steps, 2])],
        vec![value_info("s", F32, &[2]), value_info("ys", F32, &[steps, 2])],
        vec![f32_tensor("s0", &[2], &[0.5, 0.5])],
    );
    m.opset_import[0].version = 16;
    m
}

fn run_scan(m: &pb::ModelProto, x: Vec<f32>) -> anyhow::Result<Vec<(Vec<usize>, Vec<f32>)>> {
    let g = import_bytes(&encode(m), ExternalDataRoot::default(), &ImportOptions::default())?;
    let engine = Engine::from_bytes(&build_graph(g, &BuildOptions::default())?.engine)?;
    let n = x.len() / 2;
    let x = Tensor::from_vec(vec![n, 2], x)?;
    let out = engine.create_context()?.run(&[("x", &x)])?;
    out.iter().map(|(_, t)| Ok((t.shape().to_vec(), t.as_slice::<f32>()?.to_vec()))).collect()
}

#[test]
fn a_scan_is_unrolled_in_either_direction() {
    let x = vec![1f32, 2., 3., 4., 5., 6.];
    let out = run_scan(&scan_model(3, 1, None), x.clone()).unwrap();
    assert_eq!(out[0], (vec![2], vec![9.5, 12.5]));
    assert_eq!(out[1], (vec![3, 2], vec![1.5, 2.5, 4.5, 6.5, 9.5, 12.5]));
    // Reversed: the last row first.
    let out = run_scan(&scan_model(3, 1, Some(vec![1])), x).unwrap();
    assert_eq!(out[1], (vec![3, 2], vec![5.5, 6.5, 8.5, 10.5, 9.5, 12.5]));
}

#[test]
fn bad_scans_are_errors_naming_the_node() {
    let x = vec![0f32; 6];
    for (m, needle) in [
        (scan_model(3, 0, None), "num_scan_inputs 0 must be between 1 and"),
        (scan_model(3, 3, None), "num_scan_inputs 3 must be between 1 and"),
        (scan_model(3, 1, Some(vec![2])), "scan_input_directions [2] must hold 1 values, each 0 or 1"),
        (scan_model(3, 1, Some(vec![0, 1])), "scan_input_directions [0, 1] must hold 1 values"),
    ] {
        let err = format!("{:#}", run_scan(&m, x.clone()).unwrap_err());
        assert!(err.contains("node 'running_sum' (Scan)") && err.contains(needle), "{err}");
    }
}

#[test]
fn a_scan_too_long_to_unroll_runs_as_a_layer() {
    // 5000 rows (more than trtc unrolls), read in reverse.
    let x: Vec<f32> = (0..10000).map(|i| (i % 7) as f32).collect();
    let out = run_scan(&scan_model(5000, 1, Some(vec![1])), x.clone()).unwrap();
    let (mut s, mut ys) = ([0.5f32, 0.5], Vec::new());
    for row in x.chunks(2).rev() {
        s = [s[0] + row[0], s[1] + row[1]];
        ys.extend(s);
    }
    assert_eq!(out[0], (vec![2], s.to_vec()));
    assert_eq!(out[1], (vec![5000, 2], ys));
}

#[test]
fn a_scan_over_a_sequence_whose_length_varies_runs_as_a_layer() {
    use trtc::build::{import, ModelSource, ShapeProfile};
    let mut m = scan_model(3, 1, None);
    let g = m.graph.as_mut().unwrap();
    let symbolic = |name: &str| {
        common::value_info_dims(
            name,
            F32,
            vec![
                pb::tensor_shape_proto::dimension::Value::DimParam("steps".into()),
                pb::tensor_shape_proto::dimension::Value::DimValue(2),
            ],
        )
    };
    g.input = vec![symbolic("x")];
    g.output[1] = symbolic("ys");
    let at = |n: usize| vec![("x".to_string(), vec![n, 2])];
    let profile = ShapeProfile::from_flags(&at(1), &at(3), &at(9)).unwrap();
    let opts = BuildOptions { profiles: vec![profile], ..Default::default() };
    let graph = import(&ModelSource::Bytes(encode(&m)), &opts).unwrap();
    let engine = Engine::from_bytes(&build_graph(graph, &opts).unwrap().engine).unwrap();
    assert!(engine.plan().layers.iter().any(|l| l.op.name() == "Scan"));
    let mut ctx = engine.create_context().unwrap();
    for n in [1usize, 4, 9, 2] {
        let x: Vec<f32> = (0..2 * n).map(|i| i as f32).collect();
        let out = ctx.run(&[("x", &Tensor::from_vec(vec![n, 2], x.clone()).unwrap())]).unwrap();
        let (mut s, mut ys) = ([0.5f32, 0.5], Vec::new());
        for row in x.chunks(2) {
            s = [s[0] + row[0], s[1] + row[1]];
            ys.extend(s);
        }
        assert_eq!(out[0].1.as_slice::<f32>().unwrap(), s, "{n} steps");
        assert_eq!(out[1].1.shape(), [n, 2]);
        assert_eq!(out[1].1.as_slice::<f32>().unwrap(), ys);
    }
}

#[test]
fn a_scan8_over_scalars_per_batch_entry_is_an_error_not_a_panic() {
    // Scan-8: a batch axis first; x[2] sliced per batch entry is a scalar,
    // with no axis left to scan.
    let mut m = scan_model(3, 1, None);
    m.opset_import[0].version = 8;
    let g = m.graph.as_mut().unwrap();
    g.node[0].input = vec!["".into(), "s0".into(), "x".into()];
    g.input = vec![value_info("x", F32, &[2])];
    g.initializer = vec![f32_tensor("s0", &[2, 2], &[0.5; 4])];
    let err = format!("{:#}", import_bytes(&encode(&m), ExternalDataRoot::default(), &ImportOptions::default()).unwrap_err());
    assert!(err.contains("node 'running_sum' (Scan)") && err.contains("no axis to scan"), "{err}");
}
