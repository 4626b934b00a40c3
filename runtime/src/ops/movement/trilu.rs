//! Trilu: keeps the upper or lower triangle of the last two axes (with a
//! diagonal offset `k`) and zeroes the rest.

use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trilu {
    /// Keep `j - i >= k` (upper) or `j - i <= k` (lower).
    pub upper: bool,
    pub k: i64,
}

impl OpImpl for Trilu {
    fn name(&self) -> &'static str {
        "Trilu"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "Trilu")?;
        ensure_op!(x.shape.len() >= 2, "Trilu: expected rank >= 2, got {x}");
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "Trilu")?;
        let out = &mut outputs[0];
        out.bytes.copy_from_slice(x.bytes);
        let r = x.shape.len();
        let (n, m) = (x.shape[r - 2], x.shape[r - 1]);
        let esize = x.dtype.size();
        let row = m * esize;
        let mats: usize = x.shape[..r - 2].iter().product();
        for b in 0..mats {
            for i in 0..n {
                // The columns to zero in row i, as a half-open range.
                let edge = i as i64 + self.k;
                let (lo, hi) = if self.upper { (0, edge.clamp(0, m as i64)) } else { ((edge + 1).clamp(0, m as i64), m as i64) };
                let start = (b * n + i) * row;
                out.bytes[start + lo as usize * esize..start + hi.max(lo) as usize * esize].fill(0);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn run(upper: bool, k: i64) -> Vec<i32> {
        let x = Tensor::from_vec(vec![3, 3], (1..=9).collect::<Vec<i32>>()).unwrap();
        let op: Op = Trilu { upper, k }.into();
        op.eval_owned(&[Some(&x)]).unwrap()[0].as_slice::<i32>().unwrap().to_vec()
    }

    #[test]
    fn upper_and_lower() {
        assert_eq!(run(true, 0), vec![1, 2, 3, 0, 5, 6, 0, 0, 9]);
        assert_eq!(run(false, 0), vec![1, 0, 0, 4, 5, 0, 7, 8, 9]);
        assert_eq!(run(true, 1), vec![0, 2, 3, 0, 0, 6, 0, 0, 0]);
        assert_eq!(run(false, -1), vec![0, 0, 0, 4, 0, 0, 7, 8, 0]);
    }
}
