//! QuantizeLinear: `y = saturate(round_half_even(x / scale) + zero_point)`,
//! per tensor, per axis or per block, to u8, i8, u16, i16, u4 or i4; or
//! `y = x / scale` rounded to an 8-bit float (nearest even, saturating; the
//! zero point must be 0 and only names the type).

use super::common::{
    check_float8_zero_point, check_zero_point, f32_values, int_range, int_values, quantize_value, write_ints, ScaleLayout,
};
use crate::dtype::DType;
use crate::ensure_op;
use crate::error::Result;
use crate::float8::Float8;
use crate::ops::{input, opt_input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuantizeLinear {
    /// Axis of per-axis or blocked scales (normalized); unused for a
    /// per-tensor scale.
    pub axis: usize,
    /// Elements per block along `axis`; 0 when not blocked.
    pub block_size: usize,
    /// The quantized type: the zero point's dtype when one is given.
    pub output_dtype: DType,
}

impl OpImpl for QuantizeLinear {
    fn name(&self) -> &'static str {
        "QuantizeLinear"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        let s = input(inputs, 1, self.name())?;
        ensure_op!(
            matches!(x.dtype, DType::F32 | DType::F16 | DType::BF16 | DType::F64 | DType::I32),
            "QuantizeLinear: unsupported input dtype {}",
            x.dtype
        );
        ensure_op!(s.dtype.is_float(), "QuantizeLinear: scale must be float, got {}", s.dtype);
        if !self.output_dtype.is_float8() {
            int_range(self.output_dtype)?;
        }
        ScaleLayout::new(&x.shape, &s.shape, self.axis, self.block_size, self.name())?;
        if let Some(z) = opt_input(inputs, 2) {
            let d = check_zero_point(z, s, self.name())?;
            ensure_op!(d == self.output_dtype, "QuantizeLinear: zero point {z} must be {}", self.output_dtype);
        }
        Ok(vec![TensorType::new(self.output_dtype, x.shape.clone())])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        let s = input(inputs, 1, self.name())?;
        let layout = ScaleLayout::new(x.shape, s.shape, self.axis, self.block_size, self.name())?;
        let xs = f32_values(&x)?;
        let scales = f32_values(&s)?;
        let one = scales.len() == 1;
        if let Some(f) = Float8::of(self.output_dtype) {
            check_float8_zero_point(opt_input(inputs, 2), self.name())?;
            let out = &mut *outputs[0].bytes;
            ensure_op!(out.len() == xs.len(), "QuantizeLinear: output holds {} elements, input {}", out.len(), xs.len());
            layout.for_each(|i, si| {
                let si = if one { 0 } else { si };
                out[i] = f.encode(f64::from(xs[i] / scales[si]), true);
            });
            return Ok(());
        }
        let zps: Vec<f32> = match opt_input(inputs, 2) {
            Some(z) => int_values(&z)?.into_iter().map(|v| v as f32).collect(),
            None => vec![0.0; scales.len()],
        };
        let range = int_range(self.output_dtype)?;
        let mut q = vec![0f32; xs.len()];
        layout.for_each(|i, si| {
            let si = if one { 0 } else { si };
            q[i] = quantize_value(xs[i] / scales[si], zps[si.min(zps.len() - 1)], range);
        });
        write_ints(&mut outputs[0], q.into_iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn four_bit_and_float8_outputs() {
        let x = Tensor::from_vec(vec![4], vec![0f32, 5., 100., -100.]).unwrap();
        let s = Tensor::scalar(2f32);
        let op: Op = QuantizeLinear { axis: 0, block_size: 0, output_dtype: DType::I4 }.into();
        let y = op.eval_owned(&[Some(&x), Some(&s)]).unwrap().remove(0);
        // 5/2 = 2.5 -> 2; out of range saturates to [-8, 7].
        assert_eq!(y.as_slice::<i8>().unwrap(), &[0, 2, 7, -8]);
        let op: Op = QuantizeLinear { axis: 0, block_size: 0, output_dtype: DType::F8E4M3FN }.into();
        let y = op.eval_owned(&[Some(&x), Some(&s)]).unwrap().remove(0);
        assert_eq!(y.to_f64_vec(), vec![0.0, 2.5, 48.0, -48.0]);
        let bad_zero = Tensor::from_bytes(TensorType::new(DType::F8E4M3FN, vec![]), &[0x38]).unwrap();
        let e = op.eval_owned(&[Some(&x), Some(&s), Some(&bad_zero)]).unwrap_err().to_string();
        assert!(e.contains("zero point must be 0"), "{e}");
    }

    #[test]
    fn rounds_half_to_even_and_saturates() {
        let x = Tensor::from_vec(vec![6], vec![0f32, 2., 3., 1000., -254., 5.]).unwrap();
        let s = Tensor::scalar(2f32);
        let z = Tensor::scalar(128u8);
        let op: Op = QuantizeLinear { axis: 0, block_size: 0, output_dtype: DType::U8 }.into();
        let y = op.eval_owned(&[Some(&x), Some(&s), Some(&z)]).unwrap().remove(0);
        // 3/2 = 1.5 -> 2; 5/2 = 2.5 -> 2.
        assert_eq!(y.as_slice::<u8>().unwrap(), &[128, 129, 130, 255, 1, 130]);
    }

    #[test]
    fn per_axis_and_blocked_scales() {
        let x = Tensor::from_vec(vec![2, 2], vec![10f32, 10., 10., 10.]).unwrap();
        let s = Tensor::from_vec(vec![2], vec![1f32, 5.]).unwrap();
        let op: Op = QuantizeLinear { axis: 1, block_size: 0, output_dtype: DType::I8 }.into();
        let y = op.eval_owned(&[Some(&x), Some(&s)]).unwrap().remove(0);
        assert_eq!(y.as_slice::<i8>().unwrap(), &[10, 2, 10, 2]);
        // Blocks of 2 along axis 1: one scale per row.
        let s = Tensor::from_vec(vec![2, 1], vec![1f32, 5.]).unwrap();
        let op: Op = QuantizeLinear { axis: 1, block_size: 2, output_dtype: DType::I16 }.into();
        let y = op.eval_owned(&[Some(&x), Some(&s)]).unwrap().remove(0);
        assert_eq!(y.as_slice::<i16>().unwrap(), &[10, 10, 2, 2]);
    }
}
