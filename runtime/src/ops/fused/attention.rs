//! Multi-head scaled dot-product attention, as exporters spell it:
//! split heads, `softmax(Q·Kᵀ · scale + mask)`, guard fully masked rows,
//! multiply by V, merge heads. Inputs `[q, k, v, mask?]` with q, k, v of shape
//! `[batch, seq, heads * head_dim]` and an additive mask broadcastable to
//! `[batch, heads, seq_q, seq_k]`; output `[batch, seq_q, heads * head_dim_v]`.
//!
//! The CPU reference runs the constituent ops in the exporters' order, so
//! its results equal the unfused graph's.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::elementwise::{Binary, BinaryKind};
use crate::ops::linalg::MatMul;
use crate::ops::movement::{Reshape, Transpose};
use crate::ops::reduce::Softmax;
use crate::ops::util::broadcast_shapes;
use crate::ops::{input, opt_input, Op, OpImpl};
use crate::tensor::{Tensor, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

/// How the scores are scaled after Q·Kᵀ.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum ScoreScale {
    Mul(f32),
    Div(f32),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attention {
    pub num_heads: usize,
    /// Multiplies Q after the head split (legacy exports scale Q and K by
    /// `head_dim^-1/4` each).
    pub q_scale: Option<f32>,
    /// Multiplies Kᵀ after the head split.
    pub k_scale: Option<f32>,
    pub score_scale: Option<ScoreScale>,
    /// Input 3 is an additive mask.
    pub mask: bool,
    /// Rows whose scores are all -inf give 0 rather than NaN (the exporters'
    /// `Where(IsNaN(p), 0, p)` guard).
    pub nan_to_zero: bool,
}

fn run(op: impl Into<Op>, inputs: &[&Tensor]) -> Result<Tensor> {
    let ins: Vec<Option<&Tensor>> = inputs.iter().map(|t| Some(*t)).collect();
    Ok(op.into().eval_owned(&ins)?.remove(0))
}

fn scalar(v: f32) -> Tensor {
    Tensor::scalar(v)
}

impl Attention {
    /// `[B, S, H*D]` -> `[B, H, S, D]` (or `[B, H, D, S]` when `transposed`).
    fn split_heads(&self, x: &Tensor, transposed: bool) -> Result<Tensor> {
        let s = x.shape();
        let d = s[2] / self.num_heads;
        let r = run(Reshape { shape: vec![s[0], s[1], self.num_heads, d] }, &[x])?;
        run(Transpose { perm: if transposed { vec![0, 2, 3, 1] } else { vec![0, 2, 1, 3] } }, &[&r])
    }

    fn check(&self, q: &TensorType, k: &TensorType, v: &TensorType) -> Result<Vec<usize>> {
        for (n, t) in [("q", q), ("k", k), ("v", v)] {
            ensure_op!(t.dtype == DType::F32, "Attention: {n} must be f32, got {t}");
            ensure_op!(t.shape.len() == 3, "Attention: {n} must be [batch, seq, hidden], got {t}");
            ensure_op!(
                self.num_heads > 0 && t.shape[2] % self.num_heads == 0,
                "Attention: {n}'s hidden size {} is not a multiple of {} heads",
                t.shape[2],
                self.num_heads
            );
        }
        ensure_op!(q.shape[0] == k.shape[0] && k.shape[0] == v.shape[0], "Attention: batch sizes differ");
        ensure_op!(q.shape[2] == k.shape[2], "Attention: q and k hidden sizes differ");
        ensure_op!(k.shape[1] == v.shape[1], "Attention: k and v lengths differ");
        Ok(vec![q.shape[0], self.num_heads, q.shape[1], k.shape[1]])
    }
}

impl OpImpl for Attention {
    fn name(&self) -> &'static str {
        "Attention"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let (q, k, v) = (input(inputs, 0, "Attention")?, input(inputs, 1, "Attention")?, input(inputs, 2, "Attention")?);
        let scores = self.check(q, k, v)?;
        if self.mask {
            let m = input(inputs, 3, "Attention")?;
            ensure_op!(m.dtype == DType::F32, "Attention: mask must be f32, got {m}");
            let b = broadcast_shapes(&[&scores, &m.shape])?;
            ensure_op!(b == scores, "Attention: mask {m} does not broadcast to the scores {scores:?}");
        } else {
            ensure_op!(opt_input(inputs, 3).is_none(), "Attention: unexpected mask input");
        }
        Ok(vec![TensorType::new(DType::F32, vec![q.shape[0], q.shape[1], v.shape[2]])])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let q = input(inputs, 0, "Attention")?.to_owned();
        let k = input(inputs, 1, "Attention")?.to_owned();
        let v = input(inputs, 2, "Attention")?.to_owned();
        self.check(q.ty(), k.ty(), v.ty())?;
        let mut qh = self.split_heads(&q, false)?;
        if let Some(c) = self.q_scale {
            qh = run(Binary::new(BinaryKind::Mul), &[&qh, &scalar(c)])?;
        }
        let mut kt = self.split_heads(&k, true)?;
        if let Some(c) = self.k_scale {
            kt = run(Binary::new(BinaryKind::Mul), &[&kt, &scalar(c)])?;
        }
        let mut s = run(MatMul::default(), &[&qh, &kt])?;
        match self.score_scale {
            Some(ScoreScale::Mul(c)) => s = run(Binary::new(BinaryKind::Mul), &[&s, &scalar(c)])?,
            Some(ScoreScale::Div(c)) => s = run(Binary::new(BinaryKind::Div), &[&s, &scalar(c)])?,
            None => {}
        }
        if self.mask {
            let m = input(inputs, 3, "Attention")?.to_owned();
            s = run(Binary::new(BinaryKind::Add), &[&s, &m])?;
        }
        let mut p = run(Softmax::new(3), &[&s])?;
        if self.nan_to_zero {
            for x in p.as_mut_slice::<f32>()? {
                if x.is_nan() {
                    *x = 0.0;
                }
            }
        }
        let vh = self.split_heads(&v, false)?;
        let o = run(MatMul::default(), &[&p, &vh])?;
        let o = run(Transpose { perm: vec![0, 2, 1, 3] }, &[&o])?;
        let out = &mut outputs[0];
        if out.bytes.len() != o.bytes().len() {
            bail_op!("Attention: output size mismatch");
        }
        out.bytes.copy_from_slice(o.bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Attention computed directly from its definition, in f64.
    fn naive(q: &[f32], k: &[f32], v: &[f32], mask: &[f32], b: usize, s: usize, h: usize, d: usize, scale: f64) -> Vec<f64> {
        let hd = h * d;
        let mut out = vec![0f64; b * s * hd];
        for bi in 0..b {
            for hi in 0..h {
                for i in 0..s {
                    let scores: Vec<f64> = (0..s)
                        .map(|j| {
                            let dot: f64 = (0..d).map(|x| q[(bi * s + i) * hd + hi * d + x] as f64 * k[(bi * s + j) * hd + hi * d + x] as f64).sum();
                            dot * scale + mask[bi * s + j] as f64
                        })
                        .collect();
                    let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
                    let sum: f64 = e.iter().sum();
                    for x in 0..d {
                        out[(bi * s + i) * hd + hi * d + x] = (0..s).map(|j| e[j] / sum * v[(bi * s + j) * hd + hi * d + x] as f64).sum();
                    }
                }
            }
        }
        out
    }

    #[test]
    fn matches_the_definition_with_a_padding_mask() {
        let (b, s, h, d) = (2, 3, 2, 4);
        let gen = |seed: u32, n: usize| -> Vec<f32> { (0..n).map(|i| (((i as u32).wrapping_mul(2654435761u32) ^ seed) % 1000) as f32 / 500.0 - 1.0).collect() };
        let (q, k, v) = (gen(1, b * s * h * d), gen(7, b * s * h * d), gen(13, b * s * h * d));
        // The second sequence's last position is padding.
        let mask = vec![0f32, 0., 0., 0., 0., f32::NEG_INFINITY];
        let t = |x: &[f32]| Tensor::from_vec(vec![b, s, h * d], x.to_vec()).unwrap();
        let m = Tensor::from_vec(vec![b, 1, 1, s], mask.clone()).unwrap();
        let scale = 1.0 / (d as f32).sqrt();
        let op: Op = Attention { num_heads: h, q_scale: None, k_scale: None, score_scale: Some(ScoreScale::Mul(scale)), mask: true, nan_to_zero: true }.into();
        let out = op.eval_owned(&[Some(&t(&q)), Some(&t(&k)), Some(&t(&v)), Some(&m)]).unwrap().remove(0);
        let want = naive(&q, &k, &v, &mask, b, s, h, d, scale as f64);
        for (a, w) in out.to_f64_vec().iter().zip(&want) {
            assert!((a - w).abs() < 1e-5, "{a} vs {w}");
        }
    }

    #[test]
    fn rejects_a_mask_that_does_not_broadcast() {
        let t = TensorType::new(DType::F32, vec![1, 4, 8]);
        let m = TensorType::new(DType::F32, vec![1, 1, 3, 4]);
        let op = Attention { num_heads: 2, q_scale: None, k_scale: None, score_scale: None, mask: true, nan_to_zero: false };
        assert!(op.infer(&[Some(&t), Some(&t), Some(&t), Some(&m)]).is_err());
    }
}
