//! Negations: logical `Not` of booleans and `BitwiseNot` of integers.

use super::broadcast::map1;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

/// Logical negation of a boolean tensor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Not;

/// Flips every bit of an integer tensor.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BitwiseNot;

fn output<'a, 'b>(outputs: &'a mut [TensorViewMut<'b>], name: &str) -> Result<&'a mut TensorViewMut<'b>> {
    outputs.first_mut().ok_or_else(|| Error::op(format!("{name}: missing output")))
}

impl OpImpl for Not {
    fn name(&self) -> &'static str {
        "Not"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.dtype == DType::Bool, "Not: {} inputs are not supported", x.dtype);
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.dtype == DType::Bool, "Not: {} inputs are not supported", x.dtype);
        let out = output(outputs, self.name())?;
        map1(x.as_slice::<u8>()?, out.as_mut_slice::<u8>()?, |v| u8::from(v == 0))
    }
}

fn flip<T: Element + std::ops::Not<Output = T>>(x: TensorView, out: &mut TensorViewMut) -> Result<()> {
    map1(x.as_slice::<T>()?, out.as_mut_slice::<T>()?, |v| !v)
}

impl OpImpl for BitwiseNot {
    fn name(&self) -> &'static str {
        "BitwiseNot"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.dtype.is_int(), "BitwiseNot: {} inputs are not supported", x.dtype);
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        let out = output(outputs, self.name())?;
        match x.dtype {
            DType::I8 => flip::<i8>(x, out),
            DType::I16 => flip::<i16>(x, out),
            DType::I32 => flip::<i32>(x, out),
            DType::I64 => flip::<i64>(x, out),
            DType::U8 => flip::<u8>(x, out),
            DType::U16 => flip::<u16>(x, out),
            DType::U32 => flip::<u32>(x, out),
            DType::U64 => flip::<u64>(x, out),
            d => bail_op!("BitwiseNot: {d} inputs are not supported"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn not_flips_booleans() {
        let x = Tensor::from_bools(vec![3], &[true, false, true]).unwrap();
        let op: Op = Not.into();
        let out = op.eval_owned(&[Some(&x)]).unwrap().remove(0);
        assert_eq!(out.dtype(), DType::Bool);
        assert_eq!(out.as_slice::<u8>().unwrap(), &[0, 1, 0]);
    }

    #[test]
    fn bitwise_not_flips_bits() {
        let x = Tensor::from_vec(vec![2], vec![0u8, 0x0f]).unwrap();
        let op: Op = BitwiseNot.into();
        assert_eq!(op.eval_owned(&[Some(&x)]).unwrap()[0].as_slice::<u8>().unwrap(), &[0xff, 0xf0]);
        let x = Tensor::from_vec(vec![1], vec![5i32]).unwrap();
        assert_eq!(op.eval_owned(&[Some(&x)]).unwrap()[0].as_slice::<i32>().unwrap(), &[-6]);
        let b = TensorType::new(DType::Bool, vec![1]);
        assert!(BitwiseNot.infer(&[Some(&b)]).is_err());
    }
}
