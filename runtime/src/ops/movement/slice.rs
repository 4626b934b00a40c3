//! Slice with ONNX semantics: per axis a start, an end and a (possibly
//! negative) step, with negative starts/ends counted from the end and both
//! clamped to the dimension exactly as the ONNX spec says.

use crate::ensure_op;
use crate::error::Result;
use crate::ops::movement::copy::{istrides, strided_copy, Strided};
use crate::ops::movement::reshape::{eval_at, infer_at, type_shapes, AtShapes};
use crate::ops::movement::DimOf;
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Slice {
    /// Normalized (non-negative), distinct axes.
    pub axes: Vec<usize>,
    pub starts: Vec<i64>,
    pub ends: Vec<i64>,
    /// Non-zero steps.
    pub steps: Vec<i64>,
}

/// The resolved range of one axis: first index, step and element count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AxisRange {
    pub start: usize,
    pub step: i64,
    pub len: usize,
}

/// Clamps `start`/`end` for a dimension of size `dim` per the ONNX spec.
pub fn resolve_range(start: i64, end: i64, step: i64, dim: usize) -> AxisRange {
    let d = dim as i64;
    let fix = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    let (mut s, mut e) = (fix(start), fix(end));
    if step > 0 {
        s = s.clamp(0, d);
        e = e.clamp(0, d);
    } else {
        s = s.clamp(0, (d - 1).max(0));
        e = e.clamp(-1, d - 1);
    }
    let len = if dim == 0 {
        0
    } else if step > 0 && e > s {
        (e - s + step - 1) / step
    } else if step < 0 && s > e {
        (s - e + (-step) - 1) / (-step)
    } else {
        0
    };
    AxisRange { start: s as usize, step, len: len as usize }
}

impl Slice {
    fn ranges(&self, shape: &[usize]) -> Result<Vec<AxisRange>> {
        let n = self.axes.len();
        ensure_op!(
            self.starts.len() == n && self.ends.len() == n && self.steps.len() == n,
            "Slice: axes, starts, ends and steps differ in length"
        );
        let mut ranges: Vec<AxisRange> = shape.iter().map(|&d| AxisRange { start: 0, step: 1, len: d }).collect();
        let mut seen = vec![false; shape.len()];
        for i in 0..n {
            let a = self.axes[i];
            ensure_op!(a < shape.len() && !seen[a], "Slice: axis {a} is out of range or repeated for rank {}", shape.len());
            seen[a] = true;
            ensure_op!(self.steps[i] != 0, "Slice: step 0 on axis {a}");
            ranges[a] = resolve_range(self.starts[i], self.ends[i], self.steps[i], shape[a]);
        }
        Ok(ranges)
    }
}

impl OpImpl for Slice {
    fn name(&self) -> &'static str {
        "Slice"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "Slice")?;
        let ranges = self.ranges(&x.shape)?;
        Ok(vec![TensorType::new(x.dtype, ranges.iter().map(|r| r.len).collect::<Vec<_>>())])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "Slice")?;
        let ranges = self.ranges(x.shape)?;
        let in_strides = istrides(x.shape);
        let out = &mut outputs[0];
        let src_off = ranges.iter().zip(&in_strides).map(|(r, &s)| r.start as isize * s).sum();
        let plan = Strided {
            shape: ranges.iter().map(|r| r.len).collect(),
            src_strides: ranges.iter().zip(&in_strides).map(|(r, &s)| r.step as isize * s).collect(),
            dst_strides: istrides(out.shape),
            src_off,
            dst_off: 0,
        };
        strided_copy(x.bytes, out.bytes, x.dtype.size(), &plan)
    }
}

/// A size read from an input's shape, maybe negated (a slice bound counted
/// from the end: `x[:, -n:]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedDim {
    pub dim: DimOf,
    pub negate: bool,
}

