//! The elementwise family: every op of the runtime's `elementwise` and
//! `quant` families that maps elements independently, as instantiations of
//! one map kernel ([`map::MapKernel`], which the `pointwise` family also
//! instantiates for fused programs): a grid-stride loop over the output in which each
//! input is read at its numpy-broadcast offset (merged dimensions and
//! strides are arguments, so one compiled module serves every shape with
//! the same broadcast structure).
//!
//! Float math runs in f32 for f32 and f16 storage (`ld`/`st` widen on load
//! and round once on store, as the CPU's HalfIo and half-float paths do);
//! integer math runs in the integer type with the CPU's wrapping, division
//! by zero and shift rules (`cuda/elementwise_math.cuh`).
//!
//! | Op | Covered | Returns unsupported for |
//! |----|---------|-------------------------|
//! | Unary | every kind on f32/f16; Abs, Neg, Sign, Relu on integers | bf16, f64 |
//! | Binary | Add, Sub, Mul, Div, Max, Min, Mod (both), PRelu on f32/f16 and integers; bitwise ops and shifts on integers; And, Or, Xor on bool | bf16, f64 |
//! | Compare | all kinds, every dtype with a C type | bf16, f64 |
//! | Pow | f32/f16 bases with any numeric exponent; integer bases with integer exponents | integer bases with float exponents (f64 `pow` on the GPU may differ in the last bit, which truncation can turn into an off-by-one) |
//! | Where | every dtype (selected by element size) | bf16, f64 |
//! | Clip | f32/f16 and integers | bf16, f64 |
//! | Cast | between f32, f16, integers and bool, with the CPU's truncation, saturation and NaN rules; to and from the four 8-bit floats (exact encoding, saturating or not: CastNoSaturate) and the 4-bit integers (`storage.rs`, `cuda/float8.cuh`) | bf16, f64 |
//! | Not, BitwiseNot, IsNaN, IsInf | yes | bf16, f64 |
//! | QuantizeLinear | f32/f16/i32 input, f32/f16 scales, per tensor, per axis and blocked, to u8/i8/u16/i16/u4/i4 and the 8-bit floats (saturating; a zero point other than 0 traps) | other dtypes |
//! | DequantizeLinear | u8/i8/u16/i16/i32/u4/i4 and 8-bit float input to f32/f16, per tensor, per axis and blocked | bf16/f64 outputs |
//! | DynamicQuantizeLinear, QLinearMatMul, QLinearConv | no | a reduction or a matrix product, not a map |
//!
//! Broadcasts that need more than [`map::MAX_RANK`] merged dimensions are
//! unsupported.
//!
//! Tactics are the 1-D launch shapes of [`map::Launch1d`] (threads per
//! block, elements per thread); the heuristic is 256 threads, one element
//! each. They all share one source, so offering them costs no compilation.

pub mod map;
mod storage;
pub(crate) mod ops;
mod quant;

use crate::{c_type, unsupported, LayerIo, Selection, SmLimits, Unsupported};
use trtc_runtime::ops::Op;
use trtc_runtime::{DType, TensorType};

/// The candidates of an elementwise or quantization layer.
pub fn candidates(io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    match io.op {
        Op::Elementwise(op) => ops::candidates(op, io, limits),
        Op::Quant(op) => quant::candidates(op, io, limits),
        op => unsupported(format!("{} is not an elementwise op", op.name())),
    }
}

/// Input `k` of the layer, which must be present.
pub(crate) fn input<'a>(io: &LayerIo<'a>, k: usize) -> Result<&'a TensorType, Unsupported> {
    match io.inputs.get(k) {
        Some(Some(t)) => Ok(t),
        _ => unsupported(format!("{}: input {k} is missing", io.op.name())),
    }
}

/// Output `k` of the layer.
pub(crate) fn output<'a>(io: &LayerIo<'a>, k: usize) -> Result<&'a TensorType, Unsupported> {
    match io.outputs.get(k) {
        Some(t) => Ok(t),
        None => unsupported(format!("{}: output {k} is missing", io.op.name())),
    }
}

/// The C type of a dtype the kernels handle.
pub(crate) fn ctype(d: DType) -> Result<&'static str, Unsupported> {
    match c_type(d) {
        Some(t) => Ok(t),
        None => unsupported(format!("no CUDA type for {d}")),
    }
}

/// Whether values of `d` load through `ld()` as f32 (f32 and f16 storage).
pub(crate) fn is_f32_storage(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F16)
}
