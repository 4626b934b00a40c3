//! Indexing ops: Slice, Concat, Split, Gather, GatherElements, GatherND,
//! ScatterElements (and Scatter), ScatterND, Compress (a Gather with the
//! constant condition's positions), Trilu, OneHot, ReverseSequence.

use super::{axes, axis, dims, ints_attr_or_input};
use crate::frontend::onnx::ctx::Ctx;
use crate::frontend::onnx::ops::Registry;
use crate::ir::Port;
use anyhow::{anyhow, bail, Result};
use trtc_runtime::ops::control::ValueShapedOp;
use trtc_runtime::ops::movement::{
    Concat, Gather, GatherElements, GatherND, OneHot, ReverseSequence, ScatterElements, ScatterND, ScatterReduction, Slice,
    Split, Trilu,
};
use trtc_runtime::Tensor;

pub fn register(r: &mut Registry) {
    r.add("Slice", slice);
    r.add("Concat", concat);
    r.add("Split", split);
    r.add("Gather", gather);
    r.add("GatherElements", gather_elements);
    r.add("GatherND", gather_nd);
    r.add("ScatterElements", scatter_elements);
    r.add("Scatter", scatter_elements);
    r.add("ScatterND", scatter_nd);
    r.add("Compress", compress);
    r.add("Trilu", trilu);
    r.add("OneHot", one_hot);
    r.add("ReverseSequence", reverse_sequence);
}

fn slice(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let rank = ctx.ty(x).shape.len();
    let (starts, ends, ax, steps) = if ctx.opset < 10 {
        let a = &ctx.attrs;
        (
            a.ints("starts")?.ok_or_else(|| anyhow!("missing attribute 'starts'"))?,
            a.ints("ends")?.ok_or_else(|| anyhow!("missing attribute 'ends'"))?,
            a.ints("axes")?,
            None,
        )
    } else {
        if ctx.const_input(1).is_none() || ctx.const_input(2).is_none() {
            if let Some(outs) = computed_slice(ctx, rank)? {
                return Ok(outs);
            }
        }
        (
            ctx.require_const(1, "starts")?.to_i64_vec()?,
            ctx.require_const(2, "ends")?.to_i64_vec()?,
            ctx.opt_const_ints(3, "axes")?,
            ctx.opt_const_ints(4, "steps")?,
        )
    };
    let n = starts.len();
    let ax = match ax {
        Some(a) => axes(&a, rank)?,
        None => (0..n).collect(),
    };
    let steps = steps.unwrap_or_else(|| vec![1; n]);
    if ends.len() != n || ax.len() != n || steps.len() != n {
        bail!("starts, ends, axes and steps differ in length");
    }
    if steps.contains(&0) {
        bail!("slice step cannot be 0");
    }
    Ok(vec![ctx.op1(Slice { axes: ax, starts, ends, steps }, &[Some(x)])?])
}

/// A Slice whose starts or ends are computed at run time from sizes that
/// depend on the data (see `shaped_by_values`); its axes and steps must be
/// constants.
fn computed_slice(ctx: &mut Ctx, rank: usize) -> Result<Option<Vec<Port>>> {
    let Some(n) = ctx.room_value(1).map(|t| t.len()) else { return Ok(None) };
    let axes = match ctx.opt_const_ints(3, "axes")? {
        Some(a) => axes(&a, rank)?,
        None => (0..n).collect(),
    };
    let steps = ctx.opt_const_ints(4, "steps")?.unwrap_or_else(|| vec![1; n]);
    if steps.contains(&0) {
        bail!("slice step cannot be 0");
    }
    super::shaped_by_values(ctx, ValueShapedOp::Slice { axes, steps })
}

fn concat(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let inputs: Vec<Option<Port>> = (0..ctx.num_inputs()).map(|i| ctx.opt_input(i)).collect();
    let first = inputs.first().copied().flatten().ok_or_else(|| anyhow!("Concat needs inputs"))?;
    let rank = ctx.ty(first).shape.len();
    let default = if ctx.opset < 4 { 1 } else { i64::MIN };
    let a = ctx.attrs.int_or("axis", default)?;
    if a == i64::MIN {
        bail!("missing attribute 'axis'");
    }
    let a = axis(a, rank)?;
    if inputs.len() == 1 {
        return Ok(vec![first]);
    }
    Ok(vec![ctx.op1(Concat { axis: a }, &inputs)?])
}

fn split(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let shape = ctx.ty(x).shape.clone();
    let a = axis(ctx.attrs.int_or("axis", 0)?, shape.len())?;
    let dim = shape[a];
    // Split-1 took the sizes as an optional input as well as an attribute.
    let given = if ctx.opset < 2 && ctx.opt_input(1).is_some() {
        ctx.opt_const_ints(1, "split")?
    } else {
        ints_attr_or_input(ctx, "split", 1, 13)?
    };
    let sizes = match given {
        Some(s) => dims(&s, "split")?,
        None => {
            let n = ctx.attrs.int("num_outputs")?.map(|n| n as usize).unwrap_or(ctx.node.output.len());
            if n == 0 {
                bail!("Split needs at least one output");
            }
            // Equal chunks; the last one is smaller when `dim` does not divide.
            let chunk = dim.div_ceil(n);
            (0..n).map(|i| chunk.min(dim.saturating_sub(i * chunk))).collect()
        }
    };
    if sizes.iter().sum::<usize>() != dim {
        bail!("split sizes {sizes:?} do not add up to dimension {dim}");
    }
    ctx.op(Split { axis: a, sizes }, &[Some(x)])
}

