//! IndexGrid: an integer tensor that is an affine function of each
//! element's indices, `offset + sum(step[a] * i[a])`, with sizes and steps
//! fixed or read from other tensors' shapes. What index arithmetic on the
//! input shapes becomes in an engine whose shapes vary (`arange(batch) *
//! seq + arange(seq)`, as mask builders flatten a padding mask), where a
//! constant fits only one shape.

use crate::dtype::DType;
use crate::ensure_op;
use crate::error::Result;
use crate::ops::movement::reshape::{type_shapes, view_shapes};
use crate::ops::movement::DimOf;
use crate::ops::OpImpl;
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

/// A size or a step: a constant, or an axis size of one of the inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GridValue {
    Fixed(i64),
    Of(DimOf),
}

impl GridValue {
    fn value(self, shapes: &[Option<&[usize]>]) -> Result<i64> {
        match self {
            GridValue::Fixed(v) => Ok(v),
            GridValue::Of(d) => Ok(d.size(shapes, "IndexGrid")? as i64),
        }
    }
}

/// One axis of an [`IndexGrid`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GridAxis {
    pub size: GridValue,
    pub step: GridValue,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexGrid {
    /// I64 or I32.
    pub dtype: DType,
    pub offset: i64,
    pub axes: Vec<GridAxis>,
}

impl IndexGrid {
    /// The output shape and the steps, for inputs of shapes `shapes`.
    pub fn resolve(&self, shapes: &[Option<&[usize]>]) -> Result<(Vec<usize>, Vec<i64>)> {
        ensure_op!(matches!(self.dtype, DType::I64 | DType::I32), "IndexGrid: {} is not i64 or i32", self.dtype);
        let mut shape = Vec::with_capacity(self.axes.len());
        let mut steps = Vec::with_capacity(self.axes.len());
        for a in &self.axes {
            let n = a.size.value(shapes)?;
            ensure_op!(n >= 0, "IndexGrid: negative size {n}");
            shape.push(n as usize);
            steps.push(a.step.value(shapes)?);
        }
        Ok((shape, steps))
    }

    /// The values for inputs of shapes `shapes`, in row-major order.
    pub fn values(&self, shapes: &[Option<&[usize]>]) -> Result<Vec<i64>> {
        let (shape, steps) = self.resolve(shapes)?;
        let mut out = vec![self.offset];
        for (&n, &step) in shape.iter().zip(&steps) {
            let mut next = Vec::with_capacity(out.len() * n);
            for &v in &out {
                for i in 0..n as i64 {
                    next.push(v.wrapping_add(step.wrapping_mul(i)));
                }
            }
            out = next;
        }
        Ok(out)
    }
}

impl OpImpl for IndexGrid {
    fn name(&self) -> &'static str {
        "IndexGrid"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let shapes = type_shapes(inputs);
        let (shape, _) = self.resolve(&shapes)?;
        Ok(vec![TensorType::new(self.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let shapes = view_shapes(inputs);
        let values = self.values(&shapes)?;
        let out = &mut outputs[0];
        match self.dtype {
            DType::I64 => out.as_mut_slice::<i64>()?.copy_from_slice(&values),
            _ => {
                for (o, v) in out.as_mut_slice::<i32>()?.iter_mut().zip(values) {
                    *o = v as i32;
                }
            }
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
    fn flattened_batch_and_sequence_indices() {
        // arange(batch)[:, None] * seq + arange(seq), batch and seq read
        // from the ids' shape.
        let (b, s) = (DimOf { input: 0, axis: 0 }, DimOf { input: 0, axis: 1 });
        let op: Op = IndexGrid {
            dtype: DType::I64,
            offset: 0,
            axes: vec![
                GridAxis { size: GridValue::Of(b), step: GridValue::Of(s) },
                GridAxis { size: GridValue::Fixed(1), step: GridValue::Fixed(0) },
                GridAxis { size: GridValue::Of(s), step: GridValue::Fixed(1) },
            ],
        }
        .into();
        let ids = Tensor::from_vec(vec![2, 3], vec![0i64; 6]).unwrap();
        let y = op.eval_owned(&[Some(&ids)]).unwrap().remove(0);
        assert_eq!(y.shape(), &[2, 1, 3]);
        assert_eq!(y.as_slice::<i64>().unwrap(), &[0, 1, 2, 3, 4, 5]);
        let i32_range: Op = IndexGrid {
            dtype: DType::I32,
            offset: 5,
            axes: vec![GridAxis { size: GridValue::Fixed(3), step: GridValue::Fixed(-2) }],
        }
        .into();
        assert_eq!(i32_range.eval_owned(&[]).unwrap()[0].as_slice::<i32>().unwrap(), &[5, 3, 1]);
        let float: Op = IndexGrid { dtype: DType::F32, offset: 0, axes: vec![] }.into();
        assert!(float.eval_owned(&[]).is_err());
    }
}
