//! `Pow`: base and exponent broadcast numpy-style; the exponent may have any
//! numeric dtype and the output has the base's dtype (ONNX Pow-12 and later).
//! Float bases compute in their float type; integer bases raised to integer
//! exponents use exact wrapping integer powers; integer bases raised to float
//! exponents compute in f64 and truncate, as numpy's `astype` does.

use super::broadcast::map2;
use super::float::Float;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::util::broadcast_shapes;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pow;

/// Integer powers with wrapping multiplication.
trait IntPow: Element + Copy {
    fn ipow(self, e: i64) -> Self;
    fn from_f64_trunc(v: f64) -> Self;
}

macro_rules! int_pow {
    ($($t:ty),*) => {$(
        impl IntPow for $t {
            #[allow(unused_comparisons)]
            fn ipow(self, e: i64) -> Self {
                if e < 0 {
                    // 1 / b^n truncated toward zero: only 1 and -1 survive.
                    return if self == 1 {
                        1
                    } else if self < 0 && self.wrapping_add(1) == 0 {
                        if e % 2 == 0 { 1 } else { self }
                    } else {
                        0
                    };
                }
                let (mut base, mut e, mut acc): (Self, u64, Self) = (self, e as u64, 1);
                while e > 0 {
                    if e & 1 == 1 {
                        acc = acc.wrapping_mul(base);
                    }
                    base = base.wrapping_mul(base);
                    e >>= 1;
                }
                acc
            }
            fn from_f64_trunc(v: f64) -> Self {
                v as $t
            }
        }
    )*};
}
int_pow!(i8, i16, i32, i64, u8, u16, u32, u64);

/// Runs `$body` with `$e` the Rust type of exponent dtype `$dtype`.
macro_rules! with_exponent {
    ($dtype:expr, $e:ident => $body:expr) => {
        match $dtype {
            DType::F32 => {
                type $e = f32;
                $body
            }
            DType::F64 => {
                type $e = f64;
                $body
            }
            DType::F16 => {
                type $e = f16;
                $body
            }
            DType::BF16 => {
                type $e = bf16;
                $body
            }
            DType::I8 => {
                type $e = i8;
                $body
            }
            DType::I16 => {
                type $e = i16;
                $body
            }
            DType::I32 => {
                type $e = i32;
                $body
            }
            DType::I64 => {
                type $e = i64;
                $body
            }
            DType::U8 => {
                type $e = u8;
                $body
            }
            DType::U16 => {
                type $e = u16;
                $body
            }
            DType::U32 => {
                type $e = u32;
                $body
            }
            DType::U64 => {
                type $e = u64;
                $body
            }
            d => bail_op!("Pow: {d} exponents are not supported"),
        }
    };
}

/// A float base `F` stored as `X` (itself, or a half type widened to `F`).
fn run_float<X: Element, F: Float, E: Element>(
    a: TensorView,
    b: TensorView,
    out: &mut TensorViewMut,
    widen: impl Fn(X) -> F,
    narrow: impl Fn(F) -> X,
) -> Result<()> {
    let shape = out.shape;
    let x = (a.as_slice::<X>()?, a.shape);
    let e = (b.as_slice::<E>()?, b.shape);
    let o = out.as_mut_slice::<X>()?;
    // Squaring, common in decomposed normalizations, is a plain multiply.
    if e.0.len() == 1 && e.0[0].to_f64() == 2.0 {
        return map2(x, e, o, shape, |v, _| {
            let v = widen(v);
            narrow(v * v)
        });
    }
    map2(x, e, o, shape, |v, p| narrow(widen(v).powf(F::from_f64(p.to_f64()))))
}

