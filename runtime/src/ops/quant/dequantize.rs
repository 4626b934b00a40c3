//! DequantizeLinear: `y = (x - zero_point) * scale`, per tensor, per axis or
//! per block, from the integer types (4-bit ones included) or the 8-bit
//! floats (whose zero point must be 0). The output has the scale's dtype.

use super::common::{check_float8_zero_point, check_zero_point, f32_values, int_values, ScaleLayout};
use crate::dtype::DType;
use crate::error::Result;
use crate::float8::Float8;
use crate::ops::{input, opt_input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DequantizeLinear {
    /// Axis of per-axis or blocked scales (normalized); ignored for a
    /// per-tensor scale.
    pub axis: usize,
    /// Elements per block along `axis`; 0 when not blocked.
    #[serde(default)]
    pub block_size: usize,
}

impl OpImpl for DequantizeLinear {
    fn name(&self) -> &'static str {
        "DequantizeLinear"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        let s = input(inputs, 1, self.name())?;
        ensure_op!(
            matches!(x.dtype, DType::U8 | DType::I8 | DType::U16 | DType::I16 | DType::I32 | DType::U4 | DType::I4)
                || x.dtype.is_float8(),
            "DequantizeLinear: unsupported input dtype {}",
            x.dtype
        );
        ensure_op!(s.dtype.is_float(), "DequantizeLinear: scale must be float, got {}", s.dtype);
        ScaleLayout::new(&x.shape, &s.shape, self.axis, self.block_size, self.name())?;
        if let Some(z) = opt_input(inputs, 2) {
            let d = check_zero_point(z, s, self.name())?;
            ensure_op!(d == x.dtype, "DequantizeLinear: zero point {z} must be {}", x.dtype);
        }
        Ok(vec![TensorType::new(s.dtype, x.shape.clone())])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        let s = input(inputs, 1, self.name())?;
        let layout = ScaleLayout::new(x.shape, s.shape, self.axis, self.block_size, self.name())?;
        let scales = f32_values(&s)?;
        let one = scales.len() == 1;
        let mut y = vec![0f32; x.bytes.len() / x.dtype.size()];
        if let Some(f) = Float8::of(x.dtype) {
            check_float8_zero_point(opt_input(inputs, 2), self.name())?;
            layout.for_each(|i, si| {
                let si = if one { 0 } else { si };
                y[i] = f.decode(x.bytes[i]) * scales[si];
            });
        } else {
            let xs = int_values(&x)?;
            let zps = match opt_input(inputs, 2) {
                Some(z) => int_values(&z)?,
                None => vec![0; scales.len()],
            };
            layout.for_each(|i, si| {
                let si = if one { 0 } else { si };
                y[i] = (xs[i] - zps[si.min(zps.len() - 1)]) as f32 * scales[si];
            });
        }
        let out = &mut outputs[0];
        match out.dtype {
            DType::F32 => out.as_mut_slice::<f32>()?.copy_from_slice(&y),
            DType::F64 => {
                for (o, v) in out.as_mut_slice::<f64>()?.iter_mut().zip(&y) {
                    *o = *v as f64;
                }
            }
            DType::F16 => {
                for (o, v) in out.as_mut_slice::<half::f16>()?.iter_mut().zip(&y) {
                    *o = half::f16::from_f32(*v);
                }
            }
            DType::BF16 => {
                for (o, v) in out.as_mut_slice::<half::bf16>()?.iter_mut().zip(&y) {
                    *o = half::bf16::from_f32(*v);
                }
            }
            d => bail_op!("DequantizeLinear: unsupported output dtype {d}"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn four_bit_and_float8_inputs() {
        let s = Tensor::scalar(0.5f32);
        let op: Op = DequantizeLinear { axis: 0, block_size: 0 }.into();
        let q = Tensor::from_bytes(TensorType::new(DType::I4, vec![3]), &[0xf8, 0x00, 0x07]).unwrap();
        let z = Tensor::from_bytes(TensorType::new(DType::I4, vec![]), &[0xff]).unwrap();
        let y = op.eval_owned(&[Some(&q), Some(&s), Some(&z)]).unwrap().remove(0);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[-3.5, 0.5, 4.0]);
        let f8 = Tensor::from_bytes(TensorType::new(DType::F8E5M2, vec![2]), &[0x3c, 0xfc]).unwrap();
        let y = op.eval_owned(&[Some(&f8), Some(&s)]).unwrap().remove(0);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[0.5, f32::NEG_INFINITY]);
    }

    #[test]
    fn per_axis_dequantization() {
        let x = Tensor::from_vec(vec![2, 2], vec![0u8, 10, 20, 30]).unwrap();
        let s = Tensor::from_vec(vec![2], vec![0.5f32, 2.]).unwrap();
        let z = Tensor::from_vec(vec![2], vec![10u8, 0]).unwrap();
        let op: Op = DequantizeLinear { axis: 1, block_size: 0 }.into();
        let y = op.eval_owned(&[Some(&x), Some(&s), Some(&z)]).unwrap().remove(0);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[-5., 20., 5., 60.]);
    }
}
