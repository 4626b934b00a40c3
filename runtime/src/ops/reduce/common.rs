//! Helpers shared by the reduction family: dtype dispatch, integer
//! accumulation, and the iteration plan of a reduction over a set of axes.

use crate::tensor::Element;
use std::cmp::Ordering;

/// Calls `$f::<T>($args)` for the Rust type `T` of a float dtype, or fails
/// with `$name: unsupported dtype`.
macro_rules! float_dispatch {
    ($dtype:expr, $name:expr, $f:ident ( $($arg:expr),* $(,)? )) => {
        match $dtype {
            $crate::dtype::DType::F32 => $f::<f32>($($arg),*),
            $crate::dtype::DType::F64 => $f::<f64>($($arg),*),
            $crate::dtype::DType::F16 => $f::<half::f16>($($arg),*),
            $crate::dtype::DType::BF16 => $f::<half::bf16>($($arg),*),
            d => $crate::bail_op!("{}: unsupported dtype {d}", $name),
        }
    };
}
pub(super) use float_dispatch;

/// Like [`float_dispatch`] for every numeric dtype (not bool).
macro_rules! numeric_dispatch {
    ($dtype:expr, $name:expr, $f:ident ( $($arg:expr),* $(,)? )) => {
        match $dtype {
            $crate::dtype::DType::F32 => $f::<f32>($($arg),*),
            $crate::dtype::DType::F64 => $f::<f64>($($arg),*),
            $crate::dtype::DType::F16 => $f::<half::f16>($($arg),*),
            $crate::dtype::DType::BF16 => $f::<half::bf16>($($arg),*),
            $crate::dtype::DType::I8 => $f::<i8>($($arg),*),
            $crate::dtype::DType::I16 => $f::<i16>($($arg),*),
            $crate::dtype::DType::I32 => $f::<i32>($($arg),*),
            $crate::dtype::DType::I64 => $f::<i64>($($arg),*),
            $crate::dtype::DType::U8 => $f::<u8>($($arg),*),
            $crate::dtype::DType::U16 => $f::<u16>($($arg),*),
            $crate::dtype::DType::U32 => $f::<u32>($($arg),*),
            $crate::dtype::DType::U64 => $f::<u64>($($arg),*),
            d => $crate::bail_op!("{}: unsupported dtype {d}", $name),
        }
    };
}
pub(super) use numeric_dispatch;

/// Like [`float_dispatch`] for integer dtypes; bool is read as `u8`.
macro_rules! int_dispatch {
    ($dtype:expr, $name:expr, $f:ident ( $($arg:expr),* $(,)? )) => {
        match $dtype {
            $crate::dtype::DType::I8 => $f::<i8>($($arg),*),
            $crate::dtype::DType::I16 => $f::<i16>($($arg),*),
            $crate::dtype::DType::I32 => $f::<i32>($($arg),*),
            $crate::dtype::DType::I64 => $f::<i64>($($arg),*),
            $crate::dtype::DType::U8 | $crate::dtype::DType::Bool => $f::<u8>($($arg),*),
            $crate::dtype::DType::U16 => $f::<u16>($($arg),*),
            $crate::dtype::DType::U32 => $f::<u32>($($arg),*),
            $crate::dtype::DType::U64 => $f::<u64>($($arg),*),
            d => $crate::bail_op!("{}: unsupported dtype {d}", $name),
        }
    };
}
pub(super) use int_dispatch;

/// Integer elements, accumulated exactly (modulo 2^128) in `i128`.
pub(super) trait IntElement: Element + Ord {
    const MIN_I128: i128;
    const MAX_I128: i128;
    fn to_i128(self) -> i128;
    /// Wrapping conversion (keeps the low bits), like a C cast.
    fn from_i128(v: i128) -> Self;
}

macro_rules! int_element {
    ($($t:ty),*) => {$(
        impl IntElement for $t {
            const MIN_I128: i128 = <$t>::MIN as i128;
            const MAX_I128: i128 = <$t>::MAX as i128;
            fn to_i128(self) -> i128 { self as i128 }
            fn from_i128(v: i128) -> Self { v as $t }
        }
    )*};
}
int_element!(i8, i16, i32, i64, u8, u16, u32, u64);

/// A total order on elements: integers by value, floats by IEEE total order
/// (so NaN sorts above +inf), used where a sort must never see an
/// inconsistent comparison.
pub(super) trait TotalOrder: Element {
    fn total_cmp(&self, other: &Self) -> Ordering;
}

