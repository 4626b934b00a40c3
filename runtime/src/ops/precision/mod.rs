//! Reduced precision: which arithmetic a layer runs in, the f16 wrapper that
//! runs any f32 op on f16 tensors, and the int8 and FP8 linear layers.
//!
//! The CPU executor computes exactly what the GPU kernels compute: f16
//! tensors are widened to f32, the op runs in f32 (tensor-core GEMMs
//! accumulate in f32 too), and results are rounded to f16 (nearest even).
//! Int8 layers multiply int8 values exactly (int32 accumulation) and apply
//! the scales in f32 in a fixed order; see [`Int8Linear`]. FP8 layers
//! decode E4M3 values exactly and sum their products in f64 where the GPU
//! accumulates in f32; see [`Fp8Linear`].

mod half_io;
mod quantized;
mod fp8_linear;
mod int8_linear;

pub use fp8_linear::{quantize_weight_per_channel_fp8, requantize_fp8, Fp8Linear, Fp8Output, FP8_E4M3_MAX};
pub use half_io::HalfIo;
pub use int8_linear::{quantize_weight_per_channel, Int8Linear, Int8Output};

use serde::{Deserialize, Serialize};

/// The arithmetic a layer runs in, as recorded in the engine and shown by
/// `trtc inspect`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Precision {
    Fp32,
    Fp16,
    Int8,
    /// FP8 E4M3 operands, f32 accumulation (Ada and Hopper tensor cores).
    Fp8,
}

impl Precision {
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Fp16 => "fp16",
            Precision::Int8 => "int8",
            Precision::Fp8 => "fp8",
        }
    }

    /// Parses `fp32`, `fp16`, `int8` or `fp8` (also `f32`, `f16`, `half`,
    /// `e4m3`).
    pub fn parse(s: &str) -> Option<Precision> {
        match s.to_ascii_lowercase().as_str() {
            "fp32" | "f32" | "float" => Some(Precision::Fp32),
            "fp16" | "f16" | "half" => Some(Precision::Fp16),
            "int8" | "i8" => Some(Precision::Int8),
            "fp8" | "e4m3" => Some(Precision::Fp8),
            _ => None,
        }
    }
}

crate::op_family!(PrecisionOp => Precision {
    HalfIo(HalfIo),
    Int8Linear(Int8Linear),
    Fp8Linear(Fp8Linear),
});
