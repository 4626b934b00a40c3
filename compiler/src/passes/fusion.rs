//! Fusion passes: fold BatchNormalization into the preceding Conv, and fuse
//! bias, residual Add and activation into the epilogue of Conv, Gemm and
//! MatMul layers (`trtc_runtime::ops::fused::Linear`).
//!
//! Each rule fires only when the intermediate tensor has a single consumer
//! and is not a graph output, so the fused node computes exactly what the
//! chain computed and nothing is computed twice.

use super::Pass;
use crate::ir::{wires, Graph, NodeKind, Patch, Port, Wire};
use anyhow::Result;
use petgraph::stable_graph::NodeIndex;
use trtc_runtime::ops::elementwise::{BinaryKind, ElementwiseOp, UnaryKind};
use trtc_runtime::ops::fused::{Activation, Epilogue, FusedOp, Linear, LinearKind};
use trtc_runtime::ops::linalg::LinalgOp;
use trtc_runtime::ops::reduce::ReduceOp;
use trtc_runtime::{DType, Op, Tensor};

/// The single consumer of a node's only output, when it has exactly one and
/// the output is not a graph output.
fn sole_consumer(graph: &Graph, n: NodeIndex) -> Option<(NodeIndex, usize)> {
    if graph.node(n).outputs.len() != 1 {
        return None;
    }
    let out = Port { node: n, port: 0 };
    if graph.is_output(out) {
        return None;
    }
    match graph.consumers(out).as_slice() {
        [c] => Some(*c),
        _ => None,
    }
}

/// Adds to `patch` the replacement of nodes `old` (a chain whose last node's
/// output is the result) by one op node reading `inputs`; the new node's
/// output keeps the last node's tensor name, and its name joins theirs so it
/// stays traceable.
fn replace_chain(graph: &Graph, patch: &mut Patch, old: &[NodeIndex], op: Op, inputs: &[Option<Wire>]) -> Result<()> {
    let last = *old.last().expect("chain");
    let name = old.iter().map(|&n| graph.node(n).name.clone()).collect::<Vec<_>>().join(" + ");
    let ports = patch.add_op(graph, &name, op, inputs).map_err(|e| anyhow::anyhow!("fusing {name}: {e}"))?;
    patch.replace(graph, Port { node: last, port: 0 }, ports[0]);
    for &n in old.iter().rev() {
        patch.remove(n);
    }
    Ok(())
}

/// BatchNormalization after a Conv with constant weights becomes the Conv
/// with rescaled weights and bias: `W' = W * s`, `b' = (b - mean) * s + beta`,
/// `s = gamma / sqrt(var + eps)` (computed in f64).
pub struct BatchNormFolding;

impl Pass for BatchNormFolding {
    fn name(&self) -> &'static str {
        "batchnorm-folding"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        graph.rewrite_each(|graph, n| {
            let Some(Op::Linalg(LinalgOp::Conv(conv))) = graph.node(n).op().cloned() else { return Ok(None) };
            let Some((bn, 0)) = sole_consumer(graph, n) else { return Ok(None) };
            let Some(Op::Reduce(ReduceOp::BatchNorm(b))) = graph.node(bn).op() else { return Ok(None) };
            let eps = b.epsilon as f64;
            let ins = graph.inputs_of(n);
            let bn_ins = graph.inputs_of(bn);
            let konst = |p: Option<Port>| p.and_then(|p| graph.node(p.node).constant().cloned());
            let (Some(w), Some(gamma), Some(beta), Some(mean), Some(var)) =
                (konst(ins[1]), konst(bn_ins[1]), konst(bn_ins[2]), konst(bn_ins[3]), konst(bn_ins[4]))
            else {
                return Ok(None);
            };
            if w.dtype() != DType::F32 || ins.get(2).copied().flatten().is_some_and(|p| graph.node(p.node).constant().is_none()) {
                return Ok(None);
            }
            let oc = w.shape()[0];
            let bias = konst(ins.get(2).copied().flatten()).map(|t| t.to_f64_vec()).unwrap_or_else(|| vec![0.0; oc]);
            let (gamma, beta, mean, var) = (gamma.to_f64_vec(), beta.to_f64_vec(), mean.to_f64_vec(), var.to_f64_vec());
            if [gamma.len(), beta.len(), mean.len(), var.len(), bias.len()].iter().any(|&l| l != oc) {
                return Ok(None);
            }
            let s: Vec<f64> = (0..oc).map(|c| gamma[c] / (var[c] + eps).sqrt()).collect();
            let per = w.len() / oc.max(1);
            let wv = w.as_slice::<f32>()?;
            let new_w: Vec<f32> = wv.iter().enumerate().map(|(i, &v)| (v as f64 * s[i / per]) as f32).collect();
            let new_b: Vec<f32> = (0..oc).map(|c| ((bias[c] - mean[c]) * s[c] + beta[c]) as f32).collect();
            let mut patch = Patch::new();
            let w_name = format!("{}.folded_weight", graph.node(n).name);
            let wp = patch.add_constant(&w_name, Tensor::from_vec(w.shape().to_vec(), new_w)?);
            let bp = patch.add_constant(&format!("{}.folded_bias", graph.node(n).name), Tensor::from_vec(vec![oc], new_b)?);
            replace_chain(graph, &mut patch, &[n, bn], conv.into(), &[ins[0].map(Wire::from), Some(wp), Some(bp)])?;
            Ok(Some(patch))
        })
    }
}

