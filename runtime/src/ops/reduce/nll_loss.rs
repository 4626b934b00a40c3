//! NegativeLogLikelihoodLoss: for inputs `[N, C, d1..dk]` (log-probabilities)
//! and targets `[N, d1..dk]`, each element's loss is
//! `-input[n, target, d...] * weight[target]`; the losses are kept (`none`),
//! summed, or averaged by the weights taken (`mean`). A target equal to
//! `ignore_index` contributes 0 and no weight. Computed in f64 and rounded
//! once. SoftmaxCrossEntropyLoss is LogSoftmax followed by this op (the
//! frontend composes it).

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

/// How the per-element losses are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LossReduction {
    None,
    Sum,
    Mean,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NllLoss {
    pub reduction: LossReduction,
    pub ignore_index: Option<i64>,
}

impl OpImpl for NllLoss {
    fn name(&self) -> &'static str {
        "NegativeLogLikelihoodLoss"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        let t = input(inputs, 1, self.name())?;
        ensure_op!(x.dtype.is_float(), "NegativeLogLikelihoodLoss: input {x} is not float");
        ensure_op!(
            x.shape.len() >= 2
                && matches!(t.dtype, DType::I32 | DType::I64)
                && t.shape.len() + 1 == x.shape.len()
                && t.shape[0] == x.shape[0]
                && t.shape[1..] == x.shape[2..],
            "NegativeLogLikelihoodLoss: target {t} does not fit input {x} (want an i32/i64 [N, d1..dk] for [N, C, d1..dk])"
        );
        if let Some(w) = inputs.get(2).copied().flatten() {
            ensure_op!(
                w.dtype == x.dtype && w.shape == [x.shape[1]],
                "NegativeLogLikelihoodLoss: weight {w} must be {} [{}]",
                x.dtype,
                x.shape[1]
            );
        }
        let shape = if self.reduction == LossReduction::None { t.shape.clone() } else { Vec::new() };
        Ok(vec![TensorType::new(x.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        let t = input(inputs, 1, self.name())?;
        let targets: Vec<i64> = match t.dtype {
            DType::I32 => t.as_slice::<i32>()?.iter().map(|&v| v as i64).collect(),
            _ => t.as_slice::<i64>()?.to_vec(),
        };
        let w = inputs.get(2).cloned().flatten();
        let out = &mut outputs[0];
        match x.dtype {
            DType::F32 => self.run::<f32>(&x, &targets, w.as_ref(), out),
            DType::F64 => self.run::<f64>(&x, &targets, w.as_ref(), out),
            DType::F16 => self.run::<f16>(&x, &targets, w.as_ref(), out),
            DType::BF16 => self.run::<bf16>(&x, &targets, w.as_ref(), out),
            d => bail_op!("NegativeLogLikelihoodLoss: unsupported dtype {d}"),
        }
    }
}

impl NllLoss {
    fn run<T: Element>(
        &self,
        x: &TensorView<'_>,
        targets: &[i64],
        weight: Option<&TensorView<'_>>,
        out: &mut TensorViewMut<'_>,
    ) -> Result<()> {
        let (n, c) = (x.shape[0], x.shape[1]);
        let inner: usize = x.shape[2..].iter().product();
        let (x, weight, out) = (x.as_slice::<T>()?, weight.map(|w| w.as_slice::<T>()).transpose()?, out.as_mut_slice::<T>()?);
        let mut losses = Vec::with_capacity(n * inner);
        let mut weight_sum = 0f64;
        for b in 0..n {
            for d in 0..inner {
                let target = targets[b * inner + d];
                if Some(target) == self.ignore_index {
                    losses.push(0.0);
                    continue;
                }
                let Some(class) = usize::try_from(target).ok().filter(|&t| t < c) else {
                    bail_op!("NegativeLogLikelihoodLoss: target {target} is not a class in 0..{c}");
                };
                let w = weight.map_or(1.0, |w| w[class].to_f64());
                weight_sum += w;
                losses.push(-x[(b * c + class) * inner + d].to_f64() * w);
            }
        }
        match self.reduction {
            LossReduction::None => {
                for (o, l) in out.iter_mut().zip(&losses) {
                    *o = T::from_f64(*l);
                }
            }
            LossReduction::Sum => out[0] = T::from_f64(losses.iter().sum()),
            // As the ONNX reference: the weights taken divide the sum (0/0
            // is NaN when every target is ignored).
            LossReduction::Mean => out[0] = T::from_f64(losses.iter().sum::<f64>() / weight_sum),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn loss(op: NllLoss, x: Tensor, t: Tensor, w: Option<Tensor>) -> crate::error::Result<Vec<f32>> {
        let out = Op::from(op).eval_owned(&[Some(&x), Some(&t), w.as_ref()])?.remove(0);
        Ok(out.as_slice::<f32>()?.to_vec())
    }

    #[test]
    fn reductions_weights_and_ignored_targets() {
        // N = 2, C = 3: log-probabilities, targets 2 and 0.
        let x = Tensor::from_vec(vec![2, 3], vec![-1.0f32, -2.0, -3.0, -0.5, -1.5, -2.5]).unwrap();
        let t = Tensor::from_vec(vec![2], vec![2i64, 0]).unwrap();
        let none = NllLoss { reduction: LossReduction::None, ignore_index: None };
        assert_eq!(loss(none.clone(), x.clone(), t.clone(), None).unwrap(), [3.0, 0.5]);
        let w = Tensor::from_vec(vec![3], vec![2.0f32, 1.0, 4.0]).unwrap();
        let mean = NllLoss { reduction: LossReduction::Mean, ignore_index: None };
        // (3 * 4 + 0.5 * 2) / (4 + 2).
        assert_eq!(loss(mean, x.clone(), t.clone(), Some(w)).unwrap(), [13.0 / 6.0]);
        let sum_ignoring_0 = NllLoss { reduction: LossReduction::Sum, ignore_index: Some(0) };
        assert_eq!(loss(sum_ignoring_0, x.clone(), t.clone(), None).unwrap(), [3.0]);
        // A target outside the classes is an error, not a panic.
        let bad = Tensor::from_vec(vec![2], vec![3i64, -1]).unwrap();
        assert!(loss(none, x, bad, None).is_err());
    }

    #[test]
    fn inference_checks_target_and_weight_shapes() {
        let op = Op::from(NllLoss { reduction: LossReduction::None, ignore_index: None });
        let x = TensorType::new(DType::F32, vec![2, 3, 4]);
        let t = TensorType::new(DType::I64, vec![2, 4]);
        assert_eq!(op.infer(&[Some(&x), Some(&t)]).unwrap(), [TensorType::new(DType::F32, vec![2, 4])]);
        assert!(op.infer(&[Some(&x), Some(&TensorType::new(DType::I64, vec![2, 3]))]).is_err());
        assert!(op.infer(&[Some(&x), Some(&t), Some(&TensorType::new(DType::F32, vec![4]))]).is_err());
        assert!(op.infer(&[Some(&x), Some(&TensorType::new(DType::F32, vec![2, 4]))]).is_err());
    }
}
