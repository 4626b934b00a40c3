//! `HalfIo`: an op computed in f32 on f16 tensors.
//!
//! Every f16 input is widened to f32, the wrapped op runs in f32, and every
//! f32 output is rounded to f16 (round to nearest even). This is what a GPU
//! kernel with f16 loads and stores and f32 arithmetic computes: tensor-core
//! GEMMs with f32 accumulation, and Softmax, LayerNorm and pooling means with
//! f32 reductions. Inputs of other dtypes (indices, masks) pass unchanged.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{Op, OpImpl};
use crate::tensor::{Tensor, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use half::f16;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HalfIo {
    pub inner: Box<Op>,
}

/// What a [`HalfIo`] serializes as.
#[derive(Deserialize)]
#[serde(rename = "HalfIo")]
struct HalfIoFields {
    inner: Box<Op>,
}

impl<'de> Deserialize<'de> for HalfIo {
    /// Wrappers do not nest, but a hostile engine could nest them deeper
    /// than the stack allows before `infer` refuses them.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<HalfIo, D::Error> {
        let _depth = crate::ops::util::DecodeDepth::enter(crate::ops::util::MAX_NESTING).map_err(serde::de::Error::custom)?;
        HalfIoFields::deserialize(d).map(|f| HalfIo { inner: f.inner })
    }
}

impl HalfIo {
    pub fn new(inner: Op) -> HalfIo {
        HalfIo { inner: Box::new(inner) }
    }
}

fn widen_type(t: &TensorType) -> TensorType {
    if t.dtype == DType::F16 {
        TensorType::new(DType::F32, t.shape.clone())
    } else {
        t.clone()
    }
}

impl OpImpl for HalfIo {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        ensure_op!(!matches!(*self.inner, Op::Precision(_)), "{}: precision wrappers do not nest", self.name());
        ensure_op!(
            inputs.iter().flatten().all(|t| t.dtype != DType::F32),
            "{}@fp16: f32 inputs must be cast to f16 first",
            self.name()
        );
        let wide: Vec<Option<TensorType>> = inputs.iter().map(|t| t.map(widen_type)).collect();
        let refs: Vec<Option<&TensorType>> = wide.iter().map(|t| t.as_ref()).collect();
        let outs = self.inner.infer(&refs)?;
        Ok(outs.into_iter().map(|t| if t.dtype == DType::F32 { TensorType::new(DType::F16, t.shape) } else { t }).collect())
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        // Widen f16 inputs; other inputs are used in place.
        let widened: Vec<Option<Tensor>> = inputs
            .iter()
            .map(|v| match v {
                Some(v) if v.dtype == DType::F16 => {
                    let src = v.as_slice::<f16>()?;
                    let mut dst = vec![0f32; src.len()];
                    half::slice::HalfFloatSliceExt::convert_to_f32_slice(src, &mut dst);
                    Ok(Some(Tensor::from_vec(v.shape.to_vec(), dst)?))
                }
                _ => Ok(None),
            })
            .collect::<Result<_>>()?;
        let views: Vec<Option<TensorView>> =
            inputs.iter().zip(&widened).map(|(v, w)| w.as_ref().map(|w| w.view()).or(*v)).collect();
        // Outputs the wrapped op writes in f32 go to scratch tensors first.
        let mut scratch: Vec<Option<Tensor>> = outputs
            .iter()
            .map(|o| {
                if o.dtype == DType::F16 {
                    Tensor::zeros(TensorType::new(DType::F32, o.shape.to_vec())).map(Some)
                } else {
                    Ok(None)
                }
            })
            .collect::<Result<_>>()?;
        {
            let mut outs: Vec<TensorViewMut> = Vec::with_capacity(outputs.len());
            let mut scratch_iter = scratch.iter_mut();
            for o in outputs.iter_mut() {
                match scratch_iter.next() {
                    Some(Some(t)) => outs.push(t.view_mut()),
                    _ => outs.push(TensorViewMut { dtype: o.dtype, shape: o.shape, bytes: &mut *o.bytes }),
                }
            }
            self.inner.as_impl().eval(&views, &mut outs)?;
        }
        for (o, s) in outputs.iter_mut().zip(&scratch) {
            if let Some(s) = s {
                let src = s.as_slice::<f32>()?;
                let dst = o.as_mut_slice::<f16>()?;
                if src.len() != dst.len() {
                    bail_op!("{}@fp16: output size mismatch", self.name());
                }
                half::slice::HalfFloatSliceExt::convert_from_f32_slice(dst, src);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::elementwise::{Binary, BinaryKind};

    #[test]
    fn wrappers_nested_by_a_hostile_engine_are_refused_not_a_stack_overflow() {
        let leaf: Op = Binary::new(BinaryKind::Add).into();
        let once: Op = HalfIo::new(leaf.clone()).into();
        let (leaf_bytes, once_bytes) = (postcard::to_stdvec(&leaf).unwrap(), postcard::to_stdvec(&once).unwrap());
        // A wrapper's bytes are a prefix followed by the wrapped op's.
        let prefix = &once_bytes[..once_bytes.len() - leaf_bytes.len()];
        let nested = |levels: usize| [prefix.repeat(levels), leaf_bytes.clone()].concat();
        assert_eq!(postcard::from_bytes::<Op>(&nested(1)).unwrap(), once);
        assert!(postcard::from_bytes::<Op>(&nested(200_000)).is_err());
        // The count of levels is released after the failure.
        assert_eq!(postcard::from_bytes::<Op>(&nested(1)).unwrap(), once);
    }

    #[test]
    fn rounds_each_output_once_after_f32_arithmetic() {
        // 1 + 2^-11 is not an f16, so adding in f16 twice would lose it; the
        // f32 sum of 1, 2^-11 and 2^-11 is 1 + 2^-10, which is.
        let op: Op = HalfIo::new(Binary::new(BinaryKind::Add).into()).into();
        let a = Tensor::from_vec(vec![2], vec![f16::from_f32(1.0), f16::from_f32(65504.0)]).unwrap();
        let b = Tensor::from_vec(vec![2], vec![f16::from_f32(2.0f32.powi(-10)), f16::from_f32(65504.0)]).unwrap();
        let out = op.eval_owned(&[Some(&a), Some(&b)]).unwrap();
        assert_eq!(out[0].dtype(), DType::F16);
        let v = out[0].as_slice::<f16>().unwrap();
        assert_eq!(v[0].to_f32(), 1.0 + 2.0f32.powi(-10));
        // Overflow rounds to infinity, as an f16 store on the GPU does.
        assert!(v[1].is_infinite());
    }

    #[test]
    fn refuses_f32_inputs_and_nesting() {
        let add: Op = Binary::new(BinaryKind::Add).into();
        let op: Op = HalfIo::new(add.clone()).into();
        let t = TensorType::new(DType::F32, vec![2]);
        assert!(op.infer(&[Some(&t), Some(&t)]).is_err());
        let nested: Op = HalfIo::new(op).into();
        let h = TensorType::new(DType::F16, vec![2]);
        assert!(nested.infer(&[Some(&h), Some(&h)]).is_err());
    }
}
