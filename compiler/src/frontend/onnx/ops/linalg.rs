//! Converters for the runtime's `linalg` op family: MatMul, Gemm, Conv,
//! ConvTranspose, Einsum, the integer matrix products, pooling, RoiAlign,
//! Det and Col2Im.
//!
//! Every ONNX padding convention (`auto_pad`, `output_shape`, default
//! strides and dilations, kernel shapes taken from the weight) is resolved
//! here, so the runtime ops hold explicit, normalized windows.

use super::Registry;
use crate::frontend::onnx::ctx::Ctx;
use crate::ir::Port;
use anyhow::{anyhow, bail, ensure, Result};
use trtc_runtime::ops::control::ValueShapedOp;
use trtc_runtime::ops::elementwise::{Binary, BinaryKind, Unary, UnaryKind};
use trtc_runtime::ops::linalg::{
    Col2Im, Conv, ConvInteger, ConvTranspose, DeformConv, Einsum, Gemm, MatMul, MatMulInteger, MaxUnpool, NonMaxSuppression,
    Pool, PoolKind, RoiAlign, Window,
};
use trtc_runtime::ops::movement::{Concat, DimOf, PadMode, SizeOf};
use trtc_runtime::ops::reduce::{Reduce, ReduceKind, ReduceOp};
use trtc_runtime::{DType, Tensor};

pub fn register(r: &mut Registry) {
    r.add("MatMul", matmul);
    r.add("Gemm", gemm);
    r.add("Conv", conv);
    r.add("DeformConv", deform_conv);
    r.add("ConvTranspose", conv_transpose);
    r.add("Einsum", einsum);
    r.add("MatMulInteger", matmul_integer);
    r.add("ConvInteger", conv_integer);
    r.add("MaxPool", max_pool);
    r.add("AveragePool", average_pool);
    r.add("LpPool", lp_pool);
    r.add("GlobalMaxPool", global_max_pool);
    r.add("GlobalAveragePool", global_average_pool);
    r.add("GlobalLpPool", global_lp_pool);
    r.add("MaxUnpool", max_unpool);
    r.add("Det", det);
    r.add("Col2Im", col2im);
    r.add("RoiAlign", roi_align);
    r.add("NonMaxSuppression", non_max_suppression);
}

fn matmul(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let (a, b) = (ctx.input(0)?, ctx.input(1)?);
    Ok(vec![ctx.op1(MatMul {}, &[Some(a), Some(b)])?])
}

fn gemm(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let op = Gemm {
        alpha: ctx.attrs.float_or("alpha", 1.0)?,
        beta: ctx.attrs.float_or("beta", 1.0)?,
        trans_a: ctx.attrs.int_or("transA", 0)? != 0,
        trans_b: ctx.attrs.int_or("transB", 0)? != 0,
    };
    let (a, b, c) = (ctx.input(0)?, ctx.input(1)?, ctx.opt_input(2));
    Ok(vec![ctx.op1(op, &[Some(a), Some(b), c])?])
}

/// The spatial sizes of input `i` (`[N, C, spatial...]`).
fn spatial(ctx: &Ctx, i: usize) -> Result<Vec<usize>> {
    let shape = &ctx.input_ty(i)?.shape;
    ensure!(shape.len() >= 3, "input {i} has shape {shape:?}; expected [N, C, spatial...]");
    Ok(shape[2..].to_vec())
}

/// A per-axis attribute list (strides, dilations) with its default of ones.
fn per_axis(ctx: &Ctx, name: &str, n: usize) -> Result<Vec<usize>> {
    match ctx.attrs.ints(name)? {
        None => Ok(vec![1; n]),
        Some(v) => {
            ensure!(v.len() == n, "{name} {v:?} must have {n} entries");
            ensure!(v.iter().all(|&x| x >= 1), "{name} {v:?} must be positive");
            Ok(v.into_iter().map(|x| x as usize).collect())
        }
    }
}

fn auto_pad(ctx: &Ctx) -> Result<String> {
    Ok(ctx.attrs.string("auto_pad")?.map(|s| s.trim_end_matches('\0').to_string()).unwrap_or_default())
}

