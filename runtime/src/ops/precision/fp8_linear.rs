//! `Fp8Linear`: a Conv, Gemm or MatMul on FP8 (E4M3FN) activations and
//! weights, as Ada and Hopper tensor cores run it (`mma.sync` e4m3 with f32
//! accumulators), with the scales, bias, residual and activation applied in
//! the epilogue, and an f32, f16 or requantized E4M3FN output.
//!
//! Inputs: `[x: f8e4m3fn, w: f8e4m3fn, w_scale: f32[C], bias: f32[C]?,
//! residual?]`, where `C` is the number of output channels (Conv's `M`, the
//! last axis of Gemm and MatMul). Activations are scaled per tensor
//! (`x_scale`), weights per output channel (`w_scale`); FP8 has no zero
//! point. The arithmetic, which the GPU kernels follow:
//! 1. `acc = Σ x · w` over the decoded values: every product of two E4M3
//!    values is exact in f32; the CPU sums in f64 and rounds once, the GPU
//!    accumulates in f32 (so the two differ in the last bits of long sums,
//!    about `sqrt(K)` units of f32 rounding at worst in practice);
//! 2. `y = f32(acc) * (x_scale * w_scale[c])` (f32, round to nearest);
//! 3. `y = y + bias[c]`, then `y = y + residual`, then the activation, in f32;
//! 4. the output: `y` as f32, rounded to f16, or requantized as
//!    `e4m3fn(y / out_scale)` with saturation, as QuantizeLinear does.

use super::quantized::{self, QuantizedProduct};
use crate::dtype::DType;
use crate::ensure_op;
use crate::error::Result;
use crate::float8::Float8;
use crate::ops::fused::{Epilogue, LinearKind};
use crate::ops::OpImpl;
use crate::tensor::{Tensor, TensorType, TensorView, TensorViewMut};
use half::f16;
use serde::{Deserialize, Serialize};

/// The largest finite E4M3FN value: FP8 scales map a tensor's range onto it.
pub const FP8_E4M3_MAX: f32 = 448.0;

/// What an [`Fp8Linear`] stores.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Fp8Output {
    F32,
    F16,
    /// Requantized to E4M3FN with this per-tensor scale, for a consumer
    /// that reads FP8.
    Fp8 {
        scale: f32,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fp8Linear {
    pub kind: LinearKind,
    /// The scale `x` was quantized with.
    pub x_scale: f32,
    /// Whether input 3 is a per-channel bias.
    pub bias: bool,
    pub epilogue: Epilogue,
    pub output: Fp8Output,
}

/// Quantizes a weight to E4M3FN per output channel (`axis`): the scale of
/// channel `c` is `max |w_c| / 448` (1 for an all-zero channel) and each
/// element is `e4m3fn(w / scale)`, rounded to nearest even. Returns the
/// FP8 weight and the scales.
pub fn quantize_weight_per_channel_fp8(w: &Tensor, axis: usize) -> Result<(Tensor, Tensor)> {
    let (q, scales) =
        quantized::quantize_per_channel(w, axis, "fp8", FP8_E4M3_MAX, |v| Float8::E4M3FN.encode(f64::from(v), true))?;
    let t = Tensor::from_bytes(TensorType::new(DType::F8E4M3FN, w.shape().to_vec()), &q)?;
    Ok((t, scales))
}

/// `e4m3fn(v / scale)` with saturation (NaN stays NaN).
#[inline]
pub fn requantize_fp8(v: f32, scale: f32) -> u8 {
    Float8::E4M3FN.encode(f64::from(v / scale), true)
}

impl Fp8Linear {
    fn core(&self) -> QuantizedProduct<'_> {
        QuantizedProduct { name: self.name(), kind: &self.kind, x_scale: self.x_scale, bias: self.bias, epilogue: &self.epilogue }
    }

    fn out_dtype(&self) -> DType {
        match self.output {
            Fp8Output::F32 => DType::F32,
            Fp8Output::F16 => DType::F16,
            Fp8Output::Fp8 { .. } => DType::F8E4M3FN,
        }
    }
}

/// Widens E4M3FN values to f64 (exact).
fn widen_e4m3(v: TensorView<'_>) -> Result<Tensor> {
    let values: Vec<f64> = v.bytes.iter().map(|&b| f64::from(Float8::E4M3FN.decode(b))).collect();
    Tensor::from_vec(v.shape.to_vec(), values)
}

