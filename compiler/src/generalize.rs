//! One graph for input shapes that vary: the model imported at several input
//! shapes (every profile's minimum, optimum and maximum, the largest last),
//! generalized node by node into the graph an engine with profiles runs.
//!
//! The frontend evaluates shape computations on the spot, so at each input
//! shape the model gives the same nodes with other constants and other
//! static attributes where the exporter computed them from `Shape`. Each
//! difference is generalized by a rule that reads sizes from tensor shapes
//! at run time, and only when it reproduces every imported graph:
//!
//! - a Reshape whose target changes becomes a `DynamicReshape` (an axis
//!   fixed where the targets agree, else a copy of an axis of its input or
//!   of a model input equal to it at every shape, else the one inferred axis);
//! - a global pool (its window the whole input) becomes the reduction over
//!   the spatial axes;
//! - a Slice whose bounds change becomes a `DynamicSlice` (each start and
//!   end fixed or another tensor's size, negated when counted from the end);
//! - a Resize whose output sizes change becomes a `DynamicResize` (each axis
//!   fixed, following its scale, or read from another tensor's shape, as
//!   feature pyramids upsample one level to the size of the next);
//! - an Expand whose target changes becomes a `DynamicExpand`, a Tile whose
//!   repeats change a `DynamicTile`;
//! - an If or Loop decided at run time whose branches or body differ (they
//!   were imported at each shape too) gets branches or a body generalized
//!   by these same rules, recursively: their sizes are read from the
//!   tensors they take;
//! - a constant whose value changes becomes a `SliceLike` of its value at
//!   the largest shapes (position ids, causal masks, grids), when every
//!   smaller value is the leading block of that one, sized by other
//!   tensors' axes; else, for integers, an `IndexGrid`, an affine function
//!   of the element indices (`arange(batch) * seq + arange(seq)`); else a
//!   `SizeOf`, when each of its few entries is a tensor's axis size (a
//!   loop's trip count following the sequence length).
//!
//! A size read from another tensor is taken from a tensor that has it at
//! every imported shape, the nearest first: the node's own inputs, the
//! model's inputs, its ancestors, then any tensor placed before it (see
//! `find_source`). The rules are data (`OP_RULES`), tried in order.
//!
//! Anything else that differs is refused, naming the node: trtc keeps no
//! symbolic value of its own yet. [`same_plan_but_shapes`] then checks the
//! result: at every imported shape, the generalized plan must infer the
//! tensor types the model has there.

use crate::ir::{Graph, Node, Patch, Port, Wire};
use crate::lower;
use anyhow::{bail, Result};
use petgraph::stable_graph::NodeIndex;
use trtc_runtime::ops::control::{ControlOp, If, Loop, Scan, SubPlan};
use trtc_runtime::ops::linalg::LinalgOp;
use trtc_runtime::ops::movement::{
    AtShapes, DimOf, DynamicExpand, DynamicReshape, DynamicResize, DynamicSlice, DynamicTile, GridAxis, GridValue, IndexGrid,
    MovementOp, ReshapeDim, Resize, ResizeSize, SignedDim, SizeOf, Slice, SliceLike,
};
use trtc_runtime::ops::reduce::{Reduce, ReduceKind, ReduceOp};
use trtc_runtime::{DType, Op, Tensor};

/// Rewrites every graph (the same model at several input shapes, the last
/// at the largest) so that they all hold the same nodes, whose shapes follow
/// their inputs'.
pub fn generalize(graphs: &mut [Graph]) -> Result<()> {
    let Some(max) = graphs.last() else { bail!("no imported graphs to generalize") };
    if graphs.iter().any(|g| g.node_count() != max.node_count()) {
        return Err(structure_differs(graphs));
    }
    let order = Order::of(max);
    let mut rewrites = Vec::new();
    for n in max.node_ids() {
        let nodes: Vec<&Node> = graphs.iter().map(|g| g.node(n)).collect();
        let name = &nodes[0].name;
        if nodes.iter().any(|x| &x.name != name) {
            return Err(structure_differs(graphs));
        }
        if let Some(c) = nodes[0].constant() {
            if nodes.iter().any(|x| x.constant().is_none()) {
                return Err(structure_differs(graphs));
            }
            if nodes.iter().any(|x| x.constant() != Some(c)) {
                rewrites.push(constant_rule(graphs, &order, n)?);
            }
            continue;
        }
        let ops: Vec<Option<&Op>> = nodes.iter().map(|x| x.op()).collect();
        if ops.iter().all(|o| *o == ops[0]) {
            continue;
        }
        if let Some((_, rule)) = OP_RULES.iter().find(|(applies, _)| ops.iter().all(|o| o.is_some_and(applies))) {
            rewrites.push(rule(graphs, &order, n)?);
            continue;
        }
        return Err(refusal(name, format!("({}) has other attributes at other input shapes", ops[0].map_or("?", |o| o.name()))));
    }
    if rewrites.is_empty() {
        return Ok(());
    }
    // Op rewrites first: each keeps its node's inputs, which a constant's
    // rewrite recorded after it then redirects to the constant's
    // replacement (recorded before, the op would read the removed
    // constant).
    rewrites.sort_by_key(|r| !matches!(r, Rewrite::Op { .. }));
    for g in graphs.iter_mut() {
        let mut patch = Patch::new();
        for r in &rewrites {
            r.record(g, &mut patch)?;
        }
        g.apply(patch)?;
    }
    Ok(())
}

