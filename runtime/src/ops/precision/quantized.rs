//! What the quantized linear layers ([`super::Int8Linear`],
//! [`super::Fp8Linear`]) share: the product of quantized operands summed
//! in f64, the per-channel scales, the bias, residual and activation, in
//! the order the GPU kernels follow.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::fused::{Epilogue, LinearKind};
use crate::ops::{input, opt_input, OpImpl};
use crate::tensor::{Tensor, TensorType, TensorView};
use crate::{bail_op, ensure_op};
use half::f16;

/// A quantized layer's product and epilogue, borrowed from the op.
pub(super) struct QuantizedProduct<'a> {
    pub name: &'static str,
    pub kind: &'a LinearKind,
    pub x_scale: f32,
    pub bias: bool,
    pub epilogue: &'a Epilogue,
}

/// The axis of a linear layer's output that indexes its weight's output
/// channels.
pub(super) fn channel_axis(kind: &LinearKind, rank: usize) -> usize {
    match kind {
        LinearKind::Conv(_) => 1,
        _ => rank.saturating_sub(1),
    }
}

/// The product op of a linear kind.
pub(super) fn product(kind: &LinearKind) -> &dyn OpImpl {
    match kind {
        LinearKind::Conv(c) => c,
        LinearKind::Gemm(g) => g,
        LinearKind::MatMul(m) => m,
    }
}

/// Float elements of a view as f32 (f32 or f16).
fn float_values(v: TensorView<'_>, name: &str) -> Result<Vec<f32>> {
    match v.dtype {
        DType::F32 => Ok(v.as_slice::<f32>()?.to_vec()),
        DType::F16 => Ok(v.as_slice::<f16>()?.iter().map(|x| x.to_f32()).collect()),
        d => bail_op!("{name}: expected an f32 or f16 residual, got {d:?}"),
    }
}

impl QuantizedProduct<'_> {
    /// Checks the inputs `[x, w, w_scale, bias?, residual?]` (x and w of
    /// dtype `operand`) and returns the output shape.
    pub fn infer(&self, inputs: &[Option<&TensorType>], operand: DType) -> Result<Vec<usize>> {
        let name = self.name;
        ensure_op!(inputs.len() <= 5, "{name}: too many inputs");
        let x = input(inputs, 0, name)?;
        let w = input(inputs, 1, name)?;
        ensure_op!(x.dtype == operand && w.dtype == operand, "{name}: x and w must be {}, got {x} and {w}", operand.name());
        ensure_op!(self.x_scale.is_finite() && self.x_scale > 0.0, "{name}: bad input scale {}", self.x_scale);
        let xw = TensorType::new(DType::F64, x.shape.clone());
        let ww = TensorType::new(DType::F64, w.shape.clone());
        let out = product(self.kind).infer(&[Some(&xw), Some(&ww), None])?;
        ensure_op!(out.len() == 1, "{name}: one output expected");
        let shape = out[0].shape.clone();
        ensure_op!(!shape.is_empty(), "{name}: scalar output");
        let channels = shape[channel_axis(self.kind, shape.len())];
        let ws = input(inputs, 2, name)?;
        ensure_op!(ws.dtype == DType::F32 && ws.shape == [channels], "{name}: w_scale must be f32[{channels}], got {ws}");
        match (self.bias, opt_input(inputs, 3)) {
            (true, Some(b)) => {
                ensure_op!(b.dtype == DType::F32 && b.shape == [channels], "{name}: bias must be f32[{channels}], got {b}")
            }
            (false, None) => {}
            _ => bail_op!("{name}: bias input does not match the bias flag"),
        }
        match (self.epilogue.residual, opt_input(inputs, 4)) {
            (true, Some(r)) => ensure_op!(
                matches!(r.dtype, DType::F32 | DType::F16) && r.shape == shape,
                "{name}: residual must be f32 or f16 of shape {shape:?}, got {r}"
            ),
            (false, None) => {}
            _ => bail_op!("{name}: residual input does not match the epilogue"),
        }
        Ok(shape)
    }

    /// The layer's f32 values before they are stored: `acc = Σ x · w` over
    /// the operands widened by `widen` (exactly, to f64) and summed in f64,
    /// then `f32(acc) * (x_scale * w_scale[c])`, `+ bias[c]`, `+ residual`
    /// and the activation, in f32.
    pub fn eval(
        &self,
        inputs: &[Option<TensorView<'_>>],
        shape: &[usize],
        widen: impl Fn(TensorView<'_>) -> Result<Tensor>,
    ) -> Result<Vec<f32>> {
        let name = self.name;
        let x = widen(input(inputs, 0, name)?)?;
        let w = widen(input(inputs, 1, name)?)?;
        let mut acc = Tensor::zeros(TensorType::new(DType::F64, shape.to_vec()))?;
        product(self.kind).eval(&[Some(x.view()), Some(w.view()), None], &mut [acc.view_mut()])?;
        let axis = channel_axis(self.kind, shape.len());
        let channels = shape[axis];
        let inner: usize = shape[axis + 1..].iter().product();
        let w_scale = input(inputs, 2, name)?.as_slice::<f32>()?;
        let scales: Vec<f32> = w_scale.iter().map(|&s| self.x_scale * s).collect();
        let bias = if self.bias { Some(input(inputs, 3, name)?.as_slice::<f32>()?) } else { None };
        let residual = if self.epilogue.residual { Some(float_values(input(inputs, 4, name)?, name)?) } else { None };
        let acc = acc.as_slice::<f64>()?;
        let mut y: Vec<f32> = acc
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                let c = (i / inner.max(1)) % channels.max(1);
                let v = (a as f32) * scales[c];
                match bias {
                    Some(b) => v + b[c],
                    None => v,
                }
            })
            .collect();
        self.epilogue.apply(&mut y, residual.as_deref());
        Ok(y)
    }
}

/// Quantizes a weight symmetrically per output channel (`axis`): the scale
/// of channel `c` is `max |w_c| / qmax` (1 for an all-zero channel) and
/// each element is `encode(w / scale)`. Returns the quantized values and
/// the scales.
pub(super) fn quantize_per_channel<T>(
    w: &Tensor,
    axis: usize,
    what: &str,
    qmax: f32,
    encode: impl Fn(f32) -> T,
) -> Result<(Vec<T>, Tensor)> {
    ensure_op!(w.dtype() == DType::F32, "{what} weights: expected an f32 weight, got {}", w.ty());
    ensure_op!(axis < w.shape().len(), "{what} weights: axis {axis} out of range for {}", w.ty());
    let shape = w.shape();
    let channels = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    let values = w.as_slice::<f32>()?;
    ensure_op!(values.iter().all(|v| v.is_finite()), "{what} weights: the weight has non-finite values");
    let channel_of = |i: usize| (i / inner.max(1)) % channels.max(1);
    let mut amax = vec![0f32; channels];
    for (i, v) in values.iter().enumerate() {
        let c = channel_of(i);
        amax[c] = amax[c].max(v.abs());
    }
    let scales: Vec<f32> = amax.iter().map(|&a| if a > 0.0 { a / qmax } else { 1.0 }).collect();
    let q = values.iter().enumerate().map(|(i, v)| encode(v / scales[channel_of(i)])).collect();
    Ok((q, Tensor::from_vec(vec![channels], scales)?))
}
