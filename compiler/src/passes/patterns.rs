//! Pattern recognition of functions exporters spell out in primitives.

use super::Pass;
use crate::ir::{wires, Graph, Patch, Port, Wire};
use anyhow::Result;
use petgraph::stable_graph::NodeIndex;
use trtc_runtime::ops::elementwise::{BinaryKind, ElementwiseOp, Unary, UnaryKind};
use trtc_runtime::Op;

fn binary(graph: &Graph, n: NodeIndex, kind: BinaryKind) -> Option<(Port, Port)> {
    match graph.node(n).op()? {
        Op::Elementwise(ElementwiseOp::Binary(b)) if b.kind == kind => {
            let ins = graph.inputs_of(n);
            Some((ins[0]?, ins[1]?))
        }
        _ => None,
    }
}

/// The scalar value of a constant port (any shape with one element).
fn scalar(graph: &Graph, p: Port) -> Option<f64> {
    let t = graph.node(p.node).constant()?;
    (t.len() == 1).then(|| t.to_f64_vec()[0])
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

/// The sole consumer of a port (not a graph output).
fn sole(graph: &Graph, p: Port) -> Option<NodeIndex> {
    if graph.is_output(p) {
        return None;
    }
    match graph.consumers(p).as_slice() {
        [(c, _)] => Some(*c),
        _ => None,
    }
}

/// The other operand of a binary node, given one.
fn other(a: (Port, Port), this: Port) -> Option<Port> {
    if a.0 == this {
        Some(a.1)
    } else if a.1 == this {
        Some(a.0)
    } else {
        None
    }
}

/// GELU in its erf form, `x * 0.5 * (1 + erf(x / sqrt(2)))`, or its tanh
/// form, in the orders the exporters emit, becomes one `Gelu` node (which the epilogue fusion
/// then folds into the MatMul before it).
pub struct GeluPattern;

impl GeluPattern {
    /// Matches at an Erf node; returns (x, the last node of the pattern).
    fn match_at(graph: &Graph, erf: NodeIndex) -> Option<(Port, NodeIndex)> {
        match graph.node(erf).op()? {
            Op::Elementwise(ElementwiseOp::Unary(u)) if u.kind == UnaryKind::Erf => {}
            _ => return None,
        }
        let scaled = graph.inputs_of(erf)[0]?;
        // x / sqrt(2) or x * (1 / sqrt(2)).
        let x = if let Some((a, b)) = binary(graph, scaled.node, BinaryKind::Div) {
            scalar(graph, b).filter(|&c| close(c, std::f64::consts::SQRT_2)).map(|_| a)?
        } else {
            let (a, b) = binary(graph, scaled.node, BinaryKind::Mul)?;
            match (scalar(graph, a), scalar(graph, b)) {
                (_, Some(c)) if close(c, std::f64::consts::FRAC_1_SQRT_2) => a,
                (Some(c), _) if close(c, std::f64::consts::FRAC_1_SQRT_2) => b,
                _ => return None,
            }
        };
        sole(graph, scaled)?;
        Self::match_outer(graph, Port { node: erf, port: 0 }, x)
    }

    /// The part both forms share: `f` is erf(...) or tanh(...) of `x`;
    /// matches `x * 0.5 * (1 + f)` in the exporters' orders and returns the
    /// last node.
    fn match_outer(graph: &Graph, f_out: Port, x: Port) -> Option<(Port, NodeIndex)> {
        let add = sole(graph, f_out)?;
        let one = other(binary(graph, add, BinaryKind::Add)?, f_out)?;
        if !scalar(graph, one).is_some_and(|c| close(c, 1.0)) {
            return None;
        }
        let add_out = Port { node: add, port: 0 };
        let m1 = sole(graph, add_out)?;
        let f1 = other(binary(graph, m1, BinaryKind::Mul)?, add_out)?;
        let m1_out = Port { node: m1, port: 0 };
        let is_half = |p: Port| scalar(graph, p).is_some_and(|c| close(c, 0.5));
        if f1 == x {
            // (x * (1 + f)) * 0.5
            let m2 = sole(graph, m1_out)?;
            let f2 = other(binary(graph, m2, BinaryKind::Mul)?, m1_out)?;
            return is_half(f2).then_some((x, m2));
        }
        if is_half(f1) {
            // x * ((1 + f) * 0.5)
            let m2 = sole(graph, m1_out)?;
            let f2 = other(binary(graph, m2, BinaryKind::Mul)?, m1_out)?;
            return (f2 == x).then_some((x, m2));
        }
        // (x * 0.5) * (1 + f)
        let (a, b) = binary(graph, f1.node, BinaryKind::Mul)?;
        sole(graph, f1)?;
        let ok = (a == x && is_half(b)) || (b == x && is_half(a));
        ok.then_some((x, m1))
    }

    /// The tanh form, `x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`
    /// (GPT-2's `gelu_new`), matched at the Tanh node.
    fn match_tanh_at(graph: &Graph, t: NodeIndex) -> Option<(Port, NodeIndex)> {
        match graph.node(t).op()? {
            Op::Elementwise(ElementwiseOp::Unary(u)) if u.kind == UnaryKind::Tanh => {}
            _ => return None,
        }
        let scaled = graph.inputs_of(t)[0]?;
        sole(graph, scaled)?;
        let (a, b) = binary(graph, scaled.node, BinaryKind::Mul)?;
        let k = (2.0 / std::f64::consts::PI).sqrt();
        let inner = match (scalar(graph, a), scalar(graph, b)) {
            (_, Some(c)) if close(c, k) => a,
            (Some(c), _) if close(c, k) => b,
            _ => return None,
        };
        sole(graph, inner)?;
        let (p, q) = binary(graph, inner.node, BinaryKind::Add)?;
        // One side is x, the other 0.044715 * x^3.
        let cubic_of = |c: Port| -> Option<Port> {
            let (m, n) = binary(graph, c.node, BinaryKind::Mul)?;
            let cube = match (scalar(graph, m), scalar(graph, n)) {
                (_, Some(v)) if close(v, 0.044715) => m,
                (Some(v), _) if close(v, 0.044715) => n,
                _ => return None,
            };
            sole(graph, c)?;
            sole(graph, cube)?;
            use trtc_runtime::ops::elementwise::ElementwiseOp as E;
            match graph.node(cube.node).op()? {
                Op::Elementwise(E::Pow(_)) => {
                    let ins = graph.inputs_of(cube.node);
                    scalar(graph, ins[1]?).filter(|&e| e == 3.0)?;
                    ins[0]
                }
                _ => None,
            }
        };
        let x = if cubic_of(q) == Some(p) {
            p
        } else if cubic_of(p) == Some(q) {
            q
        } else {
            return None;
        };
        Self::match_outer(graph, Port { node: t, port: 0 }, x)
    }
}

impl Pass for GeluPattern {
    fn name(&self) -> &'static str {
        "gelu-pattern"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        graph.rewrite_each(|graph, n| {
            let (found, kind) = match Self::match_at(graph, n) {
                Some(f) => (f, UnaryKind::Gelu),
                None => match Self::match_tanh_at(graph, n) {
                    Some(f) => (f, UnaryKind::GeluTanh),
                    None => return Ok(None),
                },
            };
            let (x, last) = found;
            if !graph.ty(x).dtype.is_float() {
                return Ok(None);
            }
            let name = format!("{} (gelu)", graph.node(last).name);
            let mut patch = Patch::new();
            let g =
                patch.add_op(graph, &name, Unary::new(kind).into(), &[Some(x.into())]).map_err(|e| anyhow::anyhow!("{e}"))?[0];
            patch.replace(graph, Port { node: last, port: 0 }, g);
            // The pattern's other nodes are now dead; dead-nodes removes them.
            patch.remove(last);
            Ok(Some(patch))
        })
    }
}

