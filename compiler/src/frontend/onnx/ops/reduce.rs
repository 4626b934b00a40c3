//! Converters for the runtime's `reduce` op family: Reduce*, ArgMax/ArgMin,
//! Softmax/LogSoftmax/Hardmax, CumSum, TopK, the normalizations and the
//! losses (NegativeLogLikelihoodLoss; SoftmaxCrossEntropyLoss as LogSoftmax
//! then it).
//!
//! Every opset difference is resolved here: axes given as attributes or as
//! constant inputs, default axes, pre-opset-13 Softmax flattening.

use super::Registry;
use crate::frontend::onnx::ctx::Ctx;
use crate::frontend::onnx::proto;
use crate::ir::Port;
use anyhow::{anyhow, bail, Result};
use trtc_runtime::ops::control::ValueShapedOp;
use trtc_runtime::ops::reduce::{
    ArgKind, ArgMinMax, BatchNorm, CumSum, GroupNorm, InstanceNorm, LayerNorm, LossReduction, LpNorm, Lrn, Mvn, NllLoss, Reduce,
    ReduceKind, Softmax, SoftmaxKind, TopK,
};
use trtc_runtime::ops::util::{normalize_axes, normalize_axis};

pub fn register(r: &mut Registry) {
    r.add("ReduceSum", |c| reduce(c, ReduceKind::Sum));
    r.add("ReduceMean", |c| reduce(c, ReduceKind::Mean));
    r.add("ReduceMax", |c| reduce(c, ReduceKind::Max));
    r.add("ReduceMin", |c| reduce(c, ReduceKind::Min));
    r.add("ReduceProd", |c| reduce(c, ReduceKind::Prod));
    r.add("ReduceL1", |c| reduce(c, ReduceKind::L1));
    r.add("ReduceL2", |c| reduce(c, ReduceKind::L2));
    r.add("ReduceLogSum", |c| reduce(c, ReduceKind::LogSum));
    r.add("ReduceLogSumExp", |c| reduce(c, ReduceKind::LogSumExp));
    r.add("ReduceSumSquare", |c| reduce(c, ReduceKind::SumSquare));
    r.add("ArgMax", |c| arg(c, ArgKind::Max));
    r.add("ArgMin", |c| arg(c, ArgKind::Min));
    r.add("Softmax", |c| softmax(c, SoftmaxKind::Softmax));
    r.add("LogSoftmax", |c| softmax(c, SoftmaxKind::LogSoftmax));
    r.add("Hardmax", |c| softmax(c, SoftmaxKind::Hardmax));
    r.add("CumSum", cumsum);
    r.add("NegativeLogLikelihoodLoss", nll_loss);
    r.add("SoftmaxCrossEntropyLoss", softmax_cross_entropy_loss);
    r.add("TopK", topk);
    r.add("BatchNormalization", batch_norm);
    r.add("InstanceNormalization", instance_norm);
    r.add("LayerNormalization", layer_norm);
    r.add("GroupNormalization", group_norm);
    r.add("LpNormalization", lp_norm);
    r.add("LRN", lrn);
    r.add("MeanVarianceNormalization", mvn);
}

fn rank(ctx: &Ctx, i: usize) -> Result<usize> {
    Ok(ctx.input_ty(i)?.shape.len())
}

/// The `axis` attribute (with its default), normalized against input 0.
fn axis_attr(ctx: &Ctx, default: i64) -> Result<usize> {
    let axis = ctx.attrs.int_or("axis", default)?;
    Ok(normalize_axis(axis, rank(ctx, 0)?)?)
}

/// Whether a bool-like integer attribute is set.
fn flag(ctx: &Ctx, name: &str, default: bool) -> Result<bool> {
    Ok(ctx.attrs.int_or(name, default as i64)? != 0)
}

/// ReduceSum moved `axes` to an input in opset 13, the other reductions in
/// opset 18. Absent or empty axes mean all axes, or none with
/// `noop_with_empty_axes`.
fn reduce(ctx: &mut Ctx, kind: ReduceKind) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let rank = ctx.ty(x).shape.len();
    let axes_as_input = ctx.opset >= if kind == ReduceKind::Sum { 13 } else { 18 };
    let axes = if axes_as_input { ctx.opt_const_ints(1, "axes")? } else { ctx.attrs.ints("axes")? };
    let keepdims = flag(ctx, "keepdims", true)?;
    let axes = match axes {
        Some(a) if !a.is_empty() => normalize_axes(&a, rank)?,
        _ if flag(ctx, "noop_with_empty_axes", false)? => {
            // The identity, except that reductions like SumSquare still
            // apply their per-element part.
            if matches!(kind, ReduceKind::Sum | ReduceKind::Mean | ReduceKind::Max | ReduceKind::Min | ReduceKind::Prod) {
                return Ok(vec![x]);
            }
            Vec::new()
        }
        _ => (0..rank).collect(),
    };
    Ok(vec![ctx.op1(Reduce::new(kind, axes, keepdims), &[Some(x)])?])
}

