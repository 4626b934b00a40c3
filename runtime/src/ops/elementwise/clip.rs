//! `Clip`: limits every element to `[min, max]`, each bound optional. The
//! bounds are static attributes, exact in the input's dtype (the frontend
//! turns run-time bounds into `Max`/`Min`). NaN passes through, like
//! numpy's `clip`; with `min > max` every element becomes `max`.

use super::broadcast::map1;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Clip {
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Clip {
    pub fn new(min: Option<f64>, max: Option<f64>) -> Clip {
        Clip { min, max }
    }
}

/// The extreme values of a type, standing in for absent bounds.
trait Extremes: Element + Copy {
    const LOWEST: Self;
    const HIGHEST: Self;
}

macro_rules! extremes {
    ($($t:ty: $lo:expr, $hi:expr);* $(;)?) => {$(
        impl Extremes for $t {
            const LOWEST: Self = $lo;
            const HIGHEST: Self = $hi;
        }
    )*};
}
extremes!(
    f32: f32::NEG_INFINITY, f32::INFINITY;
    f64: f64::NEG_INFINITY, f64::INFINITY;
    i8: i8::MIN, i8::MAX;
    i16: i16::MIN, i16::MAX;
    i32: i32::MIN, i32::MAX;
    i64: i64::MIN, i64::MAX;
    u8: u8::MIN, u8::MAX;
    u16: u16::MIN, u16::MAX;
    u32: u32::MIN, u32::MAX;
    u64: u64::MIN, u64::MAX;
);

#[inline(always)]
fn clamp<T: PartialOrd + Copy>(x: T, lo: T, hi: T) -> T {
    let y = if x < lo { lo } else { x };
    if y > hi {
        hi
    } else {
        y
    }
}

fn run<T: Extremes>(min: Option<f64>, max: Option<f64>, x: TensorView, out: &mut TensorViewMut) -> Result<()> {
    let lo = min.map_or(T::LOWEST, T::from_f64);
    let hi = max.map_or(T::HIGHEST, T::from_f64);
    map1(x.as_slice::<T>()?, out.as_mut_slice::<T>()?, |v| clamp(v, lo, hi))
}

/// Half types clamp in f32.
fn run_half<T: Element + Copy>(
    min: Option<f64>,
    max: Option<f64>,
    x: TensorView,
    out: &mut TensorViewMut,
    widen: impl Fn(T) -> f32,
    narrow: impl Fn(f32) -> T,
) -> Result<()> {
    // Bounds round to the half type first, so that results stay in range.
    let lo = min.map_or(f32::NEG_INFINITY, |v| widen(T::from_f64(v)));
    let hi = max.map_or(f32::INFINITY, |v| widen(T::from_f64(v)));
    map1(x.as_slice::<T>()?, out.as_mut_slice::<T>()?, |v| narrow(clamp(widen(v), lo, hi)))
}

impl OpImpl for Clip {
    fn name(&self) -> &'static str {
        "Clip"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.dtype != DType::Bool, "Clip: bool inputs are not supported");
        ensure_op!(
            !self.min.is_some_and(f64::is_nan) && !self.max.is_some_and(f64::is_nan),
            "Clip: NaN bounds are not supported"
        );
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        let out = outputs.first_mut().ok_or_else(|| Error::op("Clip: missing output"))?;
        ensure_op!(out.dtype == x.dtype, "Clip: output dtype {} differs from input {}", out.dtype, x.dtype);
        let (lo, hi) = (self.min, self.max);
        match x.dtype {
            DType::F32 => run::<f32>(lo, hi, x, out),
            DType::F64 => run::<f64>(lo, hi, x, out),
            DType::F16 => run_half::<f16>(lo, hi, x, out, f16::to_f32, f16::from_f32),
            DType::BF16 => run_half::<bf16>(lo, hi, x, out, bf16::to_f32, bf16::from_f32),
            DType::I8 => run::<i8>(lo, hi, x, out),
            DType::I16 => run::<i16>(lo, hi, x, out),
            DType::I32 => run::<i32>(lo, hi, x, out),
            DType::I64 => run::<i64>(lo, hi, x, out),
            DType::U8 => run::<u8>(lo, hi, x, out),
            DType::U16 => run::<u16>(lo, hi, x, out),
            DType::U32 => run::<u32>(lo, hi, x, out),
            DType::U64 => run::<u64>(lo, hi, x, out),
            d => bail_op!("Clip: {d} inputs are not supported"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn relu6_on_floats_keeps_nan() {
        let x = Tensor::from_vec(vec![4], vec![-1f32, 3., 7., f32::NAN]).unwrap();
        let op: Op = Clip::new(Some(0.0), Some(6.0)).into();
        let v = op.eval_owned(&[Some(&x)]).unwrap()[0].to_f64_vec();
        assert_eq!(&v[..3], &[0., 3., 6.]);
        assert!(v[3].is_nan());
    }

    #[test]
    fn one_sided_on_integers() {
        let x = Tensor::from_vec(vec![3], vec![-100i8, 0, 100]).unwrap();
        let op: Op = Clip::new(None, Some(10.0)).into();
        assert_eq!(op.eval_owned(&[Some(&x)]).unwrap()[0].as_slice::<i8>().unwrap(), &[-100, 0, 10]);
        let op: Op = Clip::new(Some(-5.0), None).into();
        assert_eq!(op.eval_owned(&[Some(&x)]).unwrap()[0].as_slice::<i8>().unwrap(), &[-5, 0, 100]);
    }
}
