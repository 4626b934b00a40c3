//! Reshape to a static shape (also what Flatten, Squeeze, Unsqueeze and
//! Identity become). The data is copied unchanged.

use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reshape {
    pub shape: Vec<usize>,
}

impl OpImpl for Reshape {
    fn name(&self) -> &'static str {
        "Reshape"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "Reshape")?;
        let out = TensorType::new(x.dtype, self.shape.clone());
        ensure_op!(out.checked_len() == x.checked_len(), "Reshape: cannot reshape {x} to {:?}", self.shape);
        Ok(vec![out])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "Reshape")?;
        outputs[0].bytes.copy_from_slice(x.bytes);
        Ok(())
    }
}

/// The output shape of an ONNX Reshape: 0 copies the input dimension (unless
/// `allowzero`), -1 is inferred from the element count.
pub fn resolve_reshape(input: &[usize], spec: &[i64], allowzero: bool) -> Result<Vec<usize>> {
    let total: usize = input.iter().product();
    let mut out = Vec::with_capacity(spec.len());
    let mut infer_at = None;
    for (i, &s) in spec.iter().enumerate() {
        match s {
            0 if !allowzero => {
                let d = input.get(i).ok_or_else(|| {
                    crate::Error::op(format!("shape {spec:?}: 0 at position {i} has no input dimension to copy"))
                })?;
                out.push(*d);
            }
            -1 => {
                if infer_at.replace(i).is_some() {
                    crate::bail_op!("shape {spec:?} has more than one -1");
                }
                out.push(1);
            }
            s if s < 0 => crate::bail_op!("shape {spec:?} has an invalid dimension {s}"),
            s => out.push(s as usize),
        }
    }
    if let Some(i) = infer_at {
        if allowzero && spec.contains(&0) {
            crate::bail_op!("shape {spec:?} mixes -1 with 0 under allowzero");
        }
        let known: usize = out.iter().product();
        if known == 0 || !total.is_multiple_of(known) {
            crate::bail_op!("cannot reshape {input:?} to {spec:?}");
        }
        out[i] = total / known;
    }
    if out.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) != Some(total) {
        crate::bail_op!("cannot reshape {input:?} to {spec:?}");
    }
    Ok(out)
}

/// One output axis of a [`DynamicReshape`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReshapeDim {
    Fixed(usize),
    /// The input's size on this axis.
    Copy(usize),
    /// Whatever the element count leaves (at most one axis).
    Infer,
    /// Another input's size on one of its axes (the inputs after the first
    /// are read for their shapes only).
    Of(DimOf),
    /// The product of the input's sizes on axes `start..end` (Flatten of a
    /// tensor sized by the data).
    Merge {
        start: usize,
        end: usize,
    },
}

/// One axis of one of an op's inputs, whose size decides a size of the
/// op's output: how an engine whose shapes vary spells a dimension that
/// comes from another tensor's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DimOf {
    pub input: usize,
    pub axis: usize,
}

/// The shapes of an op's input types, for [`DimOf::size`].
pub fn type_shapes<'a>(inputs: &[Option<&'a TensorType>]) -> Vec<Option<&'a [usize]>> {
    inputs.iter().map(|t| t.map(|t| t.shape.as_slice())).collect()
}

/// The shapes of an op's input views, for [`DimOf::size`].
pub fn view_shapes<'a>(inputs: &'a [Option<TensorView<'_>>]) -> Vec<Option<&'a [usize]>> {
    inputs.iter().map(|t| t.as_ref().map(|t| t.shape)).collect()
}

/// An op that is a static op once its inputs' shapes are known (the data
/// first, then the inputs read for their shapes): `DynamicExpand` is an
/// `Expand`, `DynamicSlice` a `Slice`... Its `infer` and `eval` are the
/// static op's on the data input ([`infer_at`], [`eval_at`]).
pub trait AtShapes {
    type Static: OpImpl;

    /// The static op for inputs of shapes `shapes`.
    fn at(&self, shapes: &[Option<&[usize]>]) -> Result<Self::Static>;
}

/// `infer` of an [`AtShapes`] op.
pub fn infer_at<A: AtShapes>(op: &A, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
    op.at(&type_shapes(inputs))?.infer(&inputs[..inputs.len().min(1)])
}

/// `eval` of an [`AtShapes`] op.
pub fn eval_at<A: AtShapes>(op: &A, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
    op.at(&view_shapes(inputs))?.eval(&inputs[..inputs.len().min(1)], outputs)
}

impl DimOf {
    /// The size this names, given the op's input shapes.
    pub fn size(self, shapes: &[Option<&[usize]>], op: &str) -> Result<usize> {
        let shape = shapes.get(self.input).copied().flatten();
        ensure_op!(shape.is_some(), "{op}: no input {} to read a size from", self.input);
        let shape = shape.unwrap_or_default();
        ensure_op!(self.axis < shape.len(), "{op}: axis {} of input {}, which has rank {}", self.axis, self.input, shape.len());
        Ok(shape[self.axis])
    }
}

/// A Reshape whose target follows the input's shape: each output axis is a
/// fixed size, an input axis' size, another input's axis size, or inferred
/// from the element count.
/// What a Reshape (and Flatten, Squeeze, Unsqueeze) becomes in an engine
/// whose input shapes vary within a profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DynamicReshape {
    pub dims: Vec<ReshapeDim>,
}

