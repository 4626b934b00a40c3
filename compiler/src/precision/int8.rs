//! INT8 from calibration (`--int8`): each Conv, Gemm or MatMul with a
//! constant weight whose input has a calibrated scale becomes an
//! `Int8Linear`: its input is quantized per tensor, its weight per output
//! channel. Then, wherever an int8 layer's only consumers quantize its
//! output again with one scale, the layer requantizes in its epilogue and
//! writes int8 directly (`fold_requantization`).

use super::PrecisionConfig;
use crate::ir::{wires, Graph, Patch, Port, Wire};
use anyhow::Result;
use petgraph::stable_graph::NodeIndex;
use std::collections::{BTreeMap, HashMap};
use trtc_runtime::ops::fused::{Linear, LinearKind};
use trtc_runtime::ops::precision::{quantize_weight_per_channel, Int8Linear, Int8Output, Precision, PrecisionOp};
use trtc_runtime::ops::quant::{QuantOp, QuantizeLinear};
use trtc_runtime::{DType, Op, Tensor};

/// The axis of a layer's weight that holds its output channels, if the
/// layer has a weight int8 kernels support.
pub(super) fn weight_channel_axis(kind: &LinearKind, weight_rank: usize) -> Option<usize> {
    match kind {
        LinearKind::Conv(_) => Some(0),
        LinearKind::Gemm(g) if weight_rank == 2 => Some(if g.trans_b { 0 } else { 1 }),
        LinearKind::MatMul(_) if weight_rank == 2 => Some(1),
        _ => None,
    }
}

/// A layer's bias as one value per output channel, if it has that form.
fn per_channel_bias(graph: &Graph, linear: &Linear, bias: Option<Port>, channels: usize) -> Result<Option<Vec<f32>>, String> {
    let Some(b) = bias else { return Ok(None) };
    let Some(t) = graph.node(b.node).constant() else { return Err("its bias is not a constant".into()) };
    if t.dtype() != DType::F32 {
        return Err(format!("its bias is {}", t.dtype()));
    }
    let v = t.as_slice::<f32>().map_err(|e| e.to_string())?;
    let scale = match &linear.kind {
        LinearKind::Gemm(g) => g.beta,
        _ => 1.0,
    };
    let per_channel = t.shape().last().copied() == Some(channels) && t.shape().iter().rev().skip(1).all(|&d| d == 1);
    let conv_bias = matches!(linear.kind, LinearKind::Conv(_)) && t.shape() == [channels];
    if v.len() == 1 {
        Ok(Some(vec![v[0] * scale; channels]))
    } else if per_channel || conv_bias {
        Ok(Some(v.iter().map(|x| x * scale).collect()))
    } else {
        Err(format!("its bias {} is not one value per output channel", t.ty()))
    }
}

/// Adds to `patch` the replacement of linear layer `n` by an `Int8Linear`
/// reading `x_q` (int8, scale `x_scale`) and the quantized weight. Returns
/// why not when the layer's bias or shapes do not fit.
#[allow(clippy::too_many_arguments)]
pub(super) fn make_int8(
    graph: &Graph,
    patch: &mut Patch,
    n: NodeIndex,
    linear: &Linear,
    ins: &[Option<Port>],
    x_q: Wire,
    x_scale: f32,
    weight: (Tensor, Vec<f32>),
) -> Result<Result<(), String>> {
    let (w_q, w_scale) = weight;
    let channels = w_scale.len();
    let bias = match per_channel_bias(graph, linear, if linear.bias { ins.get(2).copied().flatten() } else { None }, channels) {
        Ok(b) => b,
        Err(why) => return Ok(Err(why)),
    };
    let name = graph.node(n).name.clone();
    let wq = patch.add_constant(&format!("{name}.weight_int8"), w_q);
    let ws = patch.add_constant(&format!("{name}.weight_scale"), Tensor::from_vec(vec![channels], w_scale)?);
    let b = match bias {
        Some(b) => Some(patch.add_constant(&format!("{name}.bias"), Tensor::from_vec(vec![channels], b)?)),
        None => None,
    };
    let residual = if linear.epilogue.residual { ins.get(3).copied().flatten().map(Wire::from) } else { None };
    let op = Int8Linear {
        kind: linear.kind.clone(),
        x_scale,
        bias: b.is_some(),
        epilogue: linear.epilogue.clone(),
        output: Int8Output::F32,
    };
    let mut inputs = vec![Some(x_q), Some(wq), Some(ws), b, residual];
    while inputs.last() == Some(&None) {
        inputs.pop();
    }
    let types: Vec<Option<&trtc_runtime::TensorType>> = inputs.iter().map(|w| w.map(|w| patch.ty(graph, w))).collect();
    if let Err(e) = Op::from(op.clone()).infer(&types) {
        return Ok(Err(e.to_string()));
    }
    patch.replace_node(graph, n, op.into(), &inputs)?;
    Ok(Ok(()))
}