/// Resolves a sliding window's strides, dilations and padding for `input`
/// spatial sizes, applying `auto_pad`.
fn window(ctx: &Ctx, kernel_shape: Vec<usize>, input: &[usize]) -> Result<Window> {
    let n = kernel_shape.len();
    ensure!(input.len() == n, "kernel_shape {kernel_shape:?} does not match {} spatial axes", input.len());
    ensure!(kernel_shape.iter().all(|&k| k >= 1), "kernel_shape {kernel_shape:?} must be positive");
    let strides = per_axis(ctx, "strides", n)?;
    let dilations = per_axis(ctx, "dilations", n)?;
    let mut w = Window { kernel_shape, strides, pads: vec![0; 2 * n], dilations };
    match auto_pad(ctx)?.as_str() {
        "" | "NOTSET" => {
            if let Some(p) = ctx.attrs.ints("pads")? {
                ensure!(p.len() == 2 * n, "pads {p:?} must have {} entries", 2 * n);
                ensure!(p.iter().all(|&x| x >= 0), "negative pads {p:?} are not supported");
                w.pads = p.into_iter().map(|x| x as usize).collect();
            }
        }
        "VALID" => {}
        mode @ ("SAME_UPPER" | "SAME_LOWER") => {
            for (d, &size) in input.iter().enumerate() {
                let out = size.div_ceil(w.strides[d]);
                let total = ((out.max(1) - 1) * w.strides[d] + w.span(d)).saturating_sub(size);
                let small = total / 2;
                let (begin, end) = if mode == "SAME_UPPER" { (small, total - small) } else { (total - small, small) };
                w.pads[d] = begin;
                w.pads[n + d] = end;
            }
        }
        other => bail!("unknown auto_pad '{other}'"),
    }
    Ok(w)
}

/// What SAME padding pads with when its pads are computed at run time.
#[derive(Clone, Copy, PartialEq)]
enum SamePadValue {
    Zero,
    NegativeInfinity,
}

/// For an input whose sizes are read at run time and SAME padding whose
/// pads depend on those sizes (a stride above 1): the input padded by pads
/// computed from its sizes when the layer runs (`ShapedByValues` Pad), so
/// that the window itself pads nothing. `None` where the pads the window
/// holds are right at every size.
fn same_padded_at_run_time(ctx: &mut Ctx, x: Port, w: &Window, value: SamePadValue) -> Result<Option<Port>> {
    let mode = auto_pad(ctx)?;
    if !ctx.graph.is_data_sized(x) || !matches!(mode.as_str(), "SAME_UPPER" | "SAME_LOWER") || w.strides.iter().all(|&s| s == 1) {
        return Ok(None);
    }
    let ty = ctx.ty(x).clone();
    let (rank, n) = (ty.shape.len(), w.kernel_shape.len());
    let ints = |v: Vec<i64>| Tensor::from_vec(vec![v.len()], v);
    // out = ceil(in / stride); total = max((out - 1) * stride + span - in, 0).
    let dims = (rank - n..rank).map(|axis| DimOf { input: 0, axis }).collect();
    let sizes = ctx.op1(SizeOf { dtype: DType::I64, dims, scalar: false }, &[Some(x)])?;
    ctx.set_room_value(sizes, ints(ty.shape[rank - n..].iter().map(|&d| d as i64).collect())?);
    let strides: Vec<i64> = w.strides.iter().map(|&s| s as i64).collect();
    let spans: Vec<i64> = (0..n).map(|d| w.span(d) as i64).collect();
    let binary = |ctx: &mut Ctx, kind: BinaryKind, a: Port, b: Tensor| -> Result<Port> {
        let b = ctx.constant(b);
        ctx.op1(Binary { kind }, &[Some(a), Some(b)])
    };
    let t = binary(ctx, BinaryKind::Add, sizes, ints(strides.iter().map(|s| s - 1).collect())?)?;
    let out = binary(ctx, BinaryKind::Div, t, ints(strides.clone())?)?;
    let t = binary(ctx, BinaryKind::Sub, out, ints(vec![1; n])?)?;
    let t = binary(ctx, BinaryKind::Mul, t, ints(strides)?)?;
    let t = binary(ctx, BinaryKind::Add, t, ints(spans)?)?;
    let minus_in = ctx.op1(Unary { kind: UnaryKind::Neg }, &[Some(sizes)])?;
    let t = ctx.op1(Binary { kind: BinaryKind::Add }, &[Some(t), Some(minus_in)])?;
    let total = binary(ctx, BinaryKind::Max, t, ints(vec![0; n])?)?;
    let small = binary(ctx, BinaryKind::Div, total, ints(vec![2; n])?)?;
    let minus_small = ctx.op1(Unary { kind: UnaryKind::Neg }, &[Some(small)])?;
    let large = ctx.op1(Binary { kind: BinaryKind::Add }, &[Some(total), Some(minus_small)])?;
    let (begin, end) = if mode == "SAME_UPPER" { (small, large) } else { (large, small) };
    let lead = ctx.constant(ints(vec![0; rank - n])?);
    let pads = ctx.op1(Concat { axis: 0 }, &[Some(lead), Some(begin), Some(lead), Some(end)])?;
    let value = match value {
        SamePadValue::Zero => None,
        SamePadValue::NegativeInfinity => {
            Some(ctx.constant(super::movement::tensor_from_f64(ty.dtype, vec![], &[f64::NEG_INFINITY])?))
        }
    };
    let op = ValueShapedOp::Pad { mode: PadMode::Constant, axes: (0..rank).collect() };
    Ok(super::movement::shaped_by_values_of(ctx, op, &[Some(x), value, Some(pads)])?.map(|o| o[0]))
}