/// A Slice whose starts or ends follow the input shapes (`x[:, :n]` where
/// `n` is another tensor's size): what a Slice becomes in an engine whose
/// shapes vary. The inputs after the first are read for their shapes only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DynamicSlice {
    /// The Slice at the largest shapes.
    pub slice: Slice,
    /// Per sliced axis: the start read at run time, or `None` to keep the
    /// slice's.
    pub starts: Vec<Option<SignedDim>>,
    pub ends: Vec<Option<SignedDim>>,
}

impl AtShapes for DynamicSlice {
    type Static = Slice;

    /// The Slice for inputs of shapes `shapes` (the data first).
    fn at(&self, shapes: &[Option<&[usize]>]) -> Result<Slice> {
        let n = self.slice.axes.len();
        ensure_op!(
            self.starts.len() == n && self.ends.len() == n && self.slice.starts.len() == n && self.slice.ends.len() == n,
            "DynamicSlice: bounds for {n} axes expected"
        );
        let mut slice = self.slice.clone();
        let read = |d: &SignedDim| -> Result<i64> {
            let v = d.dim.size(shapes, "DynamicSlice")? as i64;
            Ok(if d.negate { -v } else { v })
        };
        for i in 0..n {
            if let Some(d) = &self.starts[i] {
                slice.starts[i] = read(d)?;
            }
            if let Some(d) = &self.ends[i] {
                slice.ends[i] = read(d)?;
            }
        }
        Ok(slice)
    }
}

impl OpImpl for DynamicSlice {
    fn name(&self) -> &'static str {
        "DynamicSlice"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        infer_at(self, inputs)
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        eval_at(self, inputs, outputs)
    }
}

/// The leading block of input 0 whose size on each axis is fixed (the
/// whole axis) or read from another input's shape: what a constant
/// computed from the input shapes (position ids, causal masks) becomes in
/// an engine whose shapes vary. Input 0 holds the value at the largest
/// shapes; the other inputs are read for their shapes only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SliceLike {
    /// Per axis of input 0: `None` keeps the axis whole.
    pub dims: Vec<Option<DimOf>>,
}

impl SliceLike {
    /// The output shape for inputs of shapes `shapes` (input 0 first).
    pub fn shape(&self, shapes: &[Option<&[usize]>]) -> Result<Vec<usize>> {
        let x = shapes.first().copied().flatten().unwrap_or_default();
        ensure_op!(self.dims.len() == x.len(), "SliceLike: {} sizes for a rank-{} input", self.dims.len(), x.len());
        let mut out = Vec::with_capacity(x.len());
        for (a, (d, &whole)) in self.dims.iter().zip(x).enumerate() {
            let n = match d {
                None => whole,
                Some(d) => d.size(shapes, "SliceLike")?,
            };
            ensure_op!(n <= whole, "SliceLike: axis {a} would take {n} of {whole}");
            out.push(n);
        }
        Ok(out)
    }
}

