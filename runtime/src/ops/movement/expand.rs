//! Expand (broadcast to a static shape, or one read from other inputs'
//! shapes) and Tile (repeat along each axis).

use crate::ensure_op;
use crate::error::Result;
use crate::ops::movement::copy::{istrides, strided_copy, Strided};
use crate::ops::movement::reshape::{eval_at, infer_at, AtShapes};
use crate::ops::movement::DimOf;
use crate::ops::util::{broadcast_shapes, broadcast_strides};
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Expand {
    /// The output shape; the input must broadcast to it exactly.
    pub shape: Vec<usize>,
}

impl OpImpl for Expand {
    fn name(&self) -> &'static str {
        "Expand"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "Expand")?;
        let b = broadcast_shapes(&[&x.shape, &self.shape])?;
        ensure_op!(b == self.shape, "Expand: {x} does not broadcast to {:?}", self.shape);
        Ok(vec![TensorType::new(x.dtype, self.shape.clone())])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "Expand")?;
        let out = &mut outputs[0];
        let plan = Strided {
            shape: self.shape.clone(),
            src_strides: broadcast_strides(x.shape, &self.shape).into_iter().map(|s| s as isize).collect(),
            dst_strides: istrides(&self.shape),
            src_off: 0,
            dst_off: 0,
        };
        copy_broadcast(x.bytes, out.bytes, x.dtype.size(), &plan)
    }
}

/// An Expand whose target follows the input shapes: each axis the
/// largest target's size, or read from another input's shape (those
/// inputs are read for their shapes only).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DynamicExpand {
    /// The target at the largest shapes.
    pub shape: Vec<usize>,
    pub dims: Vec<Option<DimOf>>,
}

impl AtShapes for DynamicExpand {
    type Static = Expand;

    /// The Expand for inputs of shapes `shapes` (the data first).
    fn at(&self, shapes: &[Option<&[usize]>]) -> Result<Expand> {
        ensure_op!(self.dims.len() == self.shape.len(), "DynamicExpand: {} sizes for rank {}", self.dims.len(), self.shape.len());
        let mut shape = self.shape.clone();
        for (s, d) in shape.iter_mut().zip(&self.dims) {
            if let Some(d) = d {
                *s = d.size(shapes, "DynamicExpand")?;
            }
        }
        Ok(Expand { shape })
    }
}

impl OpImpl for DynamicExpand {
    fn name(&self) -> &'static str {
        "DynamicExpand"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        infer_at(self, inputs)
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        eval_at(self, inputs, outputs)
    }
}

/// A Tile whose repeats follow the input shapes (`x.repeat(batch, 1, 1)`):
/// each axis the largest repeats' count, or another input's size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DynamicTile {
    /// The repeats at the largest shapes.
    pub repeats: Vec<usize>,
    pub dims: Vec<Option<DimOf>>,
}

impl AtShapes for DynamicTile {
    type Static = Tile;

    /// The Tile for inputs of shapes `shapes` (the data first).
    fn at(&self, shapes: &[Option<&[usize]>]) -> Result<Tile> {
        ensure_op!(
            self.dims.len() == self.repeats.len(),
            "DynamicTile: {} counts for rank {}",
            self.dims.len(),
            self.repeats.len()
        );
        let mut repeats = self.repeats.clone();
        for (r, d) in repeats.iter_mut().zip(&self.dims) {
            if let Some(d) = d {
                *r = d.size(shapes, "DynamicTile")?;
            }
        }
        Ok(Tile { repeats })
    }
}

impl OpImpl for DynamicTile {
    fn name(&self) -> &'static str {
        "DynamicTile"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        infer_at(self, inputs)
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        eval_at(self, inputs, outputs)
    }
}

