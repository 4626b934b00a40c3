//! Converters for the runtime's `movement` op family. Everything ONNX passes
//! as a tensor input that decides shapes (shape, axes, starts/ends, pads,
//! repeats, scales/sizes, ...) is read here at build time and stored in the
//! runtime op as a static attribute.

use super::Registry;
use crate::frontend::onnx::ctx::Ctx;
use crate::ir::Port;
use anyhow::{anyhow, bail, Result};
use trtc_runtime::ops::movement::Reshape;
use trtc_runtime::{DType, Tensor};

mod constants;
mod index;
mod pad_resize;
mod sampling;
mod shape;

pub fn register(r: &mut Registry) {
    shape::register(r);
    index::register(r);
    pad_resize::register(r);
    sampling::register(r);
    constants::register(r);
}

/// Largest constant (in bytes) a converter materializes at build time.
const MAX_CONSTANT_BYTES: usize = 1 << 30;

/// Resolves a possibly negative axis against `rank`.
fn axis(a: i64, rank: usize) -> Result<usize> {
    trtc_runtime::ops::util::normalize_axis(a, rank).map_err(|e| anyhow!("{e}"))
}

/// Resolves possibly negative axes against `rank`, rejecting repeats.
fn axes(a: &[i64], rank: usize) -> Result<Vec<usize>> {
    trtc_runtime::ops::util::normalize_axes(a, rank).map_err(|e| anyhow!("{e}"))
}

/// An integer list given as an attribute before `opset` and as input `i`
/// (which must be constant) from `opset` on. `None` when absent.
fn ints_attr_or_input(ctx: &Ctx, attr: &str, i: usize, since: i64) -> Result<Option<Vec<i64>>> {
    if ctx.opset < since {
        Ok(ctx.attrs.ints(attr)?)
    } else {
        ctx.opt_const_ints(i, attr)
    }
}

/// Non-negative dimensions from a constant shape-like list.
fn dims(values: &[i64], what: &str) -> Result<Vec<usize>> {
    values.iter().map(|&v| usize::try_from(v).map_err(|_| anyhow!("{what} has a negative value {v}"))).collect()
}

/// Reshapes `x` to `shape` (a no-op when it already has that shape).
fn reshape_to(ctx: &mut Ctx, x: Port, shape: Vec<usize>) -> Result<Port> {
    if ctx.ty(x).shape == shape && !ctx.keep_identity_reshapes {
        return Ok(x);
    }
    ctx.op1(Reshape { shape }, &[Some(x)])
}

/// Checks that a constant of `len` elements of `dtype` is small enough to build.
fn check_constant_size(len: usize, dtype: DType) -> Result<()> {
    match len.checked_mul(dtype.size()) {
        Some(n) if n <= MAX_CONSTANT_BYTES => Ok(()),
        _ => bail!("the constant output would hold {len} elements of {dtype}, too large to build"),
    }
}

/// A tensor of `dtype` from f64 values (rounded toward zero for integers,
/// non-zero for booleans).
fn tensor_from_f64(dtype: DType, shape: Vec<usize>, values: &[f64]) -> Result<Tensor> {
    use half::{bf16, f16};
    let t = match dtype {
        DType::F32 => Tensor::from_vec(shape, values.iter().map(|&v| v as f32).collect()),
        DType::F64 => Tensor::from_vec(shape, values.to_vec()),
        DType::F16 => Tensor::from_vec(shape, values.iter().map(|&v| f16::from_f64(v)).collect()),
        DType::BF16 => Tensor::from_vec(shape, values.iter().map(|&v| bf16::from_f64(v)).collect()),
        DType::I8 => Tensor::from_vec(shape, values.iter().map(|&v| v as i8).collect()),
        DType::I16 => Tensor::from_vec(shape, values.iter().map(|&v| v as i16).collect()),
        DType::I32 => Tensor::from_vec(shape, values.iter().map(|&v| v as i32).collect()),
        DType::I64 => Tensor::from_vec(shape, values.iter().map(|&v| v as i64).collect()),
        DType::U8 => Tensor::from_vec(shape, values.iter().map(|&v| v as u8).collect()),
        DType::U16 => Tensor::from_vec(shape, values.iter().map(|&v| v as u16).collect()),
        DType::U32 => Tensor::from_vec(shape, values.iter().map(|&v| v as u32).collect()),
        DType::U64 => Tensor::from_vec(shape, values.iter().map(|&v| v as u64).collect()),
        DType::Bool => {
            let b: Vec<bool> = values.iter().map(|&v| v != 0.0).collect();
            Tensor::from_bools(shape, &b)
        }
        // The storage-only types: converted as Cast converts.
        d => return crate::frontend::onnx::ops::cast(d, Tensor::from_vec(shape, values.to_vec())?),
    };
    t.map_err(|e| anyhow!("{e}"))
}

/// A tensor of `shape` whose every element is the single element of `value`.
fn filled(shape: Vec<usize>, value: &Tensor) -> Result<Tensor> {
    if value.len() != 1 {
        bail!("expected a one-element value, got {:?}", value.shape());
    }
    let n: usize = shape.iter().product();
    check_constant_size(n, value.dtype())?;
    let bytes = value.bytes().repeat(n);
    Tensor::from_bytes(trtc_runtime::TensorType::new(value.dtype(), shape), &bytes).map_err(|e| anyhow!("{e}"))
}
