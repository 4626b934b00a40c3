//! Cast and CastLike.

use super::Registry;
use crate::frontend::onnx::ctx::Ctx;
use crate::frontend::onnx::proto;
use crate::ir::Port;
use anyhow::{bail, Result};
use trtc_runtime::ops::elementwise::{Cast, CastNoSaturate};
use trtc_runtime::DType;

pub fn register(r: &mut Registry) {
    r.add("Cast", cast);
    r.add("CastLike", cast_like);
}

/// Cast-1 names the target type with a string, later versions with an enum.
fn dtype_by_name(name: &str) -> Result<DType> {
    Ok(match name.to_ascii_uppercase().as_str() {
        "FLOAT" => DType::F32,
        "FLOAT16" => DType::F16,
        "BFLOAT16" => DType::BF16,
        "DOUBLE" => DType::F64,
        "INT8" => DType::I8,
        "INT16" => DType::I16,
        "INT32" => DType::I32,
        "INT64" => DType::I64,
        "UINT8" => DType::U8,
        "UINT16" => DType::U16,
        "UINT32" => DType::U32,
        "UINT64" => DType::U64,
        "BOOL" => DType::Bool,
        other => bail!("Cast to {other} is not supported"),
    })
}

/// `saturate` (opset 19, default 1) decides what an 8-bit float target does
/// with values out of its range; other targets ignore it.
fn cast_to(ctx: &mut Ctx, to: DType) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    if ctx.ty(x).dtype == to {
        return Ok(vec![x]);
    }
    let saturate = ctx.attrs.int_or("saturate", 1)? != 0;
    if to.is_float8() && !saturate {
        return Ok(vec![ctx.op1(CastNoSaturate { to }, &[Some(x)])?]);
    }
    Ok(vec![ctx.op1(Cast { to }, &[Some(x)])?])
}

fn cast(ctx: &mut Ctx) -> Result<Vec<Port>> {
    // 'to' was a type name (STRING) before opset 6, an element type since.
    let to = if ctx.opset < 6 {
        match ctx.attrs.string("to")? {
            Some(name) => dtype_by_name(&name)?,
            None => bail!("Cast without a 'to' attribute"),
        }
    } else {
        match ctx.attrs.int("to")? {
            Some(t) => proto::dtype(t as i32)?,
            None => bail!("Cast without a 'to' attribute"),
        }
    };
    cast_to(ctx, to)
}

fn cast_like(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let to = ctx.input_ty(1)?.dtype;
    cast_to(ctx, to)
}
