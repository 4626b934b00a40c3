//! BatchNormalization in inference mode:
//! `y = (x - mean) / sqrt(var + epsilon) * scale + bias` per channel (axis 1).
//!
//! Inputs: X `[N, C, ...]`, scale, bias, mean, var (each `[C]`, any float
//! dtype, as opset 15 allows parameters of another type than X).

use super::common::float_dispatch;
use crate::dtype::DType;
use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BatchNorm {
    pub epsilon: f32,
}

impl BatchNorm {
    pub fn new(epsilon: f32) -> BatchNorm {
        BatchNorm { epsilon }
    }
}

const PARAMS: [&str; 4] = ["scale", "bias", "mean", "var"];

impl OpImpl for BatchNorm {
    fn name(&self) -> &'static str {
        "BatchNorm"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.dtype.is_float(), "BatchNorm: expected a float input, got {}", x.dtype);
        ensure_op!(x.shape.len() >= 2, "BatchNorm: input must have rank >= 2, got {}", x.shape.len());
        let c = x.shape[1];
        for (i, what) in PARAMS.iter().enumerate() {
            let p = input(inputs, i + 1, self.name())?;
            ensure_op!(p.dtype.is_float(), "BatchNorm: {what} must be a float tensor, got {}", p.dtype);
            ensure_op!(p.shape == [c], "BatchNorm: {what} must have shape [{c}], got {:?}", p.shape);
        }
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.shape.len() >= 2, "BatchNorm: input must have rank >= 2");
        let c = x.shape[1];
        let mut p = Vec::with_capacity(4);
        for i in 1..=4 {
            let v = input(inputs, i, self.name())?.to_f64_vec();
            ensure_op!(v.len() == c, "BatchNorm: parameter {i} must have {c} elements");
            p.push(v);
        }
        // y = x * a + b per channel.
        let eps = self.epsilon as f64;
        let a: Vec<f64> = (0..c).map(|i| p[0][i] / (p[3][i] + eps).sqrt()).collect();
        let b: Vec<f64> = (0..c).map(|i| p[1][i] - p[2][i] * a[i]).collect();
        let spatial: usize = x.shape[2..].iter().product();
        let y = &mut outputs[0];
        ensure_op!(y.len() == x.len(), "BatchNorm: output has the wrong size");
        if x.dtype == DType::F32 {
            scale_shift_f32(x.as_slice::<f32>()?, y.as_mut_slice::<f32>()?, &a, &b, spatial);
            Ok(())
        } else {
            float_dispatch!(x.dtype, self.name(), scale_shift(x, y, &a, &b, spatial))
        }
    }
}

/// `y = x * a[c] + b[c]` over `[N, C, spatial]`, computed in f64.
pub(super) fn scale_shift<T: Element>(x: TensorView, y: &mut TensorViewMut, a: &[f64], b: &[f64], spatial: usize) -> Result<()> {
    let xs = x.as_slice::<T>()?;
    let ys = y.as_mut_slice::<T>()?;
    for_each_channel_block(xs, ys, a.len(), spatial, |xb, yb, c| {
        for (o, &v) in yb.iter_mut().zip(xb) {
            *o = T::from_f64(v.to_f64() * a[c] + b[c]);
        }
    });
    Ok(())
}

/// [`scale_shift`] for f32, in f32 arithmetic (accurate enough, vectorizes).
pub(super) fn scale_shift_f32(xs: &[f32], ys: &mut [f32], a: &[f64], b: &[f64], spatial: usize) {
    for_each_channel_block(xs, ys, a.len(), spatial, |xb, yb, c| {
        let (a, b) = (a[c] as f32, b[c] as f32);
        for (o, &v) in yb.iter_mut().zip(xb) {
            *o = v * a + b;
        }
    });
}

/// Calls `f(x_block, y_block, channel)` for each contiguous block of
/// `spatial` elements of a `[N, C, spatial]` tensor.
fn for_each_channel_block<T>(xs: &[T], ys: &mut [T], c: usize, spatial: usize, mut f: impl FnMut(&[T], &mut [T], usize)) {
    if spatial == 0 || c == 0 {
        return;
    }
    let blocks = xs.chunks_exact(spatial).zip(ys.chunks_exact_mut(spatial));
    for (i, (xb, yb)) in blocks.enumerate() {
        f(xb, yb, i % c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn batchnorm_per_channel() {
        let x = Tensor::from_vec(vec![1, 2, 2], vec![1f32, 2., 3., 4.]).unwrap();
        let scale = Tensor::from_vec(vec![2], vec![1f32, 2.]).unwrap();
        let bias = Tensor::from_vec(vec![2], vec![0f32, 1.]).unwrap();
        let mean = Tensor::from_vec(vec![2], vec![1f32, 3.]).unwrap();
        let var = Tensor::from_vec(vec![2], vec![4f32, 1.]).unwrap();
        let op: Op = BatchNorm::new(0.0).into();
        let y = op.eval_owned(&[Some(&x), Some(&scale), Some(&bias), Some(&mean), Some(&var)]).unwrap();
        // Channel 0: (x - 1) / 2; channel 1: (x - 3) * 2 + 1.
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[0., 0.5, 1., 3.]);
    }
}
