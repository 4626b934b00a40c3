//! `Cast`: converts every element to another dtype, as numpy's `astype`
//! does. Floats to integers truncate toward zero and saturate at the
//! target's range (NaN becomes 0); integers to narrower integers wrap;
//! anything to bool is `x != 0` (NaN is true); bool is 0 or 1. Conversions
//! to `f16`/`bf16` round to nearest even.
//!
//! The storage-only types follow ONNX: conversions to the 8-bit floats
//! round to nearest even and saturate ([`crate::float8`];
//! [`CastNoSaturate`] is ONNX's `saturate=0`); conversions to the 4-bit
//! integers round to nearest even and clamp to [-8, 7] or [0, 15], from
//! integers too (NaN becomes 0).

use super::broadcast::map1;
use crate::dtype::DType;
use crate::ensure_op;
use crate::error::{Error, Result};
use crate::float8::Float8;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cast {
    pub to: DType,
}

impl Cast {
    pub fn new(to: DType) -> Cast {
        Cast { to }
    }
}

/// `Cast` with ONNX's `saturate=0`: a value out of an 8-bit float's range
/// becomes infinity (E5M2) or NaN (the others) instead of the largest finite
/// value. Every other conversion is `Cast`'s. It is an op of its own rather
/// than a field of `Cast` so that engines written before it keep their
/// encoding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CastNoSaturate {
    pub to: DType,
}

/// One element conversion.
trait CastTo<U> {
    fn cast(self) -> U;
}

/// Rust `as` between primitive numbers.
macro_rules! prim_casts {
    ($($src:ty),*) => {$(
        prim_casts!(@one $src => f32, f64, i8, i16, i32, i64, u8, u16, u32, u64);
        impl CastTo<f16> for $src {
            #[inline(always)]
            fn cast(self) -> f16 { f16::from_f64(self as f64) }
        }
        impl CastTo<bf16> for $src {
            #[inline(always)]
            fn cast(self) -> bf16 { bf16::from_f64(self as f64) }
        }
        impl Truthy for $src {
            #[inline(always)]
            #[allow(clippy::float_cmp)]
            fn truthy(self) -> bool { self != (0 as $src) }
        }
    )*};
    (@one $src:ty => $($dst:ty),*) => {$(
        impl CastTo<$dst> for $src {
            #[inline(always)]
            fn cast(self) -> $dst { self as $dst }
        }
    )*};
}

/// Half types convert through f32, which holds them exactly.
macro_rules! half_casts {
    ($($src:ty),*) => {$(
        half_casts!(@one $src => f32, f64, i8, i16, i32, i64, u8, u16, u32, u64);
        impl CastTo<f16> for $src {
            #[inline(always)]
            fn cast(self) -> f16 { f16::from_f32(self.to_f32()) }
        }
        impl CastTo<bf16> for $src {
            #[inline(always)]
            fn cast(self) -> bf16 { bf16::from_f32(self.to_f32()) }
        }
        impl Truthy for $src {
            #[inline(always)]
            fn truthy(self) -> bool { self.to_f32() != 0.0 }
        }
    )*};
    (@one $src:ty => $($dst:ty),*) => {$(
        impl CastTo<$dst> for $src {
            #[inline(always)]
            fn cast(self) -> $dst { self.to_f32() as $dst }
        }
    )*};
}

/// Conversion to bool.
trait Truthy {
    fn truthy(self) -> bool;
}

prim_casts!(f32, f64, i8, i16, i32, i64, u8, u16, u32, u64);
half_casts!(f16, bf16);

/// A source type that converts to every dtype.
trait CastAll:
    Element
    + Copy
    + Truthy
    + CastTo<f32>
    + CastTo<f64>
    + CastTo<f16>
    + CastTo<bf16>
    + CastTo<i8>
    + CastTo<i16>
    + CastTo<i32>
    + CastTo<i64>
    + CastTo<u8>
    + CastTo<u16>
    + CastTo<u32>
    + CastTo<u64>
{
}

impl<T> CastAll for T where
    T: Element
        + Copy
        + Truthy
        + CastTo<f32>
        + CastTo<f64>
        + CastTo<f16>
        + CastTo<bf16>
        + CastTo<i8>
        + CastTo<i16>
        + CastTo<i32>
        + CastTo<i64>
        + CastTo<u8>
        + CastTo<u16>
        + CastTo<u32>
        + CastTo<u64>
{
}

fn convert<S: CastTo<D> + Copy, D: Element>(xs: &[S], out: &mut TensorViewMut) -> Result<()> {
    map1(xs, out.as_mut_slice::<D>()?, |v| v.cast())
}