/// A rule for an op node whose attributes differ between the imported
/// shapes: the rewrite that reads those sizes at run time, or a refusal.
type Rule = fn(&[Graph], &Order, NodeIndex) -> Result<Rewrite>;

/// Which ops a rule applies to.
type Applies = fn(&Op) -> bool;

/// The op rules: which ops each applies to (at every imported shape), and
/// the rule. A changing constant has its own rule ([`constant_rule`]).
const OP_RULES: &[(Applies, Rule)] = &[
    (|o| matches!(o, Op::Movement(MovementOp::Reshape(_))), reshape_rule),
    (|o| matches!(o, Op::Movement(MovementOp::Slice(_))), slice_rule),
    (|o| matches!(o, Op::Movement(MovementOp::Expand(_))), expand_rule),
    (|o| matches!(o, Op::Movement(MovementOp::Tile(_))), tile_rule),
    (|o| matches!(o, Op::Movement(MovementOp::Resize(_))), resize_rule),
    (|o| matches!(o, Op::Linalg(LinalgOp::Pool(_))), global_pool_rule),
    (|o| matches!(o, Op::Control(_)), control_rule),
];

/// The error for a model whose nodes differ between imported shapes (an op
/// that folds away at one shape only): a node one graph has and the
/// largest lacks, or the other way round.
fn structure_differs(graphs: &[Graph]) -> anyhow::Error {
    let names = |g: &Graph| g.node_ids().map(|n| g.node(n).name.clone()).collect::<std::collections::BTreeSet<String>>();
    let max = names(graphs.last().expect("graphs"));
    for g in &graphs[..graphs.len() - 1] {
        let here = names(g);
        let only_here = here.difference(&max).next();
        let only_max = max.difference(&here).next();
        if only_here.is_some() || only_max.is_some() {
            let show = |n: Option<&String>| n.map_or("nothing".to_string(), |n| format!("'{n}'"));
            return anyhow::anyhow!(
                "the model's nodes differ at different input shapes: one shape gives {} where the largest gives {}, so its shapes cannot vary in one engine (build one engine per shape with --shape)",
                show(only_here),
                show(only_max)
            );
        }
    }
    anyhow::anyhow!("the model's nodes differ at different input shapes, so its shapes cannot vary in one engine (build one engine per shape with --shape)")
}

fn refusal(node: &str, why: String) -> anyhow::Error {
    anyhow::anyhow!("node '{node}' {why}: the model computes it from the input shapes in a way trtc cannot keep symbolic yet")
}

/// Where each node may sit in one topological order of the generalized
/// graph: op nodes where they are, constants just before their first
/// reader. A rule reads sizes only from tensors placed before the node it
/// rewrites, so that every rewrite together keeps the graph acyclic.
struct Order {
    pos: std::collections::HashMap<NodeIndex, usize>,
    /// The graph's topological order.
    topo: Vec<NodeIndex>,
}

impl Order {
    fn of(g: &Graph) -> Order {
        let topo = g.topo_order();
        let index: std::collections::HashMap<NodeIndex, usize> = topo.iter().enumerate().map(|(i, &n)| (n, i)).collect();
        let pos = topo
            .iter()
            .map(|&n| {
                let at = if g.node(n).constant().is_some() {
                    let first = (0..g.node(n).outputs.len())
                        .flat_map(|port| g.consumers(Port { node: n, port }))
                        .map(|(c, _)| index[&c])
                        .min()
                        .unwrap_or(topo.len());
                    2 * first
                } else {
                    2 * index[&n] + 1
                };
                (n, at)
            })
            .collect();
        Order { pos, topo }
    }

    fn before(&self, a: NodeIndex, b: NodeIndex) -> bool {
        self.pos[&a] < self.pos[&b]
    }
}

/// A size read at run time: an axis of one of the node's own inputs, or of
/// another tensor of the graph (which the node then also reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Own { input: usize, axis: usize },
    Other { port: Port, axis: usize },
}

/// The first tensor axis whose size is `sizes[k]` in graph `k`, for every
/// `k`, in order of preference: the node's own inputs, the model's inputs
/// in binding order, the node's ancestors nearest first, then any other
/// tensor placed before it in `order`, latest first.
/// The nearer the source, the likelier it is the size the exporter read
/// (a size equal at the imported shapes may differ at others: `ceil(h / 2)`
/// and `floor(h / 2)` agree on every even `h`).
fn find_source(graphs: &[Graph], order: &Order, n: NodeIndex, sizes: &[usize]) -> Option<Source> {
    let sizes: Vec<Option<usize>> = sizes.iter().map(|&s| Some(s)).collect();
    find_source_where(graphs, order, n, &sizes)
}

