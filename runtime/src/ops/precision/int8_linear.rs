//! `Int8Linear`: a Conv, Gemm or MatMul on int8 activations and int8
//! weights, with the scales, bias, residual and activation applied in the
//! epilogue, and an f32, f16 or requantized int8 output.
//!
//! Inputs: `[x: i8, w: i8, w_scale: f32[C], bias: f32[C]?, residual?]`,
//! where `C` is the number of output channels (Conv's `M`, the last axis of
//! Gemm and MatMul). Activations are quantized per tensor (`x_scale`),
//! weights per output channel (`w_scale`), both symmetric (zero point 0).
//!
//! The arithmetic, which the GPU kernel follows operation by operation:
//! 1. `acc = Σ x_q · w_q`, exact (int32 on the GPU; the CPU reference sums
//!    in f64, which is exact for every accumulator int32 can hold);
//! 2. `y = f32(acc) * (x_scale * w_scale[c])` (f32, round to nearest);
//! 3. `y = y + bias[c]`, then `y = y + residual`, then the activation, in f32;
//! 4. the output: `y` as f32, rounded to f16, or requantized to int8 as
//!    `saturate(round_half_even(y / out_scale))` in [-128, 127].

use super::quantized::{self, QuantizedProduct};
use crate::dtype::DType;
use crate::ensure_op;
use crate::error::Result;
use crate::ops::fused::{Epilogue, LinearKind};
use crate::ops::OpImpl;
use crate::tensor::{Tensor, TensorType, TensorView, TensorViewMut};
use half::f16;
use serde::{Deserialize, Serialize};

/// What an [`Int8Linear`] stores.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Int8Output {
    F32,
    F16,
    /// Requantized with this per-tensor scale, for a consumer that reads int8.
    Int8 {
        scale: f32,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Int8Linear {
    pub kind: LinearKind,
    /// The scale `x` was quantized with.
    pub x_scale: f32,
    /// Whether input 3 is a per-channel bias.
    pub bias: bool,
    pub epilogue: Epilogue,
    pub output: Int8Output,
}

/// Quantizes a weight symmetrically per output channel (`axis`): the scale
/// of channel `c` is `max |w_c| / 127` (1 for an all-zero channel) and
/// `w_q = round_half_even(w / scale)`, which lies in [-127, 127]. Returns
/// the int8 weight and the scales.
pub fn quantize_weight_per_channel(w: &Tensor, axis: usize) -> Result<(Tensor, Tensor)> {
    let (q, scales) =
        quantized::quantize_per_channel(w, axis, "int8", 127.0, |v| v.round_ties_even().clamp(-127.0, 127.0) as i8)?;
    Ok((Tensor::from_vec(w.shape().to_vec(), q)?, scales))
}

impl Int8Linear {
    fn core(&self) -> QuantizedProduct<'_> {
        QuantizedProduct { name: self.name(), kind: &self.kind, x_scale: self.x_scale, bias: self.bias, epilogue: &self.epilogue }
    }

    fn out_dtype(&self) -> DType {
        match self.output {
            Int8Output::F32 => DType::F32,
            Int8Output::F16 => DType::F16,
            Int8Output::Int8 { .. } => DType::I8,
        }
    }
}

/// Widens int8 values to f64 (exact).
fn widen_i8(v: TensorView<'_>) -> Result<Tensor> {
    let src = v.as_slice::<i8>()?;
    Tensor::from_vec(v.shape.to_vec(), src.iter().map(|&x| x as f64).collect::<Vec<f64>>())
}

