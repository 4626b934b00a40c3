//! What a fused layer applies to its accumulator before storing it:
//! `y = activation(acc + bias + residual)`.

use crate::math::Math;
use crate::ops::elementwise::UnaryKind;
use serde::{Deserialize, Serialize};

/// A pointwise activation an epilogue can apply.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Activation {
    /// One of the unary activations (Relu, Sigmoid, Tanh, LeakyRelu, Gelu...).
    Unary(UnaryKind),
    /// Clip (Relu6 is `Clip { min: 0, max: 6 }`), with ONNX Clip's semantics.
    Clip { min: Option<f32>, max: Option<f32> },
    /// SiLU / Swish, `x * sigmoid(x)`, as exporters spell it (Sigmoid then Mul).
    Silu,
}

impl Activation {
    #[inline]
    pub fn apply(&self, x: f32) -> f32 {
        match self {
            Activation::Unary(k) => k.apply_f32(x),
            Activation::Silu => x * UnaryKind::Sigmoid.apply_f32(x),
            Activation::Clip { min, max } => {
                let mut v = x;
                if let Some(lo) = min {
                    if v < *lo {
                        v = *lo;
                    }
                }
                if let Some(hi) = max {
                    if v > *hi {
                        v = *hi;
                    }
                }
                v
            }
        }
    }

    pub fn name(&self) -> String {
        match self {
            Activation::Unary(k) => format!("{k:?}"),
            Activation::Clip { min, max } => format!("Clip({min:?},{max:?})"),
            Activation::Silu => "Silu".into(),
        }
    }
}

/// The operations after the main product, in this order: the bias was
/// already added by the product itself; then `+ residual` when present, then
/// the activation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Epilogue {
    /// Whether the layer takes a residual input of the output's shape.
    pub residual: bool,
    pub activation: Option<Activation>,
}

impl Epilogue {
    /// Applies residual and activation in place on f32 data: one vectorized
    /// pass per step, each the same arithmetic as the unfused op, on blocks
    /// split over the context's threads.
    pub fn apply(&self, out: &mut [f32], residual: Option<&[f32]>) {
        if self.is_empty() {
            return;
        }
        // The mode is read here, on the run's thread, not on the workers.
        let math = crate::math::mode();
        crate::parallel::par_chunks_mut(out, 1, crate::parallel::grain_elements(1), |start, block| {
            self.apply_block(math, block, residual.map(|r| &r[start..start + block.len()]))
        });
    }

    /// Applies residual and activation to one block on this thread, in the
    /// given math mode.
    pub(crate) fn apply_block(&self, math: Math, out: &mut [f32], residual: Option<&[f32]>) {
        // The loops compiled for the widest vectors the CPU has: the same
        // per-element arithmetic, so the same bits.
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                // SAFETY: the CPU has AVX-512F.
                return unsafe { self.apply_block_avx512(math, out, residual) };
            }
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2.
                return unsafe { self.apply_block_avx2(math, out, residual) };
            }
        }
        self.apply_block_body(math, out, residual)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn apply_block_avx512(&self, math: Math, out: &mut [f32], residual: Option<&[f32]>) {
        self.apply_block_body(math, out, residual)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn apply_block_avx2(&self, math: Math, out: &mut [f32], residual: Option<&[f32]>) {
        self.apply_block_body(math, out, residual)
    }

    #[inline(always)]
    fn apply_block_body(&self, math: Math, out: &mut [f32], residual: Option<&[f32]>) {
        if let Some(r) = residual {
            for (o, &r) in out.iter_mut().zip(r) {
                *o += r;
            }
        }
        match self.activation {
            None => {}
            Some(Activation::Unary(k)) => crate::ops::elementwise::apply_in_place_f32_in(math, k, out),
            Some(Activation::Silu) if math == Math::Fast => crate::math::silu_in_place(out),
            Some(Activation::Silu) => {
                for v in out.iter_mut() {
                    *v *= UnaryKind::Sigmoid.apply_f32(*v);
                }
            }
            Some(Activation::Clip { min, max }) => {
                // Infinite bounds for absent ones change nothing (NaN stays
                // NaN); selects instead of branches, so that it vectorizes.
                let (lo, hi) = (min.unwrap_or(f32::NEG_INFINITY), max.unwrap_or(f32::INFINITY));
                for v in out.iter_mut() {
                    let x = if *v < lo { lo } else { *v };
                    *v = if x > hi { hi } else { x };
                }
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        !self.residual && self.activation.is_none()
    }
}