/// [`find_source`] where `None` entries match any size.
fn find_source_where(graphs: &[Graph], order: &Order, n: NodeIndex, sizes: &[Option<usize>]) -> Option<Source> {
    let g0 = &graphs[0];
    let matches = |p: Port, axis: usize| {
        graphs.iter().zip(sizes).all(|(g, s)| g.ty(p).shape.get(axis).is_some_and(|d| s.is_none_or(|s| s == *d)))
    };
    let first_axis = |p: Port| (0..g0.ty(p).shape.len()).find(|&axis| matches(p, axis));
    for (input, p) in g0.inputs_of(n).iter().enumerate() {
        if let Some(axis) = p.and_then(first_axis) {
            return Some(Source::Own { input, axis });
        }
    }
    let model_inputs = g0.inputs().iter().map(|&node| Port { node, port: 0 });
    if let Some(found) = model_inputs.clone().find_map(|port| first_axis(port).map(|axis| Source::Other { port, axis })) {
        return Some(found);
    }
    let outputs = |m: NodeIndex| (0..g0.node(m).outputs.len()).map(move |port| Port { node: m, port });
    let ancestors = g0.ancestors(n);
    let mut candidates: Vec<Port> = ancestors.iter().flat_map(|&a| outputs(a)).collect();
    let ancestors: std::collections::HashSet<NodeIndex> = ancestors.into_iter().collect();
    // Latest first: the tensor nearest the node, which is more often the
    // end of a chain of same-sized layers than its start (reading a
    // convolution's output for its size would keep its activation from
    // fusing into it).
    candidates.extend(
        order.topo.iter().rev().copied().filter(|&m| m != n && !ancestors.contains(&m) && order.before(m, n)).flat_map(outputs),
    );
    candidates.into_iter().find_map(|port| first_axis(port).map(|axis| Source::Other { port, axis }))
}

/// A generalized node, recorded into each graph's patch.
enum Rewrite {
    /// Op node `node` runs `op` on its own inputs and then the tensors
    /// `extra` (read for their shapes).
    Op { node: NodeIndex, op: Op, extra: Vec<Port> },
    /// Constant node `node` becomes `op` on the constant `value` and the
    /// tensors `extra`.
    Constant { node: NodeIndex, value: Tensor, op: Op, extra: Vec<Port> },
    /// Constant node `node` becomes `op` on the tensors `extra` alone.
    Generated { node: NodeIndex, op: Op, extra: Vec<Port> },
}

impl Rewrite {
    fn record(&self, g: &Graph, patch: &mut Patch) -> Result<()> {
        match self {
            Rewrite::Op { node, op, extra } => {
                let mut inputs = crate::ir::wires(&g.inputs_of(*node));
                inputs.extend(extra.iter().map(|&p| Some(Wire::Graph(p))));
                patch.rewrite(g, *node, op.clone(), &inputs)
            }
            Rewrite::Constant { node, op, extra, .. } | Rewrite::Generated { node, op, extra } => {
                let name = &g.node(*node).name;
                let mut inputs = match self {
                    Rewrite::Constant { value, .. } => vec![Some(patch.add_constant(&format!("{name}:largest"), value.clone()))],
                    _ => Vec::new(),
                };
                inputs.extend(extra.iter().map(|&p| Some(Wire::Graph(p))));
                let out = patch.add_op(g, name, op.clone(), &inputs).map_err(|e| anyhow::anyhow!("rewriting {name}: {e}"))?;
                patch.replace(g, Port { node: *node, port: 0 }, out[0]);
                patch.remove(*node);
                Ok(())
            }
        }
    }
}

/// The sizes a node's rule reads: its own inputs, then the extra tensors
/// it gains.
struct Reads {
    own: usize,
    extra: Vec<Port>,
}

impl Reads {
    fn new(graphs: &[Graph], n: NodeIndex) -> Reads {
        Reads { own: graphs[0].inputs_of(n).len(), extra: Vec::new() }
    }

    /// The input index of a source, adding it to the extra tensors.
    fn dim(&mut self, source: Source) -> DimOf {
        match source {
            Source::Own { input, axis } => DimOf { input, axis },
            Source::Other { port, axis } => {
                let k = self.extra.iter().position(|&p| p == port).unwrap_or_else(|| {
                    self.extra.push(port);
                    self.extra.len() - 1
                });
                DimOf { input: self.own + k, axis }
            }
        }
    }

    /// Every input's shape in `g`, as the rewritten node sees them.
    fn shapes<'g>(&self, g: &'g Graph, n: NodeIndex) -> Vec<Option<&'g [usize]>> {
        let mut shapes: Vec<Option<&[usize]>> = g.inputs_of(n).iter().map(|p| p.map(|p| g.ty(p).shape.as_slice())).collect();
        shapes.extend(self.extra.iter().map(|&p| Some(g.ty(p).shape.as_slice())));
        shapes
    }
}

