//! ScatterElements (also ONNX's deprecated Scatter) and ScatterND: a copy of
//! the data with some elements or slices replaced by (or combined with) the
//! updates. Duplicate indices apply in order, so with no reduction the last
//! update wins.

use crate::dtype::DType;
use crate::ensure_op;
use crate::error::Result;
use crate::ops::movement::copy::{for_each_offset, index_values, istrides, resolve_index};
use crate::ops::movement::gather::{nd_geometry, nd_offset};
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

/// How an update combines with the value already there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScatterReduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

trait Combine: Element {
    fn add(self, b: Self) -> Self;
    fn mul(self, b: Self) -> Self;
}

macro_rules! combine_float {
    ($($t:ty),*) => {$(
        impl Combine for $t {
            fn add(self, b: Self) -> Self { self + b }
            fn mul(self, b: Self) -> Self { self * b }
        }
    )*};
}
combine_float!(f32, f64, f16, bf16);

macro_rules! combine_int {
    ($($t:ty),*) => {$(
        impl Combine for $t {
            fn add(self, b: Self) -> Self { self.wrapping_add(b) }
            fn mul(self, b: Self) -> Self { self.wrapping_mul(b) }
        }
    )*};
}
combine_int!(i8, i16, i32, i64, u8, u16, u32, u64);

fn combine<T: Combine>(r: ScatterReduction, a: T, b: T) -> T {
    match r {
        ScatterReduction::None => b,
        ScatterReduction::Add => a.add(b),
        ScatterReduction::Mul => a.mul(b),
        ScatterReduction::Max => {
            if b > a {
                b
            } else {
                a
            }
        }
        ScatterReduction::Min => {
            if b < a {
                b
            } else {
                a
            }
        }
    }
}

/// Applies `pairs` of (destination, source) runs of `run` elements.
fn apply<T: Combine>(
    out: &mut TensorViewMut,
    upd: &TensorView,
    pairs: &[(usize, usize)],
    run: usize,
    r: ScatterReduction,
) -> Result<()> {
    let o = out.as_mut_slice::<T>()?;
    let u = upd.as_slice::<T>()?;
    for &(d, s) in pairs {
        for k in 0..run {
            o[d + k] = combine(r, o[d + k], u[s + k]);
        }
    }
    Ok(())
}

/// Copies `data` into the output, then applies the update runs.
fn scatter(
    data: &TensorView,
    upd: &TensorView,
    out: &mut TensorViewMut,
    pairs: &[(usize, usize)],
    run: usize,
    r: ScatterReduction,
) -> Result<()> {
    out.bytes.copy_from_slice(data.bytes);
    if r == ScatterReduction::None {
        let e = data.dtype.size();
        let n = run * e;
        for &(d, s) in pairs {
            out.bytes[d * e..d * e + n].copy_from_slice(&upd.bytes[s * e..s * e + n]);
        }
        return Ok(());
    }
    match data.dtype {
        DType::F32 => apply::<f32>(out, upd, pairs, run, r),
        DType::F64 => apply::<f64>(out, upd, pairs, run, r),
        DType::F16 => apply::<f16>(out, upd, pairs, run, r),
        DType::BF16 => apply::<bf16>(out, upd, pairs, run, r),
        DType::I8 => apply::<i8>(out, upd, pairs, run, r),
        DType::I16 => apply::<i16>(out, upd, pairs, run, r),
        DType::I32 => apply::<i32>(out, upd, pairs, run, r),
        DType::I64 => apply::<i64>(out, upd, pairs, run, r),
        DType::U8 => apply::<u8>(out, upd, pairs, run, r),
        DType::U16 => apply::<u16>(out, upd, pairs, run, r),
        DType::U32 => apply::<u32>(out, upd, pairs, run, r),
        DType::U64 => apply::<u64>(out, upd, pairs, run, r),
        d => crate::bail_op!("Scatter: reductions are not supported on {d} tensors"),
    }
}