fn run_int<X: IntPow, E: Element>(a: TensorView, b: TensorView, out: &mut TensorViewMut) -> Result<()> {
    let shape = out.shape;
    let x = (a.as_slice::<X>()?, a.shape);
    let e = (b.as_slice::<E>()?, b.shape);
    let o = out.as_mut_slice::<X>()?;
    if E::DTYPE.is_float() {
        map2(x, e, o, shape, |v, p| X::from_f64_trunc(v.to_f64().powf(p.to_f64())))
    } else {
        // Exponents beyond i64 saturate, which changes nothing observable.
        map2(x, e, o, shape, |v, p| v.ipow(p.to_f64() as i64))
    }
}

impl OpImpl for Pow {
    fn name(&self) -> &'static str {
        "Pow"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let a = input(inputs, 0, self.name())?;
        let b = input(inputs, 1, self.name())?;
        ensure_op!(a.dtype != DType::Bool && b.dtype != DType::Bool, "Pow: bool inputs are not supported");
        let shape = broadcast_shapes(&[&a.shape, &b.shape])?;
        Ok(vec![TensorType::new(a.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let a = input(inputs, 0, self.name())?;
        let b = input(inputs, 1, self.name())?;
        let out = outputs.first_mut().ok_or_else(|| Error::op("Pow: missing output"))?;
        ensure_op!(out.dtype == a.dtype, "Pow: output dtype {} differs from base {}", out.dtype, a.dtype);
        with_exponent!(b.dtype, E => match a.dtype {
            DType::F32 => run_float::<f32, f32, E>(a, b, out, |v| v, |v| v),
            DType::F64 => run_float::<f64, f64, E>(a, b, out, |v| v, |v| v),
            DType::F16 => run_float::<f16, f32, E>(a, b, out, f16::to_f32, f16::from_f32),
            DType::BF16 => run_float::<bf16, f32, E>(a, b, out, bf16::to_f32, bf16::from_f32),
            DType::I8 => run_int::<i8, E>(a, b, out),
            DType::I16 => run_int::<i16, E>(a, b, out),
            DType::I32 => run_int::<i32, E>(a, b, out),
            DType::I64 => run_int::<i64, E>(a, b, out),
            DType::U8 => run_int::<u8, E>(a, b, out),
            DType::U16 => run_int::<u16, E>(a, b, out),
            DType::U32 => run_int::<u32, E>(a, b, out),
            DType::U64 => run_int::<u64, E>(a, b, out),
            d => bail_op!("Pow: {d} bases are not supported"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn pow(a: &Tensor, b: &Tensor) -> Tensor {
        let op: Op = Pow.into();
        op.eval_owned(&[Some(a), Some(b)]).unwrap().remove(0)
    }

    #[test]
    fn float_base_with_mixed_exponents() {
        let a = Tensor::from_vec(vec![3], vec![1f32, 2., 3.]).unwrap();
        let e = Tensor::from_vec(vec![3], vec![4i64, 5, 6]).unwrap();
        assert_eq!(pow(&a, &e).as_slice::<f32>().unwrap(), &[1., 32., 729.]);
        let two = Tensor::scalar(2f32);
        assert_eq!(pow(&a, &two).as_slice::<f32>().unwrap(), &[1., 4., 9.]);
        let half = Tensor::scalar(0.5f64);
        let a64 = Tensor::from_vec(vec![2], vec![4f64, 9.]).unwrap();
        assert_eq!(pow(&a64, &half).as_slice::<f64>().unwrap(), &[2., 3.]);
    }

    #[test]
    fn integer_base() {
        let a = Tensor::from_vec(vec![4], vec![2i32, -3, 2, -1]).unwrap();
        let e = Tensor::from_vec(vec![4], vec![10i32, 3, -1, -3]).unwrap();
        assert_eq!(pow(&a, &e).as_slice::<i32>().unwrap(), &[1024, -27, 0, -1]);
        let f = Tensor::from_vec(vec![4], vec![0.5f32, 2., 1.5, 2.]).unwrap();
        assert_eq!(pow(&a, &f).dtype(), DType::I32);
        assert_eq!(pow(&a, &f).as_slice::<i32>().unwrap()[..2], [1, 9]);
    }
}