/// Conv / Gemm / MatMul followed by bias Add, residual Add and activation
/// become one `Linear` node with an epilogue.
pub struct LinearEpilogueFusion;

/// A layer as a `Linear` with its current inputs `[x, w, bias?, residual?]`.
pub(crate) fn as_linear(graph: &Graph, n: NodeIndex) -> Option<(Linear, Vec<Option<Port>>)> {
    let ins = graph.inputs_of(n);
    if graph.node(n).outputs.len() != 1 || graph.node(n).outputs[0].ty.dtype != DType::F32 {
        return None;
    }
    let opt = |i: usize| ins.get(i).copied().flatten();
    match graph.node(n).op()? {
        Op::Linalg(LinalgOp::Conv(c)) => Some((
            Linear { kind: LinearKind::Conv(c.clone()), bias: opt(2).is_some(), epilogue: Epilogue::default() },
            vec![opt(0), opt(1), opt(2)],
        )),
        Op::Linalg(LinalgOp::Gemm(g)) => Some((
            Linear { kind: LinearKind::Gemm(g.clone()), bias: opt(2).is_some(), epilogue: Epilogue::default() },
            vec![opt(0), opt(1), opt(2)],
        )),
        Op::Linalg(LinalgOp::MatMul(m)) => Some((
            Linear { kind: LinearKind::MatMul(m.clone()), bias: false, epilogue: Epilogue::default() },
            vec![opt(0), opt(1), None],
        )),
        Op::Fused(FusedOp::Linear(l)) => {
            let mut v = vec![opt(0), opt(1), opt(2)];
            if l.epilogue.residual {
                v.push(opt(3));
            }
            Some((l.clone(), v))
        }
        _ => None,
    }
}

/// The activation a node applies, if it is a pointwise f32 activation.
fn activation_of(graph: &Graph, n: NodeIndex) -> Option<Activation> {
    match graph.node(n).op()? {
        Op::Elementwise(ElementwiseOp::Unary(u)) => Some(Activation::Unary(u.kind)),
        Op::Elementwise(ElementwiseOp::Clip(c)) => {
            Some(Activation::Clip { min: c.min.map(|v| v as f32), max: c.max.map(|v| v as f32) })
        }
        _ => None,
    }
}

fn is_add(graph: &Graph, n: NodeIndex) -> bool {
    matches!(graph.node(n).op(), Some(Op::Elementwise(ElementwiseOp::Binary(b))) if b.kind == BinaryKind::Add)
}

