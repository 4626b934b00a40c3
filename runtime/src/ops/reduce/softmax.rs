//! Softmax, LogSoftmax and Hardmax along one axis.
//!
//! With `flatten` (ONNX before opset 13) the input is seen as a 2-D matrix
//! `[prod(shape[..axis]), prod(shape[axis..])]` and each row is normalized;
//! otherwise (opset 13 and later) only `axis` is normalized.

use super::common::{exp_f32, float_dispatch, is_nan, lanes_max_f32, lanes_sum};
use crate::dtype::DType;
use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SoftmaxKind {
    Softmax,
    LogSoftmax,
    /// 1 at the first maximum, 0 elsewhere.
    Hardmax,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Softmax {
    pub kind: SoftmaxKind,
    /// Normalized (non-negative) axis.
    pub axis: usize,
    /// Normalize over all axes from `axis` on (pre-opset-13 semantics).
    pub flatten: bool,
}

impl Softmax {
    /// Opset-13 Softmax along `axis`.
    pub fn new(axis: usize) -> Softmax {
        Softmax { kind: SoftmaxKind::Softmax, axis, flatten: false }
    }

    pub fn with_kind(kind: SoftmaxKind, axis: usize, flatten: bool) -> Softmax {
        Softmax { kind, axis, flatten }
    }

    /// The (outer, n, inner) split of `shape` this op normalizes over.
    fn split(&self, shape: &[usize]) -> (usize, usize, usize) {
        let outer = shape[..self.axis].iter().product();
        if self.flatten {
            (outer, shape[self.axis..].iter().product(), 1)
        } else {
            (outer, shape[self.axis], shape[self.axis + 1..].iter().product())
        }
    }
}

impl OpImpl for Softmax {
    fn name(&self) -> &'static str {
        match self.kind {
            SoftmaxKind::Softmax => "Softmax",
            SoftmaxKind::LogSoftmax => "LogSoftmax",
            SoftmaxKind::Hardmax => "Hardmax",
        }
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.dtype.is_float(), "{}: expected a float tensor, got {}", self.name(), x.dtype);
        ensure_op!(self.axis < x.shape.len(), "{}: axis {} out of range for rank {}", self.name(), self.axis, x.shape.len());
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(self.axis < x.shape.len(), "{}: axis out of range", self.name());
        let dims = self.split(x.shape);
        let y = &mut outputs[0];
        ensure_op!(y.len() == x.len(), "{}: output has the wrong size", self.name());
        match (self.kind, x.dtype, dims.2) {
            (SoftmaxKind::Hardmax, d, _) => float_dispatch!(d, self.name(), hardmax(x, y, dims)),
            (kind, DType::F32, 1) => {
                softmax_rows_f32(x.as_slice::<f32>()?, y.as_mut_slice::<f32>()?, dims.1, kind == SoftmaxKind::LogSoftmax);
                Ok(())
            }
            (SoftmaxKind::Softmax, DType::F32, _) => {
                softmax_strided_f32(x.as_slice::<f32>()?, y.as_mut_slice::<f32>()?, dims);
                Ok(())
            }
            (kind, d, _) => {
                let log = kind == SoftmaxKind::LogSoftmax;
                float_dispatch!(d, self.name(), softmax_strided(x, y, dims, log))
            }
        }
    }
}

/// Softmax of contiguous f32 rows of length `n`: vectorized max and exp in
/// f32, sums in f64.
fn softmax_rows_f32(xs: &[f32], ys: &mut [f32], n: usize, log: bool) {
    if n == 0 {
        return;
    }
    let floor = fast_floor(n);
    for (x, y) in xs.chunks_exact(n).zip(ys.chunks_exact_mut(n)) {
        let max = lanes_max_f32(x);
        for (o, &v) in y.iter_mut().zip(x) {
            *o = exp_above(v - max, floor);
        }
        let sum = lanes_sum(y, |v| v as f64);
        if log {
            let log_sum = sum.ln() as f32;
            for (o, &v) in y.iter_mut().zip(x) {
                *o = (v - max) - log_sum;
            }
        } else {
            let inv = (1.0 / sum) as f32;
            for o in y.iter_mut() {
                *o *= inv;
            }
        }
    }
}

