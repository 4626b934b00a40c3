//! Explicit quantization: ONNX models with QuantizeLinear/DequantizeLinear
//! (Q/DQ) pairs, as onnxruntime's quantization tool (QDQ format),
//! PyTorch's quantized export and NVIDIA's ModelOpt (FP8) write them. A
//! Conv, Gemm or MatMul that reads `DequantizeLinear(q, s)` with `q` int8
//! (or FP8 E4M3FN) and a per-tensor scale, and a weight
//! `DequantizeLinear(w_q, s_w)` of a constant weight of the same type with
//! per-tensor or per-output-channel scales (zero points 0), runs as an
//! `Int8Linear` (`Fp8Linear`) on `q` and `w_q` directly. Like TensorRT,
//! this needs no `--int8` or `--fp8` flag and no calibration: the model
//! carries its scales.
//!
//! The frontend and constant folding leave int8 and FP8 weight
//! DequantizeLinear nodes in place ([`crate::ir::keeps_weight_dequantize`])
//! so that this rewrite still sees the quantized weights.

use super::quantized::{make_quantized, quantizer_scale, scale_and_zero, weight_channel_axis, QuantFormat};
use super::PrecisionConfig;
use crate::ir::{wires, Graph, Patch, Port};
use anyhow::Result;
use trtc_runtime::ops::precision::Precision;
use trtc_runtime::ops::quant::QuantOp;
use trtc_runtime::{Op, Tensor};

/// `(x_q, scale, format)` when `p` is `DequantizeLinear(x_q: i8 or
/// f8e4m3fn, scalar scale, zero point 0)`.
fn dequantized_activation(graph: &Graph, p: Port) -> Option<(Port, f32, QuantFormat)> {
    let Some(Op::Quant(QuantOp::DequantizeLinear(dq))) = graph.node(p.node).op() else { return None };
    if dq.block_size != 0 {
        return None;
    }
    let ins = graph.inputs_of(p.node);
    let q = ins.first().copied().flatten()?;
    let format = QuantFormat::of(graph.ty(q).dtype)?;
    let (scales, zero) = scale_and_zero(graph, &ins)?;
    (scales.len() == 1 && zero).then_some((q, scales[0], format))
}

/// `(w_q, per-channel scales)` when `p` is the DequantizeLinear of a constant
/// weight of the format's dtype whose scales are per tensor or along
/// `channel_axis`.
fn dequantized_weight(
    graph: &Graph,
    p: Port,
    format: QuantFormat,
    channel_axis: impl Fn(usize) -> Option<usize>,
) -> Option<(Tensor, Vec<f32>)> {
    let Some(Op::Quant(QuantOp::DequantizeLinear(dq))) = graph.node(p.node).op() else { return None };
    if dq.block_size != 0 {
        return None;
    }
    let ins = graph.inputs_of(p.node);
    let w = graph.node(ins.first().copied().flatten()?.node).constant()?;
    if w.dtype() != format.dtype() {
        return None;
    }
    let axis = channel_axis(w.shape().len())?;
    let channels = *w.shape().get(axis)?;
    let (scales, zero) = scale_and_zero(graph, &ins)?;
    if !zero {
        return None;
    }
    let scales = if scales.len() == 1 {
        vec![scales[0]; channels]
    } else if scales.len() == channels && dq.axis == axis {
        scales
    } else {
        return None;
    };
    Some((w.clone(), scales))
}

/// Rewrites every Q/DQ linear layer into an int8 or FP8 layer (unless
/// pinned to a float precision). Returns how many.
pub fn fold_qdq(graph: &mut Graph, cfg: &PrecisionConfig) -> Result<usize> {
    let mut folded = 0;
    for n in graph.topo_order() {
        let Some((linear, ins)) = crate::passes::as_linear(graph, n) else { continue };
        let (Some(x), Some(w)) = (ins.first().copied().flatten(), ins.get(1).copied().flatten()) else { continue };
        if matches!(cfg.pinned(&graph.node(n).name), Some(Precision::Fp32 | Precision::Fp16)) {
            continue;
        }
        let Some((x_q, x_scale, format)) = dequantized_activation(graph, x) else { continue };
        let Some(weight) = dequantized_weight(graph, w, format, |rank| weight_channel_axis(&linear.kind, rank)) else {
            continue;
        };
        let mut patch = Patch::new();
        let made = make_quantized(graph, &mut patch, n, &linear, &ins, format, x_q.into(), x_scale, weight)?;
        graph.apply(patch)?;
        if made.is_ok() {
            folded += 1;
        }
    }
    graph.remove_dead_nodes();
    Ok(folded)
}

