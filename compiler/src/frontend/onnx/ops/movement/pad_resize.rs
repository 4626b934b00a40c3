//! Pad, CenterCropPad (a Pad with negative pads where it crops), Resize and
//! Upsample (a Resize with asymmetric coordinates and floor rounding).

use super::{axes, dims, shaped_by_values_of, tensor_from_f64};
use crate::frontend::onnx::ctx::Ctx;
use crate::frontend::onnx::ops::Registry;
use crate::ir::Port;
use anyhow::{anyhow, bail, Result};
use trtc_runtime::ops::control::ValueShapedOp;
use trtc_runtime::ops::movement::{
    resize_scales_and_sizes, AspectPolicy, CoordinateMode, NearestMode, Pad, PadMode, Resize, ResizeBy, ResizeMode,
};
use trtc_runtime::Tensor;

pub fn register(r: &mut Registry) {
    r.add("Pad", pad);
    r.add("CenterCropPad", center_crop_pad);
    r.add("Resize", resize);
    r.add("Upsample", upsample);
}

fn pad_mode(ctx: &Ctx) -> Result<PadMode> {
    Ok(match ctx.attrs.string("mode")?.as_deref().unwrap_or("constant") {
        "constant" => PadMode::Constant,
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        "wrap" => PadMode::Wrap,
        m => bail!("unknown Pad mode '{m}'"),
    })
}

fn pad(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let ty = ctx.ty(x).clone();
    let rank = ty.shape.len();
    let mode = pad_mode(ctx)?;
    let (given, value, ax) = if ctx.opset < 11 {
        let name = if ctx.opset < 2 { "paddings" } else { "pads" };
        let pads = ctx.attrs.ints(name)?.ok_or_else(|| anyhow!("missing attribute '{name}'"))?;
        let v = ctx.attrs.float_or("value", 0.0)? as f64;
        let value = if v != 0.0 { Some(ctx.constant(tensor_from_f64(ty.dtype, vec![], &[v])?)) } else { None };
        (pads, value, None)
    } else {
        let ax = if ctx.opset >= 18 { ctx.opt_const_ints(3, "axes")? } else { None };
        if ctx.const_input(1).is_none() {
            // Pads computed at run time (to a multiple of 32 from the
            // input's sizes): read when the layer runs.
            let axes = match &ax {
                Some(a) => axes(a, rank)?,
                None => (0..rank).collect(),
            };
            let value = if mode == PadMode::Constant { ctx.opt_input(2) } else { None };
            let op = ValueShapedOp::Pad { mode, axes };
            if let Some(outs) = shaped_by_values_of(ctx, op, &[Some(x), value, Some(ctx.input(1)?)])? {
                return Ok(outs);
            }
        }
        let pads = ctx.require_const(1, "pads")?.to_i64_vec()?;
        (pads, ctx.opt_input(2), ax)
    };
    let ax = match ax {
        Some(a) => axes(&a, rank)?,
        None => (0..rank).collect(),
    };
    let op = Pad::over_axes(mode, rank, &ax, &given).map_err(|e| anyhow!("{e}"))?;
    if op.pads.iter().all(|&p| p == 0) {
        return Ok(vec![x]);
    }
    // The constant value only matters in constant mode.
    let value = if mode == PadMode::Constant { value } else { None };
    if let Some(v) = value {
        let vt = ctx.ty(v);
        if vt.dtype != ty.dtype {
            bail!("constant_value is {}, data is {}", vt.dtype, ty.dtype);
        }
    }
    Ok(vec![ctx.op1(op, &[Some(x), value])?])
}

fn center_crop_pad(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let shape = ctx.ty(x).shape.clone();
    let rank = shape.len();
    let target = dims(&ctx.require_const(1, "shape")?.to_i64_vec()?, "shape")?;
    let ax = match ctx.attrs.ints("axes")? {
        Some(a) => axes(&a, rank)?,
        None => (0..rank).collect(),
    };
    if target.len() != ax.len() {
        bail!("shape has {} values for {} axes", target.len(), ax.len());
    }
    let mut pads = vec![0i64; 2 * rank];
    for (&a, &t) in ax.iter().zip(&target) {
        let (d, t) = (shape[a] as i64, t as i64);
        // Crop (negative pads) or pad, centered, the extra element at the end.
        let diff = (t - d).abs();
        let (begin, end) = (diff / 2, diff - diff / 2);
        let sign = if t < d { -1 } else { 1 };
        pads[a] = sign * begin;
        pads[rank + a] = sign * end;
    }
    if pads.iter().all(|&p| p == 0) {
        return Ok(vec![x]);
    }
    Ok(vec![ctx.op1(Pad { pads, mode: PadMode::Constant }, &[Some(x), None])?])
}