impl Pass for LinearEpilogueFusion {
    fn name(&self) -> &'static str {
        "linear-epilogue-fusion"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        graph.rewrite_each(|graph, n| {
            let Some((mut lin, ins)) = as_linear(graph, n) else { return Ok(None) };
            let mut ins = wires(&ins);
            let mut patch = Patch::new();
            let out = Port { node: n, port: 0 };
            let out_ty = graph.ty(out).clone();

            // SiLU spelled out: Mul(L, Sigmoid(L)).
            if lin.epilogue.activation.is_none() && !graph.is_output(out) {
                let cons = graph.consumers(out);
                if cons.len() == 2 {
                    let sig = cons.iter().map(|c| c.0).find(|&c| {
                        matches!(graph.node(c).op(), Some(Op::Elementwise(ElementwiseOp::Unary(u))) if u.kind == UnaryKind::Sigmoid)
                    });
                    let mul = cons.iter().map(|c| c.0).find(|&c| {
                        matches!(graph.node(c).op(), Some(Op::Elementwise(ElementwiseOp::Binary(b))) if b.kind == BinaryKind::Mul)
                    });
                    if let (Some(s), Some(m)) = (sig, mul) {
                        let m_ins = graph.inputs_of(m);
                        let s_out = Port { node: s, port: 0 };
                        let reads_both = m_ins.contains(&Some(out)) && m_ins.contains(&Some(s_out));
                        if reads_both && sole_consumer(graph, s) == Some((m, if m_ins[0] == Some(s_out) { 0 } else { 1 })) {
                            lin.epilogue.activation = Some(Activation::Silu);
                            patch.remove(s);
                            replace_chain(graph, &mut patch, &[n, m], FusedOp::Linear(lin).into(), &ins)?;
                            return Ok(Some(patch));
                        }
                    }
                }
            }

            let Some((c, slot)) = sole_consumer(graph, n) else { return Ok(None) };
            if lin.epilogue.activation.is_none() {
                if let Some(act) = activation_of(graph, c) {
                    if graph.ty(Port { node: c, port: 0 }) != &out_ty {
                        return Ok(None);
                    }
                    lin.epilogue.activation = Some(act);
                    replace_chain(graph, &mut patch, &[n, c], FusedOp::Linear(lin).into(), &ins)?;
                    return Ok(Some(patch));
                }
            }
            if !is_add(graph, c) || lin.epilogue.activation.is_some() || lin.epilogue.residual {
                return Ok(None);
            }
            let other = graph.inputs_of(c)[1 - slot];
            let Some(other) = other else { return Ok(None) };
            if graph.ty(Port { node: c, port: 0 }) != &out_ty {
                return Ok(None); // The Add broadcasts the layer's output: not an epilogue.
            }
            let other_const = graph.node(other.node).constant().cloned();
            match (&lin.kind, other_const) {
                // A constant bias on a MatMul without one.
                (LinearKind::MatMul(_), Some(t)) if !lin.bias => {
                    lin.bias = true;
                    ins[2] = Some(other.into());
                    let _ = t;
                }
                // A constant per-channel bias on a Conv without one.
                (LinearKind::Conv(_), Some(t)) if !lin.bias && out_ty.shape.len() >= 2 => {
                    let ch = out_ty.shape[1];
                    let rank = out_ty.shape.len();
                    let s = t.shape();
                    let per_channel = t.len() == ch && s.len() <= rank && (s.len() + 1 >= rank) && {
                        // [C,1,...] or [1,C,1,...]: channel at axis 1 of the output.
                        let off = rank - s.len();
                        s.iter().enumerate().all(|(i, &d)| if i + off == 1 { d == ch } else { d == 1 })
                    };
                    if !per_channel || t.dtype() != DType::F32 {
                        return Ok(None);
                    }
                    let bias = patch.add_constant(&format!("{}.bias", graph.node(c).name), t.reshaped(vec![ch])?);
                    lin.bias = true;
                    ins[2] = Some(bias);
                }
                (_, Some(_)) => return Ok(None),
                // A residual of the output's exact type.
                (_, None) => {
                    if graph.ty(other) != &out_ty {
                        return Ok(None);
                    }
                    lin.epilogue.residual = true;
                    ins.truncate(3);
                    ins.resize(3, None);
                    ins.push(Some(other.into()));
                }
            }
            replace_chain(graph, &mut patch, &[n, c], FusedOp::Linear(lin).into(), &ins)?;
            Ok(Some(patch))
        })
    }
}

impl Graph {
    /// Whether a node is a fused linear layer (for coverage reports).
    pub fn is_fused_linear(&self, n: NodeIndex) -> bool {
        matches!(self.node(n).kind, NodeKind::Op(Op::Fused(FusedOp::Linear(_))))
    }
}

