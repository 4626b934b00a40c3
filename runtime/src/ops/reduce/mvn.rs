//! MeanVarianceNormalization over a set of axes, per ONNX's function body:
//! `y = (x - mean) / (sqrt(mean(x^2) - mean^2) + 1e-9)`.

use super::common::{float_dispatch, ReducePlan};
use crate::ensure_op;
use crate::error::Result;
use crate::ops::util::normalize_axes;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

/// The epsilon ONNX's function body adds to the standard deviation.
const EPSILON: f64 = 1e-9;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mvn {
    /// Normalized, distinct axes the statistics are taken over.
    pub axes: Vec<usize>,
}

impl Mvn {
    pub fn new(axes: Vec<usize>) -> Mvn {
        Mvn { axes }
    }
}

impl OpImpl for Mvn {
    fn name(&self) -> &'static str {
        "MeanVarianceNormalization"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.dtype.is_float(), "{}: expected a float input, got {}", self.name(), x.dtype);
        let axes: Vec<i64> = self.axes.iter().map(|&a| a as i64).collect();
        normalize_axes(&axes, x.shape.len())?;
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(self.axes.iter().all(|&a| a < x.shape.len()), "{}: axis out of range", self.name());
        let y = &mut outputs[0];
        ensure_op!(y.len() == x.len(), "{}: output has the wrong size", self.name());
        let plan = ReducePlan::new(x.shape, &self.axes);
        float_dispatch!(x.dtype, self.name(), mvn(&plan, x, y))
    }
}

fn mvn<T: Element>(plan: &ReducePlan, x: TensorView, y: &mut TensorViewMut) -> Result<()> {
    let xs = x.as_slice::<T>()?;
    let ys = y.as_mut_slice::<T>()?;
    let len = plan.run_len;
    // Output offsets of a run's elements: all the same when the run is
    // reduced, consecutive otherwise.
    let step = usize::from(!plan.run_reduced);
    let (mut sum, mut sum_sq) = (vec![0f64; plan.out_len], vec![0f64; plan.out_len]);
    plan.for_each_run(|xo, oo| {
        for (j, &v) in xs[xo..xo + len].iter().enumerate() {
            let v = v.to_f64();
            sum[oo + j * step] += v;
            sum_sq[oo + j * step] += v * v;
        }
    });
    let n = plan.group_len as f64;
    // Reuse the buffers for the mean and 1 / (std + eps).
    for (s, q) in sum.iter_mut().zip(sum_sq.iter_mut()) {
        let mean = *s / n;
        let var = (*q / n - mean * mean).max(0.0);
        *s = mean;
        *q = 1.0 / (var.sqrt() + EPSILON);
    }
    plan.for_each_run(|xo, oo| {
        for (j, (o, &v)) in ys[xo..xo + len].iter_mut().zip(&xs[xo..xo + len]).enumerate() {
            let k = oo + j * step;
            *o = T::from_f64((v.to_f64() - sum[k]) * sum_sq[k]);
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn mvn_over_first_axis() {
        let x = Tensor::from_vec(vec![2, 2], vec![1f32, 10., 3., 10.]).unwrap();
        let op: Op = Mvn::new(vec![0]).into();
        let y = op.eval_owned(&[Some(&x)]).unwrap()[0].to_f64_vec();
        let want = [-1.0, 0.0, 1.0, 0.0];
        assert!(y.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6), "{y:?}");
    }
}
