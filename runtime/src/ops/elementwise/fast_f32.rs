//! Branch-free `f32` exp, tanh and erf that the compiler vectorizes, unlike
//! libm calls. They are the activations on the hot path of real models
//! (Sigmoid, Tanh, GELU's Erf) and stay within a few ulp of the correctly
//! rounded result (checked against the f64 functions in the tests).
#![allow(clippy::excessive_precision)]

/// 1.5 * 2^23: adding it to a float of magnitude below 2^22 rounds to an
/// integer, left in the low mantissa bits.
const ROUND_MAGIC: f32 = 12_582_912.0;

/// `2^n` for integer `n` in `[-126, 127]`, built from the exponent bits.
#[inline(always)]
fn pow2i(n: i32) -> f32 {
    f32::from_bits(((n + 127) as u32) << 23)
}

/// `exp(x)` (Cephes' `expf` reduction and polynomial, about 1 ulp).
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split in two so that `n * LN2_HI` is exact.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Beyond these, exp overflows to inf or underflows to 0.
    const HI: f32 = 88.722_84;
    const LO: f32 = -103.972_08;
    let xc = x.clamp(LO, HI);
    let t = xc * LOG2E + ROUND_MAGIC;
    let n_f = t - ROUND_MAGIC;
    let n = (t.to_bits() as i32) - (ROUND_MAGIC.to_bits() as i32);
    let r = xc - n_f * LN2_HI - n_f * LN2_LO;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 5.000_000_1e-1;
    let y = p * r * r + r + 1.0;
    // Scale in two steps so that n = 128 and subnormal results work.
    let n1 = n >> 1;
    let scaled = y * pow2i(n1) * pow2i(n - n1);
    let scaled = if x > HI { f32::INFINITY } else { scaled };
    let scaled = if x < LO { 0.0 } else { scaled };
    if x.is_nan() {
        x
    } else {
        scaled
    }
}

/// `tanh(x)`: an odd polynomial near zero (Cephes' `tanhf`), `1 - 2 / (exp(2|x|) + 1)`
/// elsewhere.
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    let a = x.abs();
    let s = x * x;
    let mut p = -5.704_988_7e-3f32;
    p = p * s + 2.063_908_9e-2;
    p = p * s - 5.373_971_6e-2;
    p = p * s + 1.333_144_2e-1;
    p = p * s - 3.333_328_2e-1;
    let small = p * s * x + x;
    // exp(2a) is inf for large a, which gives exactly 1.
    let large = 1.0 - 2.0 / (exp(2.0 * a) + 1.0);
    let large = f32::copysign(large, x);
    if a < 0.625 {
        small
    } else if x.is_nan() {
        x
    } else {
        large
    }
}

/// `erf(x)`: a rational approximation on `[-4, 4]` (Eigen's
/// `generic_fast_erf_float`), `±1` where erf rounds to it.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let xc = x.clamp(-4.0, 4.0);
    let x2 = xc * xc;
    let mut p = -2.726_142_3e-10f32;
    p = p * x2 + 2.770_681_4e-8;
    p = p * x2 - 2.101_024e-6;
    p = p * x2 - 5.692_506_5e-5;
    p = p * x2 - 7.349_906_3e-4;
    p = p * x2 - 2.954_600_0e-3;
    p = p * x2 - 1.609_603_3e-2;
    let mut q = -1.456_607_2e-5f32;
    q = q * x2 - 2.133_740_6e-4;
    q = q * x2 - 1.682_827e-3;
    q = q * x2 - 7.373_329e-3;
    q = q * x2 - 1.426_474e-2;
    let y = xc * p / q;
    // Beyond 3.92, erf rounds to ±1 in f32.
    let y = if xc.abs() >= 3.92 { f32::copysign(1.0, x) } else { y };
    if x.is_nan() {
        x
    } else {
        y
    }
}

#[cfg(test)]
mod tests {
    use super::super::erf::erf64;

    /// Largest error in ulps of `f` against `reference` over `[lo, hi]`.
    fn max_ulps(lo: f32, hi: f32, f: impl Fn(f32) -> f32, reference: impl Fn(f64) -> f64) -> f64 {
        let steps = 200_000;
        let mut worst = 0f64;
        for i in 0..=steps {
            let x = lo + (hi - lo) * i as f32 / steps as f32;
            let want = reference(x as f64);
            let got = f(x) as f64;
            let ulp = ((want as f32).abs().max(f32::MIN_POSITIVE) as f64) * f32::EPSILON as f64;
            worst = worst.max((got - want).abs() / ulp);
        }
        worst
    }

    #[test]
    fn exp_is_within_two_ulps() {
        assert!(max_ulps(-87.0, 88.0, super::exp, f64::exp) <= 2.0);
        assert_eq!(super::exp(0.0), 1.0);
        assert_eq!(super::exp(89.0), f32::INFINITY);
        assert_eq!(super::exp(-110.0), 0.0);
        assert_eq!(super::exp(f32::NEG_INFINITY), 0.0);
        assert!(super::exp(f32::NAN).is_nan());
        // Subnormal results.
        let s = super::exp(-100.0);
        let smallest = f32::from_bits(1) as f64;
        assert!(s > 0.0 && (s as f64 - (-100f64).exp()).abs() <= smallest);
    }

    #[test]
    fn tanh_is_within_a_few_ulps() {
        assert!(max_ulps(-10.0, 10.0, super::tanh, f64::tanh) <= 4.0);
        assert!(max_ulps(-1e-3, 1e-3, super::tanh, f64::tanh) <= 2.0);
        assert_eq!(super::tanh(100.0), 1.0);
        assert_eq!(super::tanh(-100.0), -1.0);
        assert!(super::tanh(f32::NAN).is_nan());
    }

    #[test]
    fn erf_is_within_a_few_ulps() {
        assert!(max_ulps(-5.0, 5.0, super::erf, erf64) <= 4.0);
        assert!(max_ulps(-1e-3, 1e-3, super::erf, erf64) <= 4.0);
        assert_eq!(super::erf(f32::INFINITY), 1.0);
        assert_eq!(super::erf(-10.0), -1.0);
        assert!(super::erf(f32::NAN).is_nan());
    }
}