fn reshape_rule(graphs: &[Graph], order: &Order, n: NodeIndex) -> Result<Rewrite> {
    let name = &graphs[0].node(n).name;
    let targets: Vec<&[usize]> = graphs
        .iter()
        .map(|g| match g.node(n).op() {
            Some(Op::Movement(MovementOp::Reshape(r))) => r.shape.as_slice(),
            _ => unreachable!("checked by the caller"),
        })
        .collect();
    let rank = targets[0].len();
    if targets.iter().any(|t| t.len() != rank) {
        return Err(refusal(name, "(Reshape) has a target rank that changes with the input shapes".into()));
    }
    let mut reads = Reads::new(graphs, n);
    // A Reshape to its input's own shape at every shape (kept at import so
    // that each shape gives the same nodes) copies every axis: the
    // optimizer removes it.
    let identity = graphs.iter().zip(&targets).all(|(g, t)| g.inputs_of(n)[0].is_some_and(|x| g.ty(x).shape == *t));
    if identity {
        let op = DynamicReshape { dims: (0..rank).map(ReshapeDim::Copy).collect() };
        return Ok(Rewrite::Op { node: n, op: op.into(), extra: Vec::new() });
    }
    // Sizes that stay, then axes of the input itself; a single axis left is
    // inferred from the element count when that reproduces every graph
    // (reading it from another tensor, found first, ties the reshape to
    // that tensor: a matrix product's output whose fusion it then blocks).
    let sizes_at = |i: usize| -> Vec<usize> { targets.iter().map(|t| t[i]).collect() };
    let mut dims: Vec<Option<ReshapeDim>> = (0..rank)
        .map(|i| {
            let sizes = sizes_at(i);
            if sizes.iter().all(|&s| s == sizes[0]) {
                return Some(ReshapeDim::Fixed(sizes[0]));
            }
            match find_source(graphs, order, n, &sizes) {
                Some(Source::Own { input: 0, axis }) => Some(ReshapeDim::Copy(axis)),
                _ => None,
            }
        })
        .collect();
    let open: Vec<usize> = (0..rank).filter(|&i| dims[i].is_none()).collect();
    let inferred = open.len() == 1 && {
        let mut trial: Vec<ReshapeDim> = dims.iter().map(|d| d.unwrap_or(ReshapeDim::Infer)).collect();
        trial[open[0]] = ReshapeDim::Infer;
        let op = DynamicReshape { dims: trial };
        graphs.iter().zip(&targets).all(|(g, t)| op.target_of(&reads.shapes(g, n)).ok().as_deref() == Some(*t))
    };
    for i in open {
        dims[i] = Some(if inferred {
            ReshapeDim::Infer
        } else {
            match find_source(graphs, order, n, &sizes_at(i)) {
                Some(Source::Own { input: 0, axis }) => ReshapeDim::Copy(axis),
                Some(source) => ReshapeDim::Of(reads.dim(source)),
                None => ReshapeDim::Infer,
            }
        });
    }
    let op = DynamicReshape { dims: dims.into_iter().map(|d| d.expect("every axis decided")).collect() };
    for (g, t) in graphs.iter().zip(&targets) {
        if op.target_of(&reads.shapes(g, n)).ok().as_deref() != Some(*t) {
            return Err(refusal(
                name,
                format!("(Reshape to {t:?}) has a target that follows the input shapes in no way trtc can express"),
            ));
        }
    }
    Ok(Rewrite::Op { node: n, op: op.into(), extra: reads.extra })
}

/// A Resize whose output sizes change: each axis keeps its size, follows
/// its scale (`floor(input * scale)`), or reads another tensor's size (the
/// scale then being output / input).
fn resize_rule(graphs: &[Graph], order: &Order, n: NodeIndex) -> Result<Rewrite> {
    let name = &graphs[0].node(n).name;
    let resizes: Vec<&Resize> = graphs
        .iter()
        .map(|g| match g.node(n).op() {
            Some(Op::Movement(MovementOp::Resize(r))) => r,
            _ => unreachable!("checked by the caller"),
        })
        .collect();
    let largest = *resizes.last().expect("graphs");
    let rank = largest.sizes.len();
    let mut reads = Reads::new(graphs, n);
    let inputs: Vec<&[usize]> =
        graphs.iter().map(|g| g.inputs_of(n).first().copied().flatten().map_or(&[][..], |p| g.ty(p).shape.as_slice())).collect();
    let mut sizes = Vec::with_capacity(rank);
    for a in 0..rank {
        let out: Vec<usize> = resizes.iter().map(|r| r.sizes.get(a).copied().unwrap_or(0)).collect();
        let same_scale = resizes.iter().all(|r| r.scales.get(a) == largest.scales.get(a));
        if out.iter().all(|&s| s == out[0]) && same_scale {
            sizes.push(ResizeSize::Fixed);
        } else if same_scale
            && resizes
                .iter()
                .zip(&inputs)
                .all(|(r, x)| x.get(a).is_some_and(|&i| (r.scales[a] * i as f64).floor() as usize == r.sizes[a]))
        {
            sizes.push(ResizeSize::Scaled);
        } else {
            match find_source(graphs, order, n, &out) {
                Some(source) => sizes.push(ResizeSize::Of(reads.dim(source))),
                None => {
                    return Err(refusal(name, format!("(Resize) has an output size on axis {a} that no tensor of the model has")))
                }
            }
        }
    }
    let op = DynamicResize { resize: largest.clone(), sizes };
    for (g, r) in graphs.iter().zip(&resizes) {
        if op.at(&reads.shapes(g, n)).ok().as_ref() != Some(*r) {
            return Err(refusal(name, "(Resize) has sizes that follow the input shapes in no way trtc can express".into()));
        }
    }
    Ok(Rewrite::Op { node: n, op: op.into(), extra: reads.extra })
}