impl OpImpl for SliceLike {
    fn name(&self) -> &'static str {
        "SliceLike"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "SliceLike")?;
        let shapes = type_shapes(inputs);
        Ok(vec![TensorType::new(x.dtype, self.shape(&shapes)?)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "SliceLike")?;
        let out = &mut outputs[0];
        let plan = Strided {
            shape: out.shape.to_vec(),
            src_strides: istrides(x.shape),
            dst_strides: istrides(out.shape),
            src_off: 0,
            dst_off: 0,
        };
        strided_copy(x.bytes, out.bytes, x.dtype.size(), &plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn run(x: &Tensor, s: Slice) -> Tensor {
        let op: Op = s.into();
        op.eval_owned(&[Some(x)]).unwrap().remove(0)
    }

    #[test]
    fn clamps_like_onnx() {
        assert_eq!(resolve_range(1, 1000, 1, 10), AxisRange { start: 1, step: 1, len: 9 });
        assert_eq!(resolve_range(-1, i64::MIN, -1, 4), AxisRange { start: 3, step: -1, len: 4 });
        assert_eq!(resolve_range(1000, 1000, 1, 10).len, 0);
        assert_eq!(resolve_range(20, -20, -2, 5), AxisRange { start: 4, step: -2, len: 3 });
    }

    #[test]
    fn slices_rows_and_columns() {
        let x = Tensor::from_vec(vec![3, 4], (0..12).map(|v| v as f32).collect()).unwrap();
        let y = run(&x, Slice { axes: vec![0, 1], starts: vec![1, 0], ends: vec![3, 3], steps: vec![1, 2] });
        assert_eq!(y.shape(), &[2, 2]);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[4., 6., 8., 10.]);
    }

    #[test]
    fn negative_step_reverses() {
        let x = Tensor::from_vec(vec![2, 3], (0..6).collect()).unwrap();
        let y = run(&x, Slice { axes: vec![1], starts: vec![-1], ends: vec![i64::MIN], steps: vec![-1] });
        assert_eq!(y.as_slice::<i32>().unwrap(), &[2, 1, 0, 5, 4, 3]);
    }

    #[test]
    fn slice_like_takes_the_leading_block_sized_by_other_inputs() {
        // A causal mask built for 4 positions, cut to the 3 of a run.
        let mask = Tensor::from_vec(vec![4, 4], (0..16).map(|i| (i % 4 <= i / 4) as i32).collect()).unwrap();
        let ids = Tensor::from_vec(vec![2, 3], vec![0i64; 6]).unwrap();
        let op: Op = SliceLike { dims: vec![Some(DimOf { input: 1, axis: 1 }), Some(DimOf { input: 1, axis: 1 })] }.into();
        let y = op.eval_owned(&[Some(&mask), Some(&ids)]).unwrap().remove(0);
        assert_eq!(y.shape(), &[3, 3]);
        assert_eq!(y.as_slice::<i32>().unwrap(), &[1, 0, 0, 1, 1, 0, 1, 1, 1]);
        let keep_rows: Op = SliceLike { dims: vec![None, Some(DimOf { input: 1, axis: 0 })] }.into();
        assert_eq!(keep_rows.eval_owned(&[Some(&mask), Some(&ids)]).unwrap()[0].shape(), &[4, 2]);
        // Larger than the value it cuts from, or a missing axis: errors.
        let big = Tensor::from_vec(vec![5, 5], vec![0i64; 25]).unwrap();
        assert!(op.eval_owned(&[Some(&mask), Some(&big)]).is_err());
        let bad: Op = SliceLike { dims: vec![Some(DimOf { input: 1, axis: 2 }), None] }.into();
        assert!(bad.eval_owned(&[Some(&mask), Some(&ids)]).is_err());
    }

    #[test]
    fn dynamic_slice_reads_bounds_from_another_input_and_refuses_malformed_ones() {
        let x = Tensor::from_vec(vec![2, 5], (0..10).collect::<Vec<i32>>()).unwrap();
        let y = Tensor::from_vec(vec![3], vec![0u8; 3]).unwrap();
        let n = SignedDim { dim: DimOf { input: 1, axis: 0 }, negate: false };
        let head = Slice { axes: vec![1], starts: vec![0], ends: vec![5], steps: vec![1] };
        let op: Op = DynamicSlice { slice: head.clone(), starts: vec![None], ends: vec![Some(n)] }.into();
        assert_eq!(op.eval_owned(&[Some(&x), Some(&y)]).unwrap()[0].as_slice::<i32>().unwrap(), &[0, 1, 2, 5, 6, 7]);
        let tail: Op =
            DynamicSlice { slice: head.clone(), starts: vec![Some(SignedDim { negate: true, ..n })], ends: vec![None] }.into();
        assert_eq!(tail.eval_owned(&[Some(&x), Some(&y)]).unwrap()[0].as_slice::<i32>().unwrap(), &[2, 3, 4, 7, 8, 9]);
        // Bounds for more axes than the slice has (a corrupted engine): an error.
        let bad = Slice { axes: vec![1], starts: vec![], ends: vec![5], steps: vec![1] };
        let op: Op = DynamicSlice { slice: bad, starts: vec![None], ends: vec![Some(n)] }.into();
        assert!(op.eval_owned(&[Some(&x), Some(&y)]).is_err());
    }
}