/// `kernel_shape` from the attribute, or else from the weight's shape.
fn kernel_shape(ctx: &Ctx, weight: usize) -> Result<Vec<usize>> {
    match ctx.attrs.ints("kernel_shape")? {
        Some(k) => {
            ensure!(k.iter().all(|&x| x >= 1), "kernel_shape {k:?} must be positive");
            Ok(k.into_iter().map(|x| x as usize).collect())
        }
        None => {
            let w = &ctx.input_ty(weight)?.shape;
            ensure!(w.len() >= 3, "weight shape {w:?} has no spatial axes");
            Ok(w[2..].to_vec())
        }
    }
}

fn group(ctx: &Ctx) -> Result<usize> {
    let g = ctx.attrs.int_or("group", 1)?;
    ensure!(g >= 1, "group {g} must be positive");
    Ok(g as usize)
}

/// Conv's normalized attributes; also used by ConvInteger and QLinearConv
/// (whose weight is input `weight`).
pub(super) fn conv_op(ctx: &Ctx, input: usize, weight: usize) -> Result<Conv> {
    let w = window(ctx, kernel_shape(ctx, weight)?, &spatial(ctx, input)?)?;
    Ok(Conv { kernel_shape: w.kernel_shape, strides: w.strides, pads: w.pads, dilations: w.dilations, group: group(ctx)? })
}

fn conv(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let mut op = conv_op(ctx, 0, 1)?;
    let (mut x, w, b) = (ctx.input(0)?, ctx.input(1)?, ctx.opt_input(2));
    let window = Window {
        kernel_shape: op.kernel_shape.clone(),
        strides: op.strides.clone(),
        pads: op.pads.clone(),
        dilations: op.dilations.clone(),
    };
    if let Some(padded) = same_padded_at_run_time(ctx, x, &window, SamePadValue::Zero)? {
        x = padded;
        op.pads.iter_mut().for_each(|p| *p = 0);
    }
    Ok(vec![ctx.op1(op, &[Some(x), Some(w), b])?])
}

/// DeformConv (opset 19): Conv's attributes plus `offset_group`; inputs X,
/// W, offset, optional B and mask.
fn deform_conv(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let conv = conv_op(ctx, 0, 1)?;
    let offset_group = ctx.attrs.int_or("offset_group", 1)?;
    ensure!(offset_group >= 1, "offset_group {offset_group} must be positive");
    let ins: Vec<Option<Port>> = (0..5).map(|i| ctx.opt_input(i)).collect();
    Ok(vec![ctx.op1(DeformConv { conv, offset_group: offset_group as usize }, &ins)?])
}

fn matmul_integer(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let ins: Vec<Option<Port>> = (0..4).map(|i| ctx.opt_input(i)).collect();
    Ok(vec![ctx.op1(MatMulInteger {}, &ins)?])
}

fn conv_integer(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let conv = conv_op(ctx, 0, 1)?;
    let ins: Vec<Option<Port>> = (0..4).map(|i| ctx.opt_input(i)).collect();
    Ok(vec![ctx.op1(ConvInteger { conv }, &ins)?])
}

