//! Binary arithmetic with numpy-style broadcasting.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::util::{broadcast_index_map, broadcast_shapes, broadcast_strides};
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BinaryKind {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Binary {
    pub kind: BinaryKind,
}

impl Binary {
    pub fn new(kind: BinaryKind) -> Binary {
        Binary { kind }
    }
}

trait Arith: Element {
    fn add(self, b: Self) -> Self;
    fn sub(self, b: Self) -> Self;
    fn mul(self, b: Self) -> Self;
    fn div(self, b: Self) -> Self;
}

macro_rules! arith_float {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            fn add(self, b: Self) -> Self { self + b }
            fn sub(self, b: Self) -> Self { self - b }
            fn mul(self, b: Self) -> Self { self * b }
            fn div(self, b: Self) -> Self { self / b }
        }
    )*};
}
arith_float!(f32, f64, f16, bf16);

macro_rules! arith_int {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            fn add(self, b: Self) -> Self { self.wrapping_add(b) }
            fn sub(self, b: Self) -> Self { self.wrapping_sub(b) }
            fn mul(self, b: Self) -> Self { self.wrapping_mul(b) }
            // Integer division by zero is undefined in ONNX; return 0 rather than trap.
            fn div(self, b: Self) -> Self { if b == 0 { 0 } else { self.wrapping_div(b) } }
        }
    )*};
}
arith_int!(i8, i16, i32, i64, u8, u16, u32, u64);

fn run<T: Arith>(kind: BinaryKind, a: TensorView, b: TensorView, out: &mut TensorViewMut) -> Result<()> {
    let out_shape = out.shape.to_vec();
    let av = a.as_slice::<T>()?;
    let bv = b.as_slice::<T>()?;
    let o = out.as_mut_slice::<T>()?;
    let f: fn(T, T) -> T = match kind {
        BinaryKind::Add => T::add,
        BinaryKind::Sub => T::sub,
        BinaryKind::Mul => T::mul,
        BinaryKind::Div => T::div,
    };
    if a.shape == out_shape.as_slice() && b.shape == out_shape.as_slice() {
        for ((o, &x), &y) in o.iter_mut().zip(av).zip(bv) {
            *o = f(x, y);
        }
    } else if b.len() == 1 && a.shape == out_shape.as_slice() {
        let y = bv[0];
        for (o, &x) in o.iter_mut().zip(av) {
            *o = f(x, y);
        }
    } else {
        let ia = broadcast_index_map(&broadcast_strides(a.shape, &out_shape), &out_shape);
        let ib = broadcast_index_map(&broadcast_strides(b.shape, &out_shape), &out_shape);
        for ((o, &i), &j) in o.iter_mut().zip(&ia).zip(&ib) {
            *o = f(av[i], bv[j]);
        }
    }
    Ok(())
}

impl OpImpl for Binary {
    fn name(&self) -> &'static str {
        match self.kind {
            BinaryKind::Add => "Add",
            BinaryKind::Sub => "Sub",
            BinaryKind::Mul => "Mul",
            BinaryKind::Div => "Div",
        }
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let a = input(inputs, 0, self.name())?;
        let b = input(inputs, 1, self.name())?;
        ensure_op!(a.dtype == b.dtype, "{}: dtypes differ ({} and {})", self.name(), a.dtype, b.dtype);
        ensure_op!(a.dtype != DType::Bool, "{}: bool inputs are not supported", self.name());
        let shape = broadcast_shapes(&[&a.shape, &b.shape])?;
        Ok(vec![TensorType::new(a.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let a = input(inputs, 0, self.name())?;
        let b = input(inputs, 1, self.name())?;
        let out = &mut outputs[0];
        match a.dtype {
            DType::F32 => run::<f32>(self.kind, a, b, out),
            DType::F64 => run::<f64>(self.kind, a, b, out),
            DType::F16 => run::<f16>(self.kind, a, b, out),
            DType::BF16 => run::<bf16>(self.kind, a, b, out),
            DType::I8 => run::<i8>(self.kind, a, b, out),
            DType::I16 => run::<i16>(self.kind, a, b, out),
            DType::I32 => run::<i32>(self.kind, a, b, out),
            DType::I64 => run::<i64>(self.kind, a, b, out),
            DType::U8 => run::<u8>(self.kind, a, b, out),
            DType::U16 => run::<u16>(self.kind, a, b, out),
            DType::U32 => run::<u32>(self.kind, a, b, out),
            DType::U64 => run::<u64>(self.kind, a, b, out),
            DType::Bool => bail_op!("{}: bool inputs are not supported", self.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn add_broadcasts_rows() {
        let a = Tensor::from_vec(vec![2, 3], vec![1f32, 2., 3., 4., 5., 6.]).unwrap();
        let b = Tensor::from_vec(vec![3], vec![10f32, 20., 30.]).unwrap();
        let op: Op = Binary::new(BinaryKind::Add).into();
        let out = op.eval_owned(&[Some(&a), Some(&b)]).unwrap();
        assert_eq!(out[0].shape(), &[2, 3]);
        assert_eq!(out[0].as_slice::<f32>().unwrap(), &[11., 22., 33., 14., 25., 36.]);
    }

    #[test]
    fn mismatched_shapes_are_an_error() {
        let a = TensorType::new(DType::F32, vec![2, 3]);
        let b = TensorType::new(DType::F32, vec![2]);
        assert!(Binary::new(BinaryKind::Mul).infer(&[Some(&a), Some(&b)]).is_err());
    }
}