/// A pool whose window changes because it is the whole input (global
/// average, max or L1/L2 pooling over spatial sizes that vary): the same
/// reduction over the spatial axes, keeping them as size 1.
fn global_pool_rule(graphs: &[Graph], _order: &Order, n: NodeIndex) -> Result<Rewrite> {
    let name = &graphs[0].node(n).name;
    let why = "(a pool) has a window that changes with the input shapes and is not the whole input";
    let mut kind = None;
    for g in graphs {
        let Some(Op::Linalg(LinalgOp::Pool(p))) = g.node(n).op() else { unreachable!("checked by the caller") };
        let Some(Some(x)) = g.inputs_of(n).first().copied() else { return Err(refusal(name, why.into())) };
        let spatial = g.ty(x).shape.get(2..).unwrap_or_default();
        let whole = p.kernel_shape == spatial
            && p.pads.iter().all(|&v| v == 0)
            && p.dilations.iter().all(|&v| v == 1)
            && !p.indices
            && g.node(n).outputs.len() == 1;
        let k = ReduceKind::of_global_pool(&p.kind);
        if !whole || k.is_none() || (kind.is_some() && kind != k) {
            return Err(refusal(name, why.into()));
        }
        kind = k;
    }
    let rank = graphs[0].node(n).outputs[0].ty.shape.len();
    let op = Reduce::new(kind.expect("graphs"), (2..rank).collect(), true);
    Ok(Rewrite::Op { node: n, op: ReduceOp::Reduce(op).into(), extra: Vec::new() })
}

/// A Slice whose starts or ends change: each bound fixed, or another
/// tensor's size (negated for bounds counted from the end).
fn slice_rule(graphs: &[Graph], order: &Order, n: NodeIndex) -> Result<Rewrite> {
    let name = &graphs[0].node(n).name;
    let slices: Vec<&Slice> = graphs
        .iter()
        .map(|g| match g.node(n).op() {
            Some(Op::Movement(MovementOp::Slice(s))) => s,
            _ => unreachable!("checked by the caller"),
        })
        .collect();
    let largest = *slices.last().expect("graphs");
    if slices.iter().any(|s| s.axes != largest.axes || s.steps != largest.steps) {
        return Err(refusal(name, "(Slice) has axes or steps that change with the input shapes".into()));
    }
    let mut reads = Reads::new(graphs, n);
    let bound = |values: Vec<i64>, reads: &mut Reads| -> Result<Option<SignedDim>> {
        if values.iter().all(|&v| v == values[0]) {
            return Ok(None);
        }
        let negate = values.iter().all(|&v| v < 0);
        if !negate && values.iter().any(|&v| v < 0) {
            return Err(refusal(name, "(Slice) has a bound whose sign changes with the input shapes".into()));
        }
        let sizes: Vec<usize> = values.iter().map(|&v| v.unsigned_abs() as usize).collect();
        match find_source(graphs, order, n, &sizes) {
            Some(source) => Ok(Some(SignedDim { dim: reads.dim(source), negate })),
            None => Err(refusal(name, "(Slice) has a bound that no tensor of the model has as a size".into())),
        }
    };
    let mut starts = Vec::with_capacity(largest.axes.len());
    let mut ends = Vec::with_capacity(largest.axes.len());
    for i in 0..largest.axes.len() {
        starts.push(bound(slices.iter().map(|s| s.starts[i]).collect(), &mut reads)?);
        ends.push(bound(slices.iter().map(|s| s.ends[i]).collect(), &mut reads)?);
    }
    let op = DynamicSlice { slice: largest.clone(), starts, ends };
    for (g, s) in graphs.iter().zip(&slices) {
        if op.at(&reads.shapes(g, n)).ok().as_ref() != Some(*s) {
            return Err(refusal(name, "(Slice) has bounds that follow the input shapes in no way trtc can express".into()));
        }
    }
    Ok(Rewrite::Op { node: n, op: op.into(), extra: reads.extra })
}

/// Per axis of `values` (one vector per imported shape, of one length):
/// `None` where every shape gives the same size, else a source of that
/// size (`Expand`'s target, `Tile`'s repeats). `what` names it in errors.
fn axis_sources(
    graphs: &[Graph],
    order: &Order,
    n: NodeIndex,
    values: &[&[usize]],
    reads: &mut Reads,
    what: &str,
) -> Result<Vec<Option<DimOf>>> {
    let name = &graphs[0].node(n).name;
    let rank = values.last().map_or(0, |v| v.len());
    if values.iter().any(|v| v.len() != rank) {
        return Err(refusal(name, format!("({what}) has a rank that changes with the input shapes")));
    }
    let mut dims = Vec::with_capacity(rank);
    for a in 0..rank {
        let sizes: Vec<usize> = values.iter().map(|v| v[a]).collect();
        if sizes.iter().all(|&s| s == sizes[0]) {
            dims.push(None);
            continue;
        }
        match find_source(graphs, order, n, &sizes) {
            Some(source) => dims.push(Some(reads.dim(source))),
            None => return Err(refusal(name, format!("({what}) has a size on axis {a} that no tensor of the model has"))),
        }
    }
    Ok(dims)
}

