//! LRN (local response normalization across channels):
//! `y = x / (bias + alpha / size * sum(x[c']^2))^beta` where `c'` runs over
//! the window `[c - (size - 1) / 2, c + ceil((size - 1) / 2)]` clipped to the
//! channel range.

use super::common::float_dispatch;
use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lrn {
    pub size: usize,
    pub alpha: f32,
    pub beta: f32,
    pub bias: f32,
}

impl Lrn {
    pub fn new(size: usize, alpha: f32, beta: f32, bias: f32) -> Lrn {
        Lrn { size, alpha, beta, bias }
    }
}

impl OpImpl for Lrn {
    fn name(&self) -> &'static str {
        "LRN"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.dtype.is_float(), "LRN: expected a float input, got {}", x.dtype);
        ensure_op!(x.shape.len() >= 2, "LRN: input must have rank >= 2, got {}", x.shape.len());
        ensure_op!(self.size > 0, "LRN: size must be positive");
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.shape.len() >= 2 && self.size > 0, "LRN: invalid input or size");
        let y = &mut outputs[0];
        ensure_op!(y.len() == x.len(), "LRN: output has the wrong size");
        float_dispatch!(x.dtype, self.name(), lrn(self, x, y))
    }
}

fn lrn<T: Element>(op: &Lrn, x: TensorView, y: &mut TensorViewMut) -> Result<()> {
    let xs = x.as_slice::<T>()?;
    let ys = y.as_mut_slice::<T>()?;
    let c = x.shape[1];
    let spatial: usize = x.shape[2..].iter().product();
    let block = c * spatial;
    if block == 0 {
        return Ok(());
    }
    let (before, after) = ((op.size - 1) / 2, op.size / 2);
    let k = op.alpha as f64 / op.size as f64;
    let (bias, beta) = (op.bias as f64, op.beta as f64);
    let mut sq = vec![0f64; spatial];
    for (xb, yb) in xs.chunks_exact(block).zip(ys.chunks_exact_mut(block)) {
        for ch in 0..c {
            sq.fill(0.0);
            for w in ch.saturating_sub(before)..(ch + after + 1).min(c) {
                for (s, &v) in sq.iter_mut().zip(&xb[w * spatial..(w + 1) * spatial]) {
                    *s += v.to_f64() * v.to_f64();
                }
            }
            let rows = yb[ch * spatial..(ch + 1) * spatial].iter_mut().zip(&xb[ch * spatial..(ch + 1) * spatial]);
            for ((o, &v), &s) in rows.zip(&sq) {
                *o = T::from_f64(v.to_f64() / (bias + k * s).powf(beta));
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
    fn lrn_window_of_three() {
        let x = Tensor::from_vec(vec![1, 3, 1], vec![1f32, 2., 3.]).unwrap();
        let op: Op = Lrn::new(3, 3.0, 1.0, 1.0).into();
        let y = op.eval_owned(&[Some(&x)]).unwrap()[0].to_f64_vec();
        // alpha / size = 1; windows: {0,1} -> 5, {0,1,2} -> 14, {1,2} -> 13.
        let want = [1.0 / 6.0, 2.0 / 15.0, 3.0 / 14.0];
        assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6));
    }
}