impl DynamicReshape {
    /// The output shape for an input of shape `x` (a target that reads no
    /// other input).
    pub fn target(&self, x: &[usize]) -> Result<Vec<usize>> {
        self.target_of(&[Some(x)])
    }

    /// The output shape for inputs of shapes `shapes` (the data first).
    pub fn target_of(&self, shapes: &[Option<&[usize]>]) -> Result<Vec<usize>> {
        let x = shapes.first().copied().flatten().unwrap_or_default();
        let total: usize = x.iter().product();
        let mut out = Vec::with_capacity(self.dims.len());
        let mut infer = None;
        for (i, d) in self.dims.iter().enumerate() {
            out.push(match *d {
                ReshapeDim::Fixed(n) => n,
                ReshapeDim::Copy(a) => {
                    ensure_op!(a < x.len(), "DynamicReshape: axis {a} of a rank-{} input", x.len());
                    x[a]
                }
                ReshapeDim::Infer => {
                    ensure_op!(infer.is_none(), "DynamicReshape: more than one inferred axis");
                    infer = Some(i);
                    1
                }
                ReshapeDim::Of(d) => d.size(shapes, "DynamicReshape")?,
                ReshapeDim::Merge { start, end } => {
                    ensure_op!(start <= end && end <= x.len(), "DynamicReshape: axes {start}..{end} of a rank-{} input", x.len());
                    x[start..end].iter().product()
                }
            });
        }
        if let Some(i) = infer {
            let known: usize = out.iter().product();
            ensure_op!(known > 0 && total.is_multiple_of(known), "DynamicReshape: cannot reshape {x:?} to {:?}", self.dims);
            out[i] = total / known;
        }
        Ok(out)
    }
}

impl OpImpl for DynamicReshape {
    fn name(&self) -> &'static str {
        "DynamicReshape"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "DynamicReshape")?;
        let shapes = type_shapes(inputs);
        let out = TensorType::new(x.dtype, self.target_of(&shapes)?);
        ensure_op!(out.checked_len() == x.checked_len(), "DynamicReshape: cannot reshape {x} to {:?}", self.dims);
        Ok(vec![out])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "DynamicReshape")?;
        outputs[0].bytes.copy_from_slice(x.bytes);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_reshape_follows_the_input_shape() {
        use ReshapeDim::*;
        let flatten = DynamicReshape { dims: vec![Copy(0), Infer] };
        assert_eq!(flatten.target(&[3, 8, 1, 1]).unwrap(), vec![3, 8]);
        assert_eq!(flatten.target(&[7, 8, 2, 2]).unwrap(), vec![7, 32]);
        let heads = DynamicReshape { dims: vec![Copy(0), Copy(1), Fixed(4), Infer] };
        assert_eq!(heads.target(&[2, 5, 64]).unwrap(), vec![2, 5, 4, 16]);
        assert!(heads.target(&[2, 5, 6]).is_err());
        assert!(DynamicReshape { dims: vec![Infer, Infer] }.target(&[4]).is_err());
        assert!(DynamicReshape { dims: vec![Copy(3)] }.target(&[4]).is_err());
        assert!(DynamicReshape { dims: vec![Fixed(0), Infer] }.target(&[0, 4]).is_err());
        // [batch * seq, hidden] back to [batch, seq, hidden], the two read
        // from the model's input ids.
        let unflatten = DynamicReshape { dims: vec![Of(DimOf { input: 1, axis: 0 }), Of(DimOf { input: 1, axis: 1 }), Infer] };
        assert_eq!(unflatten.target_of(&[Some(&[12, 8]), Some(&[3, 4])]).unwrap(), vec![3, 4, 8]);
        assert!(unflatten.target_of(&[Some(&[12, 8]), Some(&[3])]).is_err());
        assert!(unflatten.target_of(&[Some(&[12, 8])]).is_err());
    }
}
