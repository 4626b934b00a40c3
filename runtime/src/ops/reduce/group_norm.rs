//! InstanceNormalization and GroupNormalization: normalize each group of
//! channels of each batch item over the channels and spatial dims, then
//! scale and shift per channel (or per group, GroupNormalization opset 18).
//!
//! Statistics are computed in f64 (two passes: mean, then variance).

use super::common::{float_dispatch, lanes_sum};
use crate::dtype::DType;
use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

/// InstanceNormalization: X `[N, C, ...]`, scale `[C]`, bias `[C]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InstanceNorm {
    pub epsilon: f32,
}

impl InstanceNorm {
    pub fn new(epsilon: f32) -> InstanceNorm {
        InstanceNorm { epsilon }
    }
}

/// GroupNormalization: X `[N, C, ...]`, scale and bias of `[C]` (opset 21)
/// or `[num_groups]` (opset 18, one value per group).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupNorm {
    pub num_groups: usize,
    pub epsilon: f32,
}

impl GroupNorm {
    pub fn new(num_groups: usize, epsilon: f32) -> GroupNorm {
        GroupNorm { num_groups, epsilon }
    }
}

/// Checks X and the scale and bias inputs, which hold one value per channel
/// or, with `groups`, one per group.
fn check(name: &str, inputs: &[Option<&TensorType>], groups: Option<usize>) -> Result<TensorType> {
    let x = input(inputs, 0, name)?;
    ensure_op!(x.dtype.is_float(), "{name}: expected a float input, got {}", x.dtype);
    ensure_op!(x.shape.len() >= 2, "{name}: input must have rank >= 2, got {}", x.shape.len());
    let c = x.shape[1];
    if let Some(g) = groups {
        ensure_op!(g > 0 && c % g == 0, "{name}: {c} channels do not split into {g} groups");
    }
    for (i, what) in [(1, "scale"), (2, "bias")] {
        let p = input(inputs, i, name)?;
        ensure_op!(p.dtype.is_float(), "{name}: {what} must be a float tensor, got {}", p.dtype);
        let n = p.len();
        let ok = p.shape.len() == 1 && (n == c || Some(n) == groups);
        ensure_op!(ok, "{name}: {what} has shape {:?}, expected [{c}]", p.shape);
    }
    Ok(x.clone())
}

impl OpImpl for InstanceNorm {
    fn name(&self) -> &'static str {
        "InstanceNorm"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        Ok(vec![check(self.name(), inputs, None)?])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let c = input(inputs, 0, self.name())?.shape.get(1).copied().unwrap_or(0);
        normalize(self.name(), inputs, outputs, c, self.epsilon)
    }
}

impl OpImpl for GroupNorm {
    fn name(&self) -> &'static str {
        "GroupNorm"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        Ok(vec![check(self.name(), inputs, Some(self.num_groups))?])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        normalize(self.name(), inputs, outputs, self.num_groups, self.epsilon)
    }
}

/// Per-channel values of a scale or bias that holds one value per channel
/// or one per group.
fn per_channel(v: Vec<f64>, c: usize, groups: usize) -> Result<Vec<f64>> {
    if v.len() == c {
        return Ok(v);
    }
    ensure_op!(v.len() == groups && groups > 0, "scale or bias has {} elements, expected {c}", v.len());
    let per_group = c / groups;
    Ok((0..c).map(|ch| v[ch / per_group]).collect())
}

fn normalize(
    name: &str,
    inputs: &[Option<TensorView<'_>>],
    outputs: &mut [TensorViewMut<'_>],
    groups: usize,
    epsilon: f32,
) -> Result<()> {
    let x = input(inputs, 0, name)?;
    ensure_op!(x.shape.len() >= 2, "{name}: input must have rank >= 2");
    let c = x.shape[1];
    ensure_op!(groups > 0 && c % groups == 0 || c == 0, "{name}: {c} channels do not split into {groups} groups");
    let scale = per_channel(input(inputs, 1, name)?.to_f64_vec(), c, groups)?;
    let bias = per_channel(input(inputs, 2, name)?.to_f64_vec(), c, groups)?;
    let spatial: usize = x.shape[2..].iter().product();
    let y = &mut outputs[0];
    ensure_op!(y.len() == x.len(), "{name}: output has the wrong size");
    let p = Params { c, groups, spatial, epsilon: epsilon as f64, scale: &scale, bias: &bias };
    float_dispatch!(x.dtype, name, normalize_groups(x, y, &p))
}

struct Params<'a> {
    c: usize,
    groups: usize,
    spatial: usize,
    epsilon: f64,
    scale: &'a [f64],
    bias: &'a [f64],
}

fn normalize_groups<T: Element>(x: TensorView, y: &mut TensorViewMut, p: &Params) -> Result<()> {
    let xs = x.as_slice::<T>()?;
    let ys = y.as_mut_slice::<T>()?;
    if p.c == 0 || p.spatial == 0 {
        return Ok(());
    }
    let per_group = p.c / p.groups;
    let block = per_group * p.spatial;
    for (b, (xb, yb)) in xs.chunks_exact(block).zip(ys.chunks_exact_mut(block)).enumerate() {
        let n = block as f64;
        let mean = lanes_sum(xb, T::to_f64) / n;
        let var = lanes_sum(xb, |v| (v.to_f64() - mean) * (v.to_f64() - mean)) / n;
        let inv = 1.0 / (var + p.epsilon).sqrt();
        let first_channel = (b % p.groups) * per_group;
        for (k, (xr, yr)) in xb.chunks_exact(p.spatial).zip(yb.chunks_exact_mut(p.spatial)).enumerate() {
            let ch = first_channel + k;
            let a = inv * p.scale[ch];
            let shift = p.bias[ch] - mean * a;
            if T::DTYPE == DType::F32 {
                // f32 arithmetic is accurate enough for the output pass.
                let (a, shift) = (a as f32, shift as f32);
                for (o, &v) in yr.iter_mut().zip(xr) {
                    *o = T::from_f64((v.to_f64() as f32 * a + shift) as f64);
                }
            } else {
                for (o, &v) in yr.iter_mut().zip(xr) {
                    *o = T::from_f64(v.to_f64() * a + shift);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-5)
    }

    #[test]
    fn instance_norm_per_channel() {
        let x = Tensor::from_vec(vec![1, 2, 2], vec![1f32, 3., 4., 6.]).unwrap();
        let s = Tensor::from_vec(vec![2], vec![2f32, 1.]).unwrap();
        let b = Tensor::from_vec(vec![2], vec![0f32, 7.]).unwrap();
        let op: Op = InstanceNorm::new(0.0).into();
        let y = op.eval_owned(&[Some(&x), Some(&s), Some(&b)]).unwrap();
        // Channel 0: mean 2, std 1 -> [-1, 1] * 2; channel 1: [-1, 1] + 7.
        assert!(close(&y[0].to_f64_vec(), &[-2., 2., 6., 8.]));
    }

    #[test]
    fn group_norm_with_per_group_scale() {
        let x = Tensor::from_vec(vec![1, 4, 1], vec![1f32, 3., 0., 2.]).unwrap();
        let s = Tensor::from_vec(vec![2], vec![1f32, 1.]).unwrap();
        let b = Tensor::from_vec(vec![2], vec![0f32, 1.]).unwrap();
        let op: Op = GroupNorm::new(2, 0.0).into();
        let y = op.eval_owned(&[Some(&x), Some(&s), Some(&b)]).unwrap();
        assert!(close(&y[0].to_f64_vec(), &[-1., 1., 0., 2.]));
    }
}