impl OpImpl for Int8Linear {
    fn name(&self) -> &'static str {
        match self.kind {
            LinearKind::Conv(_) => "Int8Conv",
            LinearKind::Gemm(_) => "Int8Gemm",
            LinearKind::MatMul(_) => "Int8MatMul",
        }
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        if let Int8Output::Int8 { scale } = self.output {
            ensure_op!(scale.is_finite() && scale > 0.0, "{}: bad output scale {scale}", self.name());
        }
        let shape = self.core().infer(inputs, DType::I8)?;
        Ok(vec![TensorType::new(self.out_dtype(), shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let out = &mut outputs[0];
        let shape = out.shape.to_vec();
        let y = self.core().eval(inputs, &shape, widen_i8)?;
        match self.output {
            Int8Output::F32 => out.as_mut_slice::<f32>()?.copy_from_slice(&y),
            Int8Output::F16 => half::slice::HalfFloatSliceExt::convert_from_f32_slice(out.as_mut_slice::<f16>()?, &y),
            Int8Output::Int8 { scale } => {
                for (o, &v) in out.as_mut_slice::<i8>()?.iter_mut().zip(&y) {
                    *o = requantize(v, scale);
                }
            }
        }
        Ok(())
    }
}

/// `saturate(round_half_even(v / scale))` in [-128, 127]; NaN becomes 0.
#[inline]
pub fn requantize(v: f32, scale: f32) -> i8 {
    let q = (v / scale).round_ties_even();
    if q.is_nan() {
        0
    } else {
        q.clamp(-128.0, 127.0) as i8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::elementwise::UnaryKind;
    use crate::ops::fused::Activation;
    use crate::ops::linalg::MatMul;
    use crate::ops::Op;

    #[test]
    fn weight_quantization_is_per_channel_and_symmetric() {
        // A [K=2, N=2] MatMul weight: channels are columns (axis 1).
        let w = Tensor::from_vec(vec![2, 2], vec![1.0f32, -0.5, -2.0, 0.25]).unwrap();
        let (q, s) = quantize_weight_per_channel(&w, 1).unwrap();
        assert_eq!(s.as_slice::<f32>().unwrap(), &[2.0 / 127.0, 0.5 / 127.0]);
        // 1 / (2/127) = 63.5 rounds to even: 64.
        assert_eq!(q.as_slice::<i8>().unwrap(), &[64, -127, -127, 64]);
    }

    #[test]
    fn matmul_matches_the_hand_computed_epilogue() {
        let op: Op = Int8Linear {
            kind: LinearKind::MatMul(MatMul {}),
            x_scale: 0.5,
            bias: true,
            epilogue: Epilogue { residual: true, activation: Some(Activation::Unary(UnaryKind::Relu)) },
            output: Int8Output::Int8 { scale: 0.25 },
        }
        .into();
        let x = Tensor::from_vec(vec![1, 2], vec![2i8, -3]).unwrap();
        let w = Tensor::from_vec(vec![2, 2], vec![1i8, 4, 5, -6]).unwrap();
        let ws = Tensor::from_vec(vec![2], vec![0.1f32, 0.01]).unwrap();
        let b = Tensor::from_vec(vec![2], vec![0.5f32, -1.0]).unwrap();
        let r = Tensor::from_vec(vec![1, 2], vec![0.25f32, 0.5]).unwrap();
        let out = op.eval_owned(&[Some(&x), Some(&w), Some(&ws), Some(&b), Some(&r)]).unwrap();
        // acc = [2 - 15, 8 + 18] = [-13, 26].
        // y0 = -13 * 0.05 + 0.5 + 0.25 = 0.1 -> relu 0.1 -> 0.1 / 0.25 = 0.4 -> 0.
        // y1 = 26 * 0.005 - 1 + 0.5 = -0.37 -> relu 0 -> 0.
        assert_eq!(out[0].as_slice::<i8>().unwrap(), &[0, 0]);
        let op_f32 = match op {
            Op::Precision(super::super::PrecisionOp::Int8Linear(mut l)) => {
                l.output = Int8Output::F32;
                l.epilogue.activation = None;
                Op::from(l)
            }
            _ => unreachable!(),
        };
        let out = op_f32.eval_owned(&[Some(&x), Some(&w), Some(&ws), Some(&b), Some(&r)]).unwrap();
        let v = out[0].as_slice::<f32>().unwrap();
        let s0 = 0.5f32 * 0.1;
        let s1 = 0.5f32 * 0.01;
        assert_eq!(v, &[-13.0 * s0 + 0.5 + 0.25, 26.0 * s1 - 1.0 + 0.5]);
    }

    #[test]
    fn requantization_rounds_half_to_even_and_saturates() {
        assert_eq!(requantize(0.5, 1.0), 0);
        assert_eq!(requantize(1.5, 1.0), 2);
        assert_eq!(requantize(-1000.0, 1.0), -128);
        assert_eq!(requantize(1000.0, 1.0), 127);
        assert_eq!(requantize(f32::NAN, 1.0), 0);
    }

    #[test]
    fn refuses_float_activations_and_bad_scales() {
        let op: Op = Int8Linear {
            kind: LinearKind::MatMul(MatMul {}),
            x_scale: 0.5,
            bias: false,
            epilogue: Epilogue::default(),
            output: Int8Output::F32,
        }
        .into();
        let xf = TensorType::new(DType::F32, vec![1, 2]);
        let w = TensorType::new(DType::I8, vec![2, 2]);
        let ws = TensorType::new(DType::F32, vec![2]);
        assert!(op.infer(&[Some(&xf), Some(&w), Some(&ws)]).is_err());
        let x = TensorType::new(DType::I8, vec![1, 2]);
        assert!(op.infer(&[Some(&x), Some(&w), Some(&ws)]).is_ok());
        let ws3 = TensorType::new(DType::F32, vec![3]);
        assert!(op.infer(&[Some(&x), Some(&w), Some(&ws3)]).is_err());
    }
}