/// Multi-head attention spelled out (head split, Q·Kᵀ, scaling, additive
/// mask, Softmax, the NaN guard, ·V, head merge) becomes one `Attention` node.
pub struct AttentionPattern;

/// `x` if `p` is `x * c` (or `c * x`) for a scalar constant `c` and `p` has
/// no other reader.
fn peel_scale(graph: &Graph, p: Port) -> (Port, Option<f32>) {
    if let Some((a, b)) = binary(graph, p.node, BinaryKind::Mul) {
        if sole(graph, p).is_some() {
            if let Some(c) = scalar(graph, b) {
                return (a, Some(c as f32));
            }
            if let Some(c) = scalar(graph, a) {
                return (b, Some(c as f32));
            }
        }
    }
    (p, None)
}

/// `x` and the head count if `p` is `Transpose(perm)(Reshape([B,S,H,D])(x))`
/// with `x: [B,S,H*D]`, each read only once.
fn head_split(graph: &Graph, p: Port, perm: &[usize]) -> Option<(Port, usize)> {
    use trtc_runtime::ops::movement::MovementOp;
    let Op::Movement(MovementOp::Transpose(t)) = graph.node(p.node).op()? else { return None };
    if t.perm != perm || sole(graph, p).is_none() {
        return None;
    }
    let r = graph.inputs_of(p.node)[0]?;
    let Op::Movement(m) = graph.node(r.node).op()? else { return None };
    m.is_reshape().then_some(())?;
    sole(graph, r)?;
    let x = graph.inputs_of(r.node)[0]?;
    let (xs, rs) = (&graph.ty(x).shape, &graph.ty(r).shape);
    (xs.len() == 3 && rs.len() == 4 && xs[0] == rs[0] && xs[1] == rs[1] && xs[2] == rs[2] * rs[3]).then_some((x, rs[2]))
}

