//! Resize (also ONNX's Upsample): nearest, linear and cubic interpolation
//! with every ONNX coordinate transformation mode, following the ONNX
//! reference implementation. The compiler resolves scales, sizes, axes and
//! the keep-aspect-ratio policy into a full-rank `scales` and `sizes`.
//!
//! Interpolation is separable: each resized axis is processed in turn with
//! precomputed 1-D taps (input index and weight per output coordinate), which
//! is exactly the ONNX reference's nested 1-D interpolation.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::movement::reshape::{eval_at, infer_at, AtShapes};
use crate::ops::movement::DimOf;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResizeMode {
    Nearest,
    Linear,
    Cubic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CoordinateMode {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfCropAndResize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Resize {
    pub mode: ResizeMode,
    pub coordinate_mode: CoordinateMode,
    pub nearest_mode: NearestMode,
    pub cubic_coeff_a: f64,
    pub exclude_outside: bool,
    pub extrapolation_value: f64,
    /// Widen linear/cubic filters when downsampling.
    pub antialias: bool,
    /// Scale of every axis (output / input, as ONNX defines it).
    pub scales: Vec<f64>,
    /// Output size of every axis.
    pub sizes: Vec<usize>,
    /// Region of interest `[starts..., ends...]` (full rank) for
    /// `tf_crop_and_resize`; empty otherwise.
    pub roi: Vec<f64>,
}

/// The 1-D interpolation of one axis: for each output coordinate `o`, the
/// taps `start[o]..start[o + 1]` of (`idx`, `w`), or the extrapolation value.
struct AxisTaps {
    start: Vec<usize>,
    idx: Vec<usize>,
    w: Vec<f64>,
    extrapolate: Vec<bool>,
}

impl AxisTaps {
    fn is_identity(&self, in_len: usize) -> bool {
        self.extrapolate.len() == in_len
            && !self.extrapolate.iter().any(|&e| e)
            && self.idx.len() == in_len
            && self.idx.iter().enumerate().all(|(o, &i)| i == o)
            && self.w.iter().all(|&w| w == 1.0)
    }
}

fn cubic_weight(x: f64, a: f64) -> f64 {
    let x = x.abs();
    if x <= 1.0 {
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    } else {
        0.0
    }
}

impl Resize {
    /// Where output coordinate `o` of `axis` falls in the input, or `None`
    /// when it is outside the crop region (tf_crop_and_resize).
    fn source_coord(&self, axis: usize, o: usize, in_len: usize, out_len: usize) -> Option<f64> {
        let scale = self.scales[axis];
        let (x, in_w) = (o as f64, in_len as f64);
        let out_w = scale * in_w;
        Some(match self.coordinate_mode {
            CoordinateMode::AlignCorners => {
                if out_w == 1.0 {
                    0.0
                } else {
                    x * (in_w - 1.0) / (out_w - 1.0)
                }
            }
            CoordinateMode::Asymmetric => x / scale,
            CoordinateMode::TfCropAndResize => {
                let r = self.roi.len() / 2;
                let (s, e) = (self.roi[axis], self.roi[r + axis]);
                let v = if out_w == 1.0 { (e - s) * (in_w - 1.0) / 2.0 } else { x * (e - s) * (in_w - 1.0) / (out_w - 1.0) }
                    + s * (in_w - 1.0);
                if v < 0.0 || v > in_w - 1.0 {
                    return None;
                }
                v
            }
            CoordinateMode::PytorchHalfPixel => {
                if out_w == 1.0 {
                    -0.5
                } else {
                    (x + 0.5) / scale - 0.5
                }
            }
            CoordinateMode::HalfPixel => (x + 0.5) / scale - 0.5,
            CoordinateMode::HalfPixelSymmetric => {
                let adjustment = out_len as f64 / out_w;
                let offset = in_w / 2.0 * (1.0 - adjustment);
                offset + (x + 0.5) / scale - 0.5
            }
        })
    }

    /// Filter weights around a source coordinate: `(first offset relative to
    /// the base index, weights)`, where the base index is the pixel at or
    /// left of the coordinate and `ratio` in (0, 1] the distance from it.
    fn weights(&self, ratio: f64, scale: f64) -> (i64, Vec<f64>) {
        match self.mode {
            ResizeMode::Nearest => {
                let right = if ratio == 1.0 {
                    true
                } else {
                    match self.nearest_mode {
                        NearestMode::RoundPreferFloor => ratio > 0.5,
                        NearestMode::RoundPreferCeil => ratio >= 0.5,
                        NearestMode::Floor => false,
                        NearestMode::Ceil => true,
                    }
                };
                (if right { 1 } else { 0 }, vec![1.0])
            }
            ResizeMode::Linear => {
                if self.antialias && scale < 1.0 {
                    let start = (-1.0 / scale).floor() as i64 + 1;
                    let n = 2 - 2 * start;
                    let w: Vec<f64> =
                        (start..start + n).map(|i| (1.0 - ((i as f64 - ratio) * scale).abs()).clamp(0.0, 1.0)).collect();
                    (start, normalized(w))
                } else {
                    (0, vec![1.0 - ratio, ratio])
                }
            }
            ResizeMode::Cubic => {
                let a = self.cubic_coeff_a;
                if self.antialias && scale < 1.0 {
                    let start = (-2.0 / scale).floor() as i64 + 1;
                    let w: Vec<f64> = (start..2 - start).map(|i| cubic_weight(scale * (i as f64 - ratio), a)).collect();
                    (start, normalized(w))
                } else {
                    (-1, (-1..3).map(|i| cubic_weight(i as f64 - ratio, a)).collect())
                }
            }
        }
    }

    fn taps(&self, axis: usize, in_len: usize, out_len: usize) -> AxisTaps {
        let mut t = AxisTaps { start: vec![0], idx: Vec::new(), w: Vec::new(), extrapolate: Vec::new() };
        for o in 0..out_len {
            match self.source_coord(axis, o, in_len, out_len) {
                None => t.extrapolate.push(true),
                Some(x) => {
                    t.extrapolate.push(false);
                    // The base is the pixel left of x; ratio is in (0, 1].
                    let fl = x.floor();
                    let (base, ratio) = if x == fl { (fl as i64 - 1, 1.0) } else { (fl as i64, x - fl) };
                    let (first, mut w) = self.weights(ratio, self.scales[axis]);
                    let last = in_len as i64 - 1;
                    if self.exclude_outside && self.mode != ResizeMode::Nearest {
                        for (k, wk) in w.iter_mut().enumerate() {
                            let i = base + first + k as i64;
                            if i < 0 || i > last {
                                *wk = 0.0;
                            }
                        }
                        w = normalized(w);
                    }
                    for (k, wk) in w.into_iter().enumerate() {
                        let i = (base + first + k as i64).clamp(0, last.max(0));
                        t.idx.push(i as usize);
                        t.w.push(wk);
                    }
                }
            }
            t.start.push(t.idx.len());
        }
        t
    }
}

fn normalized(mut w: Vec<f64>) -> Vec<f64> {
    let sum: f64 = w.iter().sum();
    if sum != 0.0 {
        for v in &mut w {
            *v /= sum;
        }
    }
    w
}

/// One separable pass: resizes `axis` of the row-major `src` of `shape`.
fn interpolate_axis(src: &[f64], shape: &[usize], axis: usize, taps: &AxisTaps, extrapolation: f64) -> Vec<f64> {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let (in_len, out_len) = (shape[axis], taps.extrapolate.len());
    let mut dst = vec![0f64; outer * out_len * inner];
    for ou in 0..outer {
        for o in 0..out_len {
            let d0 = (ou * out_len + o) * inner;
            let d = &mut dst[d0..d0 + inner];
            if taps.extrapolate[o] {
                d.fill(extrapolation);
                continue;
            }
            for t in taps.start[o]..taps.start[o + 1] {
                let s0 = (ou * in_len + taps.idx[t]) * inner;
                let w = taps.w[t];
                for (dv, &sv) in d.iter_mut().zip(&src[s0..s0 + inner]) {
                    *dv += w * sv;
                }
            }
        }
    }
    dst
}

fn run_filtered<T: Element>(op: &Resize, x: &TensorView, out: &mut TensorViewMut, round: bool) -> Result<()> {
    let mut shape = x.shape.to_vec();
    let mut buf: Vec<f64> = x.as_slice::<T>()?.iter().map(|&v| v.to_f64()).collect();
    for axis in (0..shape.len()).rev() {
        let taps = op.taps(axis, shape[axis], op.sizes[axis]);
        if shape[axis] == op.sizes[axis] && taps.is_identity(shape[axis]) {
            continue;
        }
        buf = interpolate_axis(&buf, &shape, axis, &taps, op.extrapolation_value);
        shape[axis] = op.sizes[axis];
    }
    let o = out.as_mut_slice::<T>()?;
    ensure_op!(o.len() == buf.len(), "Resize: internal size mismatch");
    for (d, v) in o.iter_mut().zip(buf) {
        *d = T::from_f64(if round { v.round() } else { v });
    }
    Ok(())
}

/// Nearest-neighbour resizing copies elements, so it works on raw bytes.
fn run_nearest(op: &Resize, x: &TensorView, out: &mut TensorViewMut) -> Result<()> {
    let rank = x.shape.len();
    let esize = x.dtype.size();
    let maps: Vec<Vec<Option<usize>>> = (0..rank)
        .map(|a| {
            let t = op.taps(a, x.shape[a], op.sizes[a]);
            (0..op.sizes[a]).map(|o| if t.extrapolate[o] { None } else { Some(t.idx[t.start[o]]) }).collect()
        })
        .collect();
    let fill = scalar_bytes(x.dtype, op.extrapolation_value);
    if out.bytes.is_empty() {
        return Ok(());
    }
    if rank == 0 {
        out.bytes.copy_from_slice(x.bytes);
        return Ok(());
    }
    let strides = crate::ops::util::strides(x.shape);
    let last = rank - 1;
    let rows: usize = op.sizes[..last].iter().product();
    let mut idx = vec![0usize; last];
    let mut d = 0;
    for _ in 0..rows {
        let base: Option<usize> = (0..last).try_fold(0usize, |acc, k| maps[k][idx[k]].map(|i| acc + i * strides[k]));
        for m in &maps[last] {
            match (base, m) {
                (Some(b), Some(j)) => {
                    let s = (b + j) * esize;
                    out.bytes[d..d + esize].copy_from_slice(&x.bytes[s..s + esize]);
                }
                _ => out.bytes[d..d + esize].copy_from_slice(&fill[..esize]),
            }
            d += esize;
        }
        for k in (0..last).rev() {
            idx[k] += 1;
            if idx[k] < op.sizes[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Ok(())
}

/// The little-endian bytes of `v` converted to `dtype`.
fn scalar_bytes(dtype: DType, v: f64) -> Vec<u8> {
    match dtype {
        DType::F32 => (v as f32).to_le_bytes().to_vec(),
        DType::F64 => v.to_le_bytes().to_vec(),
        DType::F16 => f16::from_f64(v).to_le_bytes().to_vec(),
        DType::BF16 => bf16::from_f64(v).to_le_bytes().to_vec(),
        DType::I8 => (v as i8).to_le_bytes().to_vec(),
        DType::I16 => (v as i16).to_le_bytes().to_vec(),
        DType::I32 => (v as i32).to_le_bytes().to_vec(),
        DType::I64 => (v as i64).to_le_bytes().to_vec(),
        DType::U8 => vec![v as u8],
        DType::Bool => vec![(v != 0.0) as u8],
        DType::U16 => (v as u16).to_le_bytes().to_vec(),
        DType::U32 => (v as u32).to_le_bytes().to_vec(),
        DType::U64 => (v as u64).to_le_bytes().to_vec(),
        DType::I4 => vec![(v as i8).clamp(-8, 7) as u8],
        DType::U4 => vec![(v as u8).min(15)],
        d => vec![crate::float8::Float8::of(d).map_or(0, |f| f.encode(v, true))],
    }
}

impl OpImpl for Resize {
    fn name(&self) -> &'static str {
        "Resize"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "Resize")?;
        let r = x.shape.len();
        ensure_op!(self.scales.len() == r && self.sizes.len() == r, "Resize: scales/sizes do not match {x}");
        ensure_op!(self.scales.iter().all(|&s| s > 0.0 && s.is_finite()), "Resize: scales must be positive");
        if self.coordinate_mode == CoordinateMode::TfCropAndResize {
            ensure_op!(self.roi.len() == 2 * r, "Resize: tf_crop_and_resize needs a roi of {} values", 2 * r);
        }
        for (a, (&i, &o)) in x.shape.iter().zip(&self.sizes).enumerate() {
            ensure_op!(i > 0 || o == 0, "Resize: cannot resize empty axis {a} of {x} to {o}");
        }
        if self.mode != ResizeMode::Nearest {
            ensure_op!(x.dtype != DType::Bool, "Resize: {:?} mode does not support bool", self.mode);
        }
        Ok(vec![TensorType::new(x.dtype, self.sizes.clone())])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "Resize")?;
        let out = &mut outputs[0];
        if self.mode == ResizeMode::Nearest {
            return run_nearest(self, &x, out);
        }
        match x.dtype {
            DType::F32 => run_filtered::<f32>(self, &x, out, false),
            DType::F64 => run_filtered::<f64>(self, &x, out, false),
            DType::F16 => run_filtered::<f16>(self, &x, out, false),
            DType::BF16 => run_filtered::<bf16>(self, &x, out, false),
            DType::I8 => run_filtered::<i8>(self, &x, out, true),
            DType::I16 => run_filtered::<i16>(self, &x, out, true),
            DType::I32 => run_filtered::<i32>(self, &x, out, true),
            DType::I64 => run_filtered::<i64>(self, &x, out, true),
            DType::U8 => run_filtered::<u8>(self, &x, out, true),
            DType::U16 => run_filtered::<u16>(self, &x, out, true),
            DType::U32 => run_filtered::<u32>(self, &x, out, true),
            DType::U64 => run_filtered::<u64>(self, &x, out, true),
            d => bail_op!("Resize: {:?} mode does not support {d}", self.mode),
        }
    }
}

/// How a [`DynamicResize`] sizes one axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResizeSize {
    /// The inner Resize's size and scale.
    Fixed,
    /// `floor(input size * scale)`, the inner Resize's scale (ONNX's
    /// `scales` input).
    Scaled,
    /// Another input's size on one of its axes; the scale is output size /
    /// input size (ONNX's `sizes` input).
    Of(DimOf),
}

/// What decides a Resize's output sizes: ONNX's `scales` or its `sizes`.
#[derive(Clone, Debug, PartialEq)]
pub enum ResizeBy {
    Scales(Vec<f64>),
    Sizes(Vec<i64>),
}

/// ONNX's `keep_aspect_ratio_policy` (with `sizes` only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AspectPolicy {
    Stretch,
    NotLarger,
    NotSmaller,
}

