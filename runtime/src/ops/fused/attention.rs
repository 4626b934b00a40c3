//! Multi-head scaled dot-product attention, as exporters spell it:
//! split heads, `softmax(Q·Kᵀ · scale + mask)`, guard fully masked rows,
//! multiply by V, merge heads. Inputs `[q, k, v, mask?]` with q, k, v of shape
//! `[batch, seq, heads * head_dim]` and an additive mask broadcastable to
//! `[batch, heads, seq_q, seq_k]`; output `[batch, seq_q, heads * head_dim_v]`.
//!
//! The CPU reference computes each head with strided GEMMs (no copies of
//! Q, K, V) and the same Softmax, in the exporters' order of operations, so
//! its results equal the unfused graph's bit for bit.

use crate::dtype::DType;
use crate::ensure_op;
use crate::error::Result;
use crate::ops::linalg::{gemm_f32, GemmArgs};
use crate::ops::reduce::Softmax;
use crate::ops::util::{broadcast_index_map, broadcast_shapes, broadcast_strides};
use crate::ops::{input, opt_input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
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

impl Attention {
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
        let (q, k, v) = (input(inputs, 0, "Attention")?, input(inputs, 1, "Attention")?, input(inputs, 2, "Attention")?);
        self.check(&q.ty(), &k.ty(), &v.ty())?;
        let (b, sq, sk, h) = (q.shape[0], q.shape[1], k.shape[1], self.num_heads);
        let (hd, hdv) = (q.shape[2], v.shape[2]);
        let (d, dv) = (hd / h, hdv / h);
        // Scaled copies only when the exporter scaled Q or K (same f32
        // products as its Mul nodes); otherwise the inputs are read in place
        // through strides.
        let scaled = |x: &[f32], c: Option<f32>| c.map(|c| x.iter().map(|&v| v * c).collect::<Vec<f32>>());
        let qs_own = scaled(q.as_slice::<f32>()?, self.q_scale);
        let ks_own = scaled(k.as_slice::<f32>()?, self.k_scale);
        let qs: &[f32] = qs_own.as_deref().unwrap_or(q.as_slice::<f32>()?);
        let ks: &[f32] = ks_own.as_deref().unwrap_or(k.as_slice::<f32>()?);
        let vs = v.as_slice::<f32>()?;
        let mask = if self.mask { Some(input(inputs, 3, "Attention")?) } else { None };
        let mask_map = match mask {
            Some(m) => {
                let full = [b, h, sq, sk];
                Some((m.as_slice::<f32>()?, broadcast_index_map(&broadcast_strides(m.shape, &full), &full)))
            }
            None => None,
        };
        let out = outputs[0].as_mut_slice::<f32>()?;
        let mut scores = vec![0f32; sq * sk];
        let mut probs = vec![0f32; sq * sk];
        let softmax = Softmax::new(1);
        let shape = [sq, sk];
        for bi in 0..b {
            for hi in 0..h {
                // scores = Q_bh · K_bhᵀ, read through strides.
                let args = GemmArgs {
                    m: sq,
                    k: d,
                    n: sk,
                    alpha: 1.0,
                    beta: 0.0,
                    rsa: hd as isize,
                    csa: 1,
                    rsb: 1,
                    csb: hd as isize,
                    rsc: sk as isize,
                    csc: 1,
                };
                let qo = bi * sq * hd + hi * d;
                let ko = bi * sk * hd + hi * d;
                gemm_f32(&args, &qs[qo..], &ks[ko..], &mut scores);
                match self.score_scale {
                    Some(ScoreScale::Mul(c)) => scores.iter_mut().for_each(|x| *x *= c),
                    Some(ScoreScale::Div(c)) => scores.iter_mut().for_each(|x| *x /= c),
                    None => {}
                }
                if let Some((m, map)) = &mask_map {
                    let base = (bi * h + hi) * sq * sk;
                    for (x, &i) in scores.iter_mut().zip(&map[base..base + sq * sk]) {
                        *x += m[i];
                    }
                }
                let sv = TensorView { dtype: DType::F32, shape: &shape, bytes: bytemuck::cast_slice(&scores) };
                let mut pv = TensorViewMut { dtype: DType::F32, shape: &shape, bytes: bytemuck::cast_slice_mut(&mut probs) };
                softmax.eval(&[Some(sv)], std::slice::from_mut(&mut pv))?;
                if self.nan_to_zero {
                    probs.iter_mut().filter(|x| x.is_nan()).for_each(|x| *x = 0.0);
                }
                // out[b, i, h, :] = P · V_bh.
                let args = GemmArgs {
                    m: sq,
                    k: sk,
                    n: dv,
                    alpha: 1.0,
                    beta: 0.0,
                    rsa: sk as isize,
                    csa: 1,
                    rsb: hdv as isize,
                    csb: 1,
                    rsc: hdv as isize,
                    csc: 1,
                };
                let vo = bi * sk * hdv + hi * dv;
                let oo = bi * sq * hdv + hi * dv;
                gemm_f32(&args, &probs, &vs[vo..], &mut out[oo..]);
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

    /// Attention computed directly from its definition, in f64.
    #[allow(clippy::too_many_arguments)]
    fn naive(q: &[f32], k: &[f32], v: &[f32], mask: &[f32], b: usize, s: usize, h: usize, d: usize, scale: f64) -> Vec<f64> {
        let hd = h * d;
        let mut out = vec![0f64; b * s * hd];
        for bi in 0..b {
            for hi in 0..h {
                for i in 0..s {
                    let scores: Vec<f64> = (0..s)
                        .map(|j| {
                            let dot: f64 = (0..d)
                                .map(|x| q[(bi * s + i) * hd + hi * d + x] as f64 * k[(bi * s + j) * hd + hi * d + x] as f64)
                                .sum();
                            dot * scale + mask[bi * s + j] as f64
                        })
                        .collect();
                    let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
                    let sum: f64 = e.iter().sum();
                    for x in 0..d {
                        out[(bi * s + i) * hd + hi * d + x] =
                            (0..s).map(|j| e[j] / sum * v[(bi * s + j) * hd + hi * d + x] as f64).sum();
                    }
                }
            }
        }
        out
    }

    #[test]
    fn matches_the_definition_with_a_padding_mask() {
        let (b, s, h, d) = (2, 3, 2, 4);
        let gen = |seed: u32, n: usize| -> Vec<f32> {
            (0..n).map(|i| (((i as u32).wrapping_mul(2654435761u32) ^ seed) % 1000) as f32 / 500.0 - 1.0).collect()
        };
        let (q, k, v) = (gen(1, b * s * h * d), gen(7, b * s * h * d), gen(13, b * s * h * d));
        // The second sequence's last position is padding.
        let mask = vec![0f32, 0., 0., 0., 0., f32::NEG_INFINITY];
        let t = |x: &[f32]| Tensor::from_vec(vec![b, s, h * d], x.to_vec()).unwrap();
        let m = Tensor::from_vec(vec![b, 1, 1, s], mask.clone()).unwrap();
        let scale = 1.0 / (d as f32).sqrt();
        let op: Op = Attention {
            num_heads: h,
            q_scale: None,
            k_scale: None,
            score_scale: Some(ScoreScale::Mul(scale)),
            mask: true,
            nan_to_zero: true,
        }
        .into();
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