/// Kᵀ with heads split, `[B,H,D,S]`: either `head_split(k, [0,2,3,1])`, or
/// the dynamo exporter's `Reshape([B,H,D,S])(Transpose([0,2,1])(Reshape([B*H,S,D])(head_split(k, [0,2,1,3]))))`.
fn key_split(graph: &Graph, p: Port) -> Option<(Port, usize)> {
    use trtc_runtime::ops::movement::MovementOp;
    if let Some(found) = head_split(graph, p, &[0, 2, 3, 1]) {
        return Some(found);
    }
    let reshape_input = |p: Port| -> Option<Port> {
        let Op::Movement(m) = graph.node(p.node).op()? else { return None };
        m.is_reshape().then_some(())?;
        sole(graph, p)?;
        graph.inputs_of(p.node)[0]
    };
    let t3 = reshape_input(p)?;
    let Op::Movement(MovementOp::Transpose(t)) = graph.node(t3.node).op()? else { return None };
    if t.perm != [0, 2, 1] || sole(graph, t3).is_none() {
        return None;
    }
    let r3 = graph.inputs_of(t3.node)[0]?;
    let split = reshape_input(r3)?;
    let (k, heads) = head_split(graph, split, &[0, 2, 1, 3])?;
    let (ps, ks) = (&graph.ty(p).shape, &graph.ty(k).shape);
    (ps.len() == 4 && ps[0] == ks[0] && ps[1] == heads && ps[3] == ks[1]).then_some((k, heads))
}

fn is_matmul(graph: &Graph, n: NodeIndex) -> Option<(Port, Port)> {
    use trtc_runtime::ops::linalg::LinalgOp;
    match graph.node(n).op()? {
        Op::Linalg(LinalgOp::MatMul(_)) => {
            let ins = graph.inputs_of(n);
            Some((ins[0]?, ins[1]?))
        }
        _ => None,
    }
}