impl OpImpl for Fp8Linear {
    fn name(&self) -> &'static str {
        match self.kind {
            LinearKind::Conv(_) => "Fp8Conv",
            LinearKind::Gemm(_) => "Fp8Gemm",
            LinearKind::MatMul(_) => "Fp8MatMul",
        }
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        if let Fp8Output::Fp8 { scale } = self.output {
            ensure_op!(scale.is_finite() && scale > 0.0, "{}: bad output scale {scale}", self.name());
        }
        let shape = self.core().infer(inputs, DType::F8E4M3FN)?;
        Ok(vec![TensorType::new(self.out_dtype(), shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let out = &mut outputs[0];
        let shape = out.shape.to_vec();
        let y = self.core().eval(inputs, &shape, widen_e4m3)?;
        match self.output {
            Fp8Output::F32 => out.as_mut_slice::<f32>()?.copy_from_slice(&y),
            Fp8Output::F16 => half::slice::HalfFloatSliceExt::convert_from_f32_slice(out.as_mut_slice::<f16>()?, &y),
            Fp8Output::Fp8 { scale } => {
                ensure_op!(
                    out.bytes.len() == y.len(),
                    "{}: output holds {} bytes, not {}",
                    self.name(),
                    out.bytes.len(),
                    y.len()
                );
                for (o, &v) in out.bytes.iter_mut().zip(&y) {
                    *o = requantize_fp8(v, scale);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::elementwise::UnaryKind;
    use crate::ops::fused::Activation;
    use crate::ops::linalg::MatMul;
    use crate::ops::Op;

    fn e4m3(values: &[f32], shape: Vec<usize>) -> Tensor {
        let bytes: Vec<u8> = values.iter().map(|&v| Float8::E4M3FN.encode(f64::from(v), true)).collect();
        Tensor::from_bytes(TensorType::new(DType::F8E4M3FN, shape), &bytes).unwrap()
    }

    #[test]
    fn weight_quantization_maps_each_channel_onto_448() {
        // A [K=2, N=2] MatMul weight: channels are columns (axis 1).
        let w = Tensor::from_vec(vec![2, 2], vec![1.0f32, -0.5, -2.0, 0.3]).unwrap();
        let (q, s) = quantize_weight_per_channel_fp8(&w, 1).unwrap();
        assert_eq!(s.as_slice::<f32>().unwrap(), &[2.0 / 448.0, 0.5 / 448.0]);
        let decoded: Vec<f32> = q.bytes().iter().map(|&b| Float8::E4M3FN.decode(b)).collect();
        // 1 / (2/448) = 224 and -2 / (2/448) = -448 are exact; -0.5 maps to
        // -448; 0.3 / (0.5/448) = 268.8 rounds to 256 (E4M3 steps by 32
        // between 256 and 448).
        assert_eq!(decoded, vec![224.0, -448.0, -448.0, 256.0]);
    }

    #[test]
    fn matmul_matches_the_hand_computed_epilogue() {
        let op: Op = Fp8Linear {
            kind: LinearKind::MatMul(MatMul {}),
            x_scale: 0.5,
            bias: true,
            epilogue: Epilogue { residual: true, activation: Some(Activation::Unary(UnaryKind::Relu)) },
            output: Fp8Output::F32,
        }
        .into();
        let x = e4m3(&[2.0, -3.0], vec![1, 2]);
        let w = e4m3(&[1.0, 4.0, 0.5, -6.0], vec![2, 2]);
        let ws = Tensor::from_vec(vec![2], vec![0.1f32, 0.01]).unwrap();
        let b = Tensor::from_vec(vec![2], vec![0.5f32, -1.0]).unwrap();
        let r = Tensor::from_vec(vec![1, 2], vec![0.25f32, 0.5]).unwrap();
        let out = op.eval_owned(&[Some(&x), Some(&w), Some(&ws), Some(&b), Some(&r)]).unwrap();
        // acc = [2 - 1.5, 8 + 18] = [0.5, 26].
        let y0 = 0.5f32 * (0.5f32 * 0.1) + 0.5 + 0.25;
        let y1 = (26.0f32 * (0.5f32 * 0.01) - 1.0 + 0.5).max(0.0);
        assert_eq!(out[0].as_slice::<f32>().unwrap(), &[y0, y1]);
    }

    #[test]
    fn fp8_output_saturates_like_quantize_linear() {
        assert_eq!(Float8::E4M3FN.decode(requantize_fp8(1000.0, 1.0)), 448.0);
        assert_eq!(Float8::E4M3FN.decode(requantize_fp8(-1000.0, 1.0)), -448.0);
        assert_eq!(Float8::E4M3FN.decode(requantize_fp8(3.0, 2.0)), 1.5);
        assert!(Float8::E4M3FN.decode(requantize_fp8(f32::NAN, 1.0)).is_nan());
    }

    #[test]
    fn refuses_int8_operands_and_bad_scales() {
        let l = Fp8Linear {
            kind: LinearKind::MatMul(MatMul {}),
            x_scale: 0.5,
            bias: false,
            epilogue: Epilogue::default(),
            output: Fp8Output::F32,
        };
        let op: Op = l.clone().into();
        let x8 = TensorType::new(DType::I8, vec![1, 2]);
        let w = TensorType::new(DType::F8E4M3FN, vec![2, 2]);
        let ws = TensorType::new(DType::F32, vec![2]);
        assert!(op.infer(&[Some(&x8), Some(&w), Some(&ws)]).is_err());
        let x = TensorType::new(DType::F8E4M3FN, vec![1, 2]);
        assert_eq!(op.infer(&[Some(&x), Some(&w), Some(&ws)]).unwrap()[0], TensorType::new(DType::F32, vec![1, 2]));
        let bad: Op = Fp8Linear { output: Fp8Output::Fp8 { scale: 0.0 }, ..l }.into();
        assert!(bad.infer(&[Some(&x), Some(&w), Some(&ws)]).is_err());
    }
}
