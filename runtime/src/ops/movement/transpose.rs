//! Transpose: permutes the axes of a tensor.

use crate::ensure_op;
use crate::error::Result;
use crate::ops::movement::copy::{istrides, strided_copy, Strided};
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Transpose {
    /// Output axis `i` is input axis `perm[i]`.
    pub perm: Vec<usize>,
}

impl OpImpl for Transpose {
    fn name(&self) -> &'static str {
        "Transpose"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "Transpose")?;
        let rank = x.shape.len();
        ensure_op!(self.perm.len() == rank, "Transpose: perm {:?} does not match rank {rank}", self.perm);
        let mut seen = vec![false; rank];
        for &p in &self.perm {
            ensure_op!(p < rank && !seen[p], "Transpose: perm {:?} is not a permutation", self.perm);
            seen[p] = true;
        }
        let shape = self.perm.iter().map(|&p| x.shape[p]).collect::<Vec<_>>();
        Ok(vec![TensorType::new(x.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "Transpose")?;
        let in_strides = istrides(x.shape);
        let out = &mut outputs[0];
        let plan = Strided {
            shape: out.shape.to_vec(),
            src_strides: self.perm.iter().map(|&p| in_strides[p]).collect(),
            dst_strides: istrides(out.shape),
            src_off: 0,
            dst_off: 0,
        };
        strided_copy(x.bytes, out.bytes, x.dtype.size(), &plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn swaps_last_two_axes() {
        let x = Tensor::from_vec(vec![1, 2, 3], vec![1f32, 2., 3., 4., 5., 6.]).unwrap();
        let op: Op = Transpose { perm: vec![0, 2, 1] }.into();
        let y = op.eval_owned(&[Some(&x)]).unwrap();
        assert_eq!(y[0].shape(), &[1, 3, 2]);
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[1., 4., 2., 5., 3., 6.]);
    }

    #[test]
    fn keeps_inner_runs_contiguous() {
        // [2, 2, 2] with perm [1, 0, 2]: rows of 2 move as blocks.
        let x = Tensor::from_vec(vec![2, 2, 2], (0..8).map(|v| v as i64).collect()).unwrap();
        let op: Op = Transpose { perm: vec![1, 0, 2] }.into();
        let y = op.eval_owned(&[Some(&x)]).unwrap();
        assert_eq!(y[0].as_slice::<i64>().unwrap(), &[0, 1, 4, 5, 2, 3, 6, 7]);
    }

    #[test]
    fn rejects_bad_perm() {
        let op: Op = Transpose { perm: vec![0, 0] }.into();
        assert!(op.infer(&[Some(&TensorType::new(crate::DType::F32, vec![2, 2]))]).is_err());
    }
}
