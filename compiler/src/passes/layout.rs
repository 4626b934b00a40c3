//! Layout cleanups: transpose chains and explicit zero padding before a
//! convolution.

use super::Pass;
use crate::ir::{wires, Graph, Patch, Port};
use anyhow::Result;
use trtc_runtime::ops::linalg::LinalgOp;
use trtc_runtime::ops::movement::{MovementOp, PadMode, Transpose};
use trtc_runtime::Op;

/// `Transpose(Transpose(x))` becomes one Transpose with the composed
/// permutation, or disappears when the composition is the identity.
pub struct TransposeCancellation;

impl Pass for TransposeCancellation {
    fn name(&self) -> &'static str {
        "transpose-cancellation"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        graph.rewrite_each(|graph, n| {
            let Some(Op::Movement(MovementOp::Transpose(outer))) = graph.node(n).op() else { return Ok(None) };
            let Some(src) = graph.inputs_of(n)[0] else { return Ok(None) };
            let Some(Op::Movement(MovementOp::Transpose(inner))) = graph.node(src.node).op() else { return Ok(None) };
            let Some(x) = graph.inputs_of(src.node)[0] else { return Ok(None) };
            // Output axis i of the outer is axis outer[i] of the inner's
            // output, which is axis inner[outer[i]] of x.
            let perm: Vec<usize> = outer.perm.iter().map(|&i| inner.perm[i]).collect();
            let mut patch = Patch::new();
            if perm.iter().enumerate().all(|(i, &p)| i == p) {
                patch.shunt(Port { node: n, port: 0 }, x.into());
                patch.remove(n);
            } else {
                patch.rewrite(graph, n, Transpose { perm }.into(), &[Some(x.into())])?;
            }
            Ok(Some(patch))
        })
    }
}

/// A constant-zero Pad of the spatial axes feeding a Conv becomes the Conv's
/// own padding.
pub struct PadFolding;

impl Pass for PadFolding {
    fn name(&self) -> &'static str {
        "pad-folding"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        graph.rewrite_each(|graph, n| {
            let Some(Op::Linalg(LinalgOp::Conv(mut conv))) = graph.node(n).op().cloned() else { return Ok(None) };
            let ins = graph.inputs_of(n);
            let Some(src) = ins[0] else { return Ok(None) };
            let Some(Op::Movement(MovementOp::Pad(pad))) = graph.node(src.node).op().cloned() else { return Ok(None) };
            if pad.mode != PadMode::Constant || pad.pads.iter().any(|&p| p < 0) {
                return Ok(None);
            }
            let pad_ins = graph.inputs_of(src.node);
            let zero = match pad_ins.get(1).copied().flatten() {
                None => true,
                Some(v) => graph.node(v.node).constant().is_some_and(|t| t.to_f64_vec().iter().all(|&x| x == 0.0)),
            };
            let rank = pad.pads.len() / 2;
            let spatial = conv.kernel_shape.len();
            if !zero
                || rank != spatial + 2
                || pad.pads[0] != 0
                || pad.pads[1] != 0
                || pad.pads[rank] != 0
                || pad.pads[rank + 1] != 0
            {
                return Ok(None);
            }
            let Some(x) = pad_ins[0] else { return Ok(None) };
            for i in 0..spatial {
                conv.pads[i] += pad.pads[2 + i] as usize;
                conv.pads[spatial + i] += pad.pads[rank + 2 + i] as usize;
            }
            let mut inputs = wires(&ins);
            inputs[0] = Some(x.into());
            let mut patch = Patch::new();
            patch.rewrite(graph, n, conv.into(), &inputs)?;
            Ok(Some(patch))
        })
    }
}

/// `Reshape([M, K])(x) -> Gemm -> Reshape([..., N])`, the way exporters run a
/// linear layer on a `[batch, seq, K]` tensor, becomes one MatMul on `x`
/// (with bias), its weight pre-transposed to `[K, N]` when the Gemm had
/// `transB`. The epilogue fusion can then absorb the residual Add and
/// activation that follow.
pub struct GemmToMatMul;

