//! OneHot: expands integer (or integral float) indices into one-hot vectors
//! along a new axis. Indices in `[-depth, depth)` set one position (negative
//! ones count from the end); any other index gives an all-`off` vector.

use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OneHot {
    pub depth: usize,
    /// Position of the new axis in the output (normalized, `0..=rank`).
    pub axis: usize,
}

impl OpImpl for OneHot {
    fn name(&self) -> &'static str {
        "OneHot"
    }

    /// Inputs: indices, values (`[off, on]`).
    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let idx = input(inputs, 0, "OneHot")?;
        let values = input(inputs, 1, "OneHot")?;
        ensure_op!(values.checked_len() == Some(2), "OneHot: values must hold [off, on], got {values}");
        ensure_op!(idx.dtype != crate::DType::Bool, "OneHot: bool indices are not supported");
        ensure_op!(self.axis <= idx.shape.len(), "OneHot: axis {} out of range for {idx}", self.axis);
        let mut shape = idx.shape.clone();
        shape.insert(self.axis, self.depth);
        Ok(vec![TensorType::new(values.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let idx = input(inputs, 0, "OneHot")?;
        let values = input(inputs, 1, "OneHot")?;
        let esize = values.dtype.size();
        let (off, on) = (&values.bytes[..esize], &values.bytes[esize..2 * esize]);
        let out = &mut outputs[0];
        for chunk in out.bytes.chunks_exact_mut(esize) {
            chunk.copy_from_slice(off);
        }
        let inner: usize = idx.shape[self.axis..].iter().product();
        let depth = self.depth as i64;
        for (k, v) in idx.to_f64_vec().into_iter().enumerate() {
            // ONNX casts float indices to integers.
            let mut i = v.trunc() as i64;
            if i < 0 {
                i += depth;
            }
            if i < 0 || i >= depth {
                continue;
            }
            let (o, n) = (k / inner, k % inner);
            let d = ((o * self.depth + i as usize) * inner + n) * esize;
            out.bytes[d..d + esize].copy_from_slice(on);
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
    fn one_hot_last_axis_with_negative_and_out_of_range() {
        let idx = Tensor::from_vec(vec![3], vec![0i64, -1, 5]).unwrap();
        let vals = Tensor::from_vec(vec![2], vec![0f32, 1.]).unwrap();
        let op: Op = OneHot { depth: 3, axis: 1 }.into();
        let y = op.eval_owned(&[Some(&idx), Some(&vals)]).unwrap();
        assert_eq!(y[0].shape(), &[3, 3]);
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[1., 0., 0., 0., 0., 1., 0., 0., 0.]);
    }

    #[test]
    fn one_hot_first_axis() {
        let idx = Tensor::from_vec(vec![2], vec![1i32, 0]).unwrap();
        let vals = Tensor::from_vec(vec![2], vec![2i64, 7]).unwrap();
        let op: Op = OneHot { depth: 2, axis: 0 }.into();
        let y = op.eval_owned(&[Some(&idx), Some(&vals)]).unwrap();
        assert_eq!(y[0].as_slice::<i64>().unwrap(), &[2, 7, 7, 2]);
    }
}
