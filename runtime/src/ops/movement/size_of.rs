//! SizeOf: sizes of its inputs' axes as an integer tensor, read at run
//! time. An engine whose shapes vary uses it where the model computed a
//! value from a shape (`x.size(0)` as a loop's trip count), which the
//! importer folded into a constant at each shape it imported.

use super::reshape::{view_shapes, DimOf};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::OpImpl;
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

/// The sizes `dims` of the inputs' axes, as `dtype` (I64 or I32): one
/// element per entry, or with `scalar` the one entry as a scalar.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SizeOf {
    pub dtype: DType,
    pub dims: Vec<DimOf>,
    pub scalar: bool,
}

impl SizeOf {
    /// The sizes it gives for inputs of shapes `shapes`.
    pub fn sizes(&self, shapes: &[Option<&[usize]>]) -> Result<Vec<usize>> {
        self.dims.iter().map(|d| d.size(shapes, "SizeOf")).collect()
    }

    fn shape(&self) -> Result<Vec<usize>> {
        ensure_op!(matches!(self.dtype, DType::I64 | DType::I32), "SizeOf: {} is not i64 or i32", self.dtype);
        if self.scalar {
            ensure_op!(self.dims.len() == 1, "SizeOf: a scalar of {} sizes", self.dims.len());
            return Ok(Vec::new());
        }
        Ok(vec![self.dims.len()])
    }
}

impl OpImpl for SizeOf {
    fn name(&self) -> &'static str {
        "SizeOf"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let shapes = super::reshape::type_shapes(inputs);
        for d in &self.dims {
            d.size(&shapes, "SizeOf")?;
        }
        Ok(vec![TensorType::new(self.dtype, self.shape()?)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let shapes = view_shapes(inputs);
        let sizes = self.sizes(&shapes)?;
        match self.dtype {
            DType::I64 => {
                for (o, s) in outputs[0].as_mut_slice::<i64>()?.iter_mut().zip(&sizes) {
                    *o = *s as i64;
                }
            }
            DType::I32 => {
                for (o, s) in outputs[0].as_mut_slice::<i32>()?.iter_mut().zip(&sizes) {
                    *o = i32::try_from(*s).map_err(|_| crate::Error::op(format!("SizeOf: {s} does not fit an i32")))?;
                }
            }
            d => bail_op!("SizeOf: {d} is not i64 or i32"),
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
    fn reads_the_sizes_of_its_inputs_axes() {
        let x = Tensor::zeros(TensorType::new(DType::F32, vec![7, 3, 5])).unwrap();
        let y = Tensor::zeros(TensorType::new(DType::U8, vec![2])).unwrap();
        let op: Op =
            SizeOf { dtype: DType::I64, dims: vec![DimOf { input: 0, axis: 2 }, DimOf { input: 1, axis: 0 }], scalar: false }
                .into();
        let out = op.eval_owned(&[Some(&x), Some(&y)]).unwrap().remove(0);
        assert_eq!(out.shape(), [2]);
        assert_eq!(out.as_slice::<i64>().unwrap(), [5, 2]);
        let op: Op = SizeOf { dtype: DType::I32, dims: vec![DimOf { input: 0, axis: 0 }], scalar: true }.into();
        let out = op.eval_owned(&[Some(&x)]).unwrap().remove(0);
        assert_eq!((out.shape().len(), out.as_slice::<i32>().unwrap()), (0, &[7][..]));
        let bad: Op = SizeOf { dtype: DType::I64, dims: vec![DimOf { input: 0, axis: 3 }], scalar: true }.into();
        assert!(bad.eval_owned(&[Some(&x)]).is_err());
        let bad: Op = SizeOf { dtype: DType::F32, dims: vec![DimOf { input: 0, axis: 0 }], scalar: true }.into();
        assert!(bad.eval_owned(&[Some(&x)]).is_err());
    }
}