fn conv_transpose(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let input = spatial(ctx, 0)?;
    let kernel = kernel_shape(ctx, 1)?;
    let n = kernel.len();
    ensure!(input.len() == n, "kernel_shape {kernel:?} does not match {} spatial axes", input.len());
    let strides = per_axis(ctx, "strides", n)?;
    let dilations = per_axis(ctx, "dilations", n)?;
    let mut output_padding = match ctx.attrs.ints("output_padding")? {
        None => vec![0; n],
        Some(v) => {
            ensure!(v.len() == n && v.iter().all(|&x| x >= 0), "bad output_padding {v:?}");
            v.into_iter().map(|x| x as usize).collect()
        }
    };
    let mode = auto_pad(ctx)?;
    // The output size before padding is removed, per axis.
    let full: Vec<i64> = (0..n)
        .map(|d| (strides[d] * input[d].saturating_sub(1) + output_padding[d] + (kernel[d] - 1) * dilations[d] + 1) as i64)
        .collect();
    let wanted: Option<Vec<i64>> = match ctx.attrs.ints("output_shape")? {
        Some(s) if s.len() == n + 2 => Some(s[2..].to_vec()),
        Some(s) => {
            ensure!(s.len() == n, "output_shape {s:?} must have {n} entries");
            Some(s)
        }
        None if mode == "SAME_UPPER" || mode == "SAME_LOWER" => Some((0..n).map(|d| (input[d] * strides[d]) as i64).collect()),
        None => None,
    };
    let mut pads = vec![0usize; 2 * n];
    match wanted {
        Some(shape) => {
            for d in 0..n {
                let total = full[d] - shape[d];
                // The extra pad goes at the end for SAME_UPPER, at the
                // beginning otherwise (ONNX's reference implementation).
                let (begin, end) = if mode == "SAME_UPPER" {
                    (total.div_euclid(2), total - total.div_euclid(2))
                } else {
                    (total - total.div_euclid(2), total.div_euclid(2))
                };
                ensure!(begin >= 0, "output_shape {shape:?} cannot be produced");
                pads[d] = begin as usize;
                if end >= 0 {
                    pads[n + d] = end as usize;
                } else {
                    // A larger output than the full convolution: zeros at the end.
                    output_padding[d] += (-end) as usize;
                }
            }
        }
        None if mode == "VALID" || mode.is_empty() || mode == "NOTSET" => {
            if let Some(p) = ctx.attrs.ints("pads")? {
                ensure!(p.len() == 2 * n && p.iter().all(|&x| x >= 0), "bad pads {p:?}");
                pads = p.into_iter().map(|x| x as usize).collect();
            }
        }
        None => bail!("unknown auto_pad '{mode}'"),
    }
    let op = ConvTranspose { kernel_shape: kernel, strides, pads, dilations, group: group(ctx)?, output_padding };
    let (x, w, b) = (ctx.input(0)?, ctx.input(1)?, ctx.opt_input(2));
    Ok(vec![ctx.op1(op, &[Some(x), Some(w), b])?])
}

fn einsum(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let equation = ctx.attrs.string("equation")?.ok_or_else(|| anyhow!("Einsum without an equation"))?;
    let inputs: Vec<Option<Port>> = (0..ctx.num_inputs()).map(|i| ctx.input(i).map(Some)).collect::<Result<_>>()?;
    Ok(vec![ctx.op1(Einsum { equation }, &inputs)?])
}

/// A pooling op from the node's window attributes.
fn pool(ctx: &mut Ctx, kind: PoolKind, indices: bool) -> Result<Vec<Port>> {
    let kernel: Vec<usize> = ctx
        .attrs
        .ints("kernel_shape")?
        .ok_or_else(|| anyhow!("kernel_shape is required"))?
        .into_iter()
        .map(|k| usize::try_from(k).map_err(|_| anyhow!("negative kernel_shape")))
        .collect::<Result<_>>()?;
    let mut w = window(ctx, kernel, &spatial(ctx, 0)?)?;
    let same = matches!(auto_pad(ctx)?.as_str(), "SAME_UPPER" | "SAME_LOWER");
    let mut x = ctx.input(0)?;
    // Padding the input gives what the window's own padding gives, except
    // for an average that leaves the padding out of its count.
    let value = match kind {
        PoolKind::Max => Some(SamePadValue::NegativeInfinity),
        PoolKind::Average { count_include_pad: false } => None,
        _ => Some(SamePadValue::Zero),
    };
    if let Some(value) = value.filter(|_| !indices) {
        if let Some(padded) = same_padded_at_run_time(ctx, x, &w, value)? {
            x = padded;
            w.pads.iter_mut().for_each(|p| *p = 0);
        }
    }
    let op = Pool {
        kind,
        kernel_shape: w.kernel_shape,
        strides: w.strides,
        pads: w.pads,
        dilations: w.dilations,
        ceil_mode: !same && ctx.attrs.int_or("ceil_mode", 0)? != 0,
        indices,
        column_major_indices: ctx.attrs.int_or("storage_order", 0)? != 0,
    };
    ctx.op(op, &[Some(x)])
}

