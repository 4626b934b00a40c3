//! Binary and variadic ops with numpy broadcasting (and the legacy
//! `broadcast`/`axis` attributes of opsets before 7), Where and Clip.

use super::{reshape, scalar, Registry};
use crate::frontend::onnx::ctx::Ctx;
use crate::ir::Port;
use anyhow::{anyhow, bail, Result};
use trtc_runtime::ops::elementwise::{Binary, BinaryKind, Clip, Compare, CompareKind, Pow, Where};
use trtc_runtime::ops::util::broadcast_shapes;
use trtc_runtime::DType;

pub fn register(r: &mut Registry) {
    for op in ["Add", "Sub", "Mul", "Div", "Mod", "And", "Or", "Xor", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift"] {
        r.add(op, binary);
    }
    for op in ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"] {
        r.add(op, compare);
    }
    for op in ["Sum", "Mean", "Max", "Min"] {
        r.add(op, variadic);
    }
    r.add("Pow", pow);
    r.add("PRelu", prelu);
    r.add("Where", where_);
    r.add("Clip", clip);
}

/// The two inputs of a binary node, the second reshaped for the legacy
/// broadcast of opsets before 7: with `broadcast=1`, B's dimensions match A's
/// starting at `axis` (by default, A's trailing dimensions).
fn operands(ctx: &mut Ctx) -> Result<(Port, Port)> {
    let a = ctx.input(0)?;
    let b = ctx.input(1)?;
    if ctx.opset >= 7 || ctx.attrs.int_or("broadcast", 0)? == 0 {
        return Ok((a, b));
    }
    let rank = ctx.ty(a).shape.len();
    let b_shape = ctx.ty(b).shape.clone();
    if b_shape.len() > rank {
        bail!("legacy broadcast: B has rank {} but A only {rank}", b_shape.len());
    }
    let axis = match ctx.attrs.int("axis")? {
        Some(ax) if ax < 0 => ax + rank as i64,
        Some(ax) => ax,
        None => (rank - b_shape.len()) as i64,
    };
    if axis < 0 || axis as usize + b_shape.len() > rank {
        bail!("legacy broadcast: axis {axis} does not fit B {b_shape:?} into rank {rank}");
    }
    let mut shape = b_shape;
    shape.resize(rank - axis as usize, 1);
    let b = reshape(ctx, b, shape)?;
    Ok((a, b))
}

fn binary_kind(ctx: &Ctx) -> Result<BinaryKind> {
    use BinaryKind::*;
    Ok(match ctx.node.op_type.as_str() {
        "Add" => Add,
        "Sub" => Sub,
        "Mul" => Mul,
        "Div" => Div,
        "Mod" => Mod { fmod: ctx.attrs.int_or("fmod", 0)? != 0 },
        "And" => And,
        "Or" => Or,
        "Xor" => Xor,
        "BitwiseAnd" => BitwiseAnd,
        "BitwiseOr" => BitwiseOr,
        "BitwiseXor" => BitwiseXor,
        "BitShift" => match ctx.attrs.string("direction")?.as_deref() {
            Some("LEFT") => BitShiftLeft,
            Some("RIGHT") => BitShiftRight,
            other => bail!("BitShift direction {other:?} is not LEFT or RIGHT"),
        },
        other => bail!("{other} is not a binary op"),
    })
}

fn binary(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let kind = binary_kind(ctx)?;
    let (a, b) = operands(ctx)?;
    Ok(vec![ctx.op1(Binary { kind }, &[Some(a), Some(b)])?])
}

fn compare(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let kind = match ctx.node.op_type.as_str() {
        "Equal" => CompareKind::Equal,
        "Less" => CompareKind::Less,
        "LessOrEqual" => CompareKind::LessOrEqual,
        "Greater" => CompareKind::Greater,
        "GreaterOrEqual" => CompareKind::GreaterOrEqual,
        other => bail!("{other} is not a comparison"),
    };
    let (a, b) = operands(ctx)?;
    Ok(vec![ctx.op1(Compare { kind }, &[Some(a), Some(b)])?])
}

fn pow(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let (a, b) = operands(ctx)?;
    Ok(vec![ctx.op1(Pow, &[Some(a), Some(b)])?])
}