/// The fast mode's cut-off for rows of `n` terms (`crate::math`): a term
/// e^(x - max) with x - max below it is 0 instead of its exponential. The
/// cut-off is e^-87 · n, so every term kept stays a normal number after
/// division by the sum (at most n), and every term dropped would have been
/// below 2e-38 · n / sum of the output. Subnormal operands cost Intel cores
/// a microcode assist per instruction (GPT-2's causal mask made half of each
/// attention row subnormal: testdata gpt2 took 0.22 ms, 0.135 without), and
/// they reach every product the probabilities feed. The exact mode keeps
/// the reference's subnormal outputs (`f32::NEG_INFINITY` there: no cut-off).
fn fast_floor(n: usize) -> f32 {
    if crate::math::mode() == crate::math::Math::Fast {
        -87.0 + (n as f32).ln()
    } else {
        f32::NEG_INFINITY
    }
}

/// e^d, or 0 where d is below `floor` (see [`fast_floor`]); NaN stays NaN.
#[inline(always)]
fn exp_above(d: f32, floor: f32) -> f32 {
    if d < floor {
        0.0
    } else {
        exp_f32(d)
    }
}

/// Softmax of f32 along the middle dim of `[outer, n, inner]`, one row of
/// `inner` elements at a time: max, exp into the output, f64 sums, scale.
fn softmax_strided_f32(xs: &[f32], ys: &mut [f32], (outer, n, inner): (usize, usize, usize)) {
    let block = n * inner;
    if block == 0 {
        return;
    }
    let floor = fast_floor(n);
    let mut max = vec![0f32; inner];
    let mut sum = vec![0f64; inner];
    let mut inv = vec![0f32; inner];
    for (xb, yb) in xs.chunks_exact(block).zip(ys.chunks_exact_mut(block)).take(outer) {
        max.fill(f32::NEG_INFINITY);
        sum.fill(0.0);
        for row in xb.chunks_exact(inner) {
            for (m, &v) in max.iter_mut().zip(row) {
                *m = if v > *m { v } else { *m };
            }
        }
        for (xr, yr) in xb.chunks_exact(inner).zip(yb.chunks_exact_mut(inner)) {
            for (((o, &v), &m), s) in yr.iter_mut().zip(xr).zip(&max).zip(sum.iter_mut()) {
                let e = exp_above(v - m, floor);
                *o = e;
                *s += e as f64;
            }
        }
        for (i, &s) in inv.iter_mut().zip(&sum) {
            *i = (1.0 / s) as f32;
        }
        for yr in yb.chunks_exact_mut(inner) {
            for (o, &i) in yr.iter_mut().zip(&inv) {
                *o *= i;
            }
        }
    }
}

/// Softmax along the middle dim of `[outer, n, inner]`, computed in f64 one
/// row of `inner` elements at a time so that memory is read contiguously.
fn softmax_strided<T: Element>(
    x: TensorView,
    y: &mut TensorViewMut,
    (outer, n, inner): (usize, usize, usize),
    log: bool,
) -> Result<()> {
    let xs = x.as_slice::<T>()?;
    let ys = y.as_mut_slice::<T>()?;
    let block = n * inner;
    if block == 0 {
        return Ok(());
    }
    let mut max = vec![0f64; inner];
    let mut sum = vec![0f64; inner];
    for (xb, yb) in xs.chunks_exact(block).zip(ys.chunks_exact_mut(block)).take(outer) {
        max.fill(f64::NEG_INFINITY);
        sum.fill(0.0);
        for row in xb.chunks_exact(inner) {
            for (m, &v) in max.iter_mut().zip(row) {
                *m = m.max(v.to_f64());
            }
        }
        for row in xb.chunks_exact(inner) {
            for ((s, &m), &v) in sum.iter_mut().zip(&max).zip(row) {
                *s += (v.to_f64() - m).exp();
            }
        }
        for (xr, yr) in xb.chunks_exact(inner).zip(yb.chunks_exact_mut(inner)) {
            for (((o, &v), &m), &s) in yr.iter_mut().zip(xr).zip(&max).zip(&sum) {
                let d = v.to_f64() - m;
                *o = T::from_f64(if log { d - s.ln() } else { d.exp() / s });
            }
        }
    }
    Ok(())
}