fn arg(ctx: &mut Ctx, kind: ArgKind) -> Result<Vec<Port>> {
    let axis = axis_attr(ctx, 0)?;
    let op = ArgMinMax::new(kind, axis, flag(ctx, "keepdims", true)?, flag(ctx, "select_last_index", false)?);
    Ok(vec![ctx.op1(op, &[Some(ctx.input(0)?)])?])
}

/// Before opset 13 the input is coerced to 2-D at `axis` (default 1);
/// from 13 on only `axis` (default -1) is normalized.
fn softmax(ctx: &mut Ctx, kind: SoftmaxKind) -> Result<Vec<Port>> {
    let legacy = ctx.opset < 13;
    let axis = axis_attr(ctx, if legacy { 1 } else { -1 })?;
    let trailing_one = ctx.input_ty(0)?.shape[axis + 1..].iter().all(|&d| d == 1);
    let op = Softmax::with_kind(kind, axis, legacy && !trailing_one);
    Ok(vec![ctx.op1(op, &[Some(ctx.input(0)?)])?])
}

fn cumsum(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let axis = ctx.require_const_int(1, "axis")?;
    let axis = normalize_axis(axis, rank(ctx, 0)?)?;
    let op = CumSum::new(axis, flag(ctx, "exclusive", false)?, flag(ctx, "reverse", false)?);
    Ok(vec![ctx.op1(op, &[Some(ctx.input(0)?)])?])
}

/// `k` is an attribute before opset 10 and a constant input after.
fn topk(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let axis = axis_attr(ctx, -1)?;
    let (largest, sorted) = (flag(ctx, "largest", true)?, flag(ctx, "sorted", true)?);
    if ctx.opset >= 10 {
        let computed = ValueShapedOp::TopK { axis, largest, sorted };
        if let Some(outs) = super::movement::shaped_by_values(ctx, computed)? {
            return Ok(outs);
        }
    }
    let k = if ctx.opset < 10 {
        ctx.attrs.int("k")?.ok_or_else(|| anyhow!("TopK without a k attribute"))?
    } else {
        ctx.require_const_int(1, "k")?
    };
    let k = usize::try_from(k).map_err(|_| anyhow!("TopK: k must be non-negative, got {k}"))?;
    let op = TopK::new(axis, k, largest, sorted);
    ctx.op(op, &[Some(ctx.input(0)?)])
}

/// Inference mode only: `training_mode` (opset 14+) must be 0, and only Y
/// is produced.
fn batch_norm(ctx: &mut Ctx) -> Result<Vec<Port>> {
    if flag(ctx, "training_mode", false)? {
        bail!("BatchNormalization with training_mode=1 is not supported (inference only)");
    }
    if ctx.opset < 9 && !flag(ctx, "spatial", true)? && rank(ctx, 0)? > 2 {
        bail!("BatchNormalization with spatial=0 (per-activation statistics) is not supported");
    }
    let op = BatchNorm::new(ctx.attrs.float_or("epsilon", 1e-5)?);
    let inputs: Vec<Option<Port>> = (0..5).map(|i| ctx.input(i).map(Some)).collect::<Result<_>>()?;
    Ok(vec![ctx.op1(op, &inputs)?])
}

fn instance_norm(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let op = InstanceNorm::new(ctx.attrs.float_or("epsilon", 1e-5)?);
    let inputs = [Some(ctx.input(0)?), Some(ctx.input(1)?), Some(ctx.input(2)?)];
    Ok(vec![ctx.op1(op, &inputs)?])
}

/// Statistics are computed in f64 whatever `stash_type` says; it only sets
/// the dtype of the optional Mean and InvStdDev outputs, which are produced
/// when the node names them.
fn layer_norm(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let axis = axis_attr(ctx, -1)?;
    let epsilon = ctx.attrs.float_or("epsilon", 1e-5)?;
    let wants_stats = ctx.node.output.iter().skip(1).any(|o| !o.is_empty());
    let op = if wants_stats {
        LayerNorm::with_stats(axis, epsilon, proto::dtype(ctx.attrs.int_or("stash_type", 1)? as i32)?)
    } else {
        LayerNorm::new(axis, epsilon)
    };
    let inputs = [Some(ctx.input(0)?), Some(ctx.input(1)?), ctx.opt_input(2)];
    ctx.op(op, &inputs)
}