/// Converts from source type `S` (for bool sources, `u8` holding 0 or 1).
fn cast_from<S: CastAll>(x: TensorView, out: &mut TensorViewMut) -> Result<()> {
    let xs = x.as_slice::<S>()?;
    match out.dtype {
        DType::F32 => convert::<S, f32>(xs, out),
        DType::F64 => convert::<S, f64>(xs, out),
        DType::F16 => convert::<S, f16>(xs, out),
        DType::BF16 => convert::<S, bf16>(xs, out),
        DType::I8 => convert::<S, i8>(xs, out),
        DType::I16 => convert::<S, i16>(xs, out),
        DType::I32 => convert::<S, i32>(xs, out),
        DType::I64 => convert::<S, i64>(xs, out),
        DType::U8 => convert::<S, u8>(xs, out),
        DType::U16 => convert::<S, u16>(xs, out),
        DType::U32 => convert::<S, u32>(xs, out),
        DType::U64 => convert::<S, u64>(xs, out),
        DType::Bool => map1(xs, out.as_mut_slice::<u8>()?, |v| u8::from(v.truthy())),
        d => crate::bail_op!("Cast: {d} is converted elsewhere"),
    }
}

/// Conversions to the storage-only types, through f64 (which holds every
/// value of every source exactly, but for i64/u64 beyond 2^53, far out of
/// these types' ranges anyway).
fn cast_to_storage_type(x: TensorView, out: &mut TensorViewMut, saturate: bool) -> Option<Result<()>> {
    let encode: Box<dyn Fn(f64) -> u8> = match out.dtype {
        DType::I4 => Box::new(|v: f64| if v.is_nan() { 0 } else { v.round_ties_even().clamp(-8.0, 7.0) as i8 as u8 }),
        DType::U4 => Box::new(|v: f64| if v.is_nan() { 0 } else { v.round_ties_even().clamp(0.0, 15.0) as u8 }),
        d => {
            let f = Float8::of(d)?;
            Box::new(move |v| f.encode(v, saturate))
        }
    };
    Some(map1(&x.to_f64_vec(), out.bytes, encode))
}

/// Conversions from the 8-bit floats: decoded to f32 (exact), then cast.
fn cast_from_float8(x: TensorView, out: &mut TensorViewMut) -> Option<Result<()>> {
    let f = Float8::of(x.dtype)?;
    let values: Vec<f32> = x.bytes.iter().map(|&b| f.decode(b)).collect();
    let decoded = TensorView { dtype: DType::F32, shape: x.shape, bytes: bytemuck::cast_slice(&values) };
    Some(cast_from::<f32>(decoded, out))
}

fn cast(x: TensorView, out: &mut TensorViewMut, to: DType, saturate: bool) -> Result<()> {
    ensure_op!(out.dtype == to, "Cast: output dtype {} is not {to}", out.dtype);
    let same_bytes = matches!((x.dtype, to), (DType::Bool, DType::U8) | (DType::I4, DType::I8) | (DType::U4, DType::U8));
    if x.dtype == to || same_bytes {
        ensure_op!(x.bytes.len() == out.bytes.len(), "Cast: input and output sizes differ");
        out.bytes.copy_from_slice(x.bytes);
        return Ok(());
    }
    if let Some(done) = convert_halves(x, out) {
        return done;
    }
    if let Some(done) = cast_to_storage_type(x, out, saturate) {
        return done;
    }
    if let Some(done) = cast_from_float8(x, out) {
        return done;
    }
    match x.dtype {
        DType::F32 => cast_from::<f32>(x, out),
        DType::F64 => cast_from::<f64>(x, out),
        DType::F16 => cast_from::<f16>(x, out),
        DType::BF16 => cast_from::<bf16>(x, out),
        DType::I8 | DType::I4 => cast_from::<i8>(x, out),
        DType::I16 => cast_from::<i16>(x, out),
        DType::I32 => cast_from::<i32>(x, out),
        DType::I64 => cast_from::<i64>(x, out),
        DType::U8 | DType::Bool | DType::U4 => cast_from::<u8>(x, out),
        DType::U16 => cast_from::<u16>(x, out),
        DType::U32 => cast_from::<u32>(x, out),
        DType::U64 => cast_from::<u64>(x, out),
        d => crate::bail_op!("Cast: {d} is converted elsewhere"),
    }
}

/// f32 to and from the half types through `half`'s slice conversions, which
/// use the CPU's conversion instructions where it has them.
fn convert_halves(x: TensorView, out: &mut TensorViewMut) -> Option<Result<()>> {
    use half::slice::HalfFloatSliceExt;
    fn run<A: Element, B: Element>(x: TensorView, out: &mut TensorViewMut, f: impl Fn(&[A], &mut [B])) -> Result<()> {
        let (a, b) = (x.as_slice::<A>()?, out.as_mut_slice::<B>()?);
        ensure_op!(a.len() == b.len(), "Cast: input holds {} elements, output {}", a.len(), b.len());
        f(a, b);
        Ok(())
    }
    Some(match (x.dtype, out.dtype) {
        (DType::F32, DType::F16) => run::<f32, f16>(x, out, |a, b| b.convert_from_f32_slice(a)),
        (DType::F32, DType::BF16) => run::<f32, bf16>(x, out, |a, b| b.convert_from_f32_slice(a)),
        (DType::F16, DType::F32) => run::<f16, f32>(x, out, |a, b| a.convert_to_f32_slice(b)),
        (DType::BF16, DType::F32) => run::<bf16, f32>(x, out, |a, b| a.convert_to_f32_slice(b)),
        _ => return None,
    })
}