/// 1 at the first maximum of each slice along the axis, 0 elsewhere.
fn hardmax<T: Element>(x: TensorView, y: &mut TensorViewMut, (outer, n, inner): (usize, usize, usize)) -> Result<()> {
    let xs = x.as_slice::<T>()?;
    let ys = y.as_mut_slice::<T>()?;
    let (zero, one) = (T::from_f64(0.0), T::from_f64(1.0));
    ys.fill(zero);
    if n == 0 {
        return Ok(());
    }
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * n + k) * inner + i;
            let mut best = 0;
            for k in 1..n {
                let (v, b) = (xs[at(k)], xs[at(best)]);
                if !is_nan(b) && (v > b || is_nan(v)) {
                    best = k;
                }
            }
            ys[at(best)] = one;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn run(op: Softmax, x: &Tensor) -> Vec<f64> {
        let op: Op = op.into();
        op.eval_owned(&[Some(x)]).unwrap().remove(0).to_f64_vec()
    }

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-6)
    }

    #[test]
    fn softmax_last_axis() {
        let x = Tensor::from_vec(vec![2, 2], vec![0f32, 0., 1., 3.]).unwrap();
        let e = 1.0 / (1.0 + 2f64.exp());
        assert!(close(&run(Softmax::new(1), &x), &[0.5, 0.5, e, 1.0 - e]));
    }

    #[test]
    fn softmax_long_rows_match_f64() {
        let v: Vec<f32> = (0..2 * 37).map(|i| ((i * 13 % 29) as f32 - 14.0) * 0.7).collect();
        let x = Tensor::from_vec(vec![2, 37], v.clone()).unwrap();
        for kind in [SoftmaxKind::Softmax, SoftmaxKind::LogSoftmax] {
            let got = run(Softmax::with_kind(kind, 1, false), &x);
            for (row, out) in v.chunks(37).zip(got.chunks(37)) {
                let max = row.iter().fold(f64::NEG_INFINITY, |m, &a| m.max(a as f64));
                let sum: f64 = row.iter().map(|&a| (a as f64 - max).exp()).sum();
                for (&a, &o) in row.iter().zip(out) {
                    let d = a as f64 - max;
                    let want = if kind == SoftmaxKind::LogSoftmax { d - sum.ln() } else { d.exp() / sum };
                    assert!((o - want).abs() <= 1e-6 * want.abs().max(1.0), "{kind:?}: {o} vs {want}");
                }
            }
        }
    }

    #[test]
    fn softmax_middle_axis_f32() {
        let x = Tensor::from_vec(vec![2, 2], vec![0f32, 1., 0., 3.]).unwrap();
        let (a, b) = (1.0 / (1.0 + 2f64.exp()), 1.0 / (1.0 + (-2f64).exp()));
        assert!(close(&run(Softmax::new(0), &x), &[0.5, a, 0.5, b]));
    }

    #[test]
    fn softmax_middle_axis_and_log() {
        let x = Tensor::from_vec(vec![2, 2], vec![0f64, 1., 0., 3.]).unwrap();
        let y = run(Softmax::with_kind(SoftmaxKind::LogSoftmax, 0, false), &x);
        let l = (0.5f64).ln();
        let (a, b) = ((1.0 / (1.0 + 2f64.exp())).ln(), (1.0 / (1.0 + (-2f64).exp())).ln());
        assert!(close(&y, &[l, a, l, b]));
    }

    #[test]
    fn flatten_normalizes_trailing_block() {
        let x = Tensor::from_vec(vec![1, 2, 2], vec![0f32; 4]).unwrap();
        assert!(close(&run(Softmax::with_kind(SoftmaxKind::Softmax, 1, true), &x), &[0.25; 4]));
        assert!(close(&run(Softmax::with_kind(SoftmaxKind::Softmax, 1, false), &x), &[0.5; 4]));
    }

    #[test]
    fn hardmax_picks_first_max() {
        let x = Tensor::from_vec(vec![2, 3], vec![1f32, 3., 3., 0., -1., -2.]).unwrap();
        assert_eq!(run(Softmax::with_kind(SoftmaxKind::Hardmax, 1, false), &x), vec![0., 1., 0., 1., 0., 0.]);
    }
}