/// Horizontal fusion: MatMuls that read the same tensor with constant
/// weights (a transformer's Q, K and V projections) become one MatMul with
/// the weights (and biases) concatenated, followed by a Split.
pub struct SiblingMatMulMerge;

impl Pass for SiblingMatMulMerge {
    fn name(&self) -> &'static str {
        "sibling-matmul-merge"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        use trtc_runtime::ops::linalg::MatMul;
        use trtc_runtime::ops::movement::Split;
        // One patch per shared input node, merging the groups of each of its
        // outputs.
        graph.rewrite_each(|graph, n| {
            let mut patch = Patch::new();
            for port in 0..graph.node(n).outputs.len() {
                let x = Port { node: n, port };
                // Candidates: plain (bias-only) MatMul layers reading x at slot 0
                // with a constant [K, N] weight and a constant bias (or none).
                let mut group: Vec<(NodeIndex, Tensor, Option<Tensor>)> = Vec::new();
                for (c, slot) in graph.consumers(x) {
                    if slot != 0 || group.iter().any(|(g, _, _)| *g == c) {
                        continue;
                    }
                    let Some((lin, ins)) = as_linear(graph, c) else { continue };
                    if !matches!(lin.kind, LinearKind::MatMul(_)) || !lin.epilogue.is_empty() {
                        continue;
                    }
                    let Some(w) = ins[1].and_then(|p| graph.node(p.node).constant().cloned()) else { continue };
                    if w.shape().len() != 2 || w.dtype() != DType::F32 {
                        continue;
                    }
                    let b = match ins[2] {
                        None => None,
                        Some(p) => match graph.node(p.node).constant() {
                            Some(t) if t.len() == w.shape()[1] && t.dtype() == DType::F32 => Some(t.clone()),
                            _ => continue,
                        },
                    };
                    group.push((c, w, b));
                }
                if group.len() < 2 || graph.ty(x).shape.last() != Some(&group[0].1.shape()[0]) {
                    continue;
                }
                let k = group[0].1.shape()[0];
                if group.iter().any(|(_, w, _)| w.shape()[0] != k) {
                    continue;
                }
                let any_bias = group.iter().any(|(_, _, b)| b.is_some());
                let sizes: Vec<usize> = group.iter().map(|(_, w, _)| w.shape()[1]).collect();
                let total: usize = sizes.iter().sum();
                let mut w_cat = vec![0f32; k * total];
                let mut b_cat = Vec::with_capacity(total);
                let mut col = 0;
                for (_, w, b) in &group {
                    let nn = w.shape()[1];
                    let wv = w.as_slice::<f32>()?;
                    for r in 0..k {
                        w_cat[r * total + col..r * total + col + nn].copy_from_slice(&wv[r * nn..(r + 1) * nn]);
                    }
                    match b {
                        Some(b) => b_cat.extend_from_slice(b.as_slice::<f32>()?),
                        None => b_cat.extend(std::iter::repeat_n(0f32, nn)),
                    }
                    col += nn;
                }
                let names: Vec<String> = group.iter().map(|(g, _, _)| graph.node(*g).name.clone()).collect();
                let name = names.join(" | ");
                let wp = patch.add_constant(&format!("{name}.weight"), Tensor::from_vec(vec![k, total], w_cat)?);
                let bp = if any_bias {
                    Some(patch.add_constant(&format!("{name}.bias"), Tensor::from_vec(vec![total], b_cat)?))
                } else {
                    None
                };
                let lin = Linear { kind: LinearKind::MatMul(MatMul::default()), bias: any_bias, epilogue: Epilogue::default() };
                let Ok(merged) = patch.add_op(graph, &name, FusedOp::Linear(lin).into(), &[Some(x.into()), Some(wp), bp]) else {
                    continue;
                };
                let axis = patch.ty(graph, merged[0]).shape.len() - 1;
                let Ok(parts) = patch.add_op(graph, &format!("{name} split"), Split { axis, sizes }.into(), &[Some(merged[0])])
                else {
                    continue;
                };
                for (i, (g, _, _)) in group.iter().enumerate() {
                    patch.replace(graph, Port { node: *g, port: 0 }, parts[i]);
                    patch.remove(*g);
                }
            }
            Ok((!patch.is_empty()).then_some(patch))
        })
    }
}