/// A Tile whose repeats change: each count fixed, or another tensor's
/// size (`x.repeat(batch, 1, 1)`).
fn tile_rule(graphs: &[Graph], order: &Order, n: NodeIndex) -> Result<Rewrite> {
    let name = &graphs[0].node(n).name;
    let counts: Vec<&[usize]> = graphs
        .iter()
        .map(|g| match g.node(n).op() {
            Some(Op::Movement(MovementOp::Tile(t))) => t.repeats.as_slice(),
            _ => unreachable!("checked by the caller"),
        })
        .collect();
    let mut reads = Reads::new(graphs, n);
    let dims = axis_sources(graphs, order, n, &counts, &mut reads, "Tile")?;
    let largest = *counts.last().expect("graphs");
    let op = DynamicTile { repeats: largest.to_vec(), dims };
    for (g, c) in graphs.iter().zip(&counts) {
        if op.at(&reads.shapes(g, n)).ok().map(|t| t.repeats).as_deref() != Some(*c) {
            return Err(refusal(name, "(Tile) has repeats that follow the input shapes in no way trtc can express".into()));
        }
    }
    Ok(Rewrite::Op { node: n, op: op.into(), extra: reads.extra })
}

/// An Expand whose target changes: each axis fixed, or read from another
/// tensor's shape.
fn expand_rule(graphs: &[Graph], order: &Order, n: NodeIndex) -> Result<Rewrite> {
    let name = &graphs[0].node(n).name;
    let targets: Vec<&[usize]> = graphs
        .iter()
        .map(|g| match g.node(n).op() {
            Some(Op::Movement(MovementOp::Expand(e))) => e.shape.as_slice(),
            _ => unreachable!("checked by the caller"),
        })
        .collect();
    let mut reads = Reads::new(graphs, n);
    let dims = axis_sources(graphs, order, n, &targets, &mut reads, "Expand")?;
    let largest = *targets.last().expect("graphs");
    let op = DynamicExpand { shape: largest.to_vec(), dims };
    for (g, t) in graphs.iter().zip(&targets) {
        if op.at(&reads.shapes(g, n)).ok().map(|e| e.shape).as_deref() != Some(*t) {
            return Err(refusal(name, "(Expand) has a target that follows the input shapes in no way trtc can express".into()));
        }
    }
    Ok(Rewrite::Op { node: n, op: op.into(), extra: reads.extra })
}

/// A constant whose value changes: the leading block of its largest value
/// ([`SliceLike`]), or else, for integers, an affine function of the
/// element indices ([`IndexGrid`]), or sizes of tensors' axes
/// ([`SizeOf`]: a loop's trip count that follows the sequence length).
fn constant_rule(graphs: &[Graph], order: &Order, n: NodeIndex) -> Result<Rewrite> {
    let name = &graphs[0].node(n).name;
    let values: Vec<&Tensor> = graphs.iter().map(|g| g.node(n).constant().expect("a constant at every shape")).collect();
    let largest = *values.last().expect("graphs");
    let why = "is a constant whose value changes with the input shapes";
    if values.iter().any(|v| v.dtype() != largest.dtype() || v.shape().len() != largest.shape().len()) {
        return Err(refusal(name, format!("{why} (its type changes)")));
    }
    if let Some(r) = slice_like_rule(graphs, order, n, &values)? {
        return Ok(r);
    }
    if let Some(r) = index_grid_rule(graphs, order, n, &values)? {
        return Ok(r);
    }
    if let Some(r) = size_of_rule(graphs, order, n, &values)? {
        return Ok(r);
    }
    Err(refusal(
        name,
        format!("{why}, neither as the leading block of its largest value nor as an affine function of its indices"),
    ))
}

fn slice_like_rule(graphs: &[Graph], order: &Order, n: NodeIndex, values: &[&Tensor]) -> Result<Option<Rewrite>> {
    let largest = *values.last().expect("graphs");
    // The constant's own input is its value at the largest shapes.
    let mut reads = Reads { own: 1, extra: Vec::new() };
    let mut dims = Vec::with_capacity(largest.shape().len());
    for a in 0..largest.shape().len() {
        let sizes: Vec<usize> = values.iter().map(|v| v.shape()[a]).collect();
        if sizes.iter().all(|&s| s == largest.shape()[a]) {
            dims.push(None);
            continue;
        }
        match find_source(graphs, order, n, &sizes) {
            Some(source) => dims.push(Some(reads.dim(source))),
            None => return Ok(None),
        }
    }
    if reads.extra.is_empty() {
        return Ok(None);
    }
    let op: Op = SliceLike { dims }.into();
    for (g, v) in graphs.iter().zip(values) {
        let mut ins: Vec<Option<&Tensor>> = vec![Some(largest)];
        let shapes: Vec<Tensor> = reads.extra.iter().map(|&p| shape_stand_in(g.ty(p).shape.clone())).collect();
        ins.extend(shapes.iter().map(Some));
        match op.eval_owned(&ins) {
            Ok(cut) if cut[0] == **v => {}
            _ => return Ok(None),
        }
    }
    Ok(Some(Rewrite::Constant { node: n, value: largest.clone(), op, extra: reads.extra }))
}

