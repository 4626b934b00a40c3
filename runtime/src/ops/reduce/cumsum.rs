//! CumSum along one axis, optionally exclusive and/or reversed.

use super::common::{float_dispatch, int_dispatch, split_at_axis, IntElement};
use crate::dtype::DType;
use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CumSum {
    /// Normalized (non-negative) axis.
    pub axis: usize,
    /// Each output excludes its own input element.
    pub exclusive: bool,
    /// Sum from the end of the axis towards the start.
    pub reverse: bool,
}

impl CumSum {
    pub fn new(axis: usize, exclusive: bool, reverse: bool) -> CumSum {
        CumSum { axis, exclusive, reverse }
    }
}

impl OpImpl for CumSum {
    fn name(&self) -> &'static str {
        "CumSum"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.dtype != DType::Bool, "CumSum: bool inputs are not supported");
        ensure_op!(self.axis < x.shape.len(), "CumSum: axis {} out of range for rank {}", self.axis, x.shape.len());
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(self.axis < x.shape.len(), "CumSum: axis out of range");
        let dims = split_at_axis(x.shape, self.axis);
        let y = &mut outputs[0];
        ensure_op!(y.len() == x.len(), "CumSum: output has the wrong size");
        if x.dtype.is_float() {
            float_dispatch!(x.dtype, "CumSum", cumsum_float(x, y, dims, self.exclusive, self.reverse))
        } else {
            int_dispatch!(x.dtype, "CumSum", cumsum_int(x, y, dims, self.exclusive, self.reverse))
        }
    }
}

/// Runs a running sum over the middle dim of `[outer, n, inner]`, one row of
/// `inner` accumulators at a time. `add(acc, x)` folds an element in and
/// `out(acc)` converts an accumulator to the output type.
#[allow(clippy::too_many_arguments)]
fn scan<T: Copy, A: Copy>(
    xs: &[T],
    ys: &mut [T],
    (outer, n, inner): (usize, usize, usize),
    exclusive: bool,
    reverse: bool,
    zero: A,
    add: impl Fn(A, T) -> A,
    out: impl Fn(A) -> T,
) {
    let mut acc = vec![zero; inner];
    for o in 0..outer {
        acc.fill(zero);
        for step in 0..n {
            let k = if reverse { n - 1 - step } else { step };
            let at = (o * n + k) * inner;
            let (xr, yr) = (&xs[at..at + inner], &mut ys[at..at + inner]);
            for ((a, &v), y) in acc.iter_mut().zip(xr).zip(yr.iter_mut()) {
                if exclusive {
                    *y = out(*a);
                    *a = add(*a, v);
                } else {
                    *a = add(*a, v);
                    *y = out(*a);
                }
            }
        }
    }
}

fn cumsum_float<T: Element>(
    x: TensorView,
    y: &mut TensorViewMut,
    dims: (usize, usize, usize),
    exclusive: bool,
    reverse: bool,
) -> Result<()> {
    let (xs, ys) = (x.as_slice::<T>()?, y.as_mut_slice::<T>()?);
    scan(xs, ys, dims, exclusive, reverse, 0f64, |a, v| a + v.to_f64(), T::from_f64);
    Ok(())
}

fn cumsum_int<T: IntElement>(
    x: TensorView,
    y: &mut TensorViewMut,
    dims: (usize, usize, usize),
    exclusive: bool,
    reverse: bool,
) -> Result<()> {
    let (xs, ys) = (x.as_slice::<T>()?, y.as_mut_slice::<T>()?);
    scan(xs, ys, dims, exclusive, reverse, 0i128, |a, v| a.wrapping_add(v.to_i128()), T::from_i128);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn run(op: CumSum, x: &Tensor) -> Vec<f64> {
        let op: Op = op.into();
        op.eval_owned(&[Some(x)]).unwrap().remove(0).to_f64_vec()
    }

    #[test]
    fn cumsum_variants_1d() {
        let x = Tensor::from_vec(vec![4], vec![1f32, 2., 3., 4.]).unwrap();
        assert_eq!(run(CumSum::new(0, false, false), &x), vec![1., 3., 6., 10.]);
        assert_eq!(run(CumSum::new(0, true, false), &x), vec![0., 1., 3., 6.]);
        assert_eq!(run(CumSum::new(0, false, true), &x), vec![10., 9., 7., 4.]);
        assert_eq!(run(CumSum::new(0, true, true), &x), vec![9., 7., 4., 0.]);
    }

    #[test]
    fn cumsum_2d_axis0_ints() {
        let x = Tensor::from_vec(vec![2, 3], vec![1i32, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(run(CumSum::new(0, false, false), &x), vec![1., 2., 3., 5., 7., 9.]);
        assert_eq!(run(CumSum::new(1, false, false), &x), vec![1., 3., 6., 4., 9., 15.]);
    }
}