impl AttentionPattern {
    /// Returns the Attention op, its inputs and the node whose output it replaces.
    fn match_at(graph: &Graph, s: NodeIndex) -> Option<(trtc_runtime::ops::fused::Attention, Vec<Option<Port>>, NodeIndex)> {
        use trtc_runtime::ops::fused::{Attention, ScoreScale};
        use trtc_runtime::ops::movement::MovementOp;
        use trtc_runtime::ops::reduce::{ReduceOp, SoftmaxKind};
        let Op::Reduce(ReduceOp::Softmax(sm)) = graph.node(s).op()? else { return None };
        let s_out = Port { node: s, port: 0 };
        if sm.kind != SoftmaxKind::Softmax || sm.flatten || sm.axis != 3 || graph.ty(s_out).shape.len() != 4 {
            return None;
        }
        let pre = graph.inputs_of(s)[0]?;
        sole(graph, pre)?;
        // Scores (optionally scaled) and an optional additive mask.
        let scores_of = |p: Port| -> Option<(Port, Option<ScoreScale>)> {
            if is_matmul(graph, p.node).is_some() {
                return Some((p, None));
            }
            for (kind, div) in [(BinaryKind::Mul, false), (BinaryKind::Div, true)] {
                if let Some((a, b)) = binary(graph, p.node, kind) {
                    let c = scalar(graph, b)? as f32;
                    if is_matmul(graph, a.node).is_some() && sole(graph, a).is_some() && sole(graph, p).is_some() {
                        return Some((a, Some(if div { ScoreScale::Div(c) } else { ScoreScale::Mul(c) })));
                    }
                }
            }
            None
        };
        let (mm, score_scale, mask) = if let Some((a, b)) = binary(graph, pre.node, BinaryKind::Add) {
            if let Some((m, sc)) = scores_of(a).filter(|(m, _)| sole(graph, *m).is_some()) {
                (m, sc, Some(b))
            } else if let Some((m, sc)) = scores_of(b).filter(|(m, _)| sole(graph, *m).is_some()) {
                (m, sc, Some(a))
            } else {
                return None;
            }
        } else {
            let (m, sc) = scores_of(pre)?;
            (m, sc, None)
        };
        let (qa, kb) = is_matmul(graph, mm.node)?;
        let (qa, q_scale) = peel_scale(graph, qa);
        let (kb, k_scale) = peel_scale(graph, kb);
        let (q, heads) = head_split(graph, qa, &[0, 2, 1, 3])?;
        let (k, heads_k) = key_split(graph, kb)?;
        // The probabilities, possibly through the NaN guard.
        let cons = graph.consumers(s_out);
        let (probs, nan_to_zero) = match cons.as_slice() {
            [(c, 0)] if is_matmul(graph, *c).is_some() => (s_out, false),
            [(a, _), (b, _)] => {
                use trtc_runtime::ops::elementwise::ElementwiseOp as E;
                let (isnan, wh) =
                    if matches!(graph.node(*a).op(), Some(Op::Elementwise(E::IsNaN(_)))) { (*a, *b) } else { (*b, *a) };
                if !matches!(graph.node(isnan).op(), Some(Op::Elementwise(E::IsNaN(_))))
                    || !matches!(graph.node(wh).op(), Some(Op::Elementwise(E::Where(_))))
                {
                    return None;
                }
                let w = graph.inputs_of(wh);
                let zero = w[1].and_then(|z| scalar(graph, z)).is_some_and(|z| z == 0.0);
                if w[0] != Some(Port { node: isnan, port: 0 }) || w[2] != Some(s_out) || !zero {
                    return None;
                }
                sole(graph, Port { node: isnan, port: 0 })?;
                (Port { node: wh, port: 0 }, true)
            }
            _ => return None,
        };
        let pv = sole(graph, probs)?;
        let (p0, vh) = is_matmul(graph, pv)?;
        if p0 != probs {
            return None;
        }
        let (v, heads_v) = head_split(graph, vh, &[0, 2, 1, 3])?;
        let pv_out = Port { node: pv, port: 0 };
        let t = sole(graph, pv_out)?;
        let Op::Movement(MovementOp::Transpose(tr)) = graph.node(t).op()? else { return None };
        if tr.perm != [0, 2, 1, 3] {
            return None;
        }
        let t_out = Port { node: t, port: 0 };
        let r = sole(graph, t_out)?;
        let Op::Movement(m) = graph.node(r).op()? else { return None };
        m.is_reshape().then_some(())?;
        let rs = &graph.ty(Port { node: r, port: 0 }).shape;
        let vs = &graph.ty(v).shape;
        let qs = &graph.ty(q).shape;
        let merged = [qs[0], qs[1], vs[2]];
        if heads != heads_k || heads != heads_v || rs.iter().product::<usize>() != merged.iter().product::<usize>() {
            return None;
        }
        let op = Attention { num_heads: heads, q_scale, k_scale, score_scale, mask: mask.is_some(), nan_to_zero };
        Some((op, vec![Some(q), Some(k), Some(v), mask], r))
    }
}

