//! Helpers shared by ops: broadcasting, strides, axis normalization, and
//! storing f64 results into float outputs.

use crate::error::{Error, Result};

/// Row-major strides (in elements) of a shape.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// The numpy-style broadcast of several shapes.
pub fn broadcast_shapes(shapes: &[&[usize]]) -> Result<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        let off = rank - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[off + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(Error::op(format!("shapes {:?} do not broadcast", shapes)));
            }
        }
    }
    Ok(out)
}

/// Strides to read a tensor of `shape` broadcast to `out_shape`: broadcast
/// dimensions get stride 0. `shape` must broadcast to `out_shape`.
pub fn broadcast_strides(shape: &[usize], out_shape: &[usize]) -> Vec<usize> {
    let own = strides(shape);
    let off = out_shape.len() - shape.len();
    (0..out_shape.len()).map(|i| if i < off || shape[i - off] == 1 { 0 } else { own[i - off] }).collect()
}

/// For each flat output index of `out_shape`, the flat index into an input
/// with the given (broadcast) strides. Allocates one vector.
pub fn broadcast_index_map(in_strides: &[usize], out_shape: &[usize]) -> Vec<usize> {
    let n: usize = out_shape.iter().product();
    let mut map = Vec::with_capacity(n);
    let rank = out_shape.len();
    if n == 0 {
        return map;
    }
    let mut idx = vec![0usize; rank];
    let mut off = 0usize;
    for _ in 0..n {
        map.push(off);
        for d in (0..rank).rev() {
            idx[d] += 1;
            off += in_strides[d];
            if idx[d] < out_shape[d] {
                break;
            }
            off -= in_strides[d] * out_shape[d];
            idx[d] = 0;
        }
    }
    map
}

/// Resolves a possibly negative axis against `rank`.
pub fn normalize_axis(axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    if a < 0 || a >= r {
        return Err(Error::op(format!("axis {axis} out of range for rank {rank}")));
    }
    Ok(a as usize)
}

/// Resolves a list of possibly negative axes, rejecting duplicates.
pub fn normalize_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = normalize_axis(a, rank)?;
        if out.contains(&n) {
            return Err(Error::op(format!("axis {a} repeated")));
        }
        out.push(n);
    }
    Ok(out)
}

/// Writes f64 results into a float output, each rounded once to its type
/// (the ops that compute in f64 and store f32, f64, f16 or bf16).
pub fn store_f64(out: &mut crate::tensor::TensorViewMut<'_>, values: &[f64], op: &str) -> Result<()> {
    use crate::dtype::DType;
    use crate::tensor::Element;
    use half::{bf16, f16};
    fn each<T: Element>(out: &mut [T], values: &[f64]) {
        for (o, &v) in out.iter_mut().zip(values) {
            *o = T::from_f64(v);
        }
    }
    match out.dtype {
        DType::F32 => each(out.as_mut_slice::<f32>()?, values),
        DType::F64 => each(out.as_mut_slice::<f64>()?, values),
        DType::F16 => each(out.as_mut_slice::<f16>()?, values),
        DType::BF16 => each(out.as_mut_slice::<bf16>()?, values),
        d => crate::bail_op!("{op}: unsupported output dtype {d}"),
    }
    Ok(())
}

/// How deep ops may nest in an engine (sub-plans in sub-plans: an If in
/// a Loop body in ...).
pub const MAX_NESTING: usize = 32;

thread_local! {
    /// Nested ops being decoded on this thread (sub-plans, precision
    /// wrappers), outermost first.
    static DECODING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Counts one level of nesting while an engine's ops are decoded, so that
/// a hostile file nesting them deeper than `limit` is refused instead of
/// exhausting the stack. Dropping it leaves the level.
pub(crate) struct DecodeDepth;

impl DecodeDepth {
    pub(crate) fn enter(limit: usize) -> Result<DecodeDepth> {
        DECODING.with(|d| {
            if d.get() >= limit {
                return Err(crate::error::Error::invalid(format!("ops nest more than {limit} deep")));
            }
            d.set(d.get() + 1);
            Ok(DecodeDepth)
        })
    }
}

impl Drop for DecodeDepth {
    fn drop(&mut self) {
        DECODING.with(|d| d.set(d.get() - 1));
    }
}
