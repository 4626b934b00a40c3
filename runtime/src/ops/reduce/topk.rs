//! TopK: the `k` largest (or smallest) elements along one axis and their
//! i64 indices. Ties go to the lower index; NaN counts as the largest value.
//! Results are always sorted (ONNX leaves the order unspecified when
//! `sorted` is 0, so sorted output is valid for both).

use super::common::{numeric_dispatch, split_at_axis, TotalOrder};
use crate::dtype::DType;
use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopK {
    /// Normalized (non-negative) axis.
    pub axis: usize,
    pub k: usize,
    /// Largest elements first (else smallest first).
    pub largest: bool,
    pub sorted: bool,
}

impl TopK {
    pub fn new(axis: usize, k: usize, largest: bool, sorted: bool) -> TopK {
        TopK { axis, k, largest, sorted }
    }
}

impl OpImpl for TopK {
    fn name(&self) -> &'static str {
        "TopK"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.dtype != DType::Bool, "TopK: bool inputs are not supported");
        ensure_op!(self.axis < x.shape.len(), "TopK: axis {} out of range for rank {}", self.axis, x.shape.len());
        ensure_op!(self.k <= x.shape[self.axis], "TopK: k = {} exceeds the axis size {}", self.k, x.shape[self.axis]);
        let mut shape = x.shape.clone();
        shape[self.axis] = self.k;
        Ok(vec![TensorType::new(x.dtype, shape.clone()), TensorType::new(DType::I64, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(self.axis < x.shape.len() && self.k <= x.shape[self.axis], "TopK: axis or k out of range");
        ensure_op!(outputs.len() == 2, "TopK: expected two outputs");
        let dims = split_at_axis(x.shape, self.axis);
        let (values, indices) = outputs.split_at_mut(1);
        let (values, indices) = (&mut values[0], &mut indices[0]);
        let want = dims.0 * self.k * dims.2;
        ensure_op!(values.len() == want && indices.len() == want, "TopK: outputs have the wrong size");
        numeric_dispatch!(x.dtype, "TopK", topk(x, values, indices, dims, self.k, self.largest))
    }
}

fn topk<T: TotalOrder>(
    x: TensorView,
    values: &mut TensorViewMut,
    indices: &mut TensorViewMut,
    (outer, n, inner): (usize, usize, usize),
    k: usize,
    largest: bool,
) -> crate::error::Result<()> {
    let xs = x.as_slice::<T>()?;
    let vs = values.as_mut_slice::<T>()?;
    let is = indices.as_mut_slice::<i64>()?;
    if k == 0 {
        return Ok(());
    }
    // Best first; ties by ascending index. A total order, so sorting is safe.
    let order = |a: &(T, usize), b: &(T, usize)| -> Ordering {
        let by_value = if largest { b.0.total_cmp(&a.0) } else { a.0.total_cmp(&b.0) };
        by_value.then(a.1.cmp(&b.1))
    };
    let mut slice: Vec<(T, usize)> = Vec::with_capacity(n);
    for o in 0..outer {
        for i in 0..inner {
            slice.clear();
            slice.extend((0..n).map(|j| (xs[(o * n + j) * inner + i], j)));
            if k < n {
                slice.select_nth_unstable_by(k - 1, order);
            }
            slice[..k].sort_unstable_by(order);
            for (j, &(v, idx)) in slice[..k].iter().enumerate() {
                let at = (o * k + j) * inner + i;
                vs[at] = v;
                is[at] = idx as i64;
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

    fn run(op: TopK, x: &Tensor) -> (Vec<f64>, Vec<i64>) {
        let op: Op = op.into();
        let out = op.eval_owned(&[Some(x)]).unwrap();
        (out[0].to_f64_vec(), out[1].as_slice::<i64>().unwrap().to_vec())
    }

    #[test]
    fn largest_with_ties_prefers_lower_index() {
        let x = Tensor::from_vec(vec![5], vec![3f32, 7., 1., 7., 5.]).unwrap();
        assert_eq!(run(TopK::new(0, 3, true, true), &x), (vec![7., 7., 5.], vec![1, 3, 4]));
    }

    #[test]
    fn smallest_along_axis0() {
        let x = Tensor::from_vec(vec![3, 2], vec![4i32, 0, 2, 9, 3, -1]).unwrap();
        assert_eq!(run(TopK::new(0, 2, false, true), &x), (vec![2., -1., 3., 0.], vec![1, 2, 2, 0]));
    }
}