impl Pass for AttentionPattern {
    fn name(&self) -> &'static str {
        "attention-pattern"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        graph.rewrite_each(|graph, n| {
            let Some((op, mut inputs, last)) = Self::match_at(graph, n) else { return Ok(None) };
            if !op.mask {
                inputs.truncate(3);
            }
            let name = format!("{} (attention)", graph.node(n).name);
            let mut patch = Patch::new();
            // The op checks shapes (e.g. that the mask broadcasts); a graph
            // it rejects is left as it is.
            let Ok(ports) = patch.add_op(graph, &name, op.into(), &wires(&inputs)) else { return Ok(None) };
            let mut result = ports[0];
            // The heads were merged straight into another shape (GPT-2 goes
            // to [batch * seq, hidden] for its Gemm): keep that reshape.
            let want = graph.ty(Port { node: last, port: 0 }).shape.clone();
            if patch.ty(graph, result).shape != want {
                use trtc_runtime::ops::movement::{MovementOp, Reshape};
                // A reshape that follows the input shapes stays one, reading
                // the same tensors' shapes.
                let (op, mut extra): (Op, Vec<Option<crate::ir::Wire>>) = match graph.node(last).op() {
                    Some(Op::Movement(MovementOp::DynamicReshape(d))) => (d.clone().into(), wires(&graph.inputs_of(last)[1..])),
                    _ => (Reshape { shape: want.clone() }.into(), Vec::new()),
                };
                extra.insert(0, Some(result));
                let Ok(reshaped) = patch.add_op(graph, &format!("{name} reshape"), op, &extra) else { return Ok(None) };
                if patch.ty(graph, reshaped[0]).shape != want {
                    return Ok(None);
                }
                result = reshaped[0];
            }
            patch.replace(graph, Port { node: last, port: 0 }, result);
            patch.remove(last);
            Ok(Some(patch))
        })
    }
}

/// LayerNorm spelled out, `(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)
/// * gamma + beta` over the trailing axes (Pow or Mul for the square, with or
/// without gamma and beta), becomes one `LayerNorm` node.
pub struct LayerNormPattern;

/// The trailing axes of a keepdims mean reduction over `x`, as the first
/// normalized axis.
fn trailing_mean(graph: &Graph, n: NodeIndex) -> Option<(Port, usize)> {
    use trtc_runtime::ops::reduce::{ReduceKind, ReduceOp};
    let Op::Reduce(ReduceOp::Reduce(r)) = graph.node(n).op()? else { return None };
    let x = graph.inputs_of(n)[0]?;
    let rank = graph.ty(x).shape.len();
    let mut axes = r.axes.clone();
    axes.sort();
    let first = *axes.first()?;
    let trailing = axes.iter().enumerate().all(|(i, &a)| a == first + i) && axes.last() == Some(&(rank - 1));
    (r.kind == ReduceKind::Mean && r.keepdims && trailing).then_some((x, first))
}

