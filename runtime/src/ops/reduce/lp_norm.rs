//! LpNormalization: `y = x / ||x||_p` along one axis, p = 1 or 2. A slice
//! whose norm is 0 gives 0 (as onnxruntime does) rather than NaN.

use super::common::{float_dispatch, split_at_axis};
use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LpNorm {
    /// Normalized (non-negative) axis.
    pub axis: usize,
    /// 1 or 2.
    pub p: u32,
}

impl LpNorm {
    pub fn new(axis: usize, p: u32) -> LpNorm {
        LpNorm { axis, p }
    }
}

impl OpImpl for LpNorm {
    fn name(&self) -> &'static str {
        "LpNorm"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.dtype.is_float(), "LpNorm: expected a float input, got {}", x.dtype);
        ensure_op!(self.axis < x.shape.len(), "LpNorm: axis {} out of range for rank {}", self.axis, x.shape.len());
        ensure_op!(self.p == 1 || self.p == 2, "LpNorm: p must be 1 or 2, got {}", self.p);
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(self.axis < x.shape.len(), "LpNorm: axis out of range");
        let dims = split_at_axis(x.shape, self.axis);
        let y = &mut outputs[0];
        ensure_op!(y.len() == x.len(), "LpNorm: output has the wrong size");
        float_dispatch!(x.dtype, self.name(), lp_norm(x, y, dims, self.p))
    }
}

fn lp_norm<T: Element>(x: TensorView, y: &mut TensorViewMut, (outer, n, inner): (usize, usize, usize), p: u32) -> Result<()> {
    let xs = x.as_slice::<T>()?;
    let ys = y.as_mut_slice::<T>()?;
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * n + k) * inner + i;
            let norm = if p == 1 {
                (0..n).map(|k| xs[at(k)].to_f64().abs()).sum::<f64>()
            } else {
                (0..n).map(|k| xs[at(k)].to_f64().powi(2)).sum::<f64>().sqrt()
            };
            let inv = if norm == 0.0 { 0.0 } else { 1.0 / norm };
            for k in 0..n {
                ys[at(k)] = T::from_f64(xs[at(k)].to_f64() * inv);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn l2_and_l1_rows() {
        let x = Tensor::from_vec(vec![2, 2], vec![3f32, 4., 0., 0.]).unwrap();
        let op: Op = LpNorm::new(1, 2).into();
        assert_eq!(op.eval_owned(&[Some(&x)]).unwrap()[0].as_slice::<f32>().unwrap(), &[0.6, 0.8, 0., 0.]);
        let op: Op = LpNorm::new(0, 1).into();
        let y = op.eval_owned(&[Some(&x)]).unwrap();
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[1., 1., 0., 0.]);
    }
}