fn gather(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let a = axis(ctx.attrs.int_or("axis", 0)?, ctx.ty(x).shape.len())?;
    Ok(vec![ctx.op1(Gather { axis: a }, &[Some(x), Some(ctx.input(1)?)])?])
}

fn gather_elements(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let a = axis(ctx.attrs.int_or("axis", 0)?, ctx.ty(x).shape.len())?;
    Ok(vec![ctx.op1(GatherElements { axis: a }, &[Some(x), Some(ctx.input(1)?)])?])
}

fn gather_nd(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let b = ctx.attrs.int_or("batch_dims", 0)?;
    let batch_dims = usize::try_from(b).map_err(|_| anyhow!("batch_dims must be non-negative, got {b}"))?;
    Ok(vec![ctx.op1(GatherND { batch_dims }, &[Some(ctx.input(0)?), Some(ctx.input(1)?)])?])
}

fn reduction(ctx: &Ctx) -> Result<ScatterReduction> {
    Ok(match ctx.attrs.string("reduction")?.as_deref().unwrap_or("none") {
        "none" => ScatterReduction::None,
        "add" => ScatterReduction::Add,
        "mul" => ScatterReduction::Mul,
        "max" => ScatterReduction::Max,
        "min" => ScatterReduction::Min,
        r => bail!("unknown reduction '{r}'"),
    })
}

fn scatter_elements(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let a = axis(ctx.attrs.int_or("axis", 0)?, ctx.ty(x).shape.len())?;
    let op = ScatterElements { axis: a, reduction: reduction(ctx)? };
    Ok(vec![ctx.op1(op, &[Some(x), Some(ctx.input(1)?), Some(ctx.input(2)?)])?])
}

fn scatter_nd(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let op = ScatterND { reduction: reduction(ctx)? };
    Ok(vec![ctx.op1(op, &[Some(ctx.input(0)?), Some(ctx.input(1)?), Some(ctx.input(2)?)])?])
}

/// Compress keeps the slices whose condition is true. The condition decides
/// the output shape, so it must be constant; the data may be a runtime
/// tensor (the op becomes a Gather of the kept positions).
fn compress(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let cond = ctx.require_const(1, "condition")?.to_i64_vec()?;
    let mut x = ctx.input(0)?;
    let a = match ctx.attrs.int("axis")? {
        Some(a) => axis(a, ctx.ty(x).shape.len())?,
        None => {
            let n = ctx.ty(x).shape.iter().product();
            x = super::reshape_to(ctx, x, vec![n])?;
            0
        }
    };
    let dim = ctx.ty(x).shape[a];
    if cond.len() > dim {
        bail!("condition has {} entries for a dimension of {dim}", cond.len());
    }
    let keep: Vec<i64> = cond.iter().enumerate().filter(|(_, &c)| c != 0).map(|(i, _)| i as i64).collect();
    let idx = ctx.constant(Tensor::from_vec(vec![keep.len()], keep)?);
    Ok(vec![ctx.op1(Gather { axis: a }, &[Some(x), Some(idx)])?])
}

fn trilu(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let k = match ctx.opt_const_ints(1, "k")? {
        Some(v) => *v.first().ok_or_else(|| anyhow!("k is empty"))?,
        None => 0,
    };
    let upper = ctx.attrs.int_or("upper", 1)? != 0;
    Ok(vec![ctx.op1(Trilu { upper, k }, &[Some(ctx.input(0)?)])?])
}

fn one_hot(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let idx = ctx.input(0)?;
    let depth = ctx.require_const(1, "depth")?.to_f64_vec();
    let &[depth] = depth.as_slice() else { bail!("depth must have one element") };
    if depth.is_nan() || depth < 1.0 || depth > (1u64 << 40) as f64 {
        bail!("invalid depth {depth}");
    }
    let rank = ctx.ty(idx).shape.len() as i64;
    let a = ctx.attrs.int_or("axis", -1)?;
    let a = if a < 0 { a + rank + 1 } else { a };
    if a < 0 || a > rank {
        bail!("axis {a} out of range for indices of rank {rank}");
    }
    let op = OneHot { depth: depth as usize, axis: a as usize };
    Ok(vec![ctx.op1(op, &[Some(idx), Some(ctx.input(2)?)])?])
}

fn reverse_sequence(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let b = ctx.attrs.int_or("batch_axis", 1)?;
    let t = ctx.attrs.int_or("time_axis", 0)?;
    let (Ok(batch_axis), Ok(time_axis)) = (usize::try_from(b), usize::try_from(t)) else {
        bail!("batch_axis and time_axis must be 0 or 1");
    };
    let op = ReverseSequence { batch_axis, time_axis };
    Ok(vec![ctx.op1(op, &[Some(ctx.input(0)?), Some(ctx.input(1)?)])?])
}