impl LayerNormPattern {
    /// Returns (x, axis, epsilon, gamma, beta, last node).
    #[allow(clippy::type_complexity)]
    fn match_at(graph: &Graph, m1: NodeIndex) -> Option<(Port, usize, f32, Option<Port>, Option<Port>, NodeIndex)> {
        use trtc_runtime::ops::elementwise::ElementwiseOp as E;
        let (x, axis) = trailing_mean(graph, m1)?;
        let mean = Port { node: m1, port: 0 };
        let sub = sole(graph, mean)?;
        let (a, b) = binary(graph, sub, BinaryKind::Sub)?;
        if a != x || b != mean {
            return None;
        }
        let d = Port { node: sub, port: 0 };
        let mut readers: Vec<NodeIndex> = graph.consumers(d).into_iter().map(|(c, _)| c).collect();
        readers.dedup();
        if readers.len() != 2 || graph.is_output(d) {
            return None;
        }
        // One reader squares d, the other divides it by the deviation.
        let is_square = |n: NodeIndex| -> bool {
            if let Some((p, q)) = binary(graph, n, BinaryKind::Mul) {
                return p == d && q == d;
            }
            matches!(graph.node(n).op(), Some(Op::Elementwise(E::Pow(_))))
                && graph.inputs_of(n)[0] == Some(d)
                && graph.inputs_of(n)[1].and_then(|e| scalar(graph, e)) == Some(2.0)
        };
        let (sq, div) = if is_square(readers[0]) { (readers[0], readers[1]) } else { (readers[1], readers[0]) };
        if !is_square(sq) {
            return None;
        }
        let m2 = sole(graph, Port { node: sq, port: 0 })?;
        let (sq_in, axis2) = trailing_mean(graph, m2)?;
        if sq_in.node != sq || axis2 != axis {
            return None;
        }
        let var = Port { node: m2, port: 0 };
        let add = sole(graph, var)?;
        let eps = other(binary(graph, add, BinaryKind::Add)?, var)?;
        let epsilon = scalar(graph, eps)? as f32;
        let add_out = Port { node: add, port: 0 };
        let sqrt = sole(graph, add_out)?;
        if !matches!(graph.node(sqrt).op(), Some(Op::Elementwise(E::Unary(u))) if u.kind == UnaryKind::Sqrt) {
            return None;
        }
        let std = Port { node: sqrt, port: 0 };
        if sole(graph, std)? != div {
            return None;
        }
        let (p, q) = binary(graph, div, BinaryKind::Div)?;
        if p != d || q != std {
            return None;
        }
        let norm_shape = graph.ty(x).shape[axis..].to_vec();
        let fits = |t: Port| {
            let s = &graph.ty(t).shape;
            graph.node(t.node).constant().is_some()
                && s.len() <= norm_shape.len()
                && s.iter().rev().zip(norm_shape.iter().rev()).all(|(a, b)| a == b || *a == 1)
        };
        let mut last = div;
        let mut gamma = None;
        let mut beta = None;
        if let Some(m) = sole(graph, Port { node: last, port: 0 }) {
            if let Some(g) = binary(graph, m, BinaryKind::Mul).and_then(|ab| other(ab, Port { node: last, port: 0 })) {
                if fits(g) {
                    gamma = Some(g);
                    last = m;
                }
            }
        }
        if let Some(a) = sole(graph, Port { node: last, port: 0 }) {
            if let Some(bt) = binary(graph, a, BinaryKind::Add).and_then(|ab| other(ab, Port { node: last, port: 0 })) {
                if fits(bt) {
                    beta = Some(bt);
                    last = a;
                }
            }
        }
        Some((x, axis, epsilon, gamma, beta, last))
    }
}

impl Pass for LayerNormPattern {
    fn name(&self) -> &'static str {
        "layernorm-pattern"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        use trtc_runtime::ops::reduce::LayerNorm;
        graph.rewrite_each(|graph, n| {
            let Some((x, axis, epsilon, gamma, beta, last)) = Self::match_at(graph, n) else { return Ok(None) };
            let ty = graph.ty(x).clone();
            if ty.dtype != trtc_runtime::DType::F32 {
                return Ok(None);
            }
            let mut patch = Patch::new();
            let gamma = match gamma {
                Some(g) => g.into(),
                None => {
                    let ones =
                        trtc_runtime::Tensor::from_vec(ty.shape[axis..].to_vec(), vec![1f32; ty.shape[axis..].iter().product()])?;
                    patch.add_constant(&format!("{}.ones", graph.node(n).name), ones)
                }
            };
            let name = format!("{} (layernorm)", graph.node(last).name);
            let op = LayerNorm::new(axis, epsilon).into();
            let Ok(ports) = patch.add_op(graph, &name, op, &[Some(x.into()), Some(gamma), beta.map(Wire::from)]) else {
                return Ok(None);
            };
            patch.replace(graph, Port { node: last, port: 0 }, ports[0]);
            patch.remove(last);
            Ok(Some(patch))
        })
    }
}

