//! INT8 and FP8 from calibration (`--int8`, `--fp8`): each Conv, Gemm or
//! MatMul with a constant weight whose input has a calibrated scale becomes
//! an `Int8Linear` or `Fp8Linear`: its input is quantized per tensor, its
//! weight per output channel. Then, wherever a quantized layer's only
//! consumers quantize its output again with one scale, the layer
//! requantizes in its epilogue and writes int8 or FP8 directly
//! (`fold_requantization`).
//!
//! Calibration gives each tensor TensorRT's int8 scale, `amax / 127`; FP8
//! (E4M3) maps the same `amax` onto its largest value, 448.

use super::PrecisionConfig;
use crate::ir::{wires, Graph, Patch, Port, Wire};
use anyhow::Result;
use petgraph::stable_graph::NodeIndex;
use std::collections::{BTreeMap, HashMap};
use trtc_runtime::ops::fused::{Linear, LinearKind};
use trtc_runtime::ops::precision::{
    quantize_weight_per_channel, quantize_weight_per_channel_fp8, Fp8Linear, Fp8Output, Int8Linear, Int8Output, Precision,
    PrecisionOp, FP8_E4M3_MAX,
};
use trtc_runtime::ops::quant::{QuantOp, QuantizeLinear};
use trtc_runtime::{DType, Op, Tensor};

/// The format a quantized layer computes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantFormat {
    /// Symmetric int8, int32 accumulation.
    Int8,
    /// FP8 E4M3FN, f32 accumulation.
    Fp8,
}

impl QuantFormat {
    /// The dtype of the quantized activations and weights.
    pub fn dtype(self) -> DType {
        match self {
            QuantFormat::Int8 => DType::I8,
            QuantFormat::Fp8 => DType::F8E4M3FN,
        }
    }

    pub fn precision(self) -> Precision {
        match self {
            QuantFormat::Int8 => Precision::Int8,
            QuantFormat::Fp8 => Precision::Fp8,
        }
    }

    /// The format whose tensors have this dtype.
    pub fn of(dtype: DType) -> Option<QuantFormat> {
        match dtype {
            DType::I8 => Some(QuantFormat::Int8),
            DType::F8E4M3FN => Some(QuantFormat::Fp8),
            _ => None,
        }
    }

    /// This format's activation scale for a tensor whose calibrated int8
    /// scale (`amax / 127`) is `int8_scale`.
    pub fn activation_scale(self, int8_scale: f32) -> f32 {
        match self {
            QuantFormat::Int8 => int8_scale,
            QuantFormat::Fp8 => int8_scale * (127.0 / FP8_E4M3_MAX),
        }
    }

    /// The weight quantized per output channel, and the scales.
    fn quantize_weight(self, w: &Tensor, axis: usize) -> trtc_runtime::Result<(Tensor, Tensor)> {
        match self {
            QuantFormat::Int8 => quantize_weight_per_channel(w, axis),
            QuantFormat::Fp8 => quantize_weight_per_channel_fp8(w, axis),
        }
    }
}

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
/// or `Fp8Linear` (after `format`) reading `x_q` (quantized with scale
/// `x_scale`) and the quantized weight. Returns why not when the layer's
/// bias or shapes do not fit.
#[allow(clippy::too_many_arguments)]
pub(super) fn make_quantized(
    graph: &Graph,
    patch: &mut Patch,
    n: NodeIndex,
    linear: &Linear,
    ins: &[Option<Port>],
    format: QuantFormat,
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
    let suffix = match format {
        QuantFormat::Int8 => "int8",
        QuantFormat::Fp8 => "fp8",
    };
    let wq = patch.add_constant(&format!("{name}.weight_{suffix}"), w_q);
    let ws = patch.add_constant(&format!("{name}.weight_scale"), Tensor::from_vec(vec![channels], w_scale)?);
    let b = match bias {
        Some(b) => Some(patch.add_constant(&format!("{name}.bias"), Tensor::from_vec(vec![channels], b)?)),
        None => None,
    };
    let residual = if linear.epilogue.residual { ins.get(3).copied().flatten().map(Wire::from) } else { None };
    let (kind, bias, epilogue) = (linear.kind.clone(), b.is_some(), linear.epilogue.clone());
    let op: Op = match format {
        QuantFormat::Int8 => Int8Linear { kind, x_scale, bias, epilogue, output: Int8Output::F32 }.into(),
        QuantFormat::Fp8 => Fp8Linear { kind, x_scale, bias, epilogue, output: Fp8Output::F32 }.into(),
    };
    let mut inputs = vec![Some(x_q), Some(wq), Some(ws), b, residual];
    while inputs.last() == Some(&None) {
        inputs.pop();
    }
    let types: Vec<Option<&trtc_runtime::TensorType>> = inputs.iter().map(|w| w.map(|w| patch.ty(graph, w))).collect();
    if let Err(e) = op.infer(&types) {
        return Ok(Err(e.to_string()));
    }
    patch.replace_node(graph, n, op, &inputs)?;
    Ok(Ok(()))
}

