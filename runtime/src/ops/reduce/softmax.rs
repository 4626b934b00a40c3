//! Softmax and LogSoftmax over one axis (opset 13 semantics).

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::util::normalize_axis;
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Softmax {
    /// Normalized (non-negative) axis.
    pub axis: usize,
    /// LogSoftmax instead of Softmax.
    pub log: bool,
}

impl OpImpl for Softmax {
    fn name(&self) -> &'static str {
        if self.log {
            "LogSoftmax"
        } else {
            "Softmax"
        }
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.dtype.is_float(), "{}: expected a float tensor, got {}", self.name(), x.dtype);
        normalize_axis(self.axis as i64, x.shape.len())?;
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        let n = x.shape[self.axis];
        let inner: usize = x.shape[self.axis + 1..].iter().product();
        let outer: usize = x.shape[..self.axis].iter().product();
        match x.dtype {
            DType::F32 => {
                let xs = x.as_slice::<f32>()?;
                let ys = outputs[0].as_mut_slice::<f32>()?;
                softmax(xs, ys, outer, n, inner, self.log, |v| v as f64, |v| v as f32);
            }
            DType::F64 => {
                let xs = x.as_slice::<f64>()?;
                let ys = outputs[0].as_mut_slice::<f64>()?;
                softmax(xs, ys, outer, n, inner, self.log, |v| v, |v| v);
            }
            DType::F16 => {
                let xs = x.as_slice::<half::f16>()?;
                let ys = outputs[0].as_mut_slice::<half::f16>()?;
                softmax(xs, ys, outer, n, inner, self.log, |v| v.to_f64(), half::f16::from_f64);
            }
            d => bail_op!("{}: unsupported dtype {d}", self.name()),
        }
        Ok(())
    }
}

#[allow(clippy::too_many_arguments)]
fn softmax<T: Copy>(
    xs: &[T],
    ys: &mut [T],
    outer: usize,
    n: usize,
    inner: usize,
    log: bool,
    to: impl Fn(T) -> f64,
    from: impl Fn(f64) -> T,
) {
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            let at = |k: usize| base + k * inner;
            let max = (0..n).map(|k| to(xs[at(k)])).fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = (0..n).map(|k| (to(xs[at(k)]) - max).exp()).sum();
            for k in 0..n {
                let v = to(xs[at(k)]) - max;
                ys[at(k)] = from(if log { v - sum.ln() } else { v.exp() / sum });
            }
        }
    }
}
