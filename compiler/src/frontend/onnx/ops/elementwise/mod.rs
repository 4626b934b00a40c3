//! Converters for the runtime's `elementwise` op family: unary math and
//! activations, binary and variadic arithmetic, comparisons, logic, Pow,
//! Where, Clip, Cast.

use super::Registry;
use crate::frontend::onnx::ctx::Ctx;
use crate::ir::Port;
use anyhow::{anyhow, bail, Result};
use trtc_runtime::{DType, Tensor};

mod binary;
mod cast;
mod unary;

pub fn register(r: &mut Registry) {
    unary::register(r);
    binary::register(r);
    cast::register(r);
}

/// A rank-0 tensor of `dtype` holding `v` (exact for the small integers and
/// bounds it is used for).
fn scalar(dtype: DType, v: f64) -> Result<Tensor> {
    use half::{bf16, f16};
    Ok(match dtype {
        DType::F32 => Tensor::scalar(v as f32),
        DType::F64 => Tensor::scalar(v),
        DType::F16 => Tensor::scalar(f16::from_f64(v)),
        DType::BF16 => Tensor::scalar(bf16::from_f64(v)),
        DType::I8 => Tensor::scalar(v as i8),
        DType::I16 => Tensor::scalar(v as i16),
        DType::I32 => Tensor::scalar(v as i32),
        DType::I64 => Tensor::scalar(v as i64),
        DType::U8 => Tensor::scalar(v as u8),
        DType::U16 => Tensor::scalar(v as u16),
        DType::U32 => Tensor::scalar(v as u32),
        DType::U64 => Tensor::scalar(v as u64),
        DType::Bool => bail!("no {dtype} scalar for {v}"),
        // The storage-only types: converted as Cast converts.
        d => crate::frontend::onnx::ops::cast(d, Tensor::scalar(v))?,
    })
}

/// Reshapes `p` to `shape`, as a new constant when it is one.
fn reshape(ctx: &mut Ctx, p: Port, shape: Vec<usize>) -> Result<Port> {
    if ctx.ty(p).shape == shape {
        return Ok(p);
    }
    if let Some(t) = ctx.konst(p) {
        let t = t.clone().reshaped(shape).map_err(|e| anyhow!("{e}"))?;
        return Ok(ctx.constant(t));
    }
    ctx.op1(trtc_runtime::ops::movement::Reshape { shape }, &[Some(p)])
}