fn coordinate_mode(s: &str) -> Result<CoordinateMode> {
    Ok(match s {
        "half_pixel" => CoordinateMode::HalfPixel,
        "half_pixel_symmetric" => CoordinateMode::HalfPixelSymmetric,
        "pytorch_half_pixel" => CoordinateMode::PytorchHalfPixel,
        "align_corners" => CoordinateMode::AlignCorners,
        "asymmetric" => CoordinateMode::Asymmetric,
        "tf_crop_and_resize" => CoordinateMode::TfCropAndResize,
        m => bail!("unknown coordinate_transformation_mode '{m}'"),
    })
}

fn nearest_mode(s: &str) -> Result<NearestMode> {
    Ok(match s {
        "round_prefer_floor" => NearestMode::RoundPreferFloor,
        "round_prefer_ceil" => NearestMode::RoundPreferCeil,
        "floor" => NearestMode::Floor,
        "ceil" => NearestMode::Ceil,
        m => bail!("unknown nearest_mode '{m}'"),
    })
}

fn resize_mode(s: &str) -> Result<ResizeMode> {
    Ok(match s {
        "nearest" => ResizeMode::Nearest,
        "linear" | "bilinear" | "trilinear" => ResizeMode::Linear,
        "cubic" | "bicubic" => ResizeMode::Cubic,
        m => bail!("unknown resize mode '{m}'"),
    })
}

/// A constant float input, or `None` when absent or empty (ONNX's way of
/// leaving an optional input out).
fn opt_floats(ctx: &Ctx, i: usize, what: &str) -> Result<Option<Vec<f64>>> {
    if ctx.opt_input(i).is_none() {
        return Ok(None);
    }
    let v = ctx.require_const(i, what)?.to_f64_vec();
    Ok(if v.is_empty() { None } else { Some(v) })
}

/// Full-rank scales and output sizes from ONNX's scales or sizes over `ax`,
/// as the ONNX reference computes them.
fn scales_and_sizes(
    shape: &[usize],
    ax: &[usize],
    scales: Option<Vec<f64>>,
    sizes: Option<Vec<i64>>,
    policy: AspectPolicy,
) -> Result<(Vec<f64>, Vec<usize>)> {
    let by = match (scales, sizes) {
        (Some(s), None) => ResizeBy::Scales(s),
        (None, Some(z)) => ResizeBy::Sizes(z),
        (Some(_), Some(_)) => bail!("only one of scales and sizes may be given"),
        (None, None) => bail!("one of scales and sizes must be given"),
    };
    resize_scales_and_sizes(shape, ax, &by, policy).map_err(|e| anyhow!("{e}"))
}

fn aspect_policy(s: &str) -> Result<AspectPolicy> {
    Ok(match s {
        "stretch" => AspectPolicy::Stretch,
        "not_larger" => AspectPolicy::NotLarger,
        "not_smaller" => AspectPolicy::NotSmaller,
        p => bail!("unknown keep_aspect_ratio_policy '{p}'"),
    })
}