/// Sum, Mean, Max, Min of one or more inputs: a chain of binary ops (Mean
/// divides the sum by the input count).
fn variadic(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let op = ctx.node.op_type.clone();
    let kind = match op.as_str() {
        "Sum" | "Mean" => BinaryKind::Add,
        "Max" => BinaryKind::Max,
        "Min" => BinaryKind::Min,
        other => bail!("{other} is not a variadic op"),
    };
    let inputs: Vec<Port> = (0..ctx.num_inputs()).filter_map(|i| ctx.opt_input(i)).collect();
    let (&first, rest) = inputs.split_first().ok_or_else(|| anyhow!("{op} needs at least one input"))?;
    let mut acc = first;
    for &p in rest {
        acc = ctx.op1(Binary { kind }, &[Some(acc), Some(p)])?;
    }
    if op == "Mean" && inputs.len() > 1 {
        let dtype = ctx.ty(acc).dtype;
        if !dtype.is_float() {
            bail!("Mean of {dtype} inputs is not supported");
        }
        let n = ctx.constant(scalar(dtype, inputs.len() as f64)?);
        acc = ctx.op1(Binary::new(BinaryKind::Div), &[Some(acc), Some(n)])?;
    }
    Ok(vec![acc])
}

/// PRelu: the slope broadcasts to X (unidirectionally). A one-dimensional
/// slope of X's channel count that does not broadcast numpy-style is a
/// per-channel slope on axis 1, as PRelu before opset 7 (and the exporters
/// of that time) meant it.
fn prelu(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let mut slope = ctx.input(1)?;
    let x_shape = ctx.ty(x).shape.clone();
    let s_shape = ctx.ty(slope).shape.clone();
    let numpy = broadcast_shapes(&[&x_shape, &s_shape]).ok();
    if numpy.as_deref() != Some(x_shape.as_slice()) {
        let per_channel = s_shape.len() == 1 && x_shape.len() >= 2 && s_shape[0] == x_shape[1];
        if !per_channel {
            bail!("PRelu slope {s_shape:?} does not broadcast to X {x_shape:?}");
        }
        let mut shape = vec![1; x_shape.len() - 1];
        shape[0] = s_shape[0];
        slope = reshape(ctx, slope, shape)?;
    }
    Ok(vec![ctx.op1(Binary::new(BinaryKind::PRelu), &[Some(x), Some(slope)])?])
}

fn where_(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let c = ctx.input(0)?;
    let x = ctx.input(1)?;
    let y = ctx.input(2)?;
    Ok(vec![ctx.op1(Where, &[Some(c), Some(x), Some(y)])?])
}

/// A Clip bound given as input `i`: `Ok(Some(v))` when constant and exact as
/// f64, `Err(port)` when it must be applied at run time.
fn clip_bound(ctx: &Ctx, i: usize) -> Result<Result<Option<f64>, Port>> {
    let Some(p) = ctx.opt_input(i) else { return Ok(Ok(None)) };
    let Some(t) = ctx.konst(p) else { return Ok(Err(p)) };
    if t.len() != 1 {
        bail!("Clip bound {i} must be a scalar, got shape {:?}", t.shape());
    }
    // 64-bit integers beyond 2^53 may not survive the trip through f64 (the
    // runtime converts back with a saturating `as`); apply those at run time.
    let exact = match t.dtype() {
        DType::I64 => {
            let v = t.as_slice::<i64>()?[0];
            v as f64 as i64 == v
        }
        DType::U64 => {
            let v = t.as_slice::<u64>()?[0];
            v as f64 as u64 == v
        }
        _ => true,
    };
    Ok(if exact { Ok(Some(t.to_f64_vec()[0])) } else { Err(p) })
}

/// Clip: static bounds from attributes (before opset 11) or constant inputs;
/// run-time bounds become Max and Min.
fn clip(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    if ctx.opset < 11 {
        let min = ctx.attrs.float("min")?.map(f64::from);
        let max = ctx.attrs.float("max")?.map(f64::from);
        return Ok(vec![ctx.op1(Clip { min, max }, &[Some(x)])?]);
    }
    let lo = clip_bound(ctx, 1)?;
    let hi = clip_bound(ctx, 2)?;
    let (min, max) = (lo.ok().flatten(), hi.ok().flatten());
    let mut y = x;
    if min.is_some() || max.is_some() {
        y = ctx.op1(Clip { min, max }, &[Some(y)])?;
    }
    if let Err(p) = lo {
        y = ctx.op1(Binary::new(BinaryKind::Max), &[Some(y), Some(p)])?;
    }
    if let Err(p) = hi {
        y = ctx.op1(Binary::new(BinaryKind::Min), &[Some(y), Some(p)])?;
    }
    Ok(vec![y])
}
