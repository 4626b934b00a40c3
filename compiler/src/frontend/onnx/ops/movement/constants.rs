//! Ops whose output shape depends on input values, built as constants at
//! import: ConstantOfShape, Range, EyeLike, NonZero and Unique. Their
//! value inputs must be constant, but NonZero's, which may come at run time
//! (a layer whose output size depends on the data); another runtime input
//! is a clear error.

use super::{check_constant_size, dims, filled, tensor_from_f64};
use crate::frontend::onnx::ctx::Ctx;
use crate::frontend::onnx::ops::Registry;
use crate::frontend::onnx::proto;
use crate::ir::Port;
use anyhow::{bail, Result};
use std::cmp::Ordering;
use trtc_runtime::ops::control::{range as range_values, range_len, ValueShapedOp};
use trtc_runtime::{Tensor, TensorType};

pub fn register(r: &mut Registry) {
    r.add("ConstantOfShape", constant_of_shape);
    r.add("Range", range);
    r.add("EyeLike", eye_like);
    r.add("NonZero", non_zero);
    r.add("Unique", unique);
}

/// The constant value of input `i`, whose values decide `op`'s output shape
/// (a runtime tensor is an error: trtc's shapes are static).
fn data_input(ctx: &Ctx, i: usize, op: &str) -> Result<Tensor> {
    Ok(ctx.require_const(i, &format!("its values decide the shape of {op}'s output"))?.clone())
}

fn constant_of_shape(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let value = match ctx.tensor_attr("value")? {
        Some(v) => v,
        None => Tensor::scalar(0f32),
    };
    if value.len() != 1 {
        bail!("expected a one-element value, got {:?}", value.shape());
    }
    let computed = ValueShapedOp::ConstantOfShape { dtype: value.dtype(), value: value.bytes().to_vec() };
    if let Some(outs) = super::shaped_by_values(ctx, computed)? {
        return Ok(outs);
    }
    let shape = dims(&ctx.require_const(0, "shape")?.to_i64_vec()?, "shape")?;
    let t = filled(shape, &value)?;
    Ok(vec![ctx.constant(t)])
}

fn range(ctx: &mut Ctx) -> Result<Vec<Port>> {
    if let Some(outs) = super::shaped_by_values(ctx, ValueShapedOp::Range)? {
        return Ok(outs);
    }
    let (start, limit, delta) = (data_input(ctx, 0, "Range")?, data_input(ctx, 1, "Range")?, data_input(ctx, 2, "Range")?);
    let n = range_len(start.view(), limit.view(), delta.view())?;
    check_constant_size(n, start.dtype())?;
    Ok(vec![ctx.constant(range_values(start.view(), limit.view(), delta.view())?)])
}

fn eye_like(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let ty = ctx.input_ty(0)?.clone();
    let &[n, m] = ty.shape.as_slice() else { bail!("EyeLike needs a 2-D input, got {ty}") };
    let dtype = match ctx.attrs.int("dtype")? {
        Some(d) => proto::dtype(d as i32)?,
        None => ty.dtype,
    };
    let k = ctx.attrs.int_or("k", 0)?;
    check_constant_size(n * m, dtype)?;
    let mut v = vec![0f64; n * m];
    for i in 0..n {
        let j = i as i64 + k;
        if j >= 0 && (j as usize) < m {
            v[i * m + j as usize] = 1.0;
        }
    }
    let t = tensor_from_f64(dtype, vec![n, m], &v)?;
    Ok(vec![ctx.constant(t)])
}

fn non_zero(ctx: &mut Ctx) -> Result<Vec<Port>> {
    if ctx.const_input(0).is_none() {
        // Computed at run time: the count is known only then.
        let x = ctx.input(0)?;
        return Ok(vec![ctx.op1(trtc_runtime::ops::movement::NonZero, &[Some(x)])?]);
    }
    let x = data_input(ctx, 0, "NonZero")?;
    let shape = x.shape().to_vec();
    let strides = trtc_runtime::ops::util::strides(&shape);
    let hits: Vec<usize> = x.to_f64_vec().iter().enumerate().filter(|(_, &v)| v != 0.0).map(|(i, _)| i).collect();
    let r = shape.len();
    let mut out = vec![0i64; r * hits.len()];
    for (k, &flat) in hits.iter().enumerate() {
        for d in 0..r {
            out[d * hits.len() + k] = ((flat / strides[d]) % shape[d]) as i64;
        }
    }
    let t = Tensor::from_vec(vec![r, hits.len()], out)?;
    Ok(vec![ctx.constant(t)])
}

/// Unique over constant data: the distinct elements (or slices along
/// `axis`), optionally sorted, with first-occurrence indices, inverse
/// indices and counts.
fn unique(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = data_input(ctx, 0, "Unique")?;
    let sorted = ctx.attrs.int_or("sorted", 1)? != 0;
    let shape = x.shape().to_vec();
    let (outer, n, inner, a) = match ctx.attrs.int("axis")? {
        Some(a) => {
            let a = super::axis(a, shape.len())?;
            (shape[..a].iter().product(), shape[a], shape[a + 1..].iter().product(), Some(a))
        }
        None => (1usize, x.len(), 1usize, None),
    };
    let values = x.to_f64_vec();
    let esize = x.dtype().size();
    // Slice i: for each outer block, `inner` elements.
    let key = |i: usize| -> Vec<f64> {
        (0..outer).flat_map(|o| values[(o * n + i) * inner..(o * n + i + 1) * inner].iter().copied()).collect()
    };
    let keys: Vec<Vec<f64>> = (0..n).map(key).collect();
    let cmp = |p: &Vec<f64>, q: &Vec<f64>| -> Ordering {
        p.iter().zip(q).map(|(a, b)| a.total_cmp(b)).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
    };
    // First occurrences in order of appearance.
    let mut firsts: Vec<usize> = Vec::new();
    for i in 0..n {
        if !firsts.iter().any(|&f| keys[f] == keys[i]) {
            firsts.push(i);
        }
    }
    if sorted {
        firsts.sort_by(|&p, &q| cmp(&keys[p], &keys[q]));
    }
    let u = firsts.len();
    let inverse: Vec<i64> = (0..n).map(|i| firsts.iter().position(|&f| keys[f] == keys[i]).unwrap_or(0) as i64).collect();
    let mut counts = vec![0i64; u];
    for &j in &inverse {
        counts[j as usize] += 1;
    }
    // Y: the kept slices, in the order of `firsts`.
    let bytes = x.bytes();
    let mut y = Vec::with_capacity(outer * u * inner * esize);
    for o in 0..outer {
        for &f in &firsts {
            let s = (o * n + f) * inner * esize;
            y.extend_from_slice(&bytes[s..s + inner * esize]);
        }
    }
    let y_shape = match a {
        Some(a) => {
            let mut s = shape.clone();
            s[a] = u;
            s
        }
        None => vec![u],
    };
    let y = Tensor::from_bytes(TensorType::new(x.dtype(), y_shape), &y)?;
    let indices = Tensor::from_vec(vec![u], firsts.iter().map(|&f| f as i64).collect())?;
    let inverse = Tensor::from_vec(vec![n], inverse)?;
    let counts = Tensor::from_vec(vec![u], counts)?;
    Ok(vec![ctx.constant(y), ctx.constant(indices), ctx.constant(inverse), ctx.constant(counts)])
}
