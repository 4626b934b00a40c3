//! ArgMax and ArgMin along one axis, with i64 indices.

use super::common::{is_nan, numeric_dispatch, split_at_axis};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArgKind {
    Max,
    Min,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArgMinMax {
    pub kind: ArgKind,
    /// Normalized (non-negative) axis.
    pub axis: usize,
    pub keepdims: bool,
    /// On ties, return the last index instead of the first.
    pub select_last_index: bool,
}

impl ArgMinMax {
    pub fn new(kind: ArgKind, axis: usize, keepdims: bool, select_last_index: bool) -> ArgMinMax {
        ArgMinMax { kind, axis, keepdims, select_last_index }
    }
}

impl OpImpl for ArgMinMax {
    fn name(&self) -> &'static str {
        match self.kind {
            ArgKind::Max => "ArgMax",
            ArgKind::Min => "ArgMin",
        }
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.dtype != DType::Bool, "{}: bool inputs are not supported", self.name());
        ensure_op!(self.axis < x.shape.len(), "{}: axis {} out of range for rank {}", self.name(), self.axis, x.shape.len());
        let mut shape = x.shape.clone();
        let n = shape[self.axis];
        if self.keepdims {
            shape[self.axis] = 1;
        } else {
            shape.remove(self.axis);
        }
        let out = TensorType::new(DType::I64, shape);
        ensure_op!(n > 0 || out.is_empty(), "{}: cannot reduce an empty axis", self.name());
        Ok(vec![out])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(self.axis < x.shape.len(), "{}: axis out of range", self.name());
        let dims = split_at_axis(x.shape, self.axis);
        let ys = outputs[0].as_mut_slice::<i64>()?;
        ensure_op!(ys.len() == dims.0 * dims.2, "{}: output has the wrong size", self.name());
        let max = self.kind == ArgKind::Max;
        numeric_dispatch!(x.dtype, self.name(), arg(x, ys, dims, max, self.select_last_index))
    }
}

/// Whether `v` should replace the current best `best` (NaN wins and stays,
/// like numpy).
fn better<T: Element>(v: T, best: T, max: bool, last: bool) -> bool {
    if is_nan(best) {
        return false;
    }
    if is_nan(v) {
        return true;
    }
    let strictly = if max { v > best } else { v < best };
    strictly || (last && v == best)
}

fn arg<T: Element>(x: TensorView, ys: &mut [i64], (outer, n, inner): (usize, usize, usize), max: bool, last: bool) -> Result<()> {
    let xs = x.as_slice::<T>()?;
    if ys.is_empty() {
        return Ok(());
    }
    if n == 0 {
        bail_op!("cannot reduce an empty axis");
    }
    // Best values and indices for one outer slice, updated row by row so the
    // input is read contiguously.
    let mut best: Vec<T> = Vec::with_capacity(inner);
    for o in 0..outer {
        let slice = &xs[o * n * inner..(o + 1) * n * inner];
        let idx = &mut ys[o * inner..(o + 1) * inner];
        best.clear();
        best.extend_from_slice(&slice[..inner]);
        idx.fill(0);
        for k in 1..n {
            let row = &slice[k * inner..(k + 1) * inner];
            for ((b, i), &v) in best.iter_mut().zip(idx.iter_mut()).zip(row) {
                if better(v, *b, max, last) {
                    *b = v;
                    *i = k as i64;
                }
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

    fn run(op: ArgMinMax, x: &Tensor) -> Tensor {
        let op: Op = op.into();
        op.eval_owned(&[Some(x)]).unwrap().remove(0)
    }

    #[test]
    fn argmax_rows_and_columns() {
        let x = Tensor::from_vec(vec![2, 3], vec![1f32, 9., 3., 7., 2., 7.]).unwrap();
        let y = run(ArgMinMax::new(ArgKind::Max, 1, false, false), &x);
        assert_eq!(y.as_slice::<i64>().unwrap(), &[1, 0]);
        let y = run(ArgMinMax::new(ArgKind::Max, 1, true, true), &x);
        assert_eq!(y.shape(), &[2, 1]);
        assert_eq!(y.as_slice::<i64>().unwrap(), &[1, 2]);
        let y = run(ArgMinMax::new(ArgKind::Min, 0, false, false), &x);
        assert_eq!(y.as_slice::<i64>().unwrap(), &[0, 1, 0]);
    }

    #[test]
    fn argmin_integers_select_last() {
        let x = Tensor::from_vec(vec![4], vec![3i64, 1, 5, 1]).unwrap();
        let y = run(ArgMinMax::new(ArgKind::Min, 0, false, true), &x);
        assert_eq!(y.shape(), &[] as &[usize]);
        assert_eq!(y.as_slice::<i64>().unwrap(), &[3]);
    }
}