impl Pass for GemmToMatMul {
    fn name(&self) -> &'static str {
        "gemm-to-matmul"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        use trtc_runtime::ops::fused::{Epilogue, Linear, LinearKind};
        use trtc_runtime::ops::linalg::MatMul;
        graph.rewrite_each(|graph, n| {
            let Some(Op::Linalg(LinalgOp::Gemm(gemm))) = graph.node(n).op().cloned() else { return Ok(None) };
            if gemm.alpha != 1.0 || gemm.trans_a {
                return Ok(None);
            }
            let ins = graph.inputs_of(n);
            let (Some(a), Some(b)) = (ins[0], ins[1]) else { return Ok(None) };
            let Some(Op::Movement(first)) = graph.node(a.node).op() else { return Ok(None) };
            if !first.is_reshape() {
                return Ok(None);
            }
            let Some(x) = graph.inputs_of(a.node)[0] else { return Ok(None) };
            let out = Port { node: n, port: 0 };
            let consumers = graph.consumers(out);
            let [(r2, 0)] = consumers.as_slice() else { return Ok(None) };
            let r2 = *r2;
            let Some(Op::Movement(second)) = graph.node(r2).op() else { return Ok(None) };
            if !second.is_reshape() {
                return Ok(None);
            }
            if graph.is_output(out) {
                return Ok(None);
            }
            let (xs, ys) = (graph.ty(x).shape.clone(), graph.ty(Port { node: r2, port: 0 }).shape.clone());
            let Some(w) = graph.node(b.node).constant().cloned() else { return Ok(None) };
            if w.dtype() != trtc_runtime::DType::F32 || w.shape().len() != 2 || xs.len() < 2 || xs.len() != ys.len() {
                return Ok(None);
            }
            let (k, nn) = if gemm.trans_b { (w.shape()[1], w.shape()[0]) } else { (w.shape()[0], w.shape()[1]) };
            if xs[xs.len() - 1] != k || ys[ys.len() - 1] != nn || xs[..xs.len() - 1] != ys[..ys.len() - 1] {
                return Ok(None);
            }
            let mut patch = Patch::new();
            // The bias: beta * C, which must be a constant vector of N.
            let bias = match ins.get(2).copied().flatten() {
                None => None,
                Some(c) => {
                    let Some(t) = graph.node(c.node).constant() else { return Ok(None) };
                    if t.len() != nn || t.dtype() != trtc_runtime::DType::F32 {
                        return Ok(None);
                    }
                    let v: Vec<f32> =
                        t.as_slice::<f32>()?.iter().map(|&v| if gemm.beta == 1.0 { v } else { gemm.beta * v }).collect();
                    Some(
                        patch.add_constant(&format!("{}.bias", graph.node(n).name), trtc_runtime::Tensor::from_vec(vec![nn], v)?),
                    )
                }
            };
            let weight = if gemm.trans_b {
                let t = Op::from(Transpose { perm: vec![1, 0] })
                    .eval_owned(&[Some(&w)])
                    .map_err(|e| anyhow::anyhow!("{e}"))?
                    .remove(0);
                patch.add_constant(&format!("{}.weight_kn", graph.node(n).name), t)
            } else {
                b.into()
            };
            let op: Op =
                Linear { kind: LinearKind::MatMul(MatMul::default()), bias: bias.is_some(), epilogue: Epilogue::default() }
                    .into();
            let name = format!("{} + {} + {}", graph.node(a.node).name, graph.node(n).name, graph.node(r2).name);
            let Ok(ports) = patch.add_op(graph, &name, op, &[Some(x.into()), Some(weight), bias]) else { return Ok(None) };
            patch.replace(graph, Port { node: r2, port: 0 }, ports[0]);
            patch.remove(r2);
            Ok(Some(patch))
        })
    }
}