fn check_types(op: &str, x: &TensorType, idx: &TensorType, upd: &TensorType, r: ScatterReduction) -> Result<()> {
    ensure_op!(matches!(idx.dtype, DType::I32 | DType::I64), "{op}: indices must be i32 or i64, got {}", idx.dtype);
    ensure_op!(upd.dtype == x.dtype, "{op}: updates are {}, data is {}", upd.dtype, x.dtype);
    ensure_op!(r == ScatterReduction::None || x.dtype != DType::Bool, "{op}: reduction {r:?} is not supported on bool tensors");
    Ok(())
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScatterElements {
    /// Normalized (non-negative) axis.
    pub axis: usize,
    pub reduction: ScatterReduction,
}

impl OpImpl for ScatterElements {
    fn name(&self) -> &'static str {
        "ScatterElements"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "ScatterElements")?;
        let idx = input(inputs, 1, "ScatterElements")?;
        let upd = input(inputs, 2, "ScatterElements")?;
        check_types("ScatterElements", x, idx, upd, self.reduction)?;
        ensure_op!(upd.shape == idx.shape, "ScatterElements: updates {upd} and indices {idx} differ in shape");
        ensure_op!(self.axis < x.shape.len(), "ScatterElements: axis {} out of range for {x}", self.axis);
        ensure_op!(idx.shape.len() == x.shape.len(), "ScatterElements: indices {idx} and data {x} differ in rank");
        for d in 0..x.shape.len() {
            ensure_op!(d == self.axis || idx.shape[d] <= x.shape[d], "ScatterElements: indices {idx} do not fit in data {x}");
        }
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "ScatterElements")?;
        let idx = input(inputs, 1, "ScatterElements")?;
        let upd = input(inputs, 2, "ScatterElements")?;
        let values = index_values(&idx, "ScatterElements")?;
        let n = x.shape[self.axis];
        let mut xs = istrides(x.shape);
        let axis_stride = xs[self.axis] as usize;
        xs[self.axis] = 0;
        let mut pairs = Vec::with_capacity(values.len());
        let mut result = Ok(());
        let mut k = 0usize;
        for_each_offset(idx.shape, &xs, &istrides(idx.shape), 0, 0, |base, s| {
            match resolve_index(values[k], n, "ScatterElements") {
                Ok(i) => pairs.push((base as usize + i * axis_stride, s as usize)),
                Err(e) => result = Err(e),
            }
            k += 1;
        });
        result?;
        scatter(&x, &upd, &mut outputs[0], &pairs, 1, self.reduction)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScatterND {
    pub reduction: ScatterReduction,
}

impl OpImpl for ScatterND {
    fn name(&self) -> &'static str {
        "ScatterND"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "ScatterND")?;
        let idx = input(inputs, 1, "ScatterND")?;
        let upd = input(inputs, 2, "ScatterND")?;
        check_types("ScatterND", x, idx, upd, self.reduction)?;
        let g = nd_geometry(&x.shape, &idx.shape, 0, "ScatterND")?;
        let mut want = idx.shape[..idx.shape.len() - 1].to_vec();
        want.extend_from_slice(&x.shape[g.m..]);
        ensure_op!(upd.shape == want, "ScatterND: updates {upd} should have shape {want:?}");
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "ScatterND")?;
        let idx = input(inputs, 1, "ScatterND")?;
        let upd = input(inputs, 2, "ScatterND")?;
        let g = nd_geometry(x.shape, idx.shape, 0, "ScatterND")?;
        let values = index_values(&idx, "ScatterND")?;
        let strides = crate::ops::util::strides(x.shape);
        let pairs = (0..g.tuples)
            .map(|t| {
                let off = nd_offset(&values[t * g.m..(t + 1) * g.m], x.shape, &strides, 0, "ScatterND")?;
                Ok((off, t * g.block))
            })
            .collect::<Result<Vec<_>>>()?;
        scatter(&x, &upd, &mut outputs[0], &pairs, g.block, self.reduction)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn scatter_elements_adds_duplicates() {
        let x = Tensor::from_vec(vec![1, 5], vec![1f32, 2., 3., 4., 5.]).unwrap();
        let i = Tensor::from_vec(vec![1, 2], vec![1i64, 1]).unwrap();
        let u = Tensor::from_vec(vec![1, 2], vec![1.1f32, 2.1]).unwrap();
        let op: Op = ScatterElements { axis: 1, reduction: ScatterReduction::Add }.into();
        let y = op.eval_owned(&[Some(&x), Some(&i), Some(&u)]).unwrap();
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[1., 5.2, 3., 4., 5.]);
    }

    #[test]
    fn scatter_elements_negative_index() {
        let x = Tensor::from_vec(vec![3], vec![0i64, 0, 0]).unwrap();
        let i = Tensor::from_vec(vec![1], vec![-1i32]).unwrap();
        let u = Tensor::from_vec(vec![1], vec![7i64]).unwrap();
        let op: Op = ScatterElements { axis: 0, reduction: ScatterReduction::None }.into();
        let y = op.eval_owned(&[Some(&x), Some(&i), Some(&u)]).unwrap();
        assert_eq!(y[0].as_slice::<i64>().unwrap(), &[0, 0, 7]);
    }

    #[test]
    fn scatter_nd_replaces_rows_and_checks_bounds() {
        let x = Tensor::from_vec(vec![3, 2], vec![0f32; 6]).unwrap();
        let i = Tensor::from_vec(vec![1, 1], vec![2i64]).unwrap();
        let u = Tensor::from_vec(vec![1, 2], vec![5f32, 6.]).unwrap();
        let op: Op = ScatterND { reduction: ScatterReduction::Max }.into();
        let y = op.eval_owned(&[Some(&x), Some(&i), Some(&u)]).unwrap();
        assert_eq!(y[0].as_slice::<f32>().unwrap(), &[0., 0., 0., 0., 5., 6.]);
        let bad = Tensor::from_vec(vec![1, 1], vec![3i64]).unwrap();
        assert!(op.eval_owned(&[Some(&x), Some(&bad), Some(&u)]).is_err());
    }
}
