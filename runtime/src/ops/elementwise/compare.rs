//! Comparisons with numpy-style broadcasting; the output is boolean.
//! Comparisons with NaN are false (so `Equal(NaN, NaN)` is false).

use super::broadcast::map2;
use crate::dtype::DType;
use crate::ensure_op;
use crate::error::{Error, Result};
use crate::ops::util::broadcast_shapes;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareKind {
    Equal,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Compare {
    pub kind: CompareKind,
}

impl Compare {
    pub fn new(kind: CompareKind) -> Compare {
        Compare { kind }
    }
}

fn run<T: Element + Copy>(kind: CompareKind, a: TensorView, b: TensorView, out: &mut TensorViewMut) -> Result<()> {
    let shape = out.shape;
    let x = (a.as_slice::<T>()?, a.shape);
    let y = (b.as_slice::<T>()?, b.shape);
    let o = out.as_mut_slice::<u8>()?;
    match kind {
        CompareKind::Equal => map2(x, y, o, shape, |p, q| u8::from(p == q)),
        CompareKind::Less => map2(x, y, o, shape, |p, q| u8::from(p < q)),
        CompareKind::LessOrEqual => map2(x, y, o, shape, |p, q| u8::from(p <= q)),
        CompareKind::Greater => map2(x, y, o, shape, |p, q| u8::from(p > q)),
        CompareKind::GreaterOrEqual => map2(x, y, o, shape, |p, q| u8::from(p >= q)),
    }
}

impl OpImpl for Compare {
    fn name(&self) -> &'static str {
        match self.kind {
            CompareKind::Equal => "Equal",
            CompareKind::Less => "Less",
            CompareKind::LessOrEqual => "LessOrEqual",
            CompareKind::Greater => "Greater",
            CompareKind::GreaterOrEqual => "GreaterOrEqual",
        }
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let a = input(inputs, 0, self.name())?;
        let b = input(inputs, 1, self.name())?;
        ensure_op!(a.dtype == b.dtype, "{}: dtypes differ ({} and {})", self.name(), a.dtype, b.dtype);
        let shape = broadcast_shapes(&[&a.shape, &b.shape])?;
        Ok(vec![TensorType::new(DType::Bool, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let a = input(inputs, 0, self.name())?;
        let b = input(inputs, 1, self.name())?;
        let out = outputs.first_mut().ok_or_else(|| Error::op(format!("{}: missing output", self.name())))?;
        ensure_op!(a.dtype == b.dtype, "{}: dtypes differ ({} and {})", self.name(), a.dtype, b.dtype);
        ensure_op!(out.dtype == DType::Bool, "{}: output must be bool, not {}", self.name(), out.dtype);
        let k = self.kind;
        match a.dtype {
            DType::F32 => run::<f32>(k, a, b, out),
            DType::F64 => run::<f64>(k, a, b, out),
            DType::F16 => run::<f16>(k, a, b, out),
            DType::BF16 => run::<bf16>(k, a, b, out),
            DType::I8 => run::<i8>(k, a, b, out),
            DType::I16 => run::<i16>(k, a, b, out),
            DType::I32 => run::<i32>(k, a, b, out),
            DType::I64 => run::<i64>(k, a, b, out),
            DType::U8 | DType::Bool => run::<u8>(k, a, b, out),
            DType::U16 => run::<u16>(k, a, b, out),
            DType::U32 => run::<u32>(k, a, b, out),
            DType::U64 => run::<u64>(k, a, b, out),
            d => crate::bail_op!("{}: {d} inputs are not supported", self.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn less_broadcasts_and_nan_is_unordered() {
        let a = Tensor::from_vec(vec![2, 2], vec![1f32, 5., f32::NAN, 2.]).unwrap();
        let b = Tensor::from_vec(vec![2], vec![2f32, 2.]).unwrap();
        let op: Op = Compare::new(CompareKind::Less).into();
        let out = op.eval_owned(&[Some(&a), Some(&b)]).unwrap().remove(0);
        assert_eq!(out.dtype(), DType::Bool);
        assert_eq!(out.as_slice::<u8>().unwrap(), &[1, 0, 0, 0]);
        let op: Op = Compare::new(CompareKind::GreaterOrEqual).into();
        let out = op.eval_owned(&[Some(&a), Some(&b)]).unwrap().remove(0);
        assert_eq!(out.as_slice::<u8>().unwrap(), &[0, 1, 0, 1]);
    }

    #[test]
    fn equal_on_integers_and_bools() {
        let a = Tensor::from_vec(vec![3], vec![1i64, 2, 3]).unwrap();
        let b = Tensor::scalar(2i64);
        let op: Op = Compare::new(CompareKind::Equal).into();
        let out = op.eval_owned(&[Some(&a), Some(&b)]).unwrap().remove(0);
        assert_eq!(out.as_slice::<u8>().unwrap(), &[0, 1, 0]);
        let p = Tensor::from_bools(vec![2], &[true, false]).unwrap();
        let out = op.eval_owned(&[Some(&p), Some(&p)]).unwrap().remove(0);
        assert_eq!(out.as_slice::<u8>().unwrap(), &[1, 1]);
    }
}