fn wants_output(ctx: &Ctx, i: usize) -> bool {
    ctx.node.output.get(i).is_some_and(|s| !s.is_empty())
}

fn max_pool(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let indices = wants_output(ctx, 1);
    pool(ctx, PoolKind::Max, indices)
}

fn average_pool(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let count_include_pad = ctx.attrs.int_or("count_include_pad", 0)? != 0;
    pool(ctx, PoolKind::Average { count_include_pad }, false)
}

/// LpPool's `p`: a float attribute in opset 1, an integer since opset 2.
fn lp_norm(ctx: &Ctx) -> Result<f32> {
    Ok(if ctx.opset < 2 { ctx.attrs.float_or("p", 2.0)? } else { ctx.attrs.int_or("p", 2)? as f32 })
}

fn lp_pool(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let p = lp_norm(ctx)?;
    pool(ctx, PoolKind::Lp { p }, false)
}

/// A pool whose kernel covers every spatial axis.
fn global_pool(ctx: &mut Ctx, kind: PoolKind) -> Result<Vec<Port>> {
    let kernel = spatial(ctx, 0)?;
    ensure!(kernel.iter().all(|&k| k > 0), "global pooling over an empty spatial axis");
    let x = ctx.input(0)?;
    if ctx.graph.is_data_sized(x) {
        // Its window is the whole input, whose sizes are read at run time:
        // the reduction over the spatial axes.
        if let Some(kind) = ReduceKind::of_global_pool(&kind) {
            let rank = kernel.len() + 2;
            return ctx.op(ReduceOp::Reduce(Reduce::new(kind, (2..rank).collect(), true)), &[Some(x)]);
        }
    }
    let op = Pool::new(kind, kernel);
    ctx.op(op, &[Some(ctx.input(0)?)])
}

fn global_max_pool(ctx: &mut Ctx) -> Result<Vec<Port>> {
    global_pool(ctx, PoolKind::Max)
}

fn global_average_pool(ctx: &mut Ctx) -> Result<Vec<Port>> {
    global_pool(ctx, PoolKind::Average { count_include_pad: false })
}

fn global_lp_pool(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let p = lp_norm(ctx)?;
    global_pool(ctx, PoolKind::Lp { p })
}

/// MaxUnpool: the unpooled shape the indices refer to inverts the pooling
/// window's output size formula; the `output_shape` input, when given, may
/// enlarge the output.
fn max_unpool(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x_shape = ctx.input_ty(0)?.shape.clone();
    let kernel: Vec<usize> = ctx
        .attrs
        .ints("kernel_shape")?
        .ok_or_else(|| anyhow!("kernel_shape is required"))?
        .into_iter()
        .map(|k| usize::try_from(k).map_err(|_| anyhow!("negative kernel_shape")))
        .collect::<Result<_>>()?;
    let input = spatial(ctx, 0)?;
    let w = window(ctx, kernel, &input)?;
    let mut index_shape = x_shape[..2].to_vec();
    for (d, &len) in input.iter().enumerate() {
        let full = len.saturating_sub(1) * w.strides[d] + w.kernel_shape[d];
        let pads = w.pad_begin(d) + w.pad_end(d);
        ensure!(full >= pads, "pads remove the whole output of spatial axis {d}");
        index_shape.push(full - pads);
    }
    let output_shape: Vec<usize> = match ctx.opt_const_ints(2, "output_shape")? {
        Some(s) => {
            s.into_iter().map(|d| usize::try_from(d).map_err(|_| anyhow!("negative output_shape"))).collect::<Result<_>>()?
        }
        None => index_shape.clone(),
    };
    let (x, i) = (ctx.input(0)?, ctx.input(1)?);
    Ok(vec![ctx.op1(MaxUnpool { output_shape, index_shape }, &[Some(x), Some(i)])?])
}

