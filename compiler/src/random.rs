//! Deterministic random tensors (for `trtc run` without inputs and tests).

use trtc_runtime::{DType, Tensor, TensorType};

/// A small, fast generator (SplitMix64); good enough for test inputs.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_add(0x9E37_79B9_7F4A_7C15))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// A random input tensor: floats uniform in [-1, 1). Integers and booleans
/// are all 1: they are usually ids, indices or masks, and 1 is valid for
/// every token-type, vocabulary and attention-mask input, where a random
/// value could be out of range.
pub fn tensor(ty: &TensorType, seed: u64) -> trtc_runtime::Result<Tensor> {
    let mut rng = Rng::new(seed);
    let float = ty.dtype.is_float();
    fill(ty, || if float { rng.uniform() } else { 1.0 })
}

/// A tensor of `ty` filled in order from `next`, allocated once (fallibly)
/// and written in place.
fn fill(ty: &TensorType, mut next: impl FnMut() -> f64) -> trtc_runtime::Result<Tensor> {
    let mut t = Tensor::zeros(ty.clone())?;
    macro_rules! fill {
        ($t:ty) => {{
            for o in t.as_mut_slice::<$t>()?.iter_mut() {
                *o = <$t as trtc_runtime::tensor::Element>::from_f64(next());
            }
        }};
    }
    match ty.dtype {
        DType::F32 => fill!(f32),
        DType::F16 => fill!(half::f16),
        DType::BF16 => fill!(half::bf16),
        DType::F64 => fill!(f64),
        DType::I8 => fill!(i8),
        DType::I16 => fill!(i16),
        DType::I32 => fill!(i32),
        DType::I64 => fill!(i64),
        DType::U8 => fill!(u8),
        DType::U16 => fill!(u16),
        DType::U32 => fill!(u32),
        DType::U64 => fill!(u64),
        DType::Bool => {
            for o in t.as_mut_slice::<u8>()?.iter_mut() {
                *o = (next() as u64 % 2) as u8;
            }
        }
        // The storage-only types: the values converted as Cast converts.
        d => {
            let values: Vec<f64> = (0..ty.len()).map(|_| next()).collect();
            let op: trtc_runtime::ops::Op = trtc_runtime::ops::elementwise::Cast::new(d).into();
            let wide = Tensor::from_vec(ty.shape.clone(), values)?;
            t = op.eval_owned(&[Some(&wide)])?.remove(0);
        }
    }
    Ok(t)
}
