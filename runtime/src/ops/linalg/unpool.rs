//! MaxUnpool: the partial inverse of MaxPool. Scatters X into a zero tensor
//! of `output_shape` at the flat positions MaxPool's Indices output names.
//! The compiler resolves the output shape (from the kernel, strides and pads,
//! or from ONNX's `output_shape` input). The indices are positions in the
//! tensor MaxPool read (`index_shape`); when the output is larger, each
//! lands at the same coordinates in the output.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MaxUnpool {
    /// The full output shape `[N, C, spatial...]`.
    pub output_shape: Vec<usize>,
    /// The shape the indices are flat positions of (the unpooled shape the
    /// window implies); usually `output_shape`.
    pub index_shape: Vec<usize>,
}

impl OpImpl for MaxUnpool {
    fn name(&self) -> &'static str {
        "MaxUnpool"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        let i = input(inputs, 1, self.name())?;
        ensure_op!(i.dtype == DType::I64 && i.shape == x.shape, "MaxUnpool: indices {i} must be i64 of X's shape {x}");
        ensure_op!(
            self.output_shape.len() == x.shape.len() && self.output_shape[..2] == x.shape[..2.min(x.shape.len())],
            "MaxUnpool: output shape {:?} does not fit input {x}",
            self.output_shape
        );
        ensure_op!(
            self.index_shape.len() == self.output_shape.len()
                && self.index_shape.iter().zip(&self.output_shape).all(|(i, o)| i <= o),
            "MaxUnpool: index shape {:?} exceeds output shape {:?}",
            self.index_shape,
            self.output_shape
        );
        ensure_op!(x.dtype.size() <= 8 && x.dtype != DType::Bool, "MaxUnpool: unsupported dtype {}", x.dtype);
        Ok(vec![TensorType::new(x.dtype, self.output_shape.clone())])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        let idx = input(inputs, 1, self.name())?.as_slice::<i64>()?;
        let moved;
        let idx = if self.index_shape == self.output_shape {
            idx
        } else {
            moved = self.relocate(idx)?;
            &moved[..]
        };
        let out = &mut outputs[0];
        match x.dtype {
            DType::F32 => scatter::<f32>(x.as_slice()?, idx, out.as_mut_slice()?),
            DType::F64 => scatter::<f64>(x.as_slice()?, idx, out.as_mut_slice()?),
            DType::F16 => scatter::<f16>(x.as_slice()?, idx, out.as_mut_slice()?),
            DType::BF16 => scatter::<bf16>(x.as_slice()?, idx, out.as_mut_slice()?),
            DType::I8 => scatter::<i8>(x.as_slice()?, idx, out.as_mut_slice()?),
            DType::U8 => scatter::<u8>(x.as_slice()?, idx, out.as_mut_slice()?),
            DType::I16 => scatter::<i16>(x.as_slice()?, idx, out.as_mut_slice()?),
            DType::U16 => scatter::<u16>(x.as_slice()?, idx, out.as_mut_slice()?),
            DType::I32 => scatter::<i32>(x.as_slice()?, idx, out.as_mut_slice()?),
            DType::U32 => scatter::<u32>(x.as_slice()?, idx, out.as_mut_slice()?),
            DType::I64 => scatter::<i64>(x.as_slice()?, idx, out.as_mut_slice()?),
            DType::U64 => scatter::<u64>(x.as_slice()?, idx, out.as_mut_slice()?),
            d => bail_op!("MaxUnpool: unsupported dtype {d}"),
        }
    }
}

impl MaxUnpool {
    /// Re-expresses flat positions in `index_shape` as flat positions in
    /// `output_shape`.
    fn relocate(&self, idx: &[i64]) -> Result<Vec<i64>> {
        let total: usize = self.index_shape.iter().product();
        let mut coords = vec![0usize; self.index_shape.len()];
        idx.iter()
            .map(|&i| {
                let Some(flat) = usize::try_from(i).ok().filter(|&f| f < total) else {
                    bail_op!("MaxUnpool: index {i} is outside the unpooled shape {:?}", self.index_shape);
                };
                super::window::unflatten(flat, &self.index_shape, &mut coords);
                Ok(coords.iter().zip(&self.output_shape).fold(0usize, |acc, (&c, &d)| acc * d + c) as i64)
            })
            .collect()
    }
}

fn scatter<T: Element + Default>(x: &[T], idx: &[i64], y: &mut [T]) -> Result<()> {
    y.fill(T::default());
    for (&v, &i) in x.iter().zip(idx) {
        match usize::try_from(i).ok().and_then(|i| y.get_mut(i)) {
            Some(o) => *o = v,
            None => bail_op!("MaxUnpool: index {i} is outside the output of {} elements", y.len()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn scatters_into_zeros() {
        let x = Tensor::from_vec(vec![1, 1, 1, 2], vec![5f32, 6.]).unwrap();
        let i = Tensor::from_vec(vec![1, 1, 1, 2], vec![3i64, 0]).unwrap();
        let op: Op = MaxUnpool { output_shape: vec![1, 1, 2, 2], index_shape: vec![1, 1, 2, 2] }.into();
        let y = op.eval_owned(&[Some(&x), Some(&i)]).unwrap().remove(0);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[6., 0., 0., 5.]);
        let bad = Tensor::from_vec(vec![1, 1, 1, 2], vec![4i64, 0]).unwrap();
        assert!(op.eval_owned(&[Some(&x), Some(&bad)]).is_err());
    }
}
