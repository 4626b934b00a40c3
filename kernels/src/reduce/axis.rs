//! The kernels over an [`AxisView`]: Reduce*, ArgMax/ArgMin, Softmax,
//! LogSoftmax, Hardmax, LpNormalization and MeanVarianceNormalization.

use super::team::team_candidates;
use super::view::AxisView;
use super::{float_type, input, output};
use crate::{unsupported, KernelLaunch, LayerIo, Selection};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::reduce::{ArgKind, ArgMinMax, LpNorm, Mvn, Reduce, ReduceKind, Softmax, SoftmaxKind};
use trtc_runtime::DType;

const REDUCE_AXIS: &str = include_str!("../../cuda/reduce_axis.cu");
const REDUCE_ARG: &str = include_str!("../../cuda/reduce_arg.cu");
const SOFTMAX_AXIS: &str = include_str!("../../cuda/softmax_axis.cu");
const NORM_AXIS: &str = include_str!("../../cuda/norm_axis.cu");

/// The view of `shape` over `axes`, or why no kernel takes it.
pub fn view(shape: &[usize], axes: &[usize]) -> Result<AxisView, crate::Unsupported> {
    match AxisView::new(shape, axes) {
        Some(v) if v.fits_int() => Ok(v),
        Some(_) => unsupported(format!("more than {} elements per output", super::view::MAX_N)),
        None => unsupported(format!("axes {axes:?} of {shape:?} interleave more than two kept and two reduced runs")),
    }
}

/// The launch of a kernel whose parameters are `(x, y, VIEW_PARAMS, extra...)`.
fn view_launch(
    t: super::team::Team,
    view: &AxisView,
    entry: &str,
    body: &str,
    defines: &[(&str, String)],
    extra: &[KernelArg],
) -> KernelLaunch {
    let mut args = vec![KernelArg::Input(0), KernelArg::Output(0)];
    args.extend(view.args());
    args.extend_from_slice(extra);
    KernelLaunch {
        kernel: t.source(entry, body, view.red2(), defines),
        grid: t.grid(view.nq),
        block: t.block(),
        shared_bytes: 0,
        args,
    }
}

/// A reduction of `view` with the `KIND` of reduce_axis.cu (`p` for LpPool)
/// into a contiguous output of x's storage type `tx`.
pub fn reduce_view(family: &str, view: &AxisView, tx: &str, kind: &str, p: f32) -> Selection {
    let defines = [("TX", tx.to_string()), ("KIND", kind.to_string())];
    Ok(team_candidates(family, view, false, |t| {
        view_launch(t, view, "trtc_reduce_axis", REDUCE_AXIS, &defines, &[KernelArg::F32(p)])
    }))
}

/// Reduce* over float tensors (integer reductions are exact on the CPU and
/// stay there).
pub fn reduce(op: &Reduce, io: &LayerIo<'_>) -> Selection {
    let x = input(io, 0)?;
    let tx = float_type(x)?;
    if output(io, 0)?.dtype != x.dtype {
        return unsupported("output dtype differs from the input's");
    }
    let kind = match op.kind {
        ReduceKind::Sum => "KIND_SUM",
        ReduceKind::Mean => "KIND_MEAN",
        ReduceKind::Max => "KIND_MAX",
        ReduceKind::Min => "KIND_MIN",
        ReduceKind::Prod => "KIND_PROD",
        ReduceKind::L1 => "KIND_L1",
        ReduceKind::L2 => "KIND_L2",
        ReduceKind::LogSum => "KIND_LOGSUM",
        ReduceKind::LogSumExp => "KIND_LOGSUMEXP",
        ReduceKind::SumSquare => "KIND_SUMSQUARE",
    };
    if op.axes.iter().any(|&a| a >= x.shape.len()) {
        return unsupported("axis out of range");
    }
    reduce_view("reduce_axis", &view(&x.shape, &op.axes)?, tx, kind, 0.0)
}

/// ArgMax / ArgMin of float tensors, indices as i64.
pub fn arg(op: &ArgMinMax, io: &LayerIo<'_>) -> Selection {
    let x = input(io, 0)?;
    let tx = float_type(x)?;
    if output(io, 0)?.dtype != DType::I64 || op.axis >= x.shape.len() {
        return unsupported("unexpected output or axis");
    }
    let view = view(&x.shape, &[op.axis])?;
    let defines = [
        ("TX", tx.to_string()),
        ("TY", "long long".to_string()),
        ("IS_MAX", (op.kind == ArgKind::Max).to_string()),
        ("LAST", op.select_last_index.to_string()),
        ("HARDMAX", "0".to_string()),
    ];
    Ok(team_candidates("reduce_arg", &view, false, |t| view_launch(t, &view, "trtc_reduce_arg", REDUCE_ARG, &defines, &[])))
}

/// Softmax and LogSoftmax (softmax_axis.cu), and Hardmax (reduce_arg.cu),
/// with the op's axis semantics (one axis, or with `flatten` every axis
/// from it on).
pub fn softmax(op: &Softmax, io: &LayerIo<'_>) -> Selection {
    let x = input(io, 0)?;
    let tx = float_type(x)?;
    if output(io, 0)?.dtype != x.dtype || op.axis >= x.shape.len() {
        return unsupported("unexpected output or axis");
    }
    let axes: Vec<usize> = if op.flatten { (op.axis..x.shape.len()).collect() } else { vec![op.axis] };
    let view = view(&x.shape, &axes)?;
    Ok(match op.kind {
        SoftmaxKind::Hardmax => {
            let defines = [
                ("TX", tx.to_string()),
                ("TY", tx.to_string()),
                ("IS_MAX", "true".to_string()),
                ("LAST", "false".to_string()),
                ("HARDMAX", "1".to_string()),
            ];
            team_candidates("reduce_arg", &view, false, |t| view_launch(t, &view, "trtc_reduce_arg", REDUCE_ARG, &defines, &[]))
        }
        kind => {
            let log = u32::from(kind == SoftmaxKind::LogSoftmax);
            let defines = [("TX", tx.to_string()), ("LOG", log.to_string())];
            team_candidates("softmax_axis", &view, false, |t| {
                view_launch(t, &view, "trtc_softmax_axis", SOFTMAX_AXIS, &defines, &[])
            })
        }
    })
}

/// LpNormalization (p = 1 or 2) along one axis.
pub fn lp_norm(op: &LpNorm, io: &LayerIo<'_>) -> Selection {
    let x = input(io, 0)?;
    let tx = float_type(x)?;
    let kind = match op.p {
        1 => "NORM_L1",
        2 => "NORM_L2",
        p => return unsupported(format!("p = {p}")),
    };
    if output(io, 0)?.dtype != x.dtype || op.axis >= x.shape.len() {
        return unsupported("unexpected output or axis");
    }
    norm_view(&view(&x.shape, &[op.axis])?, tx, kind)
}

/// MeanVarianceNormalization over its axes.
pub fn mvn(op: &Mvn, io: &LayerIo<'_>) -> Selection {
    let x = input(io, 0)?;
    let tx = float_type(x)?;
    if output(io, 0)?.dtype != x.dtype || op.axes.iter().any(|&a| a >= x.shape.len()) {
        return unsupported("unexpected output or axis");
    }
    norm_view(&view(&x.shape, &op.axes)?, tx, "NORM_MVN")
}

fn norm_view(view: &AxisView, tx: &str, kind: &str) -> Selection {
    let defines = [("TX", tx.to_string()), ("KIND", kind.to_string())];
    Ok(team_candidates("norm_axis", view, false, |t| view_launch(t, view, "trtc_norm_axis", NORM_AXIS, &defines, &[])))
}
