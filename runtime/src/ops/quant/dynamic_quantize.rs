//! DynamicQuantizeLinear: quantizes f32 to u8 with a scale and zero point
//! computed from the data, so that the range `[min(x, 0), max(x, 0)]` maps
//! onto `[0, 255]`. Outputs y (u8, x's shape), y_scale (f32 scalar) and
//! y_zero_point (u8 scalar).

use super::common::quantize_value;
use crate::dtype::DType;
use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DynamicQuantizeLinear {}

impl OpImpl for DynamicQuantizeLinear {
    fn name(&self) -> &'static str {
        "DynamicQuantizeLinear"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.dtype == DType::F32, "DynamicQuantizeLinear: input must be f32, got {}", x.dtype);
        Ok(vec![
            TensorType::new(DType::U8, x.shape.clone()),
            TensorType::new(DType::F32, vec![]),
            TensorType::new(DType::U8, vec![]),
        ])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?.as_slice::<f32>()?;
        ensure_op!(outputs.len() == 3, "DynamicQuantizeLinear: expected 3 outputs");
        let (lo, hi) = x.iter().fold((0f32, 0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        let scale = (hi - lo) / 255.0;
        let zp = if scale > 0.0 { quantize_value(-lo / scale, 0.0, (0.0, 255.0)) } else { 0.0 };
        for (o, &v) in outputs[0].as_mut_slice::<u8>()?.iter_mut().zip(x) {
            *o = if scale > 0.0 { quantize_value(v / scale, zp, (0.0, 255.0)) as u8 } else { 0 };
        }
        outputs[1].as_mut_slice::<f32>()?[0] = scale;
        outputs[2].as_mut_slice::<u8>()?[0] = zp as u8;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn maps_the_range_onto_u8() {
        let x = Tensor::from_vec(vec![3], vec![-1f32, 0., 1.55]).unwrap();
        let out = Op::from(DynamicQuantizeLinear {}).eval_owned(&[Some(&x)]).unwrap();
        // scale = 2.55 / 255 = 0.01; zero point = 100.
        assert!((out[1].as_slice::<f32>().unwrap()[0] - 0.01).abs() < 1e-7);
        assert_eq!(out[2].as_slice::<u8>().unwrap(), &[100]);
        assert_eq!(out[0].as_slice::<u8>().unwrap(), &[0, 100, 255]);
    }
}
