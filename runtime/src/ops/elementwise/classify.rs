//! Float classification: `IsNaN` and `IsInf`, with boolean outputs.

use super::broadcast::map1;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

/// True where the input is NaN.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IsNaN;

/// True where the input is +inf (when `detect_positive`) or -inf (when
/// `detect_negative`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IsInf {
    pub detect_positive: bool,
    pub detect_negative: bool,
}

fn infer_float(name: &str, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
    let x = input(inputs, 0, name)?;
    ensure_op!(x.dtype.is_float(), "{name}: {} inputs are not supported", x.dtype);
    Ok(vec![TensorType::new(DType::Bool, x.shape.clone())])
}

/// Maps every float element, as f64 for the halves and f32/f64 natively, to a flag.
fn classify(
    name: &str,
    inputs: &[Option<TensorView<'_>>],
    outputs: &mut [TensorViewMut<'_>],
    f32_test: impl Fn(f32) -> bool,
    f64_test: impl Fn(f64) -> bool,
) -> Result<()> {
    let x = input(inputs, 0, name)?;
    let out = outputs.first_mut().ok_or_else(|| Error::op(format!("{name}: missing output")))?;
    ensure_op!(out.dtype == DType::Bool, "{name}: output must be bool, not {}", out.dtype);
    let o = out.as_mut_slice::<u8>()?;
    match x.dtype {
        DType::F32 => map1(x.as_slice::<f32>()?, o, |v| u8::from(f32_test(v))),
        DType::F64 => map1(x.as_slice::<f64>()?, o, |v| u8::from(f64_test(v))),
        DType::F16 => map1(x.as_slice::<f16>()?, o, |v| u8::from(f32_test(v.to_f32()))),
        DType::BF16 => map1(x.as_slice::<bf16>()?, o, |v| u8::from(f32_test(v.to_f32()))),
        d => bail_op!("{name}: {d} inputs are not supported"),
    }
}

impl OpImpl for IsNaN {
    fn name(&self) -> &'static str {
        "IsNaN"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        infer_float(self.name(), inputs)
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        classify(self.name(), inputs, outputs, f32::is_nan, f64::is_nan)
    }
}

impl OpImpl for IsInf {
    fn name(&self) -> &'static str {
        "IsInf"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        infer_float(self.name(), inputs)
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let (pos, neg) = (self.detect_positive, self.detect_negative);
        classify(
            self.name(),
            inputs,
            outputs,
            |v| (pos && v == f32::INFINITY) || (neg && v == f32::NEG_INFINITY),
            |v| (pos && v == f64::INFINITY) || (neg && v == f64::NEG_INFINITY),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn detects_nan_and_signed_infinities() {
        let x = Tensor::from_vec(vec![4], vec![1f32, f32::NAN, f32::INFINITY, f32::NEG_INFINITY]).unwrap();
        let op: Op = IsNaN.into();
        assert_eq!(op.eval_owned(&[Some(&x)]).unwrap()[0].as_slice::<u8>().unwrap(), &[0, 1, 0, 0]);
        let op: Op = IsInf { detect_positive: true, detect_negative: true }.into();
        assert_eq!(op.eval_owned(&[Some(&x)]).unwrap()[0].as_slice::<u8>().unwrap(), &[0, 0, 1, 1]);
        let op: Op = IsInf { detect_positive: false, detect_negative: true }.into();
        assert_eq!(op.eval_owned(&[Some(&x)]).unwrap()[0].as_slice::<u8>().unwrap(), &[0, 0, 0, 1]);
    }
}