/// A quantized layer that requantizes its output and has no activation:
/// its format and scale, and the same layer with a Relu in its epilogue.
fn relu_foldable(op: &Op) -> Option<(QuantFormat, f32, Op)> {
    use trtc_runtime::ops::elementwise::UnaryKind;
    use trtc_runtime::ops::fused::Activation;
    use trtc_runtime::ops::precision::{Fp8Output, Int8Output, PrecisionOp};
    let relu = Some(Activation::Unary(UnaryKind::Relu));
    match op {
        Op::Precision(PrecisionOp::Int8Linear(l)) if l.epilogue.activation.is_none() => match l.output {
            Int8Output::Int8 { scale } => {
                let mut l = l.clone();
                l.epilogue.activation = relu;
                Some((QuantFormat::Int8, scale, l.into()))
            }
            _ => None,
        },
        Op::Precision(PrecisionOp::Fp8Linear(l)) if l.epilogue.activation.is_none() => match l.output {
            Fp8Output::Fp8 { scale } => {
                let mut l = l.clone();
                l.epilogue.activation = relu;
                Some((QuantFormat::Fp8, scale, l.into()))
            }
            _ => None,
        },
        _ => None,
    }
}

/// Q/DQ models keep a Relu between two Q/DQ pairs of one scale, as
/// onnxruntime writes them: `Int8Linear (int8 out, scale s) → DequantizeLinear(s)
/// → Relu → QuantizeLinear(s)`, and likewise in FP8. That chain equals the
/// quantized layer with a Relu in its epilogue: requantization rounds
/// monotonically and maps 0 to 0, so `q(relu(y)) = max(q(y), 0)` (in FP8 a
/// negative value may round to -0 on one side and +0 on the other, the same
/// number). Returns how many were folded.
pub fn fold_quantized_relu(graph: &mut Graph) -> Result<usize> {
    use trtc_runtime::ops::elementwise::{ElementwiseOp, UnaryKind};
    let mut folded = 0;
    for n in graph.topo_order() {
        let Some(op) = graph.node(n).op() else { continue };
        let Some((format, scale, with_relu)) = relu_foldable(op) else { continue };
        let out = Port { node: n, port: 0 };
        // The layer's only consumer is one DequantizeLinear of its scale...
        let [(dq, 0)] = graph.consumers(out)[..] else { continue };
        if graph.is_output(out) || dequantized_activation(graph, Port { node: dq, port: 0 }) != Some((out, scale, format)) {
            continue;
        }
        // ...whose only consumer is a Relu...
        let dq_out = Port { node: dq, port: 0 };
        let [(relu, 0)] = graph.consumers(dq_out)[..] else { continue };
        let is_relu =
            matches!(graph.node(relu).op(), Some(Op::Elementwise(ElementwiseOp::Unary(u))) if u.kind == UnaryKind::Relu);
        if !is_relu || graph.is_output(dq_out) {
            continue;
        }
        // ...read only by quantizers of the same format and scale.
        let relu_out = Port { node: relu, port: 0 };
        let consumers = graph.consumers(relu_out);
        let same_scale = consumers.iter().all(|&(c, slot)| slot == 0 && quantizer_scale(graph, c, format) == Some(scale));
        if consumers.is_empty() || !same_scale || graph.is_output(relu_out) {
            continue;
        }
        let mut patch = Patch::new();
        let new = patch.replace_node(graph, n, with_relu, &wires(&graph.inputs_of(n)))?;
        for (c, _) in consumers {
            patch.shunt(Port { node: c, port: 0 }, new[0]);
        }
        graph.apply(patch)?;
        folded += 1;
    }
    graph.remove_dead_nodes();
    Ok(folded)
}