/// Rewrites the layers `--int8` can run in int8. Returns the int8-capable
/// layers left in float, with the reason.
pub fn to_int8(graph: &mut Graph, cfg: &PrecisionConfig, scales: &BTreeMap<String, f32>) -> Result<Vec<(String, String)>> {
    let mut fallbacks = Vec::new();
    let mut quantized: HashMap<(Port, u32), Port> = HashMap::new();
    for n in graph.topo_order() {
        let Some((linear, ins)) = crate::passes::as_linear(graph, n) else { continue };
        let (Some(x), Some(w)) = (ins.first().copied().flatten(), ins.get(1).copied().flatten()) else { continue };
        let Some(weight) = graph.node(w.node).constant().cloned() else { continue };
        let name = graph.node(n).name.clone();
        let mut fallback = |why: String| fallbacks.push((name.clone(), why));
        if !cfg.allows(&name, Precision::Int8) {
            fallback(format!("pinned to {}", cfg.pinned(&name).map(|p| p.name()).unwrap_or("float")));
            continue;
        }
        let Some(axis) = weight_channel_axis(&linear.kind, weight.shape().len()) else {
            fallback(format!("no int8 kernel for a {}-D weight", weight.shape().len()));
            continue;
        };
        if graph.ty(x).dtype != DType::F32 || weight.dtype() != DType::F32 {
            fallback(format!("input {} and weight {} are not f32", graph.ty(x).dtype, weight.dtype()));
            continue;
        }
        let x_name = graph.node(x.node).outputs[x.port].name.clone();
        let Some(&scale) = scales.get(&x_name) else {
            fallback(format!("no calibration scale for its input '{x_name}'"));
            continue;
        };
        if !(scale.is_finite() && scale > 0.0) {
            fallback(format!("the scale of '{x_name}' is {scale}"));
            continue;
        }
        let (w_q, w_scale) = match quantize_weight_per_channel(&weight, axis) {
            Ok(q) => q,
            Err(e) => {
                fallback(e.to_string());
                continue;
            }
        };
        let w_scale = w_scale.as_slice::<f32>()?.to_vec();
        // The quantizer of x at this scale, shared by every layer reading
        // it; it stays even when this layer falls back.
        let mut patch = Patch::new();
        let (x_q, added) = match quantized.get(&(x, scale.to_bits())) {
            Some(&q) => (Wire::from(q), false),
            None => {
                let s = patch.add_constant(&format!("{x_name}.scale"), Tensor::scalar(scale));
                let q = patch.add_op(
                    graph,
                    &format!("{x_name}.int8"),
                    QuantizeLinear { axis: 0, block_size: 0, output_dtype: DType::I8 }.into(),
                    &[Some(x.into()), Some(s)],
                )?[0];
                (q, true)
            }
        };
        let made = make_int8(graph, &mut patch, n, &linear, &ins, x_q, scale, (w_q, w_scale))?;
        let applied = graph.apply(patch)?;
        if added {
            quantized.insert((x, scale.to_bits()), applied.port(x_q));
        }
        if let Err(why) = made {
            fallback(why);
        }
    }
    graph.remove_dead_nodes();
    Ok(fallbacks)
}

/// The constant scales (input 1) of a QuantizeLinear or DequantizeLinear,
/// and whether its zero points (input 2, if any) are all 0.
pub(super) fn scale_and_zero(graph: &Graph, ins: &[Option<Port>]) -> Option<(Vec<f32>, bool)> {
    let s = graph.node(ins.get(1).copied().flatten()?.node).constant()?;
    if s.dtype() != DType::F32 {
        return None;
    }
    let scales = s.as_slice::<f32>().ok()?.to_vec();
    if scales.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
        return None;
    }
    let zero = match ins.get(2).copied().flatten() {
        None => true,
        Some(z) => graph.node(z.node).constant()?.to_f64_vec().iter().all(|&v| v == 0.0),
    };
    Some((scales, zero))
}

/// The scale of a per-tensor, zero-point-0 int8 QuantizeLinear node.
pub(super) fn int8_quantizer_scale(graph: &Graph, n: NodeIndex) -> Option<f32> {
    let Some(Op::Quant(QuantOp::QuantizeLinear(q))) = graph.node(n).op() else { return None };
    if q.output_dtype != DType::I8 || q.block_size != 0 {
        return None;
    }
    let (scales, zero) = scale_and_zero(graph, &graph.inputs_of(n))?;
    (scales.len() == 1 && zero).then_some(scales[0])
}

/// Int8 layers whose output only feeds int8 quantizers of one scale write
/// int8 themselves, requantized in the epilogue; the quantizers go.
pub fn fold_requantization(graph: &mut Graph) -> Result<usize> {
    let mut folded = 0;
    for n in graph.topo_order() {
        let Some(Op::Precision(PrecisionOp::Int8Linear(l))) = graph.node(n).op() else { continue };
        if l.output != Int8Output::F32 {
            continue;
        }
        let out = Port { node: n, port: 0 };
        if graph.is_output(out) {
            continue;
        }
        let consumers = graph.consumers(out);
        let scales: Vec<Option<f32>> =
            consumers.iter().map(|&(c, slot)| if slot == 0 { int8_quantizer_scale(graph, c) } else { None }).collect();
        let Some(Some(scale)) = scales.first().copied() else { continue };
        if scales.iter().any(|s| *s != Some(scale)) {
            continue;
        }
        let mut l = l.clone();
        l.output = Int8Output::Int8 { scale };
        let mut patch = Patch::new();
        let new = patch.replace_node(graph, n, l.into(), &wires(&graph.inputs_of(n)))?;
        for (c, _) in consumers {
            patch.shunt(Port { node: c, port: 0 }, new[0]);
        }
        graph.apply(patch)?;
        folded += 1;
    }
    graph.remove_dead_nodes();
    Ok(folded)
}
