//! MaxPool, AveragePool and LpPool over NCHW tensors with 1 to 3 spatial
//! dims. A pool whose window is the whole unpadded plane (GlobalAveragePool,
//! GlobalMaxPool, GlobalLpPool) is a reduction of each plane and runs on the
//! team kernels of reduce_axis.cu first; every pool also has the
//! one-output-per-thread window kernel.

use super::axis::{reduce_view, view};
use super::view::MAX_N;
use super::{float_type, input, output};
use crate::Tactic;
use crate::{unsupported, Candidate, KernelLaunch, KernelSource, LayerIo, Selection, COMMON};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::linalg::{Pool, PoolKind};
use trtc_runtime::DType;

const POOL_WINDOW: &str = include_str!("../../cuda/pool_window.cu");

/// Threads per block of the window kernel's tactics, the default first.
const WINDOW_BLOCKS: [u32; 3] = [256, 128, 512];

pub fn pool(op: &Pool, io: &LayerIo<'_>) -> Selection {
    let x = input(io, 0)?;
    let y = output(io, 0)?;
    let rank = op.kernel_shape.len();
    if !(1..=3).contains(&rank) || x.shape.len() != rank + 2 || y.shape.len() != rank + 2 {
        return unsupported(format!("{rank}-D pooling"));
    }
    if op.strides.len() != rank || op.dilations.len() != rank || op.pads.len() != 2 * rank {
        return unsupported("window parameters disagree in rank");
    }
    let tx = match (x.dtype, &op.kind) {
        (DType::I8, PoolKind::Max) => "signed char",
        (DType::U8, PoolKind::Max) => "unsigned char",
        _ => float_type(x)?,
    };
    if y.dtype != x.dtype || (op.indices && output(io, 1)?.dtype != DType::I64) {
        return unsupported("unexpected outputs");
    }
    let in_plane = x.shape[2..].iter().product::<usize>() as u64;
    if in_plane > MAX_N {
        return unsupported(format!("planes of more than {MAX_N} elements"));
    }
    let mut candidates = Vec::new();
    let global = op.pads.iter().all(|&p| p == 0)
        && op.dilations.iter().all(|&d| d == 1)
        && op.kernel_shape == x.shape[2..]
        && y.shape[2..].iter().all(|&d| d == 1)
        && !op.indices
        && (x.dtype == DType::F32 || x.dtype == DType::F16);
    if global {
        let (kind, p) = match op.kind {
            PoolKind::Max => ("KIND_POOLMAX", 0.0),
            PoolKind::Average { .. } => ("KIND_MEAN", 0.0),
            PoolKind::Lp { p } => {
                if p == 1.0 {
                    ("KIND_L1", 0.0)
                } else if p == 2.0 {
                    ("KIND_L2", 0.0)
                } else {
                    ("KIND_LP", p)
                }
            }
        };
        let axes: Vec<usize> = (2..x.shape.len()).collect();
        candidates = reduce_view("pool_global", &view(&x.shape, &axes)?, tx, kind, p)?;
    }
    candidates.extend(window(op, io, tx)?);
    Ok(candidates)
}

/// The window kernel's candidates.
fn window(op: &Pool, io: &LayerIo<'_>, tx: &str) -> Result<Vec<Candidate>, crate::Unsupported> {
    let x = input(io, 0)?;
    let y = output(io, 0)?;
    let rank = op.kernel_shape.len();
    // Spatial parameters padded to 3 dims with leading dims of size 1.
    let lead = 3 - rank;
    let pad3 = |v: &[usize], fill: usize| -> Vec<usize> { std::iter::repeat_n(fill, lead).chain(v.iter().copied()).collect() };
    let input3 = pad3(&x.shape[2..], 1);
    let output3 = pad3(&y.shape[2..], 1);
    let kernel3 = pad3(&op.kernel_shape, 1);
    let strides3 = pad3(&op.strides, 1);
    let dil3 = pad3(&op.dilations, 1);
    let begin3 = pad3(&op.pads[..rank], 0);
    let end3 = pad3(&op.pads[rank..], 0);
    let params = [&input3, &output3, &kernel3, &strides3, &begin3, &dil3, &end3];
    if params.iter().any(|v| v.iter().any(|&d| d as u64 > MAX_N)) {
        return unsupported("window parameters too large");
    }
    let (kind, include_pad, p) = match op.kind {
        PoolKind::Max => ("POOL_MAX", false, 0.0),
        PoolKind::Average { count_include_pad } => ("POOL_AVG", count_include_pad, 0.0),
        PoolKind::Lp { p } => ("POOL_LP", false, p),
    };
    let defines = format!(
        "#define TX {tx}\n#define KIND {kind}\n#define INDICES {}\n#define COLMAJOR {}\n",
        u32::from(op.indices),
        u32::from(op.column_major_indices)
    );
    let kernel = KernelSource { entry: "trtc_pool_window".into(), source: format!("{COMMON}\n{defines}\n{POOL_WINDOW}") };
    let total = y.len() as u64;
    let mut args = vec![KernelArg::Input(0), KernelArg::Output(0)];
    if op.indices {
        args.push(KernelArg::Output(1));
    }
    args.push(KernelArg::I64(total as i64));
    // id ih iw, od oh ow, kd kh kw, sd sh sw, pd ph pw, dd dh dw, ped peh pew.
    for v in params {
        args.extend(v.iter().map(|&d| KernelArg::I32(d as i32)));
    }
    args.push(KernelArg::I32(i32::from(include_pad)));
    args.push(KernelArg::F32(p));
    Ok(WINDOW_BLOCKS
        .iter()
        .map(|&threads| Candidate {
            tactic: Tactic::PoolWindow { block: threads },
            launches: vec![KernelLaunch {
                kernel: kernel.clone(),
                grid: [total.div_ceil(threads as u64).clamp(1, 65535 * 8) as u32, 1, 1],
                block: [threads, 1, 1],
                shared_bytes: 0,
                args: args.clone(),
            }],
        })
        .collect())
}
