//! Gather (whole slices along one axis), GatherElements (element-wise along
//! one axis) and GatherND (slices addressed by index tuples). Indices are
//! runtime i32/i64 tensors: negative ones count from the end, out-of-range
//! ones are an error.

use crate::dtype::DType;
use crate::ensure_op;
use crate::error::Result;
use crate::ops::movement::copy::{for_each_offset, index_values, istrides, resolve_index};
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

fn check_index_dtype(t: &TensorType, op: &str) -> Result<()> {
    ensure_op!(matches!(t.dtype, DType::I32 | DType::I64), "{op}: indices must be i32 or i64, got {}", t.dtype);
    Ok(())
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gather {
    /// Normalized (non-negative) axis.
    pub axis: usize,
}

impl OpImpl for Gather {
    fn name(&self) -> &'static str {
        "Gather"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "Gather")?;
        let idx = input(inputs, 1, "Gather")?;
        check_index_dtype(idx, "Gather")?;
        ensure_op!(self.axis < x.shape.len(), "Gather: axis {} out of range for {x}", self.axis);
        let mut shape = x.shape[..self.axis].to_vec();
        shape.extend_from_slice(&idx.shape);
        shape.extend_from_slice(&x.shape[self.axis + 1..]);
        Ok(vec![TensorType::new(x.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "Gather")?;
        let idx = input(inputs, 1, "Gather")?;
        let n = x.shape[self.axis];
        let rows: Vec<usize> =
            index_values(&idx, "Gather")?.into_iter().map(|i| resolve_index(i, n, "Gather")).collect::<Result<_>>()?;
        let esize = x.dtype.size();
        let outer: usize = x.shape[..self.axis].iter().product();
        let run = x.shape[self.axis + 1..].iter().product::<usize>() * esize;
        if run == 0 {
            return Ok(());
        }
        let out = &mut outputs[0];
        let mut d = 0;
        for o in 0..outer {
            let base = o * n * run;
            for &r in &rows {
                let s = base + r * run;
                out.bytes[d..d + run].copy_from_slice(&x.bytes[s..s + run]);
                d += run;
            }
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GatherElements {
    /// Normalized (non-negative) axis.
    pub axis: usize,
}

/// Checks that `idx` has the rank of `x` and fits inside it off `axis`.
fn check_elements_shapes(x: &[usize], idx: &[usize], axis: usize, op: &str) -> Result<()> {
    ensure_op!(axis < x.len(), "{op}: axis {axis} out of range for rank {}", x.len());
    ensure_op!(idx.len() == x.len(), "{op}: indices {idx:?} and data {x:?} differ in rank");
    for d in 0..x.len() {
        ensure_op!(d == axis || idx[d] <= x[d], "{op}: indices {idx:?} do not fit in data {x:?}");
    }
    Ok(())
}

impl OpImpl for GatherElements {
    fn name(&self) -> &'static str {
        "GatherElements"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "GatherElements")?;
        let idx = input(inputs, 1, "GatherElements")?;
        check_index_dtype(idx, "GatherElements")?;
        check_elements_shapes(&x.shape, &idx.shape, self.axis, "GatherElements")?;
        Ok(vec![TensorType::new(x.dtype, idx.shape.clone())])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "GatherElements")?;
        let idx = input(inputs, 1, "GatherElements")?;
        let values = index_values(&idx, "GatherElements")?;
        let esize = x.dtype.size();
        let n = x.shape[self.axis];
        let mut xs = istrides(x.shape);
        let axis_stride = xs[self.axis] as usize;
        xs[self.axis] = 0;
        let out = &mut outputs[0];
        let mut result = Ok(());
        let mut k = 0usize;
        for_each_offset(idx.shape, &xs, &istrides(idx.shape), 0, 0, |base, d| {
            match resolve_index(values[k], n, "GatherElements") {
                Ok(i) => {
                    let s = (base as usize + i * axis_stride) * esize;
                    let d = d as usize * esize;
                    out.bytes[d..d + esize].copy_from_slice(&x.bytes[s..s + esize]);
                }
                Err(e) => result = Err(e),
            }
            k += 1;
        });
        result
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GatherND {
    pub batch_dims: usize,
}

/// The geometry shared by GatherND and ScatterND: `batch` leading dimensions
/// common to data and indices, `tuples` index tuples of length `m` per batch
/// entry, each addressing a block of `block` elements.
pub(crate) struct NdGeometry {
    pub batch: usize,
    pub tuples: usize,
    pub m: usize,
    pub block: usize,
}

pub(crate) fn nd_geometry(x: &[usize], idx: &[usize], b: usize, op: &str) -> Result<NdGeometry> {
    ensure_op!(!idx.is_empty(), "{op}: indices must have rank >= 1");
    let q = idx.len();
    let m = idx[q - 1];
    ensure_op!(b < q && b <= x.len(), "{op}: batch_dims {b} too large for indices {idx:?} and data {x:?}");
    ensure_op!(x[..b] == idx[..b], "{op}: batch dimensions of data {x:?} and indices {idx:?} differ");
    ensure_op!(b + m <= x.len(), "{op}: index tuples of length {m} are too long for data {x:?}");
    Ok(NdGeometry {
        batch: x[..b].iter().product(),
        tuples: idx[b..q - 1].iter().product(),
        m,
        block: x[b + m..].iter().product(),
    })
}

/// The element offset (within one batch entry of `x`) of index tuple `t`.
pub(crate) fn nd_offset(tuple: &[i64], x: &[usize], strides: &[usize], b: usize, op: &str) -> Result<usize> {
    let mut off = 0;
    for (j, &i) in tuple.iter().enumerate() {
        off += resolve_index(i, x[b + j], op)? * strides[b + j];
    }
    Ok(off)
}

impl OpImpl for GatherND {
    fn name(&self) -> &'static str {
        "GatherND"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "GatherND")?;
        let idx = input(inputs, 1, "GatherND")?;
        check_index_dtype(idx, "GatherND")?;
        let g = nd_geometry(&x.shape, &idx.shape, self.batch_dims, "GatherND")?;
        let mut shape = idx.shape[..idx.shape.len() - 1].to_vec();
        shape.extend_from_slice(&x.shape[self.batch_dims + g.m..]);
        Ok(vec![TensorType::new(x.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "GatherND")?;
        let idx = input(inputs, 1, "GatherND")?;
        let b = self.batch_dims;
        let g = nd_geometry(x.shape, idx.shape, b, "GatherND")?;
        let values = index_values(&idx, "GatherND")?;
        let strides = crate::ops::util::strides(x.shape);
        let esize = x.dtype.size();
        let run = g.block * esize;
        let batch_len: usize = x.shape[b..].iter().product();
        let out = &mut outputs[0];
        if run == 0 {
            return Ok(());
        }
        let mut d = 0;
        for bi in 0..g.batch {
            for t in 0..g.tuples {
                let k = (bi * g.tuples + t) * g.m;
                let off = bi * batch_len + nd_offset(&values[k..k + g.m], x.shape, &strides, b, "GatherND")?;
                let s = off * esize;
                out.bytes[d..d + run].copy_from_slice(&x.bytes[s..s + run]);
                d += run;
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
    fn gathers_rows_with_negative_indices() {
        let x = Tensor::from_vec(vec![3, 2], vec![1f32, 2., 3., 4., 5., 6.]).unwrap();
        let i = Tensor::from_vec(vec![2], vec![-1i64, 0]).unwrap();
        let op: Op = Gather { axis: 0 }.into();
        let y = op.eval_owned(&[Some(&x), Some(&i)]).unwrap();
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[5., 6., 1., 2.]);
    }

    #[test]
    fn gather_scalar_index_on_last_axis() {
        let x = Tensor::from_vec(vec![2, 3], vec![1i32, 2, 3, 4, 5, 6]).unwrap();
        let i = Tensor::scalar(2i32);
        let op: Op = Gather { axis: 1 }.into();
        let y = op.eval_owned(&[Some(&x), Some(&i)]).unwrap();
        assert_eq!(y[0].shape(), &[2]);
        assert_eq!(y[0].as_slice::<i32>().unwrap(), &[3, 6]);
    }

    #[test]
    fn gather_rejects_out_of_range() {
        let x = Tensor::from_vec(vec![2], vec![1f32, 2.]).unwrap();
        let i = Tensor::from_vec(vec![1], vec![2i64]).unwrap();
        let op: Op = Gather { axis: 0 }.into();
        assert!(op.eval_owned(&[Some(&x), Some(&i)]).is_err());
    }

    #[test]
    fn gather_elements_along_axis_1() {
        let x = Tensor::from_vec(vec![2, 2], vec![1f32, 2., 3., 4.]).unwrap();
        let i = Tensor::from_vec(vec![2, 2], vec![0i64, 0, 1, 0]).unwrap();
        let op: Op = GatherElements { axis: 1 }.into();
        let y = op.eval_owned(&[Some(&x), Some(&i)]).unwrap();
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[1., 1., 4., 3.]);
    }

    #[test]
    fn gather_nd_with_batch_dims() {
        let x = Tensor::from_vec(vec![2, 2, 2], (0..8).collect()).unwrap();
        let i = Tensor::from_vec(vec![2, 1], vec![1i64, 0]).unwrap();
        let op: Op = GatherND { batch_dims: 1 }.into();
        let y = op.eval_owned(&[Some(&x), Some(&i)]).unwrap();
        assert_eq!(y[0].shape(), &[2, 2]);
        assert_eq!(y[0].as_slice::<i32>().unwrap(), &[2, 3, 4, 5]);
    }
}