/// Softmax spelled out over one axis, `exp(x - max(x)) / sum(exp(x - max(x)))`
/// (or without the max), becomes one `Softmax` node.
pub struct SoftmaxPattern;

fn reduce_over(graph: &Graph, n: NodeIndex, kind: trtc_runtime::ops::reduce::ReduceKind) -> Option<(Port, usize)> {
    use trtc_runtime::ops::reduce::ReduceOp;
    let Op::Reduce(ReduceOp::Reduce(r)) = graph.node(n).op()? else { return None };
    (r.kind == kind && r.keepdims && r.axes.len() == 1).then(|| Some((graph.inputs_of(n)[0]?, r.axes[0])))?
}

impl SoftmaxPattern {
    /// Matches at the Exp node; returns (x, axis, last node).
    fn match_at(graph: &Graph, e: NodeIndex) -> Option<(Port, usize, NodeIndex)> {
        use trtc_runtime::ops::elementwise::ElementwiseOp as E;
        use trtc_runtime::ops::reduce::ReduceKind;
        match graph.node(e).op()? {
            Op::Elementwise(E::Unary(u)) if u.kind == UnaryKind::Exp => {}
            _ => return None,
        }
        let arg = graph.inputs_of(e)[0]?;
        // x - max(x) over the same axis, or x itself.
        let (x, max_axis) = match binary(graph, arg.node, BinaryKind::Sub) {
            Some((a, m)) => match reduce_over(graph, m.node, ReduceKind::Max) {
                Some((mx, axis)) if mx == a && sole(graph, arg).is_some() => (a, Some(axis)),
                _ => (arg, None),
            },
            None => (arg, None),
        };
        let ex = Port { node: e, port: 0 };
        let mut readers: Vec<NodeIndex> = graph.consumers(ex).into_iter().map(|(c, _)| c).collect();
        readers.dedup();
        if readers.len() != 2 || graph.is_output(ex) {
            return None;
        }
        let (sum, div) = if reduce_over(graph, readers[0], ReduceKind::Sum).is_some() {
            (readers[0], readers[1])
        } else {
            (readers[1], readers[0])
        };
        let (s_in, axis) = reduce_over(graph, sum, ReduceKind::Sum)?;
        if s_in != ex || max_axis.is_some_and(|m| m != axis) {
            return None;
        }
        let total = Port { node: sum, port: 0 };
        sole(graph, total)?;
        let (p, q) = binary(graph, div, BinaryKind::Div)?;
        (p == ex && q == total).then_some((x, axis, div))
    }
}

impl Pass for SoftmaxPattern {
    fn name(&self) -> &'static str {
        "softmax-pattern"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        use trtc_runtime::ops::reduce::Softmax;
        graph.rewrite_each(|graph, n| {
            let Some((x, axis, last)) = Self::match_at(graph, n) else { return Ok(None) };
            if !graph.ty(x).dtype.is_float() {
                return Ok(None);
            }
            let name = format!("{} (softmax)", graph.node(last).name);
            let mut patch = Patch::new();
            let Ok(ports) = patch.add_op(graph, &name, Softmax::new(axis).into(), &[Some(x.into())]) else { return Ok(None) };
            if patch.ty(graph, ports[0]) != graph.ty(Port { node: last, port: 0 }) {
                return Ok(None);
            }
            patch.replace(graph, Port { node: last, port: 0 }, ports[0]);
            patch.remove(last);
            Ok(Some(patch))
        })
    }
}
