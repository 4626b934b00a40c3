//! Converters for the runtime's `quant` op family: QuantizeLinear,
//! DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul, QLinearConv.
//! Axes are normalized and the quantized output type resolved here.

use super::Registry;
use crate::frontend::onnx::ctx::Ctx;
use crate::frontend::onnx::proto;
use crate::ir::Port;
use anyhow::{ensure, Result};
use trtc_runtime::ops::quant::{DequantizeLinear, DynamicQuantizeLinear, QLinearConv, QLinearMatMul, QuantizeLinear};
use trtc_runtime::ops::util::normalize_axis;
use trtc_runtime::DType;

pub fn register(r: &mut Registry) {
    r.add("QuantizeLinear", quantize_linear);
    r.add("DequantizeLinear", dequantize_linear);
    r.add("DynamicQuantizeLinear", dynamic_quantize_linear);
    r.add("QLinearMatMul", qlinear_matmul);
    r.add("QLinearConv", qlinear_conv);
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
    let op = QuantizeLinear { axis, block_size, output_dtype };
    let ins = inputs3(ctx)?;
    Ok(vec![ctx.op1(op, &ins)?])
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