macro_rules! total_order_int {
    ($($t:ty),*) => {$(
        impl TotalOrder for $t {
            fn total_cmp(&self, other: &Self) -> Ordering { self.cmp(other) }
        }
    )*};
}
total_order_int!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! total_order_float {
    ($($t:ty),*) => {$(
        impl TotalOrder for $t {
            fn total_cmp(&self, other: &Self) -> Ordering { self.to_f64().total_cmp(&other.to_f64()) }
        }
    )*};
}
total_order_float!(f32, f64, half::f16, half::bf16);

/// Whether `v` is NaN (the only value not equal to itself).
#[allow(clippy::eq_op)]
pub(super) fn is_nan<T: PartialEq>(v: T) -> bool {
    v != v
}

/// Sum of `f(v)` over a slice with eight independent f64 accumulators, so
/// that the loop vectorizes and the rounding error stays small.
#[inline]
pub(super) fn lanes_sum<T: Copy>(xs: &[T], f: impl Fn(T) -> f64) -> f64 {
    let mut acc = [0f64; 8];
    let chunks = xs.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += f(v);
        }
    }
    let tail: f64 = rest.iter().map(|&v| f(v)).sum();
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

/// Maximum of a slice of f32 (NaN-ignoring like `f32::max`), in eight lanes
/// so that the loop vectorizes. `-inf` for an empty slice.
#[inline]
pub(super) fn lanes_max_f32(xs: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 8];
    let chunks = xs.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a = if v > *a { v } else { *a };
        }
    }
    rest.iter().chain(&acc).fold(f32::NEG_INFINITY, |m, &v| m.max(v))
}

/// `e^x` for f32 without a libm call, so that loops over it vectorize
/// (Cephes' `expf`: range reduction by ln 2 with round-to-nearest, degree-6 polynomial, scaling by
/// 2^n through the exponent bits). Relative error about 2e-7; NaN stays NaN;
/// results below ~1e-38 flush to 0 and above ~1e38 saturate near f32::MAX.
#[inline]
pub fn exp_f32(x: f32) -> f32 {
    const HI: f32 = 88.376_26;
    const LO: f32 = -87.336_55;
    // `clamp` keeps NaN.
    let x = x.clamp(LO, HI);
    // Round x / ln 2 to the nearest integer with the 1.5 * 2^23 trick (no
    // `floor`, which is a libm call without SSE4.1).
    const ROUND: f32 = 12_582_912.0;
    let t = x * std::f32::consts::LOG2_E + ROUND;
    let n = t - ROUND;
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let z = r * r;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r + 1.666_666_5e-1) * r + 0.5;
    let e = p * z + r + 1.0;
    // 2^n for n in [-126, 128]: build the exponent bits. The integer n sits
    // in the low mantissa bits of t (read as bits rather than with `as`,
    // which saturates and does not vectorize). n = 128 only occurs near HI;
    // split it so the bit pattern stays finite. NaN gives garbage n, but e
    // is already NaN.
    let n = (t.to_bits() as i32).wrapping_sub(ROUND.to_bits() as i32);
    let half = n >> 1;
    let pow = |k: i32| f32::from_bits((k.wrapping_add(127) as u32) << 23);
    e * pow(half) * pow(n - half)
}

/// Splits a shape at `axis` into (outer, n, inner): the product of the dims
/// before, the dim itself, and the product of the dims after.
pub(super) fn split_at_axis(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    let outer = shape[..axis].iter().product();
    let inner = shape[axis + 1..].iter().product();
    (outer, shape[axis], inner)
}

/// How to walk an input tensor when reducing it over a set of axes.
///
/// Adjacent axes that are all reduced (or all kept) are merged and axes of
/// size 1 dropped, so the walk is a short odometer over "runs": contiguous
/// stretches of the innermost merged axis. A run either folds into one
/// output element (`run_reduced`) or maps one to one onto contiguous output
/// elements.
#[derive(Clone, Debug)]
pub(super) struct ReducePlan {
    /// Merged outer dims (all but the innermost), with their input strides
    /// and output strides (0 for reduced dims).
    outer: Vec<(usize, usize, usize)>,
    /// Length of one run (the innermost merged dim).
    pub run_len: usize,
    /// Whether the innermost merged dim is reduced.
    pub run_reduced: bool,
    /// Number of input elements.
    pub in_len: usize,
    /// Number of output elements.
    pub out_len: usize,
    /// Number of input elements folded into each output element.
    pub group_len: usize,
}

