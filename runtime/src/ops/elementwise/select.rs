//! `Where`: picks from `x` where the condition holds and from `y` elsewhere,
//! all three broadcast numpy-style.

use super::broadcast::map3;
use crate::dtype::DType;
use crate::ensure_op;
use crate::error::{Error, Result};
use crate::ops::util::broadcast_shapes;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Where;

fn run<T: Element + Copy>(c: TensorView, x: TensorView, y: TensorView, out: &mut TensorViewMut) -> Result<()> {
    let shape = out.shape;
    let cond = (c.as_slice::<u8>()?, c.shape);
    let xs = (x.as_slice::<T>()?, x.shape);
    let ys = (y.as_slice::<T>()?, y.shape);
    map3(cond, xs, ys, out.as_mut_slice::<T>()?, shape, |c, a, b| if c != 0 { a } else { b })
}

impl OpImpl for Where {
    fn name(&self) -> &'static str {
        "Where"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let c = input(inputs, 0, self.name())?;
        let x = input(inputs, 1, self.name())?;
        let y = input(inputs, 2, self.name())?;
        ensure_op!(c.dtype == DType::Bool, "Where: the condition must be bool, not {}", c.dtype);
        ensure_op!(x.dtype == y.dtype, "Where: dtypes differ ({} and {})", x.dtype, y.dtype);
        let shape = broadcast_shapes(&[&c.shape, &x.shape, &y.shape])?;
        Ok(vec![TensorType::new(x.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let c = input(inputs, 0, self.name())?;
        let x = input(inputs, 1, self.name())?;
        let y = input(inputs, 2, self.name())?;
        let out = outputs.first_mut().ok_or_else(|| Error::op("Where: missing output"))?;
        ensure_op!(c.dtype == DType::Bool, "Where: the condition must be bool, not {}", c.dtype);
        ensure_op!(
            x.dtype == y.dtype && x.dtype == out.dtype,
            "Where: dtypes differ ({}, {} -> {})",
            x.dtype,
            y.dtype,
            out.dtype
        );
        // Only the element size matters for a selection.
        match x.dtype {
            DType::F32 => run::<f32>(c, x, y, out),
            DType::F64 => run::<f64>(c, x, y, out),
            DType::F16 => run::<f16>(c, x, y, out),
            DType::BF16 => run::<bf16>(c, x, y, out),
            DType::I8 => run::<i8>(c, x, y, out),
            DType::I16 => run::<i16>(c, x, y, out),
            DType::I32 => run::<i32>(c, x, y, out),
            DType::I64 => run::<i64>(c, x, y, out),
            DType::U8 | DType::Bool | DType::U4 => run::<u8>(c, x, y, out),
            DType::I4 => run::<i8>(c, x, y, out),
            DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ => run::<u8>(c, x, y, out),
            DType::U16 => run::<u16>(c, x, y, out),
            DType::U32 => run::<u32>(c, x, y, out),
            DType::U64 => run::<u64>(c, x, y, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn selects_with_broadcasting() {
        let c = Tensor::from_bools(vec![2, 1], &[true, false]).unwrap();
        let x = Tensor::from_vec(vec![2], vec![1i64, 2]).unwrap();
        let y = Tensor::scalar(-1i64);
        let op: Op = Where.into();
        let out = op.eval_owned(&[Some(&c), Some(&x), Some(&y)]).unwrap().remove(0);
        assert_eq!(out.shape(), &[2, 2]);
        assert_eq!(out.as_slice::<i64>().unwrap(), &[1, 2, -1, -1]);
    }

    #[test]
    fn condition_must_be_bool() {
        let c = TensorType::new(DType::U8, vec![2]);
        let x = TensorType::new(DType::F32, vec![2]);
        assert!(Where.infer(&[Some(&c), Some(&x), Some(&x)]).is_err());
    }
}
