//! Binary ops whose output has the inputs' dtype, with numpy-style
//! broadcasting: arithmetic, Max/Min, Mod, PRelu, bitwise ops and shifts,
//! boolean logic.

use super::broadcast::map2;
use super::float::{nan_max, nan_min, python_mod, widen_all, Float, Half};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::util::broadcast_shapes;
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
    /// Integer division truncates toward zero; dividing by zero gives 0.
    Div,
    /// numpy's `maximum`: NaN wins.
    Max,
    /// numpy's `minimum`: NaN wins.
    Min,
    /// With `fmod`, C's remainder (sign of the dividend); without, Python's
    /// (sign of the divisor). An integer remainder by zero gives 0.
    Mod {
        fmod: bool,
    },
    /// `x < 0 ? slope * x : x`, the slope being the second input.
    PRelu,
    BitwiseAnd,
    BitwiseOr,
    BitwiseXor,
    /// Shifts by the second input; shifting by the bit width or more gives 0.
    BitShiftLeft,
    BitShiftRight,
    /// Logical and of booleans.
    And,
    Or,
    Xor,
}

impl BinaryKind {
    /// Which dtypes the kind takes.
    fn category(self) -> Category {
        use BinaryKind::*;
        match self {
            Add | Sub | Mul | Div | Max | Min | Mod { .. } | PRelu => Category::Numeric,
            BitwiseAnd | BitwiseOr | BitwiseXor | BitShiftLeft | BitShiftRight => Category::Integer,
            And | Or | Xor => Category::Bool,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Category {
    Numeric,
    Integer,
    Bool,
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

/// Arithmetic on one numeric type.
trait Arith: Element + Copy {
    fn add(self, b: Self) -> Self;
    fn sub(self, b: Self) -> Self;
    fn mul(self, b: Self) -> Self;
    fn div(self, b: Self) -> Self;
    fn rem(self, b: Self, fmod: bool) -> Self;
    fn prelu(self, slope: Self) -> Self;
}

macro_rules! arith_float {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            #[inline(always)]
            fn add(self, b: Self) -> Self { self + b }
            #[inline(always)]
            fn sub(self, b: Self) -> Self { self - b }
            #[inline(always)]
            fn mul(self, b: Self) -> Self { self * b }
            #[inline(always)]
            fn div(self, b: Self) -> Self { self / b }
            #[inline(always)]
            fn rem(self, b: Self, fmod: bool) -> Self {
                if fmod { self.fmod(b) } else { python_mod(self, b) }
            }
            #[inline(always)]
            fn prelu(self, slope: Self) -> Self { if self < 0.0 { slope * self } else { self } }
        }
    )*};
}
arith_float!(f32, f64);

macro_rules! arith_int {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            #[inline(always)]
            fn add(self, b: Self) -> Self { self.wrapping_add(b) }
            #[inline(always)]
            fn sub(self, b: Self) -> Self { self.wrapping_sub(b) }
            #[inline(always)]
            fn mul(self, b: Self) -> Self { self.wrapping_mul(b) }
            // Integer division by zero is undefined in ONNX; return 0 rather than trap.
            #[inline(always)]
            fn div(self, b: Self) -> Self { if b == 0 { 0 } else { self.wrapping_div(b) } }
            #[inline(always)]
            #[allow(unused_comparisons)]
            fn rem(self, b: Self, fmod: bool) -> Self {
                if b == 0 {
                    return 0;
                }
                let r = self.wrapping_rem(b);
                if !fmod && r != 0 && ((r < 0) != (b < 0)) { r.wrapping_add(b) } else { r }
            }
            #[inline(always)]
            #[allow(unused_comparisons)]
            fn prelu(self, slope: Self) -> Self { if self < 0 { slope.wrapping_mul(self) } else { self } }
        }
    )*};
}
arith_int!(i8, i16, i32, i64, u8, u16, u32, u64);

/// Bit operations on one integer type.
trait Bits: Element + Copy {
    fn and(self, b: Self) -> Self;
    fn or(self, b: Self) -> Self;
    fn xor(self, b: Self) -> Self;
    fn shl(self, b: Self) -> Self;
    fn shr(self, b: Self) -> Self;
}

macro_rules! bits_int {
    ($($t:ty),*) => {$(
        impl Bits for $t {
            #[inline(always)]
            fn and(self, b: Self) -> Self { self & b }
            #[inline(always)]
            fn or(self, b: Self) -> Self { self | b }
            #[inline(always)]
            fn xor(self, b: Self) -> Self { self ^ b }
            #[inline(always)]
            fn shl(self, b: Self) -> Self {
                u32::try_from(b).ok().and_then(|s| self.checked_shl(s)).unwrap_or(0)
            }
            #[inline(always)]
            #[allow(unused_comparisons)]
            fn shr(self, b: Self) -> Self {
                let fill = if self < 0 { !0 } else { 0 };
                u32::try_from(b).ok().and_then(|s| self.checked_shr(s)).unwrap_or(fill)
            }
        }
    )*};
}
bits_int!(i8, i16, i32, i64, u8, u16, u32, u64);