/// A per-output-channel Mul or Add by a constant right after a Conv with
/// constant weights is folded into the weights and bias:
/// `(W*x + b) * s = (W*s)*x + b*s`, `(W*x + b) + c = W*x + (b + c)`.
pub struct AffineFolding;

/// The per-channel values of a constant that broadcasts along axis 1 of a
/// `[N, C, ...]` output (`[C,1,..]`, `[1,C,1,..]` or a scalar).
fn per_channel(graph: &Graph, p: Port, out: &trtc_runtime::TensorType) -> Option<Vec<f64>> {
    let t = graph.node(p.node).constant()?;
    if t.dtype() != DType::F32 || out.shape.len() < 2 {
        return None;
    }
    let ch = out.shape[1];
    let v = t.to_f64_vec();
    if v.len() == 1 && t.shape().len() <= out.shape.len() {
        return Some(vec![v[0]; ch]);
    }
    let s = t.shape();
    let rank = out.shape.len();
    if s.len() > rank || s.len() + 1 < rank || v.len() != ch {
        return None;
    }
    let off = rank - s.len();
    s.iter().enumerate().all(|(i, &d)| if i + off == 1 { d == ch } else { d == 1 }).then_some(v)
}

impl Pass for AffineFolding {
    fn name(&self) -> &'static str {
        "affine-folding"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        graph.rewrite_each(|graph, n| {
            let Some(Op::Linalg(LinalgOp::Conv(conv))) = graph.node(n).op().cloned() else { return Ok(None) };
            let Some((c, slot)) = sole_consumer(graph, n) else { return Ok(None) };
            let ins = graph.inputs_of(n);
            let out_ty = graph.node(n).outputs[0].ty.clone();
            let Some(w) = ins[1].and_then(|p| graph.node(p.node).constant().cloned()) else { return Ok(None) };
            let bias = match ins.get(2).copied().flatten() {
                None => None,
                Some(p) => match graph.node(p.node).constant() {
                    Some(t) => Some(t.to_f64_vec()),
                    None => return Ok(None),
                },
            };
            if w.dtype() != DType::F32 || graph.ty(Port { node: c, port: 0 }) != &out_ty {
                return Ok(None);
            }
            let oc = w.shape()[0];
            let is_mul = binary_kind(graph, c) == Some(BinaryKind::Mul);
            let is_add = binary_kind(graph, c) == Some(BinaryKind::Add);
            if !(is_mul || is_add) || slot > 1 {
                return Ok(None);
            }
            let Some(k) = graph.inputs_of(c)[1 - slot] else { return Ok(None) };
            let Some(vals) = per_channel(graph, k, &out_ty) else { return Ok(None) };
            if vals.len() != oc {
                return Ok(None);
            }
            let b0 = bias.unwrap_or_else(|| vec![0.0; oc]);
            let (new_w, new_b): (Vec<f32>, Vec<f32>) = if is_mul {
                let per = w.len() / oc.max(1);
                let wv = w.as_slice::<f32>()?;
                (
                    wv.iter().enumerate().map(|(i, &x)| (x as f64 * vals[i / per]) as f32).collect(),
                    (0..oc).map(|o| (b0[o] * vals[o]) as f32).collect(),
                )
            } else {
                (w.as_slice::<f32>()?.to_vec(), (0..oc).map(|o| (b0[o] + vals[o]) as f32).collect())
            };
            let base = &graph.node(n).name;
            let mut patch = Patch::new();
            let wp = patch.add_constant(&format!("{base}.folded_weight"), Tensor::from_vec(w.shape().to_vec(), new_w)?);
            let bp = patch.add_constant(&format!("{base}.folded_bias"), Tensor::from_vec(vec![oc], new_b)?);
            replace_chain(graph, &mut patch, &[n, c], conv.into(), &[ins[0].map(Wire::from), Some(wp), Some(bp)])?;
            Ok(Some(patch))
        })
    }
}

fn binary_kind(graph: &Graph, n: NodeIndex) -> Option<BinaryKind> {
    match graph.node(n).op()? {
        Op::Elementwise(ElementwiseOp::Binary(b)) => Some(b.kind),
        _ => None,
    }
}
