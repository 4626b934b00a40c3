//! Shared pieces of the quantization ops: how a scale (and zero point)
//! tensor maps onto the elements it scales (per tensor, per axis, or per
//! block along an axis), rounding, and saturation to the integer types.

use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};

/// Where each element of a tensor finds its scale: element `(o, j, k)` (outer
/// index, index along the axis, inner index) uses scale
/// `o·outer_stride + (j / block)·axis_stride + k·inner_stride`.
#[derive(Clone, Copy, Debug)]
pub struct ScaleLayout {
    pub outer: usize,
    pub axis_len: usize,
    pub inner: usize,
    pub block: usize,
    pub outer_stride: usize,
    pub axis_stride: usize,
    pub inner_stride: usize,
}

impl ScaleLayout {
    /// Resolves the layout of `scale` for input `x`: a one-element scale
    /// applies to the whole tensor; a 1-D scale of `x.shape[axis]` entries
    /// applies per axis; with `block_size > 0`, a scale of x's rank whose
    /// `axis` dimension is `ceil(x.shape[axis] / block_size)` applies per
    /// block.
    pub fn new(x: &[usize], scale: &[usize], axis: usize, block_size: usize, op: &str) -> Result<ScaleLayout> {
        let total: usize = x.iter().product();
        let n: usize = scale.iter().product();
        if n == 1 && block_size == 0 {
            return Ok(ScaleLayout {
                outer: 1,
                axis_len: total,
                inner: 1,
                block: 1,
                outer_stride: 0,
                axis_stride: 0,
                inner_stride: 0,
            });
        }
        ensure_op!(axis < x.len(), "{op}: axis {axis} out of range for input {x:?}");
        let outer = x[..axis].iter().product();
        let inner = x[axis + 1..].iter().product();
        let axis_len = x[axis];
        if block_size == 0 {
            ensure_op!(
                scale.len() == 1 && scale[0] == axis_len,
                "{op}: scale shape {scale:?} does not fit input {x:?} along axis {axis}"
            );
            return Ok(ScaleLayout { outer, axis_len, inner, block: 1, outer_stride: 0, axis_stride: 1, inner_stride: 0 });
        }
        let blocks = axis_len.div_ceil(block_size);
        let fits = scale.len() == x.len()
            && scale.iter().zip(x).enumerate().all(|(d, (&s, &v))| if d == axis { s == blocks } else { s == v });
        ensure_op!(fits, "{op}: scale shape {scale:?} does not fit input {x:?} with block_size {block_size} on axis {axis}");
        Ok(ScaleLayout {
            outer,
            axis_len,
            inner,
            block: block_size,
            outer_stride: blocks * inner,
            axis_stride: inner,
            inner_stride: 1,
        })
    }

    /// Calls `f(element index, scale index)` for every element, in order.
    pub fn for_each(&self, mut f: impl FnMut(usize, usize)) {
        let mut i = 0;
        for o in 0..self.outer {
            for j in 0..self.axis_len {
                let base = o * self.outer_stride + (j / self.block) * self.axis_stride;
                for k in 0..self.inner {
                    f(i, base + k * self.inner_stride);
                    i += 1;
                }
            }
        }
    }
}

/// Checks that a zero point has the scale's shape and returns its dtype.
pub fn check_zero_point(zp: &TensorType, scale: &TensorType, op: &str) -> Result<DType> {
    ensure_op!(
        zp.len() == scale.len() && (zp.shape == scale.shape || zp.len() == 1),
        "{op}: zero point {zp} does not match scale {scale}"
    );
    Ok(zp.dtype)
}

/// The range of an integer quantized type.
pub fn int_range(d: DType) -> Result<(f32, f32)> {
    Ok(match d {
        DType::U8 => (0.0, 255.0),
        DType::I8 => (-128.0, 127.0),
        DType::U16 => (0.0, 65535.0),
        DType::I16 => (-32768.0, 32767.0),
        DType::U4 => (0.0, 15.0),
        DType::I4 => (-8.0, 7.0),
        d => bail_op!("unsupported quantized type {d}"),
    })
}

/// Float elements of a view as f32 (f32, f16, bf16, f64, or integers).
pub fn f32_values(v: &TensorView<'_>) -> Result<Vec<f32>> {
    Ok(match v.dtype {
        DType::F32 => v.as_slice::<f32>()?.to_vec(),
        DType::F16 => v.as_slice::<half::f16>()?.iter().map(|x| x.to_f32()).collect(),
        DType::BF16 => v.as_slice::<half::bf16>()?.iter().map(|x| x.to_f32()).collect(),
        _ => v.to_f64_vec().into_iter().map(|x| x as f32).collect(),
    })
}

/// Integer elements of a view as i64.
pub fn int_values(v: &TensorView<'_>) -> Result<Vec<i64>> {
    v.to_i64_vec()
}

/// The zero point of an 8-bit float quantization, which ONNX requires to be
/// zero (its type only names the format): refuses any other value.
pub fn check_float8_zero_point(zp: Option<TensorView<'_>>, op: &str) -> Result<()> {
    if let Some(z) = zp {
        ensure_op!(z.to_f64_vec().iter().all(|&v| v == 0.0), "{op}: an 8-bit float zero point must be 0");
    }
    Ok(())
}

/// Writes already rounded and saturated values into an integer output.
pub fn write_ints(out: &mut TensorViewMut<'_>, values: impl Iterator<Item = f32>) -> Result<()> {
    macro_rules! write {
        ($t:ty) => {
            for (o, v) in out.as_mut_slice::<$t>()?.iter_mut().zip(values) {
                *o = v as $t;
            }
        };
    }
    match out.dtype {
        DType::U8 | DType::U4 => write!(u8),
        DType::I8 | DType::I4 => write!(i8),
        DType::U16 => write!(u16),
        DType::I16 => write!(i16),
        d => bail_op!("unsupported quantized output type {d}"),
    }
    Ok(())
}

/// Rounds half to even, adds the zero point and saturates to `[lo, hi]`.
#[inline]
pub fn quantize_value(v: f32, zp: f32, (lo, hi): (f32, f32)) -> f32 {
    let r = v.round_ties_even() + zp;
    // NaN has no integer value; it maps to the zero point.
    if r.is_nan() {
        zp.clamp(lo, hi)
    } else {
        r.clamp(lo, hi)
    }
}

/// Rounds a scale product to the precision of the scales' dtype, so that
/// requantization multipliers match a computation carried out in that dtype.
pub fn round_to(d: DType, v: f32) -> f32 {
    match d {
        DType::F16 => half::f16::from_f32(v).to_f32(),
        DType::BF16 => half::bf16::from_f32(v).to_f32(),
        _ => v,
    }
}