/// Splits the three tensors into typed slices with their shapes and runs `f`.
macro_rules! with_slices {
    ($t:ty, $a:expr, $b:expr, $out:expr, |$x:ident, $y:ident, $o:ident, $shape:ident| $body:expr) => {{
        let $shape = $out.shape;
        let $x = ($a.as_slice::<$t>()?, $a.shape);
        let $y = ($b.as_slice::<$t>()?, $b.shape);
        let $o = $out.as_mut_slice::<$t>()?;
        $body
    }};
}

fn run_arith<T: Arith>(kind: BinaryKind, a: TensorView, b: TensorView, out: &mut TensorViewMut) -> Result<()> {
    with_slices!(T, a, b, out, |x, y, o, shape| arith_widest(kind, x, y, o, shape))
}

/// [`arith`] compiled for the widest vectors the CPU has (AVX-512, AVX2,
/// else the baseline the crate is built for): the same per-element
/// arithmetic, so the same bits.
fn arith_widest<T: Arith>(
    kind: BinaryKind,
    x: (&[T], &[usize]),
    y: (&[T], &[usize]),
    o: &mut [T],
    shape: &[usize],
) -> Result<()> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F.
            return unsafe { arith_avx512(kind, x, y, o, shape) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { arith_avx2(kind, x, y, o, shape) };
        }
    }
    arith(kind, x, y, o, shape)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn arith_avx512<T: Arith>(
    kind: BinaryKind,
    x: (&[T], &[usize]),
    y: (&[T], &[usize]),
    o: &mut [T],
    shape: &[usize],
) -> Result<()> {
    arith(kind, x, y, o, shape)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn arith_avx2<T: Arith>(
    kind: BinaryKind,
    x: (&[T], &[usize]),
    y: (&[T], &[usize]),
    o: &mut [T],
    shape: &[usize],
) -> Result<()> {
    arith(kind, x, y, o, shape)
}

/// Half floats compute in f32 on widened copies, rounding each result once.
fn run_arith_half<H: Half>(kind: BinaryKind, a: TensorView, b: TensorView, out: &mut TensorViewMut) -> Result<()> {
    let shape = out.shape;
    let wa = widen_all(a.as_slice::<H>()?);
    let wb = widen_all(b.as_slice::<H>()?);
    let o = out.as_mut_slice::<H>()?;
    let mut wo = vec![0f32; o.len()];
    arith(kind, (&wa, a.shape), (&wb, b.shape), &mut wo, shape)?;
    H::narrow(&wo, o);
    Ok(())
}

#[inline(always)]
fn arith<T: Arith>(kind: BinaryKind, x: (&[T], &[usize]), y: (&[T], &[usize]), o: &mut [T], shape: &[usize]) -> Result<()> {
    match kind {
        BinaryKind::Add => map2(x, y, o, shape, T::add),
        BinaryKind::Sub => map2(x, y, o, shape, T::sub),
        BinaryKind::Mul => map2(x, y, o, shape, T::mul),
        BinaryKind::Div => map2(x, y, o, shape, T::div),
        BinaryKind::Max => map2(x, y, o, shape, nan_max::<T>),
        BinaryKind::Min => map2(x, y, o, shape, nan_min::<T>),
        BinaryKind::Mod { fmod: true } => map2(x, y, o, shape, |p, q| p.rem(q, true)),
        BinaryKind::Mod { fmod: false } => map2(x, y, o, shape, |p, q| p.rem(q, false)),
        BinaryKind::PRelu => map2(x, y, o, shape, T::prelu),
        k => bail_op!("{k:?} is not arithmetic"),
    }
}

fn run_bits<T: Bits>(kind: BinaryKind, a: TensorView, b: TensorView, out: &mut TensorViewMut) -> Result<()> {
    with_slices!(T, a, b, out, |x, y, o, shape| match kind {
        BinaryKind::BitwiseAnd => map2(x, y, o, shape, T::and),
        BinaryKind::BitwiseOr => map2(x, y, o, shape, T::or),
        BinaryKind::BitwiseXor => map2(x, y, o, shape, T::xor),
        BinaryKind::BitShiftLeft => map2(x, y, o, shape, T::shl),
        BinaryKind::BitShiftRight => map2(x, y, o, shape, T::shr),
        k => bail_op!("{k:?} is not a bit operation"),
    })
}

fn run_logic(kind: BinaryKind, a: TensorView, b: TensorView, out: &mut TensorViewMut) -> Result<()> {
    with_slices!(u8, a, b, out, |x, y, o, shape| match kind {
        BinaryKind::And => map2(x, y, o, shape, |p, q| u8::from(p != 0 && q != 0)),
        BinaryKind::Or => map2(x, y, o, shape, |p, q| u8::from(p != 0 || q != 0)),
        BinaryKind::Xor => map2(x, y, o, shape, |p, q| u8::from((p != 0) != (q != 0))),
        k => bail_op!("{k:?} is not a logical operation"),
    })
}

impl OpImpl for Binary {
    fn name(&self) -> &'static str {
        use BinaryKind::*;
        match self.kind {
            Add => "Add",
            Sub => "Sub",
            Mul => "Mul",
            Div => "Div",
            Max => "Max",
            Min => "Min",
            Mod { .. } => "Mod",
            PRelu => "PRelu",
            BitwiseAnd => "BitwiseAnd",
            BitwiseOr => "BitwiseOr",
            BitwiseXor => "BitwiseXor",
            BitShiftLeft | BitShiftRight => "BitShift",
            And => "And",
            Or => "Or",
            Xor => "Xor",
        }
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let a = input(inputs, 0, self.name())?;
        let b = input(inputs, 1, self.name())?;
        ensure_op!(a.dtype == b.dtype, "{}: dtypes differ ({} and {})", self.name(), a.dtype, b.dtype);
        let ok = match self.kind.category() {
            Category::Numeric => a.dtype != DType::Bool,
            Category::Integer => a.dtype.is_int(),
            Category::Bool => a.dtype == DType::Bool,
        };
        ensure_op!(ok, "{}: {} inputs are not supported", self.name(), a.dtype);
        let shape = broadcast_shapes(&[&a.shape, &b.shape])?;
        Ok(vec![TensorType::new(a.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let a = input(inputs, 0, self.name())?;
        let b = input(inputs, 1, self.name())?;
        let out = outputs.first_mut().ok_or_else(|| Error::op(format!("{}: missing output", self.name())))?;
        ensure_op!(
            a.dtype == b.dtype && a.dtype == out.dtype,
            "{}: dtypes differ ({}, {} -> {})",
            self.name(),
            a.dtype,
            b.dtype,
            out.dtype
        );
        let k = self.kind;
        match (k.category(), a.dtype) {
            (Category::Numeric, DType::F32) => run_arith::<f32>(k, a, b, out),
            (Category::Numeric, DType::F64) => run_arith::<f64>(k, a, b, out),
            (Category::Numeric, DType::F16) => run_arith_half::<f16>(k, a, b, out),
            (Category::Numeric, DType::BF16) => run_arith_half::<bf16>(k, a, b, out),
            (Category::Numeric, DType::I8) => run_arith::<i8>(k, a, b, out),
            (Category::Numeric, DType::I16) => run_arith::<i16>(k, a, b, out),
            (Category::Numeric, DType::I32) => run_arith::<i32>(k, a, b, out),
            (Category::Numeric, DType::I64) => run_arith::<i64>(k, a, b, out),
            (Category::Numeric, DType::U8) => run_arith::<u8>(k, a, b, out),
            (Category::Numeric, DType::U16) => run_arith::<u16>(k, a, b, out),
            (Category::Numeric, DType::U32) => run_arith::<u32>(k, a, b, out),
            (Category::Numeric, DType::U64) => run_arith::<u64>(k, a, b, out),
            (Category::Integer, DType::I8) => run_bits::<i8>(k, a, b, out),
            (Category::Integer, DType::I16) => run_bits::<i16>(k, a, b, out),
            (Category::Integer, DType::I32) => run_bits::<i32>(k, a, b, out),
            (Category::Integer, DType::I64) => run_bits::<i64>(k, a, b, out),
            (Category::Integer, DType::U8) => run_bits::<u8>(k, a, b, out),
            (Category::Integer, DType::U16) => run_bits::<u16>(k, a, b, out),
            (Category::Integer, DType::U32) => run_bits::<u32>(k, a, b, out),
            (Category::Integer, DType::U64) => run_bits::<u64>(k, a, b, out),
            (Category::Bool, DType::Bool) => run_logic(k, a, b, out),
            (_, d) => bail_op!("{}: {d} inputs are not supported", self.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn eval(kind: BinaryKind, a: &Tensor, b: &Tensor) -> Tensor {
        let op: Op = Binary::new(kind).into();
        op.eval_owned(&[Some(a), Some(b)]).unwrap().remove(0)
    }

    #[test]
    fn add_broadcasts_rows() {
        let a = Tensor::from_vec(vec![2, 3], vec![1f32, 2., 3., 4., 5., 6.]).unwrap();
        let b = Tensor::from_vec(vec![3], vec![10f32, 20., 30.]).unwrap();
        let out = eval(BinaryKind::Add, &a, &b);
        assert_eq!(out.shape(), &[2, 3]);
        assert_eq!(out.as_slice::<f32>().unwrap(), &[11., 22., 33., 14., 25., 36.]);
    }

    #[test]
    fn mul_broadcasts_channels_and_scalars() {
        let a = Tensor::from_vec(vec![1, 2, 2], vec![1f32, 2., 3., 4.]).unwrap();
        let c = Tensor::from_vec(vec![2, 1], vec![10f32, 100.]).unwrap();
        assert_eq!(eval(BinaryKind::Mul, &a, &c).as_slice::<f32>().unwrap(), &[10., 20., 300., 400.]);
        let s = Tensor::scalar(2f32);
        assert_eq!(eval(BinaryKind::Sub, &s, &a).as_slice::<f32>().unwrap(), &[1., 0., -1., -2.]);
    }

    #[test]
    fn half_floats_compute_in_f32() {
        let h = |v: &[f32]| v.iter().map(|&x| f16::from_f32(x)).collect::<Vec<_>>();
        let a = Tensor::from_vec(vec![2, 2], h(&[1., 2., 3., 4.])).unwrap();
        let b = Tensor::from_vec(vec![2], h(&[0.5, -1.])).unwrap();
        let out = eval(BinaryKind::Mul, &a, &b);
        assert_eq!(out.dtype(), DType::F16);
        assert_eq!(out.to_f64_vec(), vec![0.5, -2., 1.5, -4.]);
        let m = eval(BinaryKind::Mod { fmod: true }, &a, &b);
        assert_eq!(m.to_f64_vec(), vec![0., 0., 0., 0.]);
    }

    #[test]
    fn mismatched_shapes_are_an_error() {
        let a = TensorType::new(DType::F32, vec![2, 3]);
        let b = TensorType::new(DType::F32, vec![2]);
        assert!(Binary::new(BinaryKind::Mul).infer(&[Some(&a), Some(&b)]).is_err());
    }

    #[test]
    fn mod_signs() {
        let a = Tensor::from_vec(vec![4], vec![-4i32, 7, -7, 5]).unwrap();
        let b = Tensor::from_vec(vec![4], vec![3i32, -3, -3, 0]).unwrap();
        assert_eq!(eval(BinaryKind::Mod { fmod: false }, &a, &b).as_slice::<i32>().unwrap(), &[2, -2, -1, 0]);
        assert_eq!(eval(BinaryKind::Mod { fmod: true }, &a, &b).as_slice::<i32>().unwrap(), &[-1, 1, -1, 0]);
    }

    #[test]
    fn integer_division_truncates() {
        let a = Tensor::from_vec(vec![3], vec![7i64, -7, 1]).unwrap();
        let b = Tensor::from_vec(vec![3], vec![2i64, 2, 0]).unwrap();
        assert_eq!(eval(BinaryKind::Div, &a, &b).as_slice::<i64>().unwrap(), &[3, -3, 0]);
    }

    #[test]
    fn max_propagates_nan_and_prelu_scales_negatives() {
        let a = Tensor::from_vec(vec![3], vec![f32::NAN, 1., -2.]).unwrap();
        let b = Tensor::from_vec(vec![3], vec![0f32, 3., 0.5]).unwrap();
        let m = eval(BinaryKind::Max, &a, &b).to_f64_vec();
        assert!(m[0].is_nan());
        assert_eq!(&m[1..], &[3., 0.5]);
        let p = eval(BinaryKind::PRelu, &a, &b).to_f64_vec();
        assert_eq!(&p[1..], &[1., -1.]);
    }

    #[test]
    fn shifts_and_logic() {
        let a = Tensor::from_vec(vec![3], vec![1u8, 128, 255]).unwrap();
        let b = Tensor::from_vec(vec![3], vec![3u8, 1, 8]).unwrap();
        assert_eq!(eval(BinaryKind::BitShiftLeft, &a, &b).as_slice::<u8>().unwrap(), &[8, 0, 0]);
        assert_eq!(eval(BinaryKind::BitShiftRight, &a, &b).as_slice::<u8>().unwrap(), &[0, 64, 0]);
        let p = Tensor::from_bools(vec![2], &[true, false]).unwrap();
        let q = Tensor::from_bools(vec![2, 1], &[true, false]).unwrap();
        let x = eval(BinaryKind::Xor, &p, &q);
        assert_eq!(x.dtype(), DType::Bool);
        assert_eq!(x.as_slice::<u8>().unwrap(), &[0, 1, 1, 0]);
        let t = TensorType::new(DType::F32, vec![2]);
        assert!(Binary::new(BinaryKind::And).infer(&[Some(&t), Some(&t)]).is_err());
    }
}