/// Full-rank scales and output sizes of a Resize of an input of `shape`
/// from ONNX's scales or sizes over the axes `ax`, as the ONNX reference
/// computes them.
pub fn resize_scales_and_sizes(
    shape: &[usize],
    ax: &[usize],
    by: &ResizeBy,
    policy: AspectPolicy,
) -> Result<(Vec<f64>, Vec<usize>)> {
    let rank = shape.len();
    ensure_op!(ax.iter().all(|&a| a < rank), "Resize: axes {ax:?} out of range for rank {rank}");
    let mut full_scales = vec![1.0f64; rank];
    let mut full_sizes = shape.to_vec();
    match by {
        ResizeBy::Scales(s) => {
            ensure_op!(s.len() == ax.len(), "Resize: {} scales for {} axes", s.len(), ax.len());
            for (&a, &v) in ax.iter().zip(s) {
                ensure_op!(v.is_finite() && v > 0.0, "Resize: scale {v} must be positive");
                full_scales[a] = v;
                // Saturates: an output too large to hold is refused by its type.
                full_sizes[a] = (v * shape[a] as f64).floor() as usize;
            }
        }
        ResizeBy::Sizes(z) => {
            ensure_op!(z.len() == ax.len(), "Resize: {} sizes for {} axes", z.len(), ax.len());
            for (&a, &v) in ax.iter().zip(z) {
                let v = usize::try_from(v).map_err(|_| crate::Error::op(format!("Resize: size {v} is negative")))?;
                ensure_op!(shape[a] > 0, "Resize: cannot resize an empty axis {a}");
                full_scales[a] = v as f64 / shape[a] as f64;
                full_sizes[a] = v;
            }
            if policy != AspectPolicy::Stretch {
                let it = ax.iter().map(|&a| full_scales[a]);
                let scale = match policy {
                    AspectPolicy::NotLarger => it.fold(f64::INFINITY, f64::min),
                    _ => it.fold(0.0, f64::max),
                };
                for &a in ax {
                    full_scales[a] = scale;
                    full_sizes[a] = (scale * shape[a] as f64 + 0.5).floor() as usize;
                }
            }
        }
    }
    Ok((full_scales, full_sizes))
}

