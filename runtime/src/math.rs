//! The CPU executor's two modes of f32 arithmetic.
//!
//! [`Math::Exact`], the default, is the reference: every kernel's arithmetic
//! is fixed, so results are reproducible bit for bit, whatever the thread
//! count; GPU checks, calibration and accuracy reports compare against it.
//! [`Math::Fast`] lets a few f32 kernels trade that for speed, each within a
//! bound its tests check (`runtime/tests/math.rs`):
//! - f32 matrix products run through `ops/linalg/sgemm.rs`'s packed kernel
//!   (a 12×32 AVX-512 or 6×16 AVX2 register tile of fused multiply-adds)
//!   where the CPU has one, instead of `matrixmultiply`'s, and convolutions
//!   write their im2col matrix straight into its packed layout
//!   (`ops/linalg/conv_packed.rs`): each sum is fused in blocks of 256
//!   terms, the same whatever the thread count;
//! - matrix products with at most [`FAST_GEMV_ROWS`] rows or columns (fully
//!   connected layers at small batch) run as dot products or row updates
//!   that read the weight once, instead of packing it on every call: the
//!   sums are reordered;
//! - Sigmoid and SiLU use [`exp`], a vectorizable e^x within 2 ulp, instead
//!   of libm's (with fused multiply-adds where the CPU has FMA, so fast
//!   results may differ in the last bits between CPUs);
//! - the recurrent layers (LSTM, GRU, RNN) compute their gates in f32 over
//!   whole gate rows, with [`exp`]-based sigmoid and [`tanh`], instead of
//!   element by element in f64.
//! - Softmax drops the terms of a row of n below e^-87·n of its largest
//!   (0 instead of an output under 2e-38·n), so that no output is subnormal:
//!   Intel cores take a microcode assist for every subnormal operand, in the
//!   softmax and in each product its output feeds (a causal mask's rows).
//!
//! f16/bf16 storage, int8 and everything else are the same in both modes.
//! A context sets its mode for the duration of a run on the calling thread
//! ([`install`]); kernels read it there, before splitting work over threads.

use std::cell::Cell;

/// How f32 kernels may compute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Math {
    /// The reference arithmetic, reproducible bit for bit.
    #[default]
    Exact,
    /// Faster kernels whose results differ within tested bounds.
    Fast,
}

thread_local! {
    static MODE: Cell<Math> = const { Cell::new(Math::Exact) };
}

/// The mode of the run on this thread ([`Math::Exact`] outside a run).
pub fn mode() -> Math {
    MODE.with(Cell::get)
}

/// Runs `f` with `math` as this thread's mode.
pub fn install<R>(math: Math, f: impl FnOnce() -> R) -> R {
    struct Restore(Math);
    impl Drop for Restore {
        fn drop(&mut self) {
            MODE.with(|m| m.set(self.0));
        }
    }
    let _restore = Restore(MODE.with(|m| m.replace(math)));
    f()
}

/// Matrix products with at most this many rows take the fast path.
pub const FAST_GEMV_ROWS: usize = 4;

/// e^x within 2 ulp for results of at least 2^-126 (smaller ones may be
/// flushed toward zero), `inf` above ln(f32::MAX), NaN for NaN; no branch
/// and no table, so loops over it vectorize. Cody-Waite range reduction
/// x = n·ln2 + r, a degree-6 polynomial for e^r, and 2^n as two exact
/// scalings so that n may reach 128 or -150.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    exp_with::<false>(x)
}