fn resize(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let shape = ctx.ty(x).shape.clone();
    let rank = shape.len();
    let a = &ctx.attrs;
    let mode = resize_mode(&a.string("mode")?.unwrap_or_else(|| "nearest".into()))?;
    let (coordinate_mode, nearest, roi) = if ctx.opset < 11 {
        // Resize-10 behaves like Upsample.
        (CoordinateMode::Asymmetric, NearestMode::Floor, None)
    } else {
        let cm = coordinate_mode(&a.string("coordinate_transformation_mode")?.unwrap_or_else(|| "half_pixel".into()))?;
        let nm = nearest_mode(&a.string("nearest_mode")?.unwrap_or_else(|| "round_prefer_floor".into()))?;
        let roi = if cm == CoordinateMode::TfCropAndResize { opt_floats(ctx, 1, "roi")? } else { None };
        (cm, nm, roi)
    };
    let a = &ctx.attrs;
    let ax = match a.ints("axes")? {
        Some(v) => axes(&v, rank)?,
        None => (0..rank).collect(),
    };
    let policy = aspect_policy(&a.string("keep_aspect_ratio_policy")?.unwrap_or_else(|| "stretch".into()))?;
    let roi = match (coordinate_mode, roi) {
        (CoordinateMode::TfCropAndResize, Some(r)) => {
            if r.len() != 2 * ax.len() {
                bail!("roi has {} values for {} axes", r.len(), ax.len());
            }
            let mut full: Vec<f64> = vec![0.0; rank].into_iter().chain(vec![1.0; rank]).collect();
            for (i, &axis) in ax.iter().enumerate() {
                full[axis] = r[i];
                full[rank + axis] = r[ax.len() + i];
            }
            full
        }
        (CoordinateMode::TfCropAndResize, None) => bail!("tf_crop_and_resize needs a roi input"),
        _ => vec![],
    };
    let template = Resize {
        mode,
        coordinate_mode,
        nearest_mode: nearest,
        cubic_coeff_a: a.float_or("cubic_coeff_a", -0.75)? as f64,
        exclude_outside: a.int_or("exclude_outside", 0)? != 0,
        extrapolation_value: a.float_or("extrapolation_value", 0.0)? as f64,
        antialias: a.int_or("antialias", 0)? != 0,
        scales: vec![],
        sizes: vec![],
        roi,
    };
    if template.antialias && template.mode == ResizeMode::Nearest {
        bail!("antialias is not defined for nearest mode");
    }
    // Which input decides the output sizes: `sizes` when given (an empty
    // constant counts as absent), else `scales`.
    let empty_const = |ctx: &Ctx, i: usize| ctx.const_input(i).is_some_and(|t| t.is_empty());
    let (by, by_sizes) = if ctx.opset < 11 {
        (1, false)
    } else if ctx.opt_input(3).is_some() && !empty_const(ctx, 3) {
        (3, true)
    } else {
        (2, false)
    };
    if let Some(values) = ctx.opt_input(by) {
        if ctx.const_input(by).is_none() || ctx.graph.is_data_sized(x) {
            // Sizes computed at run time, or an input whose own sizes are
            // read at run time: the output sizes are computed when the
            // layer runs.
            let op = ValueShapedOp::Resize { template: template.clone(), axes: ax.clone(), by_sizes, policy };
            if let Some(outs) = shaped_by_values_of(ctx, op, &[Some(x), Some(values)])? {
                return Ok(outs);
            }
        }
    }
    let (scales, sizes) = if by_sizes {
        let sizes = ctx.require_const(3, "sizes")?.to_i64_vec()?;
        let scales = if empty_const(ctx, 2) || ctx.opt_input(2).is_none() { None } else { opt_floats(ctx, 2, "scales")? };
        scales_and_sizes(&shape, &ax, scales, Some(sizes), policy)?
    } else {
        scales_and_sizes(&shape, &ax, opt_floats(ctx, by, "scales")?, None, policy)?
    };
    let op = Resize { scales, sizes, ..template };
    Ok(vec![ctx.op1(op, &[Some(x)])?])
}

fn upsample(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let shape = ctx.ty(x).shape.clone();
    let mode = resize_mode(&ctx.attrs.string("mode")?.unwrap_or_else(|| "nearest".into()))?;
    let scales = if ctx.opset < 7 {
        // Upsample-1: NCHW with height_scale and width_scale attributes.
        if shape.len() != 4 {
            bail!("Upsample-1 needs a 4-D input, got {shape:?}");
        }
        let h = ctx.attrs.float("height_scale")?.ok_or_else(|| anyhow!("missing attribute 'height_scale'"))?;
        let w = ctx.attrs.float("width_scale")?.ok_or_else(|| anyhow!("missing attribute 'width_scale'"))?;
        Some(vec![1.0, 1.0, h as f64, w as f64])
    } else if ctx.opset < 9 {
        ctx.attrs.floats("scales")?.map(|v| v.into_iter().map(|s| s as f64).collect())
    } else {
        opt_floats(ctx, 1, "scales")?
    };
    let ax: Vec<usize> = (0..shape.len()).collect();
    let template = Resize {
        mode,
        coordinate_mode: CoordinateMode::Asymmetric,
        nearest_mode: NearestMode::Floor,
        cubic_coeff_a: -0.75,
        exclude_outside: false,
        extrapolation_value: 0.0,
        antialias: false,
        scales: vec![],
        sizes: vec![],
        roi: vec![],
    };
    if let (Some(s), true) = (&scales, ctx.graph.is_data_sized(x)) {
        // An input whose sizes are read at run time: its output sizes too.
        let values = ctx.constant(Tensor::from_vec(vec![s.len()], s.iter().map(|&v| v as f32).collect())?);
        let op = ValueShapedOp::Resize {
            template: template.clone(),
            axes: ax.clone(),
            by_sizes: false,
            policy: AspectPolicy::Stretch,
        };
        if let Some(outs) = shaped_by_values_of(ctx, op, &[Some(x), Some(values)])? {
            return Ok(outs);
        }
    }
    let (scales, sizes) = scales_and_sizes(&shape, &ax, scales, None, AspectPolicy::Stretch)?;
    Ok(vec![ctx.op1(Resize { scales, sizes, ..template }, &[Some(x)])?])
}