impl OpImpl for Cast {
    fn name(&self) -> &'static str {
        "Cast"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        Ok(vec![TensorType::new(self.to, x.shape.clone())])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        let out = outputs.first_mut().ok_or_else(|| Error::op("Cast: missing output"))?;
        cast(x, out, self.to, true)
    }
}

impl OpImpl for CastNoSaturate {
    fn name(&self) -> &'static str {
        "CastNoSaturate"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        Ok(vec![TensorType::new(self.to, x.shape.clone())])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        let out = outputs.first_mut().ok_or_else(|| Error::op("CastNoSaturate: missing output"))?;
        cast(x, out, self.to, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn cast(x: &Tensor, to: DType) -> Tensor {
        let op: Op = Cast::new(to).into();
        op.eval_owned(&[Some(x)]).unwrap().remove(0)
    }

    #[test]
    fn float_to_int_truncates_and_saturates() {
        let x = Tensor::from_vec(vec![4], vec![-1.7f32, 2.9, 300.0, f32::NAN]).unwrap();
        assert_eq!(cast(&x, DType::I32).as_slice::<i32>().unwrap(), &[-1, 2, 300, 0]);
        assert_eq!(cast(&x, DType::U8).as_slice::<u8>().unwrap(), &[0, 2, 255, 0]);
    }

    #[test]
    fn bools_both_ways() {
        let x = Tensor::from_vec(vec![3], vec![0f64, -0.5, f64::NAN]).unwrap();
        let b = cast(&x, DType::Bool);
        assert_eq!(b.dtype(), DType::Bool);
        assert_eq!(b.as_slice::<u8>().unwrap(), &[0, 1, 1]);
        assert_eq!(cast(&b, DType::F32).as_slice::<f32>().unwrap(), &[0., 1., 1.]);
    }

    #[test]
    fn four_bit_targets_round_half_even_and_clamp() {
        let x = Tensor::from_vec(vec![7], vec![2.5f32, 3.5, -2.5, 9.0, -9.0, f32::NAN, 15.4]).unwrap();
        let i4 = cast(&x, DType::I4);
        assert_eq!(i4.dtype(), DType::I4);
        assert_eq!(i4.as_slice::<i8>().unwrap(), &[2, 4, -2, 7, -8, 0, 7]);
        assert_eq!(cast(&x, DType::U4).as_slice::<u8>().unwrap(), &[2, 4, 0, 9, 0, 0, 15]);
        // From integers: clamped, not wrapped.
        let wide = Tensor::from_vec(vec![3], vec![300i32, -300, 5]).unwrap();
        assert_eq!(cast(&wide, DType::I4).as_slice::<i8>().unwrap(), &[7, -8, 5]);
        assert_eq!(cast(&i4, DType::F32).as_slice::<f32>().unwrap(), &[2., 4., -2., 7., -8., 0., 7.]);
    }

    #[test]
    fn float8_targets_saturate_unless_told_not_to() {
        let x = Tensor::from_vec(vec![3], vec![1000f32, -0.3, f32::INFINITY]).unwrap();
        let f8 = cast(&x, DType::F8E4M3FN);
        assert_eq!(f8.bytes(), &[0x7e, 0xaa, 0x7e]);
        assert_eq!(cast(&f8, DType::F16).to_f64_vec(), vec![448.0, -0.3125, 448.0]);
        let op: Op = CastNoSaturate { to: DType::F8E5M2 }.into();
        let e5 = op.eval_owned(&[Some(&x)]).unwrap().remove(0);
        assert_eq!(e5.to_f64_vec()[0], 1024.0);
        assert_eq!(e5.to_f64_vec()[2], f64::INFINITY);
        // Between two 8-bit floats: decoded, then encoded again.
        assert_eq!(cast(&f8, DType::F8E5M2).to_f64_vec(), vec![448.0, -0.3125, 448.0]);
    }

    #[test]
    fn integers_wrap_and_halves_round() {
        let x = Tensor::from_vec(vec![2], vec![257i64, -1]).unwrap();
        assert_eq!(cast(&x, DType::U8).as_slice::<u8>().unwrap(), &[1, 255]);
        let y = Tensor::from_vec(vec![1], vec![1.0f32 + 1.0 / 1024.0 + 1.0 / 4096.0]).unwrap();
        let h = cast(&y, DType::F16);
        assert_eq!(h.to_f64_vec(), vec![1.0 + 1.0 / 1024.0]);
        assert_eq!(cast(&h, DType::BF16).to_f64_vec(), vec![1.0]);
    }
}