/// A Resize whose output sizes follow the input shapes: what a Resize
/// becomes in an engine whose shapes vary (feature pyramids that upsample
/// to the size of another level).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DynamicResize {
    /// The Resize at the largest shapes; its mode and coordinate rules.
    pub resize: Resize,
    pub sizes: Vec<ResizeSize>,
}

impl AtShapes for DynamicResize {
    type Static = Resize;

    /// The Resize for inputs of shapes `shapes` (the data first).
    fn at(&self, shapes: &[Option<&[usize]>]) -> Result<Resize> {
        let x = shapes.first().copied().flatten().unwrap_or_default();
        let r = x.len();
        ensure_op!(
            self.sizes.len() == r && self.resize.sizes.len() == r && self.resize.scales.len() == r,
            "DynamicResize: sizes do not match a rank-{r} input"
        );
        let mut resize = self.resize.clone();
        for (a, how) in self.sizes.iter().enumerate() {
            match *how {
                ResizeSize::Fixed => {}
                ResizeSize::Scaled => resize.sizes[a] = (resize.scales[a] * x[a] as f64).floor() as usize,
                ResizeSize::Of(d) => {
                    let n = d.size(shapes, "DynamicResize")?;
                    ensure_op!(x[a] > 0, "DynamicResize: cannot resize empty axis {a} to {n}");
                    resize.sizes[a] = n;
                    resize.scales[a] = n as f64 / x[a] as f64;
                }
            }
        }
        Ok(resize)
    }
}

