//! The reduce family: reductions, normalizations and pooling, computed as
//! the runtime's CPU reference ops compute them (in f32 whatever the
//! storage: loads widen, each output rounds once on store, as `HalfIo`
//! does on the CPU).
//!
//! Most kernels see their input through an [`AxisView`](view::AxisView):
//! `nq` independent outputs (rows) of `n` reduced elements, the axes merged
//! as the CPU's `ReducePlan` merges them. A *team* of threads computes one
//! row (`kernels/cuda/reduce_team.cuh`): warp shuffles within a warp,
//! shared memory across warps, block-stride loops over rows of any length.
//!
//! | Op | Kernel | Covered | Runs on the host |
//! |----|--------|---------|------------------|
//! | ReduceSum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare | `reduce_axis.cu` | f32/f16, any axes whose merged runs are ≤ 2 kept and ≤ 2 reduced, keepdims or not, no axes | integer and bool inputs (exact on the CPU), more interleaved axes |
//! | ArgMax, ArgMin | `reduce_arg.cu` | f32/f16, `select_last_index`, NaN wins as on the CPU | integer inputs |
//! | Softmax, LogSoftmax | `softmax_axis.cu` | f32/f16, one axis or (pre-opset-13) flattened trailing axes | |
//! | Hardmax | `reduce_arg.cu` | f32/f16 | |
//! | LpNormalization | `norm_axis.cu` | p = 1, 2 | |
//! | MeanVarianceNormalization | `norm_axis.cu` | as Reduce's axes; statistics in f64 | |
//! | LayerNormalization | `norm_layer.cu` | scale/bias broadcast as trailing dims, optional bias, Mean/InvStdDev outputs | other parameter broadcasts |
//! | GroupNormalization, InstanceNormalization | `norm_group.cu` | per-channel or per-group scale and bias | scale and bias of different counts |
//! | BatchNormalization | `norm_batch.cu` | inference, parameters of any float storage | |
//! | LRN | `norm_lrn.cu` | | |
//! | MaxPool, AveragePool, LpPool | `pool_window.cu` | 1-3 spatial dims, strides, pads, dilations, ceil_mode (in the output shape), count_include_pad, MaxPool Indices (row- or column-major), i8/u8 MaxPool | more spatial dims |
//! | Global pools (window = whole plane, no pads) | `reduce_axis.cu` | f32/f16 Max, Average, Lp (with Indices or on i8/u8: the window kernel) | |
//! | RoiAlign | `pool_roi_align.cu` | f32/f16, avg and max, both coordinate modes, fixed or adaptive sampling, i32/i64 batch indices (out of range: `__trap()`) | |
//! | NonMaxSuppression | `nms.cu` | f32 boxes and scores, both box layouts, every optional input; output rows counted on the GPU and read back (`KernelArg::Counts`) | more boxes than shared memory holds a bit each (393,216) |
//! | CumSum, TopK | | | scans and sorts have no kernel |
//!
//! Every op rejects empty tensors (the host does nothing for them) and
//! bf16/f64 storage.
//!
//! # Tactics and heuristic
//!
//! The team kernels have one tactic per team shape: `rows SxT` (S = 8 to
//! 1024 threads per row, T = max(1, 256 / S) rows per block) or `cols 32xS`
//! (32 rows per block, S = 1 to 32 threads per row, adjacent rows on
//! adjacent lanes). The heuristic takes rows teams when the reduced
//! elements of a row are contiguous (the innermost merged dim is reduced)
//! and columns otherwise, sized for about 8 (rows) or 16 (columns) elements
//! per thread, and grows the team while the launch has fewer than 64K
//! threads and the team fewer threads than its row has elements.
//! LayerNorm and GroupNorm only have rows teams. BatchNorm's tactic is its
//! block size (planes along grid y, default: the smallest of 64..512 that
//! covers a plane, else 256); the window pool's is its block size (default
//! 256), after the team tactics of a global pool.

pub mod view;
pub(crate) mod team;
mod axis;
mod norm;
mod pool;
mod roi_align;
mod nms;

use crate::{unsupported, LayerIo, Selection, SmLimits, Unsupported};
use trtc_runtime::ops::linalg::LinalgOp;
use trtc_runtime::ops::reduce::ReduceOp;
use trtc_runtime::ops::Op;
use trtc_runtime::{DType, TensorType};

/// The candidates of a reduce-family layer: an `Op::Reduce` or a pool.
pub fn candidates(io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let tensors = io.inputs.iter().flatten().copied().chain(io.outputs.iter().copied());
    if tensors.clone().any(|t| t.is_empty()) {
        return unsupported(format!("{}: empty tensor", io.op.name()));
    }
    let r = match io.op {
        Op::Reduce(op) => match op {
            ReduceOp::Reduce(op) => axis::reduce(op, io),
            ReduceOp::ArgMinMax(op) => axis::arg(op, io),
            ReduceOp::Softmax(op) => axis::softmax(op, io),
            ReduceOp::LpNorm(op) => axis::lp_norm(op, io),
            ReduceOp::Mvn(op) => axis::mvn(op, io),
            ReduceOp::LayerNorm(op) => norm::layer_norm(op, io),
            ReduceOp::GroupNorm(op) => norm::group_norm(op, io),
            ReduceOp::InstanceNorm(op) => norm::instance_norm(op, io),
            ReduceOp::BatchNorm(op) => norm::batch_norm(op, io),
            ReduceOp::Lrn(op) => norm::lrn(op, io),
            ReduceOp::CumSum(_) | ReduceOp::TopK(_) => unsupported("no scan or sort kernel"),
            ReduceOp::NllLoss(_) => unsupported("no loss kernel (the layer runs on the host)"),
        },
        Op::Linalg(LinalgOp::Pool(op)) => pool::pool(op, io),
        Op::Linalg(LinalgOp::RoiAlign(op)) => roi_align::roi_align(op, io, limits),
        Op::Linalg(LinalgOp::NonMaxSuppression(op)) => nms::nms(op, io, limits),
        _ => unsupported("not a reduce-family op"),
    };
    r.map_err(|Unsupported(why)| Unsupported(format!("{}: {why}", io.op.name())))
}

/// The C storage type of a float tensor the kernels compute in f32.
pub(crate) fn float_type(t: &TensorType) -> Result<&'static str, Unsupported> {
    match t.dtype {
        DType::F32 => Ok("float"),
        DType::F16 => Ok("f16"),
        d => unsupported(format!("{d} tensors")),
    }
}

/// The layer's input `k`, which must be present.
pub(crate) fn input<'a>(io: &LayerIo<'a>, k: usize) -> Result<&'a TensorType, Unsupported> {
    match io.inputs.get(k) {
        Some(Some(t)) => Ok(t),
        _ => unsupported(format!("missing input {k}")),
    }
}

/// The layer's output `k`.
pub(crate) fn output<'a>(io: &LayerIo<'a>, k: usize) -> Result<&'a TensorType, Unsupported> {
    match io.outputs.get(k) {
        Some(t) => Ok(t),
        None => unsupported(format!("missing output {k}")),
    }
}
