//! Concat (joins tensors along one axis) and Split (its inverse).

use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Concat {
    /// Normalized (non-negative) axis.
    pub axis: usize,
}

/// Number of elements before and after `axis`.
fn outer_inner(shape: &[usize], axis: usize) -> (usize, usize) {
    (shape[..axis].iter().product(), shape[axis + 1..].iter().product())
}

impl OpImpl for Concat {
    fn name(&self) -> &'static str {
        "Concat"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let first = input(inputs, 0, "Concat")?;
        let rank = first.shape.len();
        ensure_op!(self.axis < rank, "Concat: axis {} out of range for rank {rank}", self.axis);
        let mut shape = first.shape.clone();
        shape[self.axis] = 0;
        for (i, t) in inputs.iter().enumerate() {
            let Some(t) = t else { bail_op!("Concat: missing input {i}") };
            ensure_op!(t.dtype == first.dtype, "Concat: input {i} is {}, input 0 is {}", t.dtype, first.dtype);
            ensure_op!(t.shape.len() == rank, "Concat: input {i} has rank {}, expected {rank}", t.shape.len());
            for d in 0..rank {
                ensure_op!(
                    d == self.axis || t.shape[d] == first.shape[d],
                    "Concat: input {i} {t} does not match input 0 {first} off axis {}",
                    self.axis
                );
            }
            shape[self.axis] += t.shape[self.axis];
        }
        Ok(vec![TensorType::new(first.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let out = &mut outputs[0];
        let esize = out.dtype.size();
        let (outer, inner) = outer_inner(out.shape, self.axis);
        let out_row = out.shape[self.axis] * inner * esize;
        let mut col = 0;
        for (i, x) in inputs.iter().enumerate() {
            let x = x.ok_or_else(|| crate::Error::op(format!("Concat: missing input {i}")))?;
            let run = x.shape[self.axis] * inner * esize;
            if run == 0 {
                continue;
            }
            for o in 0..outer {
                let d = o * out_row + col;
                out.bytes[d..d + run].copy_from_slice(&x.bytes[o * run..(o + 1) * run]);
            }
            col += run;
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Split {
    /// Normalized (non-negative) axis.
    pub axis: usize,
    /// Size of each output along `axis`; they sum to the input's dimension.
    pub sizes: Vec<usize>,
}

impl OpImpl for Split {
    fn name(&self) -> &'static str {
        "Split"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "Split")?;
        ensure_op!(self.axis < x.shape.len(), "Split: axis {} out of range for {x}", self.axis);
        let total: usize = self.sizes.iter().sum();
        ensure_op!(total == x.shape[self.axis], "Split: sizes {:?} do not add up to dimension {} of {x}", self.sizes, self.axis);
        Ok(self
            .sizes
            .iter()
            .map(|&s| {
                let mut shape = x.shape.clone();
                shape[self.axis] = s;
                TensorType::new(x.dtype, shape)
            })
            .collect())
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "Split")?;
        let esize = x.dtype.size();
        let (outer, inner) = outer_inner(x.shape, self.axis);
        let in_row = x.shape[self.axis] * inner * esize;
        let mut col = 0;
        for out in outputs.iter_mut() {
            let run = out.shape[self.axis] * inner * esize;
            if run == 0 {
                continue;
            }
            for o in 0..outer {
                let s = o * in_row + col;
                out.bytes[o * run..(o + 1) * run].copy_from_slice(&x.bytes[s..s + run]);
            }
            col += run;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn concats_along_last_axis() {
        let a = Tensor::from_vec(vec![2, 1], vec![1f32, 2.]).unwrap();
        let b = Tensor::from_vec(vec![2, 2], vec![3f32, 4., 5., 6.]).unwrap();
        let op: Op = Concat { axis: 1 }.into();
        let y = op.eval_owned(&[Some(&a), Some(&b)]).unwrap();
        assert_eq!(y[0].shape(), &[2, 3]);
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[1., 3., 4., 2., 5., 6.]);
    }

    #[test]
    fn concat_rejects_mismatched_shapes() {
        let op: Op = Concat { axis: 0 }.into();
        let a = TensorType::new(crate::DType::F32, vec![1, 2]);
        let b = TensorType::new(crate::DType::F32, vec![1, 3]);
        assert!(op.infer(&[Some(&a), Some(&b)]).is_err());
    }

    #[test]
    fn splits_unevenly() {
        let x = Tensor::from_vec(vec![2, 3], (0..6).map(|v| v as i64).collect()).unwrap();
        let op: Op = Split { axis: 1, sizes: vec![2, 1] }.into();
        let y = op.eval_owned(&[Some(&x)]).unwrap();
        assert_eq!(y[0].as_slice::<i64>().unwrap(), &[0, 1, 3, 4]);
        assert_eq!(y[1].as_slice::<i64>().unwrap(), &[2, 5]);
    }
}
