//! Unary math and activations (one `Unary` op whose kind holds the
//! parameters), `Not`, `BitwiseNot`, `IsNaN`, `IsInf`.

use super::Registry;
use crate::frontend::onnx::ctx::Ctx;
use crate::ir::Port;
use anyhow::{bail, Result};
use trtc_runtime::ops::elementwise::{BitwiseNot, IsInf, IsNaN, Not, Unary, UnaryKind};

/// ONNX op types that become a [`Unary`] op.
const UNARY_OPS: &[&str] = &[
    "Abs",
    "Acos",
    "Acosh",
    "Asin",
    "Asinh",
    "Atan",
    "Atanh",
    "Ceil",
    "Cos",
    "Cosh",
    "Erf",
    "Exp",
    "Floor",
    "Log",
    "Neg",
    "Reciprocal",
    "Round",
    "Sign",
    "Sin",
    "Sinh",
    "Sqrt",
    "Tan",
    "Tanh",
    "Relu",
    "Sigmoid",
    "Elu",
    "Selu",
    "Celu",
    "LeakyRelu",
    "ThresholdedRelu",
    "HardSigmoid",
    "HardSwish",
    "Softplus",
    "Softsign",
    "Mish",
    "Gelu",
    "Shrink",
];

pub fn register(r: &mut Registry) {
    for &op in UNARY_OPS {
        r.add(op, unary);
    }
    r.add("Not", not);
    r.add("BitwiseNot", bitwise_not);
    r.add("IsNaN", is_nan);
    r.add("IsInf", is_inf);
}

/// The unary kind of the node, with its attributes or ONNX's defaults.
fn kind(ctx: &Ctx) -> Result<UnaryKind> {
    use UnaryKind::*;
    let a = &ctx.attrs;
    Ok(match ctx.node.op_type.as_str() {
        "Abs" => Abs,
        "Acos" => Acos,
        "Acosh" => Acosh,
        "Asin" => Asin,
        "Asinh" => Asinh,
        "Atan" => Atan,
        "Atanh" => Atanh,
        "Ceil" => Ceil,
        "Cos" => Cos,
        "Cosh" => Cosh,
        "Erf" => Erf,
        "Exp" => Exp,
        "Floor" => Floor,
        "Log" => Log,
        "Neg" => Neg,
        "Reciprocal" => Reciprocal,
        "Round" => Round,
        "Sign" => Sign,
        "Sin" => Sin,
        "Sinh" => Sinh,
        "Sqrt" => Sqrt,
        "Tan" => Tan,
        "Tanh" => Tanh,
        "Relu" => Relu,
        "Sigmoid" => Sigmoid,
        "Elu" => Elu { alpha: a.float_or("alpha", 1.0)? },
        "Selu" => Selu { alpha: a.float_or("alpha", 1.673_263_2)?, gamma: a.float_or("gamma", 1.050_701)? },
        "Celu" => Celu { alpha: a.float_or("alpha", 1.0)? },
        "LeakyRelu" => LeakyRelu { alpha: a.float_or("alpha", 0.01)? },
        "ThresholdedRelu" => ThresholdedRelu { alpha: a.float_or("alpha", 1.0)? },
        "HardSigmoid" => HardSigmoid { alpha: a.float_or("alpha", 0.2)?, beta: a.float_or("beta", 0.5)? },
        "HardSwish" => HardSwish,
        "Softplus" => Softplus,
        "Softsign" => Softsign,
        "Mish" => Mish,
        "Gelu" => match a.string("approximate")?.as_deref().unwrap_or("none") {
            "none" => Gelu,
            "tanh" => GeluTanh,
            other => bail!("Gelu approximation '{other}' is not supported"),
        },
        "Shrink" => Shrink { bias: a.float_or("bias", 0.0)?, lambd: a.float_or("lambd", 0.5)? },
        other => bail!("{other} is not a unary op"),
    })
}

fn unary(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let kind = kind(ctx)?;
    if matches!(kind, UnaryKind::Celu { alpha } if alpha == 0.0) {
        bail!("Celu with alpha 0 is undefined");
    }
    let x = ctx.input(0)?;
    Ok(vec![ctx.op1(Unary { kind }, &[Some(x)])?])
}

fn not(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    Ok(vec![ctx.op1(Not, &[Some(x)])?])
}

fn bitwise_not(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    Ok(vec![ctx.op1(BitwiseNot, &[Some(x)])?])
}

fn is_nan(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    Ok(vec![ctx.op1(IsNaN, &[Some(x)])?])
}

fn is_inf(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let op = IsInf {
        detect_positive: ctx.attrs.int_or("detect_positive", 1)? != 0,
        detect_negative: ctx.attrs.int_or("detect_negative", 1)? != 0,
    };
    let x = ctx.input(0)?;
    Ok(vec![ctx.op1(op, &[Some(x)])?])
}