/// Rewrites the layers `--int8` (`--fp8`) can run in int8 (FP8), or that a
/// pin puts there. `scales` are the calibrated int8 scales. Returns the
/// capable layers left in float, with the reason.
pub fn to_quantized(
    graph: &mut Graph,
    cfg: &PrecisionConfig,
    scales: &BTreeMap<String, f32>,
    format: QuantFormat,
) -> Result<Vec<(String, String)>> {
    let precision = format.precision();
    let mut fallbacks = Vec::new();
    let mut quantized: HashMap<(Port, u32), Port> = HashMap::new();
    for n in graph.topo_order() {
        let Some((linear, ins)) = crate::passes::as_linear(graph, n) else { continue };
        let (Some(x), Some(w)) = (ins.first().copied().flatten(), ins.get(1).copied().flatten()) else { continue };
        let Some(weight) = graph.node(w.node).constant().cloned() else { continue };
        let name = graph.node(n).name.clone();
        let mut fallback = |why: String| fallbacks.push((name.clone(), why));
        if !cfg.allows(&name, precision) {
            // Reported only when the build asks for this format (not when a
            // pin elsewhere made this pass run), and not for a layer pinned
            // to the other quantized format, whose pass takes it.
            match cfg.pinned(&name) {
                Some(p) if cfg.enables(precision) && !matches!(p, Precision::Int8 | Precision::Fp8) => {
                    fallback(format!("pinned to {}", p.name()))
                }
                _ => {}
            }
            continue;
        }
        let Some(axis) = weight_channel_axis(&linear.kind, weight.shape().len()) else {
            fallback(format!("no {} kernel for a {}-D weight", precision.name(), weight.shape().len()));
            continue;
        };
        if graph.ty(x).dtype != DType::F32 || weight.dtype() != DType::F32 {
            fallback(format!("input {} and weight {} are not f32", graph.ty(x).dtype, weight.dtype()));
            continue;
        }
        let x_name = graph.node(x.node).outputs[x.port].name.clone();
        let Some(&int8_scale) = scales.get(&x_name) else {
            fallback(format!("no calibration scale for its input '{x_name}'"));
            continue;
        };
        let scale = format.activation_scale(int8_scale);
        if !(scale.is_finite() && scale > 0.0) {
            fallback(format!("the scale of '{x_name}' is {int8_scale}"));
            continue;
        }
        let (w_q, w_scale) = match format.quantize_weight(&weight, axis) {
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
                    &format!("{x_name}.{}", precision.name()),
                    QuantizeLinear { axis: 0, block_size: 0, output_dtype: format.dtype() }.into(),
                    &[Some(x.into()), Some(s)],
                )?[0];
                (q, true)
            }
        };
        let made = make_quantized(graph, &mut patch, n, &linear, &ins, format, x_q, scale, (w_q, w_scale))?;
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

/// The scale of a per-tensor, zero-point-0 QuantizeLinear node to the
/// format's dtype.
pub(super) fn quantizer_scale(graph: &Graph, n: NodeIndex, format: QuantFormat) -> Option<f32> {
    let Some(Op::Quant(QuantOp::QuantizeLinear(q))) = graph.node(n).op() else { return None };
    if q.output_dtype != format.dtype() || q.block_size != 0 {
        return None;
    }
    let (scales, zero) = scale_and_zero(graph, &graph.inputs_of(n))?;
    (scales.len() == 1 && zero).then_some(scales[0])
}

/// The format of a quantized layer with an f32 output.
fn f32_output_format(op: &Op) -> Option<QuantFormat> {
    match op {
        Op::Precision(PrecisionOp::Int8Linear(l)) if l.output == Int8Output::F32 => Some(QuantFormat::Int8),
        Op::Precision(PrecisionOp::Fp8Linear(l)) if l.output == Fp8Output::F32 => Some(QuantFormat::Fp8),
        _ => None,
    }
}

/// The same quantized layer requantizing its output with `scale`.
fn requantized(op: &Op, scale: f32) -> Option<Op> {
    match op {
        Op::Precision(PrecisionOp::Int8Linear(l)) => Some(Int8Linear { output: Int8Output::Int8 { scale }, ..l.clone() }.into()),
        Op::Precision(PrecisionOp::Fp8Linear(l)) => Some(Fp8Linear { output: Fp8Output::Fp8 { scale }, ..l.clone() }.into()),
        _ => None,
    }
}

/// Int8 (FP8) layers whose output only feeds int8 (FP8) quantizers of one
/// scale write int8 (FP8) themselves, requantized in the epilogue; the
/// quantizers go.
pub fn fold_requantization(graph: &mut Graph) -> Result<usize> {
    let mut folded = 0;
    for n in graph.topo_order() {
        let Some(format) = graph.node(n).op().and_then(f32_output_format) else { continue };
        let out = Port { node: n, port: 0 };
        if graph.is_output(out) {
            continue;
        }
        let consumers = graph.consumers(out);
        let scales: Vec<Option<f32>> =
            consumers.iter().map(|&(c, slot)| if slot == 0 { quantizer_scale(graph, c, format) } else { None }).collect();
        let Some(Some(scale)) = scales.first().copied() else { continue };
        if scales.iter().any(|s| *s != Some(scale)) {
            continue;
        }
        let Some(op) = graph.node(n).op().and_then(|op| requantized(op, scale)) else { continue };
        let mut patch = Patch::new();
        let new = patch.replace_node(graph, n, op, &wires(&graph.inputs_of(n)))?;
        for (c, _) in consumers {
            patch.shunt(Port { node: c, port: 0 }, new[0]);
        }
        graph.apply(patch)?;
        folded += 1;
    }
    graph.remove_dead_nodes();
    Ok(folded)
}