/// `a · b + c`, fused (one rounding) when `FMA`: only called where the
/// CPU has FMA, as elsewhere it would be a slow library call.
#[inline(always)]
fn madd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// [`exp`], with fused multiply-adds in the reduction and the polynomial
/// when `FMA` (about a fifth fewer instructions, same bound).
#[inline(always)]
fn exp_with<const FMA: bool>(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln2 split so that n·LN2_HI is exact for |n| < 2^9.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding and subtracting 1.5·2^23 rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let xc = x.clamp(-104.0, 89.0);
    let shifted = madd::<FMA>(xc, LOG2E, ROUND);
    let n = shifted - ROUND;
    let r = xc - n * LN2_HI - n * LN2_LO;
    let p = 1.987_569_2e-4;
    let p = madd::<FMA>(p, r, 1.398_199_9e-3);
    let p = madd::<FMA>(p, r, 8.333_452e-3);
    let p = madd::<FMA>(p, r, 4.166_579_6e-2);
    let p = madd::<FMA>(p, r, 1.666_666_5e-1);
    let p = madd::<FMA>(p, r, 0.5);
    let y = madd::<FMA>(p, r * r, r) + 1.0;
    // n as an integer, read from the mantissa of `shifted` (no float to
    // int conversion, which would not vectorize).
    let n = shifted.to_bits() as i32 - ROUND.to_bits() as i32;
    let (n1, n2) = (n >> 1, n - (n >> 1));
    let scale = |k: i32| f32::from_bits(((k + 127) as u32) << 23);
    let v = y * scale(n1) * scale(n2);
    if x.is_nan() {
        x
    } else {
        v
    }
}

/// 1 / (1 + e^-x) through [`exp`].
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    sigmoid_with::<false>(x)
}

#[inline(always)]
fn sigmoid_with<const FMA: bool>(x: f32) -> f32 {
    1.0 / (1.0 + exp_with::<FMA>(-x))
}

/// tanh(x) within a few ulp: an odd Taylor polynomial of degree 9 below
/// |x| = 0.3 (where `1 - e^-2|x|` would cancel), `(1 - e) / (1 + e)` with
/// `e = e^-2|x|` through [`exp`] above; both are computed and one selected,
/// so loops over it vectorize.
#[inline(always)]
pub fn tanh(x: f32) -> f32 {
    tanh_with::<false>(x)
}

#[inline(always)]
fn tanh_with<const FMA: bool>(x: f32) -> f32 {
    let x2 = x * x;
    let p = 62.0 / 2835.0;
    let p = madd::<FMA>(p, x2, -17.0 / 315.0);
    let p = madd::<FMA>(p, x2, 2.0 / 15.0);
    let p = madd::<FMA>(p, x2, -1.0 / 3.0);
    let small = madd::<FMA>(x * x2, p, x);
    let e = exp_with::<FMA>(-2.0 * x.abs());
    let large = ((1.0 - e) / (1.0 + e)).copysign(x);
    if x.abs() < 0.3 {
        small
    } else {
        large
    }
}