/// Opset 18 takes scale and bias per group, opset 21 per channel; the
/// runtime op accepts both.
fn group_norm(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let groups = ctx.attrs.int("num_groups")?.ok_or_else(|| anyhow!("GroupNormalization without num_groups"))?;
    let groups = usize::try_from(groups).ok().filter(|&g| g > 0);
    let groups = groups.ok_or_else(|| anyhow!("GroupNormalization: num_groups must be positive"))?;
    if ctx.opset >= 21 {
        let c = ctx.input_ty(0)?.shape.get(1).copied().unwrap_or(0);
        for i in [1, 2] {
            let n = ctx.input_ty(i)?.len();
            if n != c {
                bail!("GroupNormalization (opset 21): scale and bias must have {c} elements, got {n}");
            }
        }
    }
    let op = GroupNorm::new(groups, ctx.attrs.float_or("epsilon", 1e-5)?);
    let inputs = [Some(ctx.input(0)?), Some(ctx.input(1)?), Some(ctx.input(2)?)];
    Ok(vec![ctx.op1(op, &inputs)?])
}

fn lp_norm(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let axis = axis_attr(ctx, -1)?;
    let p = match ctx.attrs.int_or("p", 2)? {
        p @ (1 | 2) => p as u32,
        p => bail!("LpNormalization: p must be 1 or 2, got {p}"),
    };
    Ok(vec![ctx.op1(LpNorm::new(axis, p), &[Some(ctx.input(0)?)])?])
}

fn lrn(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let size = ctx.attrs.int("size")?.ok_or_else(|| anyhow!("LRN without a size attribute"))?;
    let size = usize::try_from(size).ok().filter(|&s| s > 0).ok_or_else(|| anyhow!("LRN: size must be positive"))?;
    let a = &ctx.attrs;
    let op = Lrn::new(size, a.float_or("alpha", 1e-4)?, a.float_or("beta", 0.75)?, a.float_or("bias", 1.0)?);
    Ok(vec![ctx.op1(op, &[Some(ctx.input(0)?)])?])
}

fn mvn(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let axes = ctx.attrs.ints("axes")?.unwrap_or_else(|| vec![0, 2, 3]);
    let axes = normalize_axes(&axes, rank(ctx, 0)?)?;
    Ok(vec![ctx.op1(Mvn::new(axes), &[Some(ctx.input(0)?)])?])
}

/// The `reduction` and `ignore_index` attributes of the losses.
fn loss_op(ctx: &Ctx) -> Result<NllLoss> {
    let reduction = match ctx.attrs.string("reduction")?.as_deref().map(|s| s.trim_end_matches('\0')) {
        None | Some("mean") => LossReduction::Mean,
        Some("sum") => LossReduction::Sum,
        Some("none") => LossReduction::None,
        Some(r) => bail!("reduction '{r}' is not none, sum or mean"),
    };
    let ignore_index = ctx.attrs.int("ignore_index")?.filter(|_| ctx.attrs.has("ignore_index"));
    Ok(NllLoss { reduction, ignore_index })
}

fn nll_loss(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let op = loss_op(ctx)?;
    let inputs = [Some(ctx.input(0)?), Some(ctx.input(1)?), ctx.opt_input(2)];
    Ok(vec![ctx.op1(op, &inputs)?])
}

/// `NegativeLogLikelihoodLoss(LogSoftmax(scores, axis 1), labels, weights)`;
/// the second output is the log-probabilities.
fn softmax_cross_entropy_loss(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let op = loss_op(ctx)?;
    let log_prob = ctx.op1(Softmax::with_kind(SoftmaxKind::LogSoftmax, 1, false), &[Some(ctx.input(0)?)])?;
    let loss = ctx.op1(op, &[Some(log_prob), Some(ctx.input(1)?), ctx.opt_input(2)])?;
    Ok(vec![loss, log_prob])
}

#[cfg(test)]
mod tests {
    use crate::frontend::onnx::proto::ExternalDataRoot;
    use crate::frontend::onnx::{import_model, ImportOptions};
    use tract_onnx::pb;
    use trtc_runtime::Tensor;

    enum Attr {
        Int(i64),
        Ints(Vec<i64>),
    }

    fn attribute(name: &str, a: Attr) -> pb::AttributeProto {
        use pb::attribute_proto::AttributeType;
        let mut p = pb::AttributeProto { name: name.into(), ..Default::default() };
        match a {
            Attr::Int(i) => {
                p.i = i;
                p.r#type = AttributeType::Int as i32;
            }
            Attr::Ints(v) => {
                p.ints = v;
                p.r#type = AttributeType::Ints as i32;
            }
        }
        p
    }

    fn f32_init(name: &str, shape: &[i64], values: Vec<f32>) -> pb::TensorProto {
        let data_type = pb::tensor_proto::DataType::Float as i32;
        pb::TensorProto { name: name.into(), dims: shape.to_vec(), data_type, float_data: values, ..Default::default() }
    }

