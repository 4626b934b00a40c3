//! Layers whose core is a matrix product: Gemm and MatMul (`gemm`), Conv and
//! ConvTranspose (`conv`), plain, fused (`Linear`: bias, residual and
//! activation in the epilogue) or int8 (`Int8Linear`); DeformConv
//! (`deform`, a direct kernel); LSTM, GRU and RNN (`recurrent`, one block
//! per sequence).

pub mod conv;
pub mod deform;
pub mod gemm;
pub mod recurrent;

use crate::{unsupported, LayerIo, Selection, SmLimits};
use trtc_runtime::ops::fused::{FusedOp, LinearKind};
use trtc_runtime::ops::linalg::LinalgOp;
use trtc_runtime::ops::precision::PrecisionOp;
use trtc_runtime::Op;

/// The candidates of a Gemm, MatMul, Conv or ConvTranspose layer, plain, fused
/// or int8.
pub fn candidates(io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    match io.op {
        Op::Linalg(LinalgOp::Gemm(_) | LinalgOp::MatMul(_)) => gemm::candidates(io, limits),
        Op::Linalg(LinalgOp::Conv(_) | LinalgOp::ConvTranspose(_)) => conv::candidates(io, limits),
        Op::Linalg(LinalgOp::DeformConv(d)) => deform::candidates(d, io, limits),
        Op::Linalg(LinalgOp::Recurrent(r)) => recurrent::candidates(r, io, limits),
        Op::Fused(FusedOp::Linear(l)) => match l.kind {
            LinearKind::Conv(_) => conv::candidates(io, limits),
            LinearKind::Gemm(_) | LinearKind::MatMul(_) => gemm::candidates(io, limits),
        },
        Op::Precision(PrecisionOp::Int8Linear(l)) => match l.kind {
            LinearKind::Conv(_) => conv::candidates(io, limits),
            LinearKind::Gemm(_) | LinearKind::MatMul(_) => gemm::candidates(io, limits),
        },
        Op::Precision(PrecisionOp::Fp8Linear(l)) => match l.kind {
            LinearKind::Conv(_) => conv::candidates(io, limits),
            LinearKind::Gemm(_) | LinearKind::MatMul(_) => gemm::candidates(io, limits),
        },
        op => unsupported(format!("no CUDA kernel for {} yet", op.name())),
    }
}
