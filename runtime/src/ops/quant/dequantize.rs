//! DequantizeLinear: y = (x - zero_point) * scale, per tensor or per axis.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{input, opt_input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DequantizeLinear {
    /// Axis of per-channel scales (normalized); ignored for scalar scales.
    pub axis: usize,
}

impl OpImpl for DequantizeLinear {
    fn name(&self) -> &'static str {
        "DequantizeLinear"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        let s = input(inputs, 1, self.name())?;
        ensure_op!(s.dtype.is_float(), "DequantizeLinear: scale must be float, got {}", s.dtype);
        let n = s.len();
        ensure_op!(
            n == 1 || (self.axis < x.shape.len() && x.shape[self.axis] == n && s.shape.len() == 1),
            "DequantizeLinear: scale {s} does not fit input {x} on axis {}",
            self.axis
        );
        if let Some(z) = opt_input(inputs, 2) {
            ensure_op!(z.dtype == x.dtype && z.len() == n, "DequantizeLinear: bad zero point {z}");
        }
        Ok(vec![TensorType::new(s.dtype, x.shape.clone())])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        let s = input(inputs, 1, self.name())?;
        let xs = x.to_i64_vec()?;
        let scales = s.to_f64_vec();
        let zps = match opt_input(inputs, 2) {
            Some(z) => z.to_i64_vec()?,
            None => vec![0; scales.len()],
        };
        let inner: usize = if scales.len() == 1 { xs.len().max(1) } else { x.shape[self.axis + 1..].iter().product() };
        let c = scales.len();
        let out = &mut outputs[0];
        let value = |i: usize| {
            let ch = if c == 1 { 0 } else { (i / inner) % c };
            (xs[i] - zps[ch]) as f64 * scales[ch]
        };
        match out.dtype {
            DType::F32 => {
                let o = out.as_mut_slice::<f32>()?;
                for (i, o) in o.iter_mut().enumerate() {
                    *o = ((xs[i] - zps[if c == 1 { 0 } else { (i / inner) % c }]) as f32)
                        * scales[if c == 1 { 0 } else { (i / inner) % c }] as f32;
                }
            }
            DType::F64 => {
                let o = out.as_mut_slice::<f64>()?;
                for (i, o) in o.iter_mut().enumerate() {
                    *o = value(i);
                }
            }
            DType::F16 => {
                let o = out.as_mut_slice::<half::f16>()?;
                for (i, o) in o.iter_mut().enumerate() {
                    *o = half::f16::from_f64(value(i));
                }
            }
            d => bail_op!("DequantizeLinear: unsupported output dtype {d}"),
        }
        Ok(())
    }
}