    fn i64_init(name: &str, values: Vec<i64>) -> pb::TensorProto {
        let data_type = pb::tensor_proto::DataType::Int64 as i32;
        let dims = vec![values.len() as i64];
        pb::TensorProto { name: name.into(), dims, data_type, int64_data: values, ..Default::default() }
    }

    /// Imports a one-node model whose inputs are all initializers (so the
    /// node folds to constants) and returns its outputs.
    fn fold(op_type: &str, opset: i64, inits: Vec<pb::TensorProto>, attrs: Vec<(&str, Attr)>, outputs: usize) -> Vec<Tensor> {
        let out_names: Vec<String> = (0..outputs).map(|i| format!("y{i}")).collect();
        let node = pb::NodeProto {
            name: "n".into(),
            op_type: op_type.into(),
            input: inits.iter().map(|t| t.name.clone()).collect(),
            output: out_names.clone(),
            attribute: attrs.into_iter().map(|(n, a)| attribute(n, a)).collect(),
            ..Default::default()
        };
        let output = out_names.iter().map(|n| pb::ValueInfoProto { name: n.clone(), ..Default::default() }).collect();
        let graph = pb::GraphProto { node: vec![node], initializer: inits, output, ..Default::default() };
        let model = pb::ModelProto {
            ir_version: 8,
            opset_import: vec![pb::OperatorSetIdProto { domain: String::new(), version: opset }],
            graph: Some(graph),
            ..Default::default()
        };
        let g = import_model(&model, ExternalDataRoot { dir: None }, &ImportOptions::default()).unwrap();
        g.outputs().iter().map(|o| g.node(o.port.node).constant().expect("folded").clone()).collect()
    }

    #[test]
    fn legacy_softmax_flattens_at_axis() {
        let x = f32_init("x", &[1, 2, 2], vec![0.0; 4]);
        let y = fold("Softmax", 11, vec![x.clone()], vec![("axis", Attr::Int(1))], 1);
        assert_eq!(y[0].to_f64_vec(), vec![0.25; 4]);
        let y = fold("Softmax", 13, vec![x], vec![("axis", Attr::Int(1))], 1);
        assert_eq!(y[0].to_f64_vec(), vec![0.5; 4]);
    }

    #[test]
    fn reduce_axes_from_attribute_or_input() {
        let x = || f32_init("x", &[2, 2], vec![1., 2., 3., 4.]);
        let attrs = vec![("axes", Attr::Ints(vec![1])), ("keepdims", Attr::Int(0))];
        let y = fold("ReduceSum", 11, vec![x()], attrs, 1);
        assert_eq!((y[0].shape(), y[0].to_f64_vec()), (&[2usize][..], vec![3., 7.]));
        let y = fold("ReduceMean", 18, vec![x(), i64_init("axes", vec![-2])], vec![], 1);
        assert_eq!((y[0].shape(), y[0].to_f64_vec()), (&[1usize, 2][..], vec![2., 3.]));
        let y = fold("ReduceMax", 18, vec![x()], vec![], 1);
        assert_eq!(y[0].to_f64_vec(), vec![4.]);
    }

    #[test]
    fn noop_with_empty_axes() {
        let x = f32_init("x", &[2], vec![-2., 3.]);
        let noop = || vec![("noop_with_empty_axes", Attr::Int(1))];
        assert_eq!(fold("ReduceSum", 13, vec![x.clone()], noop(), 1)[0].to_f64_vec(), vec![-2., 3.]);
        assert_eq!(fold("ReduceSumSquare", 18, vec![x], noop(), 1)[0].to_f64_vec(), vec![4., 9.]);
    }

    #[test]
    fn topk_k_from_input_and_attribute() {
        let x = || f32_init("x", &[4], vec![1., 4., 2., 4.]);
        let y = fold("TopK", 11, vec![x(), i64_init("k", vec![2])], vec![], 2);
        assert_eq!((y[0].to_f64_vec(), y[1].to_i64_vec().unwrap()), (vec![4., 4.], vec![1, 3]));
        let y = fold("TopK", 1, vec![x()], vec![("k", Attr::Int(1))], 2);
        assert_eq!(y[1].to_i64_vec().unwrap(), vec![1]);
    }

    #[test]
    fn cumsum_axis_from_scalar_input() {
        let x = f32_init("x", &[3], vec![1., 2., 3.]);
        let axis = pb::TensorProto { dims: vec![], ..i64_init("axis", vec![0]) };
        let y = fold("CumSum", 14, vec![x, axis], vec![("reverse", Attr::Int(1))], 1);
        assert_eq!(y[0].to_f64_vec(), vec![6., 5., 3.]);
    }
}
