//! NonZero: the indices of the non-zero elements, `[rank, count]`, in
//! row-major order. How many depends on the data: `infer` gives the room
//! for every element, `eval_sized` the actual count.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NonZero;

impl OpImpl for NonZero {
    fn name(&self) -> &'static str {
        "NonZero"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "NonZero")?;
        Ok(vec![TensorType::new(DType::I64, vec![x.shape.len(), x.len()])])
    }

    fn data_dependent(&self) -> bool {
        true
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        self.eval_sized(inputs, outputs).map(|_| ())
    }

    fn eval_sized(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<Vec<Vec<usize>>> {
        let x = input(inputs, 0, "NonZero")?;
        let esize = x.dtype.size();
        // An element is zero when all its bytes are, but for floats' -0.0.
        let zero = |i: usize| -> bool {
            let b = &x.bytes[i * esize..(i + 1) * esize];
            match x.dtype {
                DType::F32 => f32::from_le_bytes(b.try_into().expect("4 bytes")) == 0.0,
                DType::F64 => f64::from_le_bytes(b.try_into().expect("8 bytes")) == 0.0,
                DType::F16 | DType::BF16 => b[0] == 0 && b[1] & 0x7f == 0,
                _ => b.iter().all(|&v| v == 0),
            }
        };
        let n: usize = x.shape.iter().product();
        let hits: Vec<usize> = (0..n).filter(|&i| !zero(i)).collect();
        let strides = crate::ops::util::strides(x.shape);
        let rank = x.shape.len();
        let out = outputs[0].as_mut_slice::<i64>()?;
        for (k, &flat) in hits.iter().enumerate() {
            for d in 0..rank {
                out[d * hits.len() + k] = ((flat / strides[d]) % x.shape[d]) as i64;
            }
        }
        Ok(vec![vec![rank, hits.len()]])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn indices_of_the_non_zero_elements() {
        let x = Tensor::from_vec(vec![2, 3], vec![0f32, 1.0, -0.0, 2.0, 0.0, f32::NAN]).unwrap();
        let y = Op::from(NonZero).eval_owned(&[Some(&x)]).unwrap().remove(0);
        assert_eq!(y.shape(), &[2, 3]);
        assert_eq!(y.as_slice::<i64>().unwrap(), &[0, 1, 1, 1, 0, 2]);
        let none = Tensor::from_vec(vec![4], vec![0i32; 4]).unwrap();
        assert_eq!(Op::from(NonZero).eval_owned(&[Some(&none)]).unwrap()[0].shape(), &[1, 0]);
    }
}
