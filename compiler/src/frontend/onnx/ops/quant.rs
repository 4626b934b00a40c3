//! Converters for the runtime's `quant` op family: QuantizeLinear,
//! DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul, QLinearConv, and
//! the FP8 Q/DQ of TensorRT's `trt` domain that NVIDIA's ModelOpt exports
//! (`TRT_FP8QuantizeLinear`, `TRT_FP8DequantizeLinear`: E4M3FN, no zero
//! point). Axes are normalized and the quantized output type resolved here.

use super::Registry;
use crate::frontend::onnx::ctx::Ctx;
use crate::frontend::onnx::proto;
use crate::ir::Port;
use anyhow::{ensure, Result};
use trtc_runtime::ops::elementwise::{Binary, BinaryKind, CastNoSaturate};
use trtc_runtime::ops::movement::Reshape;
use trtc_runtime::ops::quant::{DequantizeLinear, DynamicQuantizeLinear, QLinearConv, QLinearMatMul, QuantizeLinear};
use trtc_runtime::ops::util::normalize_axis;
use trtc_runtime::DType;

pub fn register(r: &mut Registry) {
    r.add("QuantizeLinear", quantize_linear);
    r.add("DequantizeLinear", dequantize_linear);
    r.add("DynamicQuantizeLinear", dynamic_quantize_linear);
    r.add("QLinearMatMul", qlinear_matmul);
    r.add("QLinearConv", qlinear_conv);
    r.add("trt:TRT_FP8QuantizeLinear", trt_fp8_quantize_linear);
    r.add("trt:TRT_FP8DequantizeLinear", trt_fp8_dequantize_linear);
}

/// The axis of a `trt` FP8 Q/DQ node: a per-tensor scale needs none; a
/// scale per channel needs the node's `axis` attribute.
fn trt_fp8_axis(ctx: &Ctx) -> Result<usize> {
    let rank = ctx.input_ty(0)?.shape.len();
    if ctx.input_ty(1)?.len() == 1 {
        return Ok(0);
    }
    ensure!(ctx.attrs.has("axis"), "a scale of more than one value needs an axis attribute");
    Ok(normalize_axis(ctx.attrs.int_or("axis", 0)?, rank)?)
}

/// ModelOpt's `TRT_FP8QuantizeLinear(x, scale)`: QuantizeLinear to E4M3FN,
/// saturating.
fn trt_fp8_quantize_linear(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let axis = trt_fp8_axis(ctx)?;
    let op = QuantizeLinear { axis, block_size: 0, output_dtype: DType::F8E4M3FN };
    let ins = [Some(ctx.input(0)?), Some(ctx.input(1)?)];
    Ok(vec![ctx.op1(op, &ins)?])
}

/// ModelOpt's `TRT_FP8DequantizeLinear(q, scale)`, `q` E4M3FN.
fn trt_fp8_dequantize_linear(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let axis = trt_fp8_axis(ctx)?;
    let q = ctx.input(0)?;
    ensure!(ctx.ty(q).dtype == DType::F8E4M3FN, "the input is {}, not E4M3FN", ctx.ty(q).dtype);
    let ins = [Some(q), Some(ctx.input(1)?)];
    Ok(vec![ctx.op1(DequantizeLinear { axis, block_size: 0 }, &ins)?])
}

/// The `axis` (default 1) and `block_size` (default 0) of a Q/DQ node,
/// normalized against the input's rank. A per-tensor scale ignores the axis,
/// so an out-of-range default is harmless there.
fn axis_and_block(ctx: &Ctx) -> Result<(usize, usize)> {
    let rank = ctx.input_ty(0)?.shape.len();
    let per_tensor = ctx.input_ty(1)?.len() == 1;
    let block = ctx.attrs.int_or("block_size", 0)?;
    ensure!(block >= 0, "block_size {block} must not be negative");
    let axis = ctx.attrs.int_or("axis", 1)?;
    let axis = match normalize_axis(axis, rank) {
        Ok(a) => a,
        Err(_) if per_tensor && block == 0 => 0,
        Err(e) => return Err(e.into()),
    };
    Ok((axis, block as usize))
}

fn inputs3(ctx: &Ctx) -> Result<[Option<Port>; 3]> {
    Ok([Some(ctx.input(0)?), Some(ctx.input(1)?), ctx.opt_input(2)])
}

fn quantize_linear(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let (axis, block_size) = axis_and_block(ctx)?;
    let output_dtype = match ctx.opt_input(2) {
        Some(z) => ctx.ty(z).dtype,
        None => match ctx.attrs.int_or("output_dtype", 0)? {
            0 => DType::U8,
            t => proto::dtype(t as i32)?,
        },
    };
    if output_dtype.is_float8() && ctx.attrs.int_or("saturate", 1)? == 0 {
        return quantize_float8_unsaturated(ctx, axis, block_size, output_dtype);
    }
    let op = QuantizeLinear { axis, block_size, output_dtype };
    let ins = inputs3(ctx)?;
    Ok(vec![ctx.op1(op, &ins)?])
}

/// QuantizeLinear to an 8-bit float with `saturate=0` is `x / scale` cast
/// without saturation (the zero point only names the type, and must be 0):
/// a Div by the scale, reshaped to broadcast along `axis`, then
/// CastNoSaturate.
fn quantize_float8_unsaturated(ctx: &mut Ctx, axis: usize, block_size: usize, to: DType) -> Result<Vec<Port>> {
    let (x, scale) = (ctx.input(0)?, ctx.input(1)?);
    if let Some(z) = ctx.const_input(2) {
        ensure!(z.to_f64_vec().iter().all(|&v| v == 0.0), "an 8-bit float zero point must be 0");
    }
    let (rank, n) = (ctx.ty(x).shape.len(), ctx.ty(scale).len());
    ensure!(block_size == 0 || n == 1, "blocked scales with saturate=0 are not supported");
    let scale = if n == 1 {
        scale
    } else {
        let mut shape = vec![1; rank - axis];
        shape[0] = n;
        ctx.op1(Reshape { shape }, &[Some(scale)])?
    };
    let ratio = ctx.op1(Binary::new(BinaryKind::Div), &[Some(x), Some(scale)])?;
    Ok(vec![ctx.op1(CastNoSaturate { to }, &[Some(ratio)])?])
}

fn dequantize_linear(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let (axis, block_size) = axis_and_block(ctx)?;
    let ins = inputs3(ctx)?;
    Ok(vec![ctx.op1(DequantizeLinear { axis, block_size }, &ins)?])
}

fn dynamic_quantize_linear(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    ctx.op(DynamicQuantizeLinear {}, &[Some(x)])
}

fn all_inputs(ctx: &Ctx, n: usize) -> Vec<Option<Port>> {
    (0..n).map(|i| ctx.opt_input(i)).collect()
}

fn qlinear_matmul(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let ins = all_inputs(ctx, 8);
    Ok(vec![ctx.op1(QLinearMatMul {}, &ins)?])
}

fn qlinear_conv(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let conv = super::linalg::conv_op(ctx, 0, 3)?;
    let ins = all_inputs(ctx, 9);
    Ok(vec![ctx.op1(QLinearConv { conv }, &ins)?])
}