/// Whether the in-place loops below may take their AVX2 + FMA versions.
#[cfg(target_arch = "x86_64")]
fn has_avx2_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// An in-place loop `v = f(v)` over a slice, for `f` one of the
/// `*_with::<FMA>` functions: its AVX2 + FMA copy, an AVX-512 copy 16 lanes
/// wide (the same operations lane by lane), and the portable loop without
/// fused multiply-adds where the CPU has neither.
macro_rules! in_place {
    ($(#[$doc:meta])* $name:ident, $with:ident) => {
        $(#[$doc])*
        pub fn $name(data: &mut [f32]) {
            #[cfg(target_arch = "x86_64")]
            if has_avx2_fma() {
                #[target_feature(enable = "avx2,fma")]
                unsafe fn fma(data: &mut [f32]) {
                    data.iter_mut().for_each(|v| *v = $with::<true>(*v));
                }
                #[target_feature(enable = "avx512f,avx2,fma")]
                unsafe fn avx512(data: &mut [f32]) {
                    data.iter_mut().for_each(|v| *v = $with::<true>(*v));
                }
                // SAFETY: the CPU has AVX2 and FMA (and AVX-512F for the wider copy).
                return unsafe {
                    if std::arch::is_x86_feature_detected!("avx512f") {
                        avx512(data)
                    } else {
                        fma(data)
                    }
                };
            }
            data.iter_mut().for_each(|v| *v = $with::<false>(*v));
        }
    };
}

#[inline(always)]
fn silu_with<const FMA: bool>(x: f32) -> f32 {
    x * sigmoid_with::<FMA>(x)
}

#[inline(always)]
fn gelu_with<const FMA: bool>(x: f32) -> f32 {
    let z = x * std::f32::consts::FRAC_1_SQRT_2;
    let a = z.abs();
    let t = 1.0 / madd::<FMA>(0.327_591_1, a, 1.0);
    let p = madd::<FMA>(1.061_405_4, t, -1.453_152);
    let p = madd::<FMA>(p, t, 1.421_413_8);
    let p = madd::<FMA>(p, t, -0.284_496_74);
    let p = madd::<FMA>(p, t, 0.254_829_6);
    // q = 1 - erf(|z|).
    let q = p * t * exp_with::<FMA>(-a * a);
    let one_plus_erf = if z < 0.0 { q } else { 2.0 - q };
    if x.is_nan() {
        x
    } else {
        0.5 * x * one_plus_erf
    }
}

#[inline(always)]
fn gelu_tanh_with<const FMA: bool>(x: f32) -> f32 {
    let k = (2.0f64 / std::f64::consts::PI).sqrt() as f32;
    let inner = k * (x + 0.044715 * x * x * x);
    0.5 * x * (1.0 + tanh_with::<FMA>(inner))
}

in_place!(
    /// `v = tanh(v)` over `data`, 8 or 16 lanes wide with fused multiply-adds
    /// where the CPU has AVX2 and FMA (and AVX-512).
    tanh_in_place,
    tanh_with
);

in_place!(
    /// `v = sigmoid(v)` over `data`, 8 or 16 lanes wide with fused
    /// multiply-adds where the CPU has AVX2 and FMA (and AVX-512).
    sigmoid_in_place,
    sigmoid_with
);

in_place!(
    /// `v = v · sigmoid(v)` (SiLU) over `data`, 8 or 16 lanes wide with fused
    /// multiply-adds where the CPU has AVX2 and FMA (and AVX-512).
    silu_in_place,
    silu_with
);

in_place!(
    /// `v = v/2 · (1 + erf(v/√2))` (Gelu) over `data`, with erf from
    /// Abramowitz and Stegun's 7.1.26 (`1 - erf(z) = q(t)·e^(-z²)`, `t = 1 /
    /// (1 + 0.3275911 z)` for z >= 0, absolute error below 1.5e-7) and [`exp`]:
    /// for z < 0 `1 + erf(z)` is `q` itself, with no cancellation. 8 or 16
    /// lanes wide with fused multiply-adds where the CPU has AVX2 and FMA (and
    /// AVX-512).
    gelu_in_place,
    gelu_with
);

in_place!(
    /// `v = v/2 · (1 + tanh(√(2/π) · (v + 0.044715 v³)))`, Gelu's tanh
    /// approximation as `UnaryKind::GeluTanh` writes it, with [`tanh`] (a few
    /// ulp from libm's) instead of libm's scalar call: 8 or 16 lanes wide
    /// with fused multiply-adds where the CPU has AVX2 and FMA (and AVX-512).
    gelu_tanh_in_place,
    gelu_tanh_with
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_scopes_the_mode() {
        assert_eq!(mode(), Math::Exact);
        install(Math::Fast, || {
            assert_eq!(mode(), Math::Fast);
            install(Math::Exact, || assert_eq!(mode(), Math::Exact));
            assert_eq!(mode(), Math::Fast);
        });
        assert_eq!(mode(), Math::Exact);
    }

    #[test]
    fn exp_special_values() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(200.0), f32::INFINITY);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(-200.0), 0.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(sigmoid(-200.0), 0.0);
        assert_eq!(sigmoid(200.0), 1.0);
    }
}