impl OpImpl for DynamicResize {
    fn name(&self) -> &'static str {
        "DynamicResize"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        infer_at(self, inputs)
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        eval_at(self, inputs, outputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn resize(mode: ResizeMode, coord: CoordinateMode, scales: Vec<f64>, sizes: Vec<usize>) -> Resize {
        Resize {
            mode,
            coordinate_mode: coord,
            nearest_mode: NearestMode::RoundPreferFloor,
            cubic_coeff_a: -0.75,
            exclude_outside: false,
            extrapolation_value: 0.0,
            antialias: false,
            scales,
            sizes,
            roi: vec![],
        }
    }

    #[test]
    fn nearest_upsample_doubles() {
        let x = Tensor::from_vec(vec![1, 2], vec![1f32, 2.]).unwrap();
        let mut op = resize(ResizeMode::Nearest, CoordinateMode::Asymmetric, vec![1., 2.], vec![1, 4]);
        op.nearest_mode = NearestMode::Floor;
        let op: Op = op.into();
        let y = op.eval_owned(&[Some(&x)]).unwrap();
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[1., 1., 2., 2.]);
    }

    #[test]
    fn linear_half_pixel_upsample() {
        // ONNX: [1, 2] upsampled x2 with half_pixel is [1, 1.25, 1.75, 2].
        let x = Tensor::from_vec(vec![2], vec![1f32, 2.]).unwrap();
        let op: Op = resize(ResizeMode::Linear, CoordinateMode::HalfPixel, vec![2.], vec![4]).into();
        let y = op.eval_owned(&[Some(&x)]).unwrap();
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[1., 1.25, 1.75, 2.]);
    }

    #[test]
    fn linear_align_corners() {
        let x = Tensor::from_vec(vec![2], vec![0f64, 3.]).unwrap();
        let op: Op = resize(ResizeMode::Linear, CoordinateMode::AlignCorners, vec![2.], vec![4]).into();
        let y = op.eval_owned(&[Some(&x)]).unwrap();
        assert_eq!(y[0].as_slice::<f64>().unwrap(), &[0., 1., 2., 3.]);
    }

    #[test]
    fn cubic_weights_sum_to_one() {
        let op = resize(ResizeMode::Cubic, CoordinateMode::HalfPixel, vec![2.], vec![4]);
        let (_, w) = op.weights(0.3, 2.0);
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }
}