fn det(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    Ok(vec![ctx.op1(trtc_runtime::ops::linalg::Det {}, &[Some(x)])?])
}

/// RoiAlign: opset 10 knows only `output_half_pixel` coordinates, opset 16
/// defaults to `half_pixel`.
fn roi_align(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let size = |ctx: &Ctx, name: &str| -> Result<usize> {
        match ctx.attrs.int_or(name, 1)? {
            v if (1..=1 << 16).contains(&v) => Ok(v as usize),
            v => bail!("{name} {v} is not in 1..=65536"),
        }
    };
    let (output_height, output_width) = (size(ctx, "output_height")?, size(ctx, "output_width")?);
    let sampling_ratio = match ctx.attrs.int_or("sampling_ratio", 0)? {
        v if (0..=1 << 12).contains(&v) => v as usize,
        v => bail!("sampling_ratio {v} is not in 0..=4096"),
    };
    let spatial_scale = ctx.attrs.float("spatial_scale")?.unwrap_or(1.0);
    ensure!(spatial_scale.is_finite(), "spatial_scale {spatial_scale} is not finite");
    let default_mode = if ctx.opset >= 16 { "half_pixel" } else { "output_half_pixel" };
    let half_pixel = match ctx.attrs.string("coordinate_transformation_mode")?.as_deref().unwrap_or(default_mode) {
        "half_pixel" => true,
        "output_half_pixel" => false,
        m => bail!("coordinate_transformation_mode '{m}' is not half_pixel or output_half_pixel"),
    };
    let max = match ctx.attrs.string("mode")?.as_deref().unwrap_or("avg") {
        "avg" => false,
        "max" => true,
        m => bail!("mode '{m}' is not avg or max"),
    };
    let op = RoiAlign { output_height, output_width, sampling_ratio, spatial_scale, half_pixel, max };
    let ins = [Some(ctx.input(0)?), Some(ctx.input(1)?), Some(ctx.input(2)?)];
    Ok(vec![ctx.op1(op, &ins)?])
}

/// NonMaxSuppression: how many boxes it keeps depends on the data; the
/// engine holds room for the most there can be (`max_output_boxes_per_class`
/// when it is a constant, else every box) and later layers take the actual
/// count at run time.
fn non_max_suppression(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let center_point_box = match ctx.attrs.int_or("center_point_box", 0)? {
        0 => false,
        1 => true,
        v => bail!("center_point_box {v} is not 0 or 1"),
    };
    let max_per_class = match ctx.opt_input(2) {
        None => Some(0),
        Some(p) => match ctx.konst(p) {
            Some(t) => match t.to_i64_vec()?.as_slice() {
                [v] => Some((*v).max(0) as usize),
                _ => bail!("max_output_boxes_per_class must be one integer, not {}", t.ty()),
            },
            None => None,
        },
    };
    let op = NonMaxSuppression { center_point_box, max_per_class };
    let ins: Vec<Option<Port>> = (0..5).map(|i| ctx.opt_input(i)).collect();
    Ok(vec![ctx.op1(op, &ins)?])
}

/// Col2Im: `image_shape` and `block_shape` decide the output's shape, so
/// they must be known when the engine is built.
fn col2im(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let dims = |ctx: &Ctx, i: usize, what: &str| -> Result<Vec<usize>> {
        let v = ctx.require_const(i, what)?.to_i64_vec()?;
        v.iter().map(|&d| usize::try_from(d).map_err(|_| anyhow!("{what} {v:?} has a negative value"))).collect()
    };
    let image = dims(ctx, 1, "image_shape")?;
    let block = dims(ctx, 2, "block_shape")?;
    let n = image.len();
    ensure!(n >= 1 && block.len() == n, "image_shape {image:?} and block_shape {block:?} must have as many axes");
    let strides = per_axis(ctx, "strides", n)?;
    let dilations = per_axis(ctx, "dilations", n)?;
    let pads = match ctx.attrs.ints("pads")? {
        None => vec![0; 2 * n],
        Some(v) => {
            ensure!(v.len() == 2 * n && v.iter().all(|&x| x >= 0), "pads {v:?} must be {} non-negative values", 2 * n);
            v.into_iter().map(|x| x as usize).collect()
        }
    };
    let x = ctx.input(0)?;
    Ok(vec![ctx.op1(Col2Im { image, block, strides, dilations, pads }, &[Some(x)])?])
}