/// `value[i] = offset + sum(step[a] * i[a])`: the offset and each axis'
/// step (`None` on axes of size 1 or less, where any step fits), if the
/// integer tensor is such a grid.
fn affine_fit(v: &Tensor) -> Option<(i64, Vec<Option<i64>>)> {
    let data = match v.dtype() {
        DType::I64 | DType::I32 => v.to_i64_vec().ok()?,
        _ => return None,
    };
    let shape = v.shape();
    let strides = trtc_runtime::ops::util::strides(shape);
    let offset = *data.first()?;
    let steps: Vec<Option<i64>> =
        shape.iter().zip(&strides).map(|(&d, &st)| (d > 1).then(|| data[st].wrapping_sub(offset))).collect();
    let fits = data.iter().enumerate().all(|(flat, &x)| {
        let at =
            shape.iter().zip(&strides).zip(&steps).fold(offset, |acc, ((&d, &st), step)| {
                acc.wrapping_add(step.unwrap_or(0).wrapping_mul(((flat / st) % d) as i64))
            });
        at == x
    });
    fits.then_some((offset, steps))
}

fn index_grid_rule(graphs: &[Graph], order: &Order, n: NodeIndex, values: &[&Tensor]) -> Result<Option<Rewrite>> {
    let largest = *values.last().expect("graphs");
    let Some(fits) = values.iter().map(|v| affine_fit(v)).collect::<Option<Vec<_>>>() else { return Ok(None) };
    if fits.iter().any(|(offset, _)| *offset != fits[0].0) {
        return Ok(None);
    }
    let mut reads = Reads { own: 0, extra: Vec::new() };
    let mut axes = Vec::with_capacity(largest.shape().len());
    for a in 0..largest.shape().len() {
        let sizes: Vec<usize> = values.iter().map(|v| v.shape()[a]).collect();
        let size = if sizes.iter().all(|&s| s == sizes[0]) {
            GridValue::Fixed(sizes[0] as i64)
        } else {
            match find_source(graphs, order, n, &sizes) {
                Some(source) => GridValue::Of(reads.dim(source)),
                None => return Ok(None),
            }
        };
        let steps: Vec<Option<i64>> = fits.iter().map(|(_, steps)| steps[a]).collect();
        let known: Vec<i64> = steps.iter().flatten().copied().collect();
        let step = if known.iter().all(|&s| Some(&s) == known.first()) {
            GridValue::Fixed(known.first().copied().unwrap_or(0))
        } else if known.iter().all(|&s| s > 0) {
            let sizes: Vec<Option<usize>> = steps.iter().map(|s| s.map(|s| s as usize)).collect();
            match find_source_where(graphs, order, n, &sizes) {
                Some(source) => GridValue::Of(reads.dim(source)),
                None => return Ok(None),
            }
        } else {
            return Ok(None);
        };
        axes.push(GridAxis { size, step });
    }
    let op = IndexGrid { dtype: largest.dtype(), offset: fits[0].0, axes };
    for (g, v) in graphs.iter().zip(values) {
        let shapes: Vec<Option<&[usize]>> = reads.extra.iter().map(|&p| Some(g.ty(p).shape.as_slice())).collect();
        if op.values(&shapes).ok() != v.to_i64_vec().ok() {
            return Ok(None);
        }
    }
    let op: Op = op.into();
    Ok(Some(Rewrite::Generated { node: n, op, extra: reads.extra }))
}

/// A small integer constant (a scalar or a vector of a few entries) each of
/// whose entries is, at every imported shape, the size of a tensor's axis.
fn size_of_rule(graphs: &[Graph], order: &Order, n: NodeIndex, values: &[&Tensor]) -> Result<Option<Rewrite>> {
    let largest = *values.last().expect("graphs");
    let shape = largest.shape();
    if !matches!(largest.dtype(), DType::I64 | DType::I32) || shape.len() > 1 || values.iter().any(|v| v.shape() != shape) {
        return Ok(None);
    }
    let Ok(ints) = values.iter().map(|v| v.to_i64_vec()).collect::<Result<Vec<Vec<i64>>, _>>() else { return Ok(None) };
    let mut reads = Reads { own: 0, extra: Vec::new() };
    let mut dims = Vec::with_capacity(largest.len());
    for e in 0..largest.len() {
        let Ok(sizes) = ints.iter().map(|v| usize::try_from(v[e])).collect::<Result<Vec<usize>, _>>() else { return Ok(None) };
        match find_source(graphs, order, n, &sizes) {
            Some(source) => dims.push(reads.dim(source)),
            None => return Ok(None),
        }
    }
    let op = SizeOf { dtype: largest.dtype(), dims, scalar: shape.is_empty() };
    Ok(Some(Rewrite::Generated { node: n, op: op.into(), extra: reads.extra }))
}

