//! LayerNormalization: normalize over the trailing dims `shape[axis..]`,
//! then `y = x_hat * scale + bias` with scale and bias broadcast to those
//! dims. The optional Mean and InvStdDev outputs (shape `shape[..axis]`
//! followed by 1s) are produced when `stats_dtype` is set.
//!
//! Row statistics are computed in f64 (mean, then the centered variance);
//! for f32 inputs the output pass runs in f32.

use super::common::{float_dispatch, lanes_sum};
use crate::dtype::DType;
use crate::ensure_op;
use crate::error::{Error, Result};
use crate::ops::util::{broadcast_index_map, broadcast_shapes, broadcast_strides};
use crate::ops::{input, opt_input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerNorm {
    /// Normalized (non-negative) first axis of the normalized dims.
    pub axis: usize,
    pub epsilon: f32,
    /// Also output Mean and InvStdDev, of this dtype (ONNX's `stash_type`).
    pub stats_dtype: Option<DType>,
}

impl LayerNorm {
    /// LayerNorm producing only Y.
    pub fn new(axis: usize, epsilon: f32) -> LayerNorm {
        LayerNorm { axis, epsilon, stats_dtype: None }
    }

    /// LayerNorm also producing Mean and InvStdDev of `dtype`.
    pub fn with_stats(axis: usize, epsilon: f32, dtype: DType) -> LayerNorm {
        LayerNorm { axis, epsilon, stats_dtype: Some(dtype) }
    }
}

/// `shape` without leading 1s beyond rank `rank`, so that a `[1, 768]` scale
/// can apply to normalized dims `[768]`.
fn trimmed(shape: &[usize], rank: usize) -> &[usize] {
    let extra = shape.len().saturating_sub(rank);
    if shape[..extra].iter().all(|&d| d == 1) {
        &shape[extra..]
    } else {
        shape
    }
}

/// Whether a parameter of `shape` broadcasts to the normalized dims.
fn fits(shape: &[usize], norm: &[usize]) -> bool {
    let s = trimmed(shape, norm.len());
    s.len() <= norm.len() && broadcast_shapes(&[s, norm]).map(|b| b == norm).unwrap_or(false)
}

/// A parameter expanded to one f64 per element of the normalized dims.
fn expand(p: TensorView, norm: &[usize]) -> Vec<f64> {
    let v = p.to_f64_vec();
    let n: usize = norm.iter().product();
    if v.len() == n {
        return v;
    }
    let strides = broadcast_strides(trimmed(p.shape, norm.len()), norm);
    broadcast_index_map(&strides, norm).into_iter().map(|i| v[i]).collect()
}

impl OpImpl for LayerNorm {
    fn name(&self) -> &'static str {
        "LayerNorm"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.dtype.is_float(), "LayerNorm: expected a float input, got {}", x.dtype);
        ensure_op!(self.axis < x.shape.len(), "LayerNorm: axis {} out of range for rank {}", self.axis, x.shape.len());
        let norm = &x.shape[self.axis..];
        let scale = input(inputs, 1, self.name())?;
        let params = std::iter::once(("scale", scale)).chain(opt_input(inputs, 2).map(|b| ("bias", b)));
        for (what, p) in params {
            ensure_op!(p.dtype.is_float(), "LayerNorm: {what} must be a float tensor, got {}", p.dtype);
            ensure_op!(fits(&p.shape, norm), "LayerNorm: {what} shape {:?} does not broadcast to {:?}", p.shape, norm);
        }
        let mut out = vec![x.clone()];
        if let Some(dtype) = self.stats_dtype {
            ensure_op!(dtype.is_float(), "LayerNorm: statistics dtype must be a float type, got {dtype}");
            let shape: Vec<usize> = x.shape.iter().enumerate().map(|(i, &d)| if i < self.axis { d } else { 1 }).collect();
            out.push(TensorType::new(dtype, shape.clone()));
            out.push(TensorType::new(dtype, shape));
        }
        Ok(out)
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(self.axis < x.shape.len(), "LayerNorm: axis out of range");
        let norm = &x.shape[self.axis..];
        let scale = input(inputs, 1, self.name())?;
        ensure_op!(fits(scale.shape, norm), "LayerNorm: scale does not broadcast");
        let scale = expand(scale, norm);
        let n = scale.len();
        let bias = match opt_input(inputs, 2) {
            Some(b) => {
                ensure_op!(fits(b.shape, norm), "LayerNorm: bias does not broadcast");
                expand(b, norm)
            }
            None => vec![0.0; n],
        };
        let (y, stat_outputs) = outputs.split_first_mut().ok_or_else(|| Error::op("LayerNorm: no output"))?;
        ensure_op!(y.len() == x.len(), "LayerNorm: output has the wrong size");
        if n == 0 {
            return Ok(());
        }
        let eps = self.epsilon as f64;
        let mut stats = Vec::new();
        let want_stats = self.stats_dtype.is_some();
        if x.dtype == DType::F32 {
            layer_norm_f32(x.as_slice::<f32>()?, y.as_mut_slice::<f32>()?, &scale, &bias, eps, want_stats, &mut stats);
        } else {
            float_dispatch!(x.dtype, self.name(), layer_norm(x, y, &scale, &bias, eps, want_stats, &mut stats))?;
        }
        if want_stats {
            write_stats(stat_outputs, &stats)?;
        }
        Ok(())
    }
}

