//! ReverseSequence: reverses the first `seq_lens[b]` steps of every batch
//! entry `b` along the time axis; the remaining steps are copied unchanged.

use crate::error::Result;
use crate::ops::movement::copy::index_values;
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReverseSequence {
    /// 0 or 1, and different from `time_axis`.
    pub batch_axis: usize,
    pub time_axis: usize,
}

impl OpImpl for ReverseSequence {
    fn name(&self) -> &'static str {
        "ReverseSequence"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "ReverseSequence")?;
        let lens = input(inputs, 1, "ReverseSequence")?;
        ensure_op!(x.shape.len() >= 2, "ReverseSequence: expected rank >= 2, got {x}");
        ensure_op!(
            self.batch_axis <= 1 && self.time_axis <= 1 && self.batch_axis != self.time_axis,
            "ReverseSequence: batch_axis and time_axis must be 0 and 1 in some order"
        );
        ensure_op!(
            lens.shape == [x.shape[self.batch_axis]],
            "ReverseSequence: sequence_lens {lens} does not match the batch of {x}"
        );
        ensure_op!(
            matches!(lens.dtype, crate::DType::I32 | crate::DType::I64),
            "ReverseSequence: sequence_lens must be i32 or i64"
        );
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "ReverseSequence")?;
        let lens = index_values(&input(inputs, 1, "ReverseSequence")?, "ReverseSequence")?;
        let out = &mut outputs[0];
        let (batch, time) = (x.shape[self.batch_axis], x.shape[self.time_axis]);
        let run = x.shape[2..].iter().product::<usize>() * x.dtype.size();
        // Byte offset of step t of batch entry b.
        let at = |b: usize, t: usize| {
            if self.batch_axis == 0 {
                (b * time + t) * run
            } else {
                (t * batch + b) * run
            }
        };
        for (b, &len) in lens.iter().enumerate() {
            if len < 0 || len as usize > time {
                bail_op!("ReverseSequence: sequence length {len} is out of range 0..={time}");
            }
            let len = len as usize;
            for t in 0..time {
                let src = if t < len { len - 1 - t } else { t };
                let (s, d) = (at(b, src), at(b, t));
                out.bytes[d..d + run].copy_from_slice(&x.bytes[s..s + run]);
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

    #[test]
    fn reverses_prefixes_along_time_axis_0() {
        // [time=3, batch=2]
        let x = Tensor::from_vec(vec![3, 2], vec![0f32, 10., 1., 11., 2., 12.]).unwrap();
        let lens = Tensor::from_vec(vec![2], vec![3i64, 2]).unwrap();
        let op: Op = ReverseSequence { batch_axis: 1, time_axis: 0 }.into();
        let y = op.eval_owned(&[Some(&x), Some(&lens)]).unwrap();
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[2., 11., 1., 10., 0., 12.]);
    }

    #[test]
    fn rejects_too_long_sequences() {
        let x = Tensor::from_vec(vec![1, 2], vec![0f32, 1.]).unwrap();
        let lens = Tensor::from_vec(vec![1], vec![3i64]).unwrap();
        let op: Op = ReverseSequence { batch_axis: 0, time_axis: 1 }.into();
        assert!(op.eval_owned(&[Some(&x), Some(&lens)]).is_err());
    }
}