/// An If or Loop whose sub-plans differ between the imported shapes: each
/// sub-plan's graphs (one per imported shape) generalized like the model's.
fn control_rule(graphs: &[Graph], _order: &Order, n: NodeIndex) -> Result<Rewrite> {
    let name = &graphs[0].node(n).name;
    let ops: Vec<&ControlOp> = graphs
        .iter()
        .map(|g| match g.node(n).op() {
            Some(Op::Control(c)) => Ok(c),
            _ => Err(refusal(name, "is control flow at one input shape only".into())),
        })
        .collect::<Result<_>>()?;
    let general = |subs: Vec<&SubPlan>| -> Result<SubPlan> {
        let mut sub_graphs = subs.into_iter().map(crate::ir::from_sub_plan).collect::<Result<Vec<_>>>()?;
        generalize(&mut sub_graphs).map_err(|e| anyhow::anyhow!("in node '{name}': {e:#}"))?;
        crate::ir::to_sub_plan(sub_graphs.last().expect("one graph per imported shape"))
    };
    let op: Op = match ops[0] {
        ControlOp::If(_) => {
            let branches = |then: bool| {
                ops.iter()
                    .map(|o| match o {
                        ControlOp::If(i) if then => Ok(&*i.then_branch),
                        ControlOp::If(i) => Ok(&*i.else_branch),
                        _ => Err(refusal(name, "is an If at one input shape only".into())),
                    })
                    .collect::<Result<Vec<&SubPlan>>>()
            };
            If::new(general(branches(true)?)?, general(branches(false)?)?).map_err(|e| anyhow::anyhow!("{e}"))?.into()
        }
        ControlOp::Loop(first) => {
            let bodies = ops
                .iter()
                .map(|o| match o {
                    ControlOp::Loop(l) if l.carried == first.carried => Ok(&*l.body),
                    _ => Err(refusal(name, "is another Loop at another input shape".into())),
                })
                .collect::<Result<Vec<&SubPlan>>>()?;
            let nominal = ops.iter().map(|o| if let ControlOp::Loop(l) = o { l.nominal_trips } else { 0 }).max().unwrap_or(1);
            Loop::new(general(bodies)?, first.carried, nominal).map_err(|e| anyhow::anyhow!("{e}"))?.into()
        }
        ControlOp::Scan(first) => {
            // The same scan at every shape but for its body's types.
            let same = |s: &Scan| Scan { body: first.body.clone(), ..s.clone() } == *first;
            let bodies = ops
                .iter()
                .map(|o| match o {
                    ControlOp::Scan(s) if same(s) => Ok(&*s.body),
                    _ => Err(refusal(name, "is another Scan at another input shape".into())),
                })
                .collect::<Result<Vec<&SubPlan>>>()?;
            Scan { body: Box::new(general(bodies)?), ..first.clone() }.into()
        }
        ControlOp::ShapedByValues(first) => {
            // The same op at every shape but for its room: the largest
            // shape's (the last graph's); a larger run keeps its output on
            // the heap.
            let same = ops.iter().all(|o| matches!(o, ControlOp::ShapedByValues(s) if s.op == first.op));
            if !same {
                return Err(refusal(name, "is another op at another input shape".into()));
            }
            Op::Control(ops[ops.len() - 1].clone())
        }
    };
    Ok(Rewrite::Op { node: n, op, extra: Vec::new() })
}

/// A tensor of `shape` for an op that reads only its shape (empty data
/// would do, but a real tensor keeps the op's checks honest).
fn shape_stand_in(shape: Vec<usize>) -> Tensor {
    let len = shape.iter().product();
    Tensor::from_vec(shape, vec![0u8; len]).expect("a u8 tensor of its own length")
}

/// Checks that `other` (the same model imported at other input shapes) has
/// the layers, weights and bindings of `max`, and that inferring `max`'s
/// layers at `other`'s input shapes gives `other`'s tensor types.
pub fn same_plan_but_shapes(max: &lower::Lowered, other: &lower::Lowered) -> Result<()> {
    let (a, b) = (&max.plan, &other.plan);
    for (i, (la, lb)) in a.layers.iter().zip(&b.layers).enumerate() {
        if la != lb {
            bail!("layer {i} is {} ({}) at the max shapes, {} ({}) here", la.name, la.op.name(), lb.name, lb.op.name());
        }
    }
    if a.layers.len() != b.layers.len() {
        bail!("{} layers at the max shapes, {} here", a.layers.len(), b.layers.len());
    }
    let names_differ = a.tensors.len() != b.tensors.len() || a.tensors.iter().zip(&b.tensors).any(|(x, y)| x.name != y.name);
    if names_differ || a.inputs != b.inputs || a.outputs != b.outputs || a.fixed_inputs != b.fixed_inputs {
        bail!("the tensors or bindings differ");
    }
    if max.weights != other.weights {
        let which = a
            .tensors
            .iter()
            .zip(&b.tensors)
            .find(|(x, y)| {
                matches!(x.storage, trtc_runtime::plan::Storage::Weight { .. }) && (x.ty != y.ty || x.storage != y.storage)
            })
            .map(|(x, _)| format!(": first '{}'", x.name))
            .unwrap_or_default();
        bail!("constants computed from the input shapes differ{which}");
    }
    let inputs: Vec<trtc_runtime::TensorType> = b.inputs.iter().map(|&i| b.tensors[i].ty.clone()).collect();
    let bound = trtc_runtime::profile::bind(a, &inputs).map_err(|e| anyhow::anyhow!("{e}"))?;
    for (t, ty) in b.tensors.iter().zip(&bound) {
        if &t.ty != ty {
            bail!("tensor '{}' is {} here, but the plan for the max shapes infers {ty}", t.name, t.ty);
        }
    }
    Ok(())
}