/// Mean and 1 / sqrt(var + eps) of one row.
#[inline]
fn row_stats<T: Copy>(row: &[T], eps: f64, f: impl Fn(T) -> f64 + Copy) -> (f64, f64) {
    let n = row.len() as f64;
    let mean = lanes_sum(row, f) / n;
    let var = lanes_sum(row, |v| (f(v) - mean) * (f(v) - mean)) / n;
    (mean, 1.0 / (var + eps).sqrt())
}

/// Writes per-row (mean, inv_std) pairs to the Mean and InvStdDev outputs.
fn write_stats(outputs: &mut [TensorViewMut<'_>], stats: &[(f64, f64)]) -> Result<()> {
    ensure_op!(outputs.len() == 2, "LayerNorm: expected Mean and InvStdDev outputs");
    let (mean, inv) = outputs.split_at_mut(1);
    let means: Vec<f64> = stats.iter().map(|s| s.0).collect();
    let invs: Vec<f64> = stats.iter().map(|s| s.1).collect();
    let (mean, inv) = (&mut mean[0], &mut inv[0]);
    float_dispatch!(mean.dtype, "LayerNorm", store(mean, &means))?;
    float_dispatch!(inv.dtype, "LayerNorm", store(inv, &invs))
}

fn store<T: Element>(out: &mut TensorViewMut, values: &[f64]) -> Result<()> {
    let o = out.as_mut_slice::<T>()?;
    ensure_op!(o.len() == values.len(), "LayerNorm: statistics output has the wrong size");
    for (o, &v) in o.iter_mut().zip(values) {
        *o = T::from_f64(v);
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn layer_norm_f32(
    xs: &[f32],
    ys: &mut [f32],
    scale: &[f64],
    bias: &[f64],
    eps: f64,
    want_stats: bool,
    stats: &mut Vec<(f64, f64)>,
) {
    let n = scale.len();
    let scale: Vec<f32> = scale.iter().map(|&v| v as f32).collect();
    let bias: Vec<f32> = bias.iter().map(|&v| v as f32).collect();
    for (xr, yr) in xs.chunks_exact(n).zip(ys.chunks_exact_mut(n)) {
        let (mean, inv) = row_stats(xr, eps, |v| v as f64);
        if want_stats {
            stats.push((mean, inv));
        }
        let (mean, inv) = (mean as f32, inv as f32);
        for (((o, &v), &s), &b) in yr.iter_mut().zip(xr).zip(&scale).zip(&bias) {
            *o = (v - mean) * inv * s + b;
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn layer_norm<T: Element>(
    x: TensorView,
    y: &mut TensorViewMut,
    scale: &[f64],
    bias: &[f64],
    eps: f64,
    want_stats: bool,
    stats: &mut Vec<(f64, f64)>,
) -> Result<()> {
    let xs = x.as_slice::<T>()?;
    let ys = y.as_mut_slice::<T>()?;
    let n = scale.len();
    for (xr, yr) in xs.chunks_exact(n).zip(ys.chunks_exact_mut(n)) {
        let (mean, inv) = row_stats(xr, eps, T::to_f64);
        if want_stats {
            stats.push((mean, inv));
        }
        for (((o, &v), &s), &b) in yr.iter_mut().zip(xr).zip(scale).zip(bias) {
            *o = T::from_f64((v.to_f64() - mean) * inv * s + b);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-5)
    }

    #[test]
    fn layer_norm_last_axis_with_bias() {
        let x = Tensor::from_vec(vec![2, 2], vec![1f32, 3., 2., 6.]).unwrap();
        let s = Tensor::from_vec(vec![2], vec![1f32, 2.]).unwrap();
        let b = Tensor::from_vec(vec![1, 2], vec![0f32, 1.]).unwrap();
        let op: Op = LayerNorm::new(1, 0.0).into();
        let y = op.eval_owned(&[Some(&x), Some(&s), Some(&b)]).unwrap();
        // Both rows normalize to [-1, 1], then scale [1, 2] and bias [0, 1].
        assert!(close(&y[0].to_f64_vec(), &[-1., 3., -1., 3.]));
    }

    #[test]
    fn layer_norm_stats_outputs() {
        let x = Tensor::from_vec(vec![2, 2], vec![1f32, 3., 2., 6.]).unwrap();
        let s = Tensor::from_vec(vec![2], vec![1f32, 1.]).unwrap();
        let op: Op = LayerNorm::with_stats(1, 0.0, DType::F32).into();
        let y = op.eval_owned(&[Some(&x), Some(&s), None]).unwrap();
        assert_eq!(y[1].shape(), &[2, 1]);
        assert!(close(&y[1].to_f64_vec(), &[2., 4.]));
        assert!(close(&y[2].to_f64_vec(), &[1., 0.5]));
    }

    #[test]
    fn layer_norm_two_axes_f64_broadcast_scale() {
        let x = Tensor::from_vec(vec![1, 2, 2], vec![0f64, 2., 4., 6.]).unwrap();
        let s = Tensor::from_vec(vec![2], vec![1f64, 1.]).unwrap();
        let op: Op = LayerNorm::new(1, 0.0).into();
        let y = op.eval_owned(&[Some(&x), Some(&s), None]).unwrap();
        let k = 1.0 / 5f64.sqrt();
        assert!(close(&y[0].to_f64_vec(), &[-3. * k, -k, k, 3. * k]));
    }
}
