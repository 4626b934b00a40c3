//! ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
//! ReduceL2, ReduceLogSum, ReduceLogSumExp and ReduceSumSquare over a static
//! set of axes.
//!
//! Float inputs accumulate in f64; integer inputs accumulate exactly in i128
//! and wrap to the output type like onnxruntime's native arithmetic. Reducing
//! over an empty set gives the identity of the reduction (0 for sums, 1 for
//! products, -inf / the type's minimum for Max, -inf for the log-sums).
//! Reducing over no axes applies the per-element part of the reduction
//! (e.g. `x * x` for ReduceSumSquare).

use super::common::{float_dispatch, int_dispatch, lanes_sum, IntElement, ReducePlan};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::util::normalize_axes;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReduceKind {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

impl ReduceKind {
    /// The reduction over the spatial axes that a pool of `kind` whose
    /// window is its whole input computes (a global pool); `None` for an Lp
    /// pool of a `p` other than 1 or 2.
    pub fn of_global_pool(kind: &crate::ops::linalg::PoolKind) -> Option<ReduceKind> {
        use crate::ops::linalg::PoolKind;
        match kind {
            PoolKind::Max => Some(ReduceKind::Max),
            PoolKind::Average { .. } => Some(ReduceKind::Mean),
            PoolKind::Lp { p: 1.0 } => Some(ReduceKind::L1),
            PoolKind::Lp { p: 2.0 } => Some(ReduceKind::L2),
            PoolKind::Lp { .. } => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reduce {
    pub kind: ReduceKind,
    /// Normalized, distinct axes to reduce over (empty: reduce nothing).
    pub axes: Vec<usize>,
    /// Keep reduced axes as dims of size 1.
    pub keepdims: bool,
}

impl Reduce {
    pub fn new(kind: ReduceKind, axes: Vec<usize>, keepdims: bool) -> Reduce {
        Reduce { kind, axes, keepdims }
    }

    fn out_shape(&self, shape: &[usize]) -> Vec<usize> {
        let reduced = |i: &usize| self.axes.contains(i);
        if self.keepdims {
            shape.iter().enumerate().map(|(i, &d)| if reduced(&i) { 1 } else { d }).collect()
        } else {
            shape.iter().enumerate().filter(|(i, _)| !reduced(i)).map(|(_, &d)| d).collect()
        }
    }

    /// Whether the reduction is computed on integers (exactly) rather than
    /// through f64.
    fn exact_int(&self, dtype: DType) -> bool {
        (dtype.is_int() || dtype == DType::Bool)
            && !matches!(self.kind, ReduceKind::L2 | ReduceKind::LogSum | ReduceKind::LogSumExp)
    }
}

impl OpImpl for Reduce {
    fn name(&self) -> &'static str {
        match self.kind {
            ReduceKind::Sum => "ReduceSum",
            ReduceKind::Mean => "ReduceMean",
            ReduceKind::Max => "ReduceMax",
            ReduceKind::Min => "ReduceMin",
            ReduceKind::Prod => "ReduceProd",
            ReduceKind::L1 => "ReduceL1",
            ReduceKind::L2 => "ReduceL2",
            ReduceKind::LogSum => "ReduceLogSum",
            ReduceKind::LogSumExp => "ReduceLogSumExp",
            ReduceKind::SumSquare => "ReduceSumSquare",
        }
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        let bool_ok = matches!(self.kind, ReduceKind::Max | ReduceKind::Min);
        ensure_op!(x.dtype != DType::Bool || bool_ok, "{}: bool inputs are not supported", self.name());
        let axes: Vec<i64> = self.axes.iter().map(|&a| a as i64).collect();
        normalize_axes(&axes, x.shape.len())?;
        Ok(vec![TensorType::new(x.dtype, self.out_shape(&x.shape))])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(self.axes.iter().all(|&a| a < x.shape.len()), "{}: axis out of range", self.name());
        let plan = ReducePlan::new(x.shape, &self.axes);
        let y = &mut outputs[0];
        ensure_op!(y.len() == plan.out_len, "{}: output has the wrong size", self.name());
        if self.exact_int(x.dtype) {
            int_dispatch!(x.dtype, self.name(), reduce_int(self.kind, &plan, x, y))
        } else if x.dtype.is_float() {
            float_dispatch!(x.dtype, self.name(), reduce_via_f64(self.kind, &plan, x, y))
        } else {
            int_dispatch!(x.dtype, self.name(), reduce_via_f64(self.kind, &plan, x, y))
        }
    }
}

/// Folds `g(x)` of every input element into `acc[output]` with `combine`.
fn accumulate<T: Element, A: Copy>(plan: &ReducePlan, xs: &[T], acc: &mut [A], g: impl Fn(T) -> A, combine: impl Fn(A, A) -> A) {
    let len = plan.run_len;
    if plan.run_reduced {
        plan.for_each_run(|xo, oo| {
            let mut a = acc[oo];
            for &v in &xs[xo..xo + len] {
                a = combine(a, g(v));
            }
            acc[oo] = a;
        });
    } else {
        plan.for_each_run(|xo, oo| {
            for (a, &v) in acc[oo..oo + len].iter_mut().zip(&xs[xo..xo + len]) {
                *a = combine(*a, g(v));
            }
        });
    }
}

/// [`accumulate`] for sums of `g(x)`, with vectorized sums over runs.
fn accumulate_sum<T: Element>(plan: &ReducePlan, xs: &[T], acc: &mut [f64], g: impl Fn(T) -> f64 + Copy) {
    let len = plan.run_len;
    if plan.run_reduced {
        plan.for_each_run(|xo, oo| acc[oo] += lanes_sum(&xs[xo..xo + len], g));
    } else {
        accumulate(plan, xs, acc, g, |a, b| a + b);
    }
}

/// Max that propagates NaN, like numpy.
fn max_nan(a: f64, b: f64) -> f64 {
    if b > a || b.is_nan() {
        b
    } else {
        a
    }
}

fn min_nan(a: f64, b: f64) -> f64 {
    if b < a || b.is_nan() {
        b
    } else {
        a
    }
}

fn reduce_via_f64<T: Element>(kind: ReduceKind, plan: &ReducePlan, x: TensorView, y: &mut TensorViewMut) -> Result<()> {
    let xs = x.as_slice::<T>()?;
    let ys = y.as_mut_slice::<T>()?;
    let init = match kind {
        ReduceKind::Max | ReduceKind::LogSumExp => f64::NEG_INFINITY,
        ReduceKind::Min => f64::INFINITY,
        ReduceKind::Prod => 1.0,
        _ => 0.0,
    };
    let mut acc = vec![init; plan.out_len];
    match kind {
        ReduceKind::Sum | ReduceKind::Mean | ReduceKind::LogSum => accumulate_sum(plan, xs, &mut acc, T::to_f64),
        ReduceKind::SumSquare | ReduceKind::L2 => accumulate_sum(plan, xs, &mut acc, |v| v.to_f64() * v.to_f64()),
        ReduceKind::L1 => accumulate_sum(plan, xs, &mut acc, |v| v.to_f64().abs()),
        ReduceKind::Max => accumulate(plan, xs, &mut acc, T::to_f64, max_nan),
        ReduceKind::Min => accumulate(plan, xs, &mut acc, T::to_f64, min_nan),
        ReduceKind::Prod => accumulate(plan, xs, &mut acc, T::to_f64, |a, b| a * b),
        ReduceKind::LogSumExp => log_sum_exp(plan, xs, &mut acc),
    }
    let n = plan.group_len as f64;
    for (o, &a) in ys.iter_mut().zip(&acc) {
        let v = match kind {
            ReduceKind::Mean => a / n,
            ReduceKind::L2 => a.sqrt(),
            ReduceKind::LogSum => a.ln(),
            _ => a,
        };
        *o = T::from_f64(v);
    }
    Ok(())
}

/// `acc` holds -inf on entry; on return, log(sum(exp(x))) per output,
/// computed stably around the maximum.
fn log_sum_exp<T: Element>(plan: &ReducePlan, xs: &[T], acc: &mut [f64]) {
    accumulate(plan, xs, acc, T::to_f64, max_nan);
    // A non-finite maximum (all -inf, an +inf, NaN) needs no shift.
    let shift: Vec<f64> = acc.iter().map(|&m| if m.is_finite() { m } else { 0.0 }).collect();
    let mut sums = vec![0.0f64; acc.len()];
    let len = plan.run_len;
    if plan.run_reduced {
        plan.for_each_run(|xo, oo| {
            let m = shift[oo];
            sums[oo] += xs[xo..xo + len].iter().map(|&v| (v.to_f64() - m).exp()).sum::<f64>();
        });
    } else {
        plan.for_each_run(|xo, oo| {
            let rows = sums[oo..oo + len].iter_mut().zip(&shift[oo..oo + len]);
            for ((s, &m), &v) in rows.zip(&xs[xo..xo + len]) {
                *s += (v.to_f64() - m).exp();
            }
        });
    }
    for ((a, &s), &m) in acc.iter_mut().zip(&sums).zip(&shift) {
        *a = m + s.ln();
    }
}

fn reduce_int<T: IntElement>(kind: ReduceKind, plan: &ReducePlan, x: TensorView, y: &mut TensorViewMut) -> Result<()> {
    let xs = x.as_slice::<T>()?;
    let ys = y.as_mut_slice::<T>()?;
    let init = match kind {
        ReduceKind::Max => T::MIN_I128,
        ReduceKind::Min => T::MAX_I128,
        ReduceKind::Prod => 1,
        _ => 0,
    };
    let mut acc = vec![init; plan.out_len];
    let sum = |a: i128, b: i128| a.wrapping_add(b);
    match kind {
        ReduceKind::Sum | ReduceKind::Mean => accumulate(plan, xs, &mut acc, T::to_i128, sum),
        ReduceKind::SumSquare => accumulate(plan, xs, &mut acc, |v| v.to_i128().wrapping_mul(v.to_i128()), sum),
        ReduceKind::L1 => accumulate(plan, xs, &mut acc, |v| v.to_i128().abs(), sum),
        ReduceKind::Max => accumulate(plan, xs, &mut acc, T::to_i128, i128::max),
        ReduceKind::Min => accumulate(plan, xs, &mut acc, T::to_i128, i128::min),
        ReduceKind::Prod => accumulate(plan, xs, &mut acc, T::to_i128, i128::wrapping_mul),
        k => bail_op!("{k:?} is not computed on integers"),
    }
    let n = plan.group_len as i128;
    for (o, &a) in ys.iter_mut().zip(&acc) {
        let v = match kind {
            ReduceKind::Mean if n > 0 => a / n,
            _ => a,
        };
        *o = T::from_i128(v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn run(kind: ReduceKind, axes: &[usize], keepdims: bool, x: &Tensor) -> Tensor {
        let op: Op = Reduce::new(kind, axes.to_vec(), keepdims).into();
        op.eval_owned(&[Some(x)]).unwrap().remove(0)
    }

    fn x234() -> Tensor {
        Tensor::from_vec(vec![2, 3, 4], (0..24).map(|v| v as f32).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn sum_over_middle_axis() {
        let y = run(ReduceKind::Sum, &[1], false, &x234());
        assert_eq!(y.shape(), &[2, 4]);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[12., 15., 18., 21., 48., 51., 54., 57.]);
    }

    #[test]
    fn mean_over_outer_and_inner_axes_keeps_dims() {
        let y = run(ReduceKind::Mean, &[0, 2], true, &x234());
        assert_eq!(y.shape(), &[1, 3, 1]);
        // Axis 1 index j averages 4j..4j+3 and 12+4j..12+4j+3: 4j + 7.5.
        assert_eq!(y.as_slice::<f32>().unwrap(), &[7.5, 11.5, 15.5]);
    }

    #[test]
    fn max_min_and_log_sum_exp() {
        let x = Tensor::from_vec(vec![2, 2], vec![1f32, 5., -3., 2.]).unwrap();
        assert_eq!(run(ReduceKind::Max, &[1], false, &x).as_slice::<f32>().unwrap(), &[5., 2.]);
        assert_eq!(run(ReduceKind::Min, &[0], false, &x).as_slice::<f32>().unwrap(), &[-3., 2.]);
        let lse = run(ReduceKind::LogSumExp, &[1], false, &x);
        let want = (1f64.exp() + 5f64.exp()).ln() as f32;
        assert!((lse.as_slice::<f32>().unwrap()[0] - want).abs() < 1e-6);
    }

    #[test]
    fn empty_set_gives_identities() {
        let x = Tensor::from_vec(vec![2, 0, 4], Vec::<f32>::new()).unwrap();
        assert_eq!(run(ReduceKind::Sum, &[1], true, &x).as_slice::<f32>().unwrap(), &[0.; 8]);
        assert_eq!(run(ReduceKind::Prod, &[1], true, &x).as_slice::<f32>().unwrap(), &[1.; 8]);
        assert_eq!(run(ReduceKind::LogSum, &[1], true, &x).as_slice::<f32>().unwrap(), &[f32::NEG_INFINITY; 8]);
        let xi = Tensor::from_vec(vec![2, 0], Vec::<i32>::new()).unwrap();
        assert_eq!(run(ReduceKind::Min, &[1], false, &xi).as_slice::<i32>().unwrap(), &[i32::MAX; 2]);
    }

    #[test]
    fn integers_are_exact() {
        let x = Tensor::from_vec(vec![3], vec![i64::MAX - 2, 1, 1]).unwrap();
        assert_eq!(run(ReduceKind::Sum, &[0], false, &x).as_slice::<i64>().unwrap(), &[i64::MAX]);
        let x = Tensor::from_vec(vec![2], vec![7i32, 2]).unwrap();
        assert_eq!(run(ReduceKind::Mean, &[0], false, &x).as_slice::<i32>().unwrap(), &[4]);
        assert_eq!(run(ReduceKind::L2, &[0], false, &x).as_slice::<i32>().unwrap(), &[7]);
    }

    #[test]
    fn bool_max_and_no_axes() {
        let x = Tensor::from_bools(vec![2, 2], &[true, false, false, false]).unwrap();
        let y = run(ReduceKind::Max, &[1], false, &x);
        assert_eq!(y.dtype(), DType::Bool);
        assert_eq!(y.bytes(), &[1, 0]);
        let x = Tensor::from_vec(vec![2], vec![-2f32, 3.]).unwrap();
        assert_eq!(run(ReduceKind::SumSquare, &[], true, &x).as_slice::<f32>().unwrap(), &[4., 9.]);
    }
}
