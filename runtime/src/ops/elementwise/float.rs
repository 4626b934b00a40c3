//! The float math the elementwise ops compute in: `f32` (also for `f16` and
//! `bf16`, which are widened to it) and `f64`.

use super::erf::erf64;
use super::fast_f32;
use half::slice::HalfFloatSliceExt;
use std::ops::{Add, Div, Mul, Neg, Sub};

/// A float type the unary math is written once for.
pub(crate) trait Float:
    Copy + PartialOrd + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> + Div<Output = Self> + Neg<Output = Self>
{
    const ZERO: Self;
    const ONE: Self;
    const HALF: Self;

    fn from_f32(v: f32) -> Self;
    fn from_f64(v: f64) -> Self;
    fn abs(self) -> Self;
    fn sqrt(self) -> Self;
    fn exp(self) -> Self;
    fn exp_m1(self) -> Self;
    fn ln(self) -> Self;
    fn ln_1p(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn asin(self) -> Self;
    fn acos(self) -> Self;
    fn atan(self) -> Self;
    fn sinh(self) -> Self;
    fn cosh(self) -> Self;
    fn tanh(self) -> Self;
    fn asinh(self) -> Self;
    fn acosh(self) -> Self;
    fn atanh(self) -> Self;
    fn ceil(self) -> Self;
    fn floor(self) -> Self;
    fn round_ties_even(self) -> Self;
    fn erf(self) -> Self;
    fn powf(self, e: Self) -> Self;
    /// C `fmod`: the remainder with the sign of `self`.
    fn fmod(self, d: Self) -> Self;
}

/// `$exp`, `$tanh` and `$erf` implement the three functions that are hot in
/// real models; the rest is the standard library's.
macro_rules! float_impl {
    ($t:ty, $exp:path, $tanh:path, $erf:path) => {
        impl Float for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const HALF: Self = 0.5;

            #[inline(always)]
            fn from_f32(v: f32) -> Self {
                v as $t
            }
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn exp(self) -> Self {
                $exp(self)
            }
            #[inline(always)]
            fn exp_m1(self) -> Self {
                <$t>::exp_m1(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn ln_1p(self) -> Self {
                <$t>::ln_1p(self)
            }
            #[inline(always)]
            fn sin(self) -> Self {
                <$t>::sin(self)
            }
            #[inline(always)]
            fn cos(self) -> Self {
                <$t>::cos(self)
            }
            #[inline(always)]
            fn tan(self) -> Self {
                <$t>::tan(self)
            }
            #[inline(always)]
            fn asin(self) -> Self {
                <$t>::asin(self)
            }
            #[inline(always)]
            fn acos(self) -> Self {
                <$t>::acos(self)
            }
            #[inline(always)]
            fn atan(self) -> Self {
                <$t>::atan(self)
            }
            #[inline(always)]
            fn sinh(self) -> Self {
                <$t>::sinh(self)
            }
            #[inline(always)]
            fn cosh(self) -> Self {
                <$t>::cosh(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                $tanh(self)
            }
            #[inline(always)]
            fn asinh(self) -> Self {
                <$t>::asinh(self)
            }
            #[inline(always)]
            fn acosh(self) -> Self {
                <$t>::acosh(self)
            }
            #[inline(always)]
            fn atanh(self) -> Self {
                <$t>::atanh(self)
            }
            #[inline(always)]
            fn ceil(self) -> Self {
                <$t>::ceil(self)
            }
            #[inline(always)]
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            #[inline(always)]
            fn round_ties_even(self) -> Self {
                <$t>::round_ties_even(self)
            }
            #[inline(always)]
            fn erf(self) -> Self {
                $erf(self)
            }
            #[inline(always)]
            fn powf(self, e: Self) -> Self {
                <$t>::powf(self, e)
            }
            #[inline(always)]
            fn fmod(self, d: Self) -> Self {
                self % d
            }
        }
    };
}
float_impl!(f32, fast_f32::exp, fast_f32::tanh, fast_f32::erf);
float_impl!(f64, f64::exp, f64::tanh, erf64);

/// The 16-bit float types, which compute through `f32`. Their slice
/// conversions use the CPU's conversion instructions where it has them
/// (detected at run time), unlike element-by-element conversion.
pub(crate) trait Half: crate::tensor::Element + Copy {
    fn widen(src: &[Self], dst: &mut [f32]);
    fn narrow(src: &[f32], dst: &mut [Self]);
}

macro_rules! half_impl {
    ($($t:ty),*) => {$(
        impl Half for $t {
            #[inline]
            fn widen(src: &[Self], dst: &mut [f32]) {
                src.convert_to_f32_slice(dst)
            }
            #[inline]
            fn narrow(src: &[f32], dst: &mut [Self]) {
                dst.convert_from_f32_slice(src)
            }
        }
    )*};
}
half_impl!(half::f16, half::bf16);

/// `out[i] = f(x[i])` on half floats, computed in f32 chunks.
#[inline(always)]
pub(crate) fn map_half<H: Half>(x: &[H], out: &mut [H], f: impl Fn(f32) -> f32) -> crate::error::Result<()> {
    crate::ensure_op!(x.len() == out.len(), "input holds {} elements, output {}", x.len(), out.len());
    const CHUNK: usize = 256;
    let mut buf = [0f32; CHUNK];
    for (xs, os) in x.chunks(CHUNK).zip(out.chunks_mut(CHUNK)) {
        let b = &mut buf[..xs.len()];
        H::widen(xs, b);
        for v in b.iter_mut() {
            *v = f(*v);
        }
        H::narrow(b, os);
    }
    Ok(())
}

/// A whole half-float tensor widened to f32.
pub(crate) fn widen_all<H: Half>(x: &[H]) -> Vec<f32> {
    let mut v = vec![0f32; x.len()];
    H::widen(x, &mut v);
    v
}

/// Python's `%` on floats: the remainder with the sign of the divisor.
#[inline(always)]
pub(crate) fn python_mod<F: Float>(a: F, b: F) -> F {
    let r = a.fmod(b);
    if r != F::ZERO && ((r < F::ZERO) != (b < F::ZERO)) {
        r + b
    } else {
        r
    }
}

/// numpy's `maximum`: NaN in either operand gives NaN.
#[inline(always)]
pub(crate) fn nan_max<T: PartialOrd + Copy>(a: T, b: T) -> T {
    // `a != a` holds only for NaN; comparisons with NaN are false, so a NaN
    // `b` falls through to the second branch.
    #[allow(clippy::eq_op)]
    if a != a || a > b {
        a
    } else {
        b
    }
}

/// numpy's `minimum`: NaN in either operand gives NaN.
#[inline(always)]
pub(crate) fn nan_min<T: PartialOrd + Copy>(a: T, b: T) -> T {
    #[allow(clippy::eq_op)]
    if a != a || a < b {
        a
    } else {
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        // erf(0.5) = 0.5204998778130465, erf(1.5) = 0.9661051464753108.
        assert!((erf64(0.5) - 0.5204998778130465).abs() < 1e-15);
        assert!((erf64(-1.5) + 0.9661051464753108).abs() < 1e-15);
        assert!((Float::erf(0.5f32) - 0.520_499_9).abs() < 1e-6);
        assert_eq!(Float::erf(10f32), 1.0);
        assert!(erf64(f64::NAN).is_nan());
    }

    #[test]
    fn python_mod_takes_the_divisor_sign() {
        assert_eq!(python_mod(-4.0f64, 3.0), 2.0);
        assert_eq!(python_mod(4.0f32, -3.0), -2.0);
        assert_eq!((-4.0f32).fmod(3.0), -1.0);
    }

    #[test]
    fn max_and_min_propagate_nan() {
        assert!(nan_max(f32::NAN, 1.0).is_nan());
        assert!(nan_max(1.0, f32::NAN).is_nan());
        assert!(nan_min(f64::NAN, 1.0).is_nan());
        assert!(nan_min(1.0, f64::NAN).is_nan());
        assert_eq!(nan_max(2, 3), 3);
        assert_eq!(nan_min(2, 3), 2);
    }
}