impl ReducePlan {
    /// `axes` must be valid, distinct axes of `shape`.
    pub fn new(shape: &[usize], axes: &[usize]) -> ReducePlan {
        let in_len: usize = shape.iter().product();
        let out_len: usize = shape.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, d)| d).product();
        let group_len: usize = axes.iter().map(|&a| shape[a]).product();
        let mut merged: Vec<(usize, bool)> = Vec::with_capacity(shape.len());
        for (i, &d) in shape.iter().enumerate() {
            if d == 1 {
                continue;
            }
            let reduced = axes.contains(&i);
            match merged.last_mut() {
                Some((size, r)) if *r == reduced => *size *= d,
                _ => merged.push((d, reduced)),
            }
        }
        let (run_len, run_reduced) = merged.pop().unwrap_or((1, false));
        let mut outer = Vec::with_capacity(merged.len());
        let mut in_stride = run_len;
        let mut out_stride = if run_reduced { 1 } else { run_len };
        for &(size, reduced) in merged.iter().rev() {
            outer.push((size, in_stride, if reduced { 0 } else { out_stride }));
            in_stride *= size;
            if !reduced {
                out_stride *= size;
            }
        }
        outer.reverse();
        ReducePlan { outer, run_len, run_reduced, in_len, out_len, group_len }
    }

    /// Calls `f(input_offset, output_offset)` for the start of every run, in
    /// input order. Does nothing for an empty input.
    pub fn for_each_run(&self, mut f: impl FnMut(usize, usize)) {
        if self.in_len == 0 {
            return;
        }
        let runs = self.in_len / self.run_len;
        let mut idx = vec![0usize; self.outer.len()];
        let (mut x_off, mut o_off) = (0usize, 0usize);
        for _ in 0..runs {
            f(x_off, o_off);
            for (d, &(size, xs, os)) in self.outer.iter().enumerate().rev() {
                idx[d] += 1;
                x_off += xs;
                o_off += os;
                if idx[d] < size {
                    break;
                }
                idx[d] = 0;
                x_off -= xs * size;
                o_off -= os * size;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(shape: &[usize], axes: &[usize]) -> Vec<(usize, usize)> {
        let mut v = Vec::new();
        ReducePlan::new(shape, axes).for_each_run(|x, o| v.push((x, o)));
        v
    }

    #[test]
    fn exp_f32_matches_libm() {
        let mut worst = 0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let want = (x as f64).exp();
            worst = worst.max(((exp_f32(x) as f64 - want) / want).abs());
            x += 0.0137;
        }
        assert!(worst < 5e-7, "worst relative error {worst}");
        assert!(exp_f32(f32::NEG_INFINITY) < 1.2e-38);
        assert!(exp_f32(f32::NAN).is_nan());
        assert!(exp_f32(f32::INFINITY).is_finite());
    }

    #[test]
    fn lanes_max_handles_tails() {
        let v: Vec<f32> = (0..19).map(|i| (i * 7 % 19) as f32).collect();
        assert_eq!(lanes_max_f32(&v), 18.0);
        assert_eq!(lanes_max_f32(&[]), f32::NEG_INFINITY);
    }

    #[test]
    fn plan_merges_adjacent_axes() {
        let p = ReducePlan::new(&[2, 3, 4, 5], &[2, 3]);
        assert_eq!((p.run_len, p.run_reduced, p.out_len, p.group_len), (20, true, 6, 20));
        assert_eq!(runs(&[2, 3, 4, 5], &[2, 3]).len(), 6);
    }

    #[test]
    fn plan_middle_axis_runs_are_kept() {
        let p = ReducePlan::new(&[2, 3, 4], &[1]);
        assert_eq!((p.run_len, p.run_reduced, p.out_len), (4, false, 8));
        assert_eq!(runs(&[2, 3, 4], &[1]), vec![(0, 0), (4, 0), (8, 0), (12, 4), (16, 4), (20, 4)]);
    }

    #[test]
    fn plan_handles_scalars_and_empty() {
        assert_eq!(runs(&[], &[]), vec![(0, 0)]);
        assert!(runs(&[2, 0], &[1]).is_empty());
        assert_eq!(ReducePlan::new(&[2, 0], &[1]).out_len, 2);
    }
}