/// A strided copy whose source repeats. When the innermost dimensions are
/// broadcast (stride 0), fills the first run and doubles it in place instead
/// of copying element by element.
fn copy_broadcast(src: &[u8], dst: &mut [u8], esize: usize, plan: &Strided) -> Result<()> {
    // Count trailing dimensions that are broadcast in the source.
    let rank = plan.shape.len();
    let mut k = rank;
    while k > 0 && plan.src_strides[k - 1] == 0 {
        k -= 1;
    }
    let rep: usize = plan.shape[k..].iter().product();
    if k == rank || rep == 0 {
        return strided_copy(src, dst, esize, plan);
    }
    // Copy one element per repeated block, then spread it over the block.
    let inner_plan = Strided {
        shape: plan.shape[..k].to_vec(),
        src_strides: plan.src_strides[..k].to_vec(),
        dst_strides: istrides(&plan.shape[..k]),
        src_off: 0,
        dst_off: 0,
    };
    strided_copy(src, dst, esize, &inner_plan)?;
    let blocks: usize = plan.shape[..k].iter().product();
    let block = rep * esize;
    // Walk backwards so each compact element is read before being overwritten.
    for b in (0..blocks).rev() {
        let (s, d) = (b * esize, b * block);
        let v: [u8; 16] = {
            let mut v = [0u8; 16];
            v[..esize].copy_from_slice(&dst[s..s + esize]);
            v
        };
        let run = &mut dst[d..d + block];
        run[..esize].copy_from_slice(&v[..esize]);
        let mut filled = esize;
        while filled < block {
            let n = filled.min(block - filled);
            run.copy_within(0..n, filled);
            filled += n;
        }
    }
    Ok(())
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tile {
    /// Repeat count for each axis.
    pub repeats: Vec<usize>,
}

impl OpImpl for Tile {
    fn name(&self) -> &'static str {
        "Tile"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "Tile")?;
        ensure_op!(self.repeats.len() == x.shape.len(), "Tile: {} repeats for {x}", self.repeats.len());
        let shape = x.shape.iter().zip(&self.repeats).map(|(&d, &r)| d.checked_mul(r)).collect::<Option<Vec<_>>>();
        let shape = shape.ok_or_else(|| crate::Error::op("Tile: output too large"))?;
        Ok(vec![TensorType::new(x.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "Tile")?;
        let out = &mut outputs[0];
        // View the output as [r0, d0, r1, d1, ...]: the repeat axes read with stride 0.
        let in_strides = istrides(x.shape);
        let mut shape = Vec::with_capacity(2 * x.shape.len());
        let mut src_strides = Vec::with_capacity(2 * x.shape.len());
        for (i, &d) in x.shape.iter().enumerate() {
            shape.extend([self.repeats[i], d]);
            src_strides.extend([0, in_strides[i]]);
        }
        let plan = Strided { dst_strides: istrides(&shape), shape, src_strides, src_off: 0, dst_off: 0 };
        strided_copy(x.bytes, out.bytes, x.dtype.size(), &plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn expands_columns_and_rows() {
        let x = Tensor::from_vec(vec![3, 1], vec![1f32, 2., 3.]).unwrap();
        let op: Op = Expand { shape: vec![2, 3, 2] }.into();
        let y = op.eval_owned(&[Some(&x)]).unwrap();
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[1., 1., 2., 2., 3., 3., 1., 1., 2., 2., 3., 3.]);
    }

    #[test]
    fn expand_row_vector() {
        let x = Tensor::from_vec(vec![2], vec![1i64, 2]).unwrap();
        let op: Op = Expand { shape: vec![2, 2] }.into();
        let y = op.eval_owned(&[Some(&x)]).unwrap();
        assert_eq!(y[0].as_slice::<i64>().unwrap(), &[1, 2, 1, 2]);
    }

    #[test]
    fn tiles_both_axes() {
        let x = Tensor::from_vec(vec![1, 2], vec![1u8, 2]).unwrap();
        let op: Op = Tile { repeats: vec![2, 2] }.into();
        let y = op.eval_owned(&[Some(&x)]).unwrap();
        assert_eq!(y[0].shape(), &[2, 4]);
        assert_eq!(y[0].as_slice::<u8>().unwrap(), &[1, 2, 1, 2, 1, 2, 1, 2]);
    }
}
