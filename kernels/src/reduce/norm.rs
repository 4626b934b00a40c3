//! LayerNormalization, GroupNormalization, InstanceNormalization,
//! BatchNormalization (inference) and LRN.

use super::team::team_candidates;
use super::view::{AxisView, MAX_N};
use super::{float_type, input, output};
use crate::Tactic;
use crate::{geometry_1d, unsupported, Candidate, KernelLaunch, KernelSource, LayerIo, Selection, COMMON};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::reduce::{BatchNorm, GroupNorm, InstanceNorm, LayerNorm, Lrn};

const NORM_LAYER: &str = include_str!("../../cuda/norm_layer.cu");
const NORM_GROUP: &str = include_str!("../../cuda/norm_group.cu");
const NORM_BATCH: &str = include_str!("../../cuda/norm_batch.cu");
const NORM_LRN: &str = include_str!("../../cuda/norm_lrn.cu");

/// A view of `rows` contiguous rows of `n` elements (for the team tactics).
fn rows_view(rows: u64, n: u64) -> AxisView {
    AxisView { nq: rows, q0n: 1, sq1: n, sq0: 0, n, r0n: n, sr1: 0, sr0: 1, inner_reduced: true }
}

/// How many elements of the normalized dims `norm` a LayerNorm parameter
/// of `shape` repeats (index r mod that count), when it broadcasts as its
/// trailing dims: leading 1s dropped, the rest equal to the last dims of
/// `norm`.
fn trailing_count(shape: &[usize], norm: &[usize]) -> Option<u64> {
    let start = shape.iter().position(|&d| d != 1).unwrap_or(shape.len());
    let s = &shape[start..];
    (s.len() <= norm.len() && norm[norm.len() - s.len()..] == *s).then(|| s.iter().product::<usize>() as u64)
}

pub fn layer_norm(op: &LayerNorm, io: &LayerIo<'_>) -> Selection {
    let x = input(io, 0)?;
    let tx = float_type(x)?;
    if op.axis >= x.shape.len() || output(io, 0)?.dtype != x.dtype {
        return unsupported("unexpected output or axis");
    }
    let norm = &x.shape[op.axis..];
    let rows = x.shape[..op.axis].iter().product::<usize>() as u64;
    let n = norm.iter().product::<usize>() as u64;
    if n > MAX_N {
        return unsupported(format!("rows of more than {MAX_N} elements"));
    }
    let scale = input(io, 1)?;
    let bias = io.inputs.get(2).copied().flatten();
    let Some(ns) = trailing_count(&scale.shape, norm) else {
        return unsupported(format!("scale {:?} is not a trailing part of {norm:?}", scale.shape));
    };
    let nb = match bias {
        Some(b) => match trailing_count(&b.shape, norm) {
            Some(c) => Some((c, float_type(b)?)),
            None => return unsupported(format!("bias {:?} is not a trailing part of {norm:?}", b.shape)),
        },
        None => None,
    };
    let stats = match (op.stats_dtype.is_some(), io.outputs.len()) {
        (false, 1) => None,
        (true, 3) => {
            let t = float_type(output(io, 1)?)?;
            if output(io, 2)?.dtype != output(io, 1)?.dtype {
                return unsupported("Mean and InvStdDev of different dtypes");
            }
            Some(t)
        }
        _ => return unsupported("unexpected outputs"),
    };
    let defines = [
        ("TX", tx.to_string()),
        ("TS", float_type(scale)?.to_string()),
        ("TB", nb.map_or(tx, |b| b.1).to_string()),
        ("TM", stats.unwrap_or(tx).to_string()),
        ("HAS_BIAS", u32::from(nb.is_some()).to_string()),
        ("STATS", u32::from(stats.is_some()).to_string()),
    ];
    let mut args = vec![KernelArg::Input(0), KernelArg::Input(1)];
    if nb.is_some() {
        args.push(KernelArg::Input(2));
    }
    args.push(KernelArg::Output(0));
    if stats.is_some() {
        args.extend([KernelArg::Output(1), KernelArg::Output(2)]);
    }
    args.extend([
        KernelArg::I64(rows as i64),
        KernelArg::I32(n as i32),
        KernelArg::I32(ns as i32),
        KernelArg::I32(nb.map_or(n, |b| b.0) as i32),
        KernelArg::F32(op.epsilon),
    ]);
    let view = rows_view(rows, n);
    Ok(team_candidates("norm_layer", &view, true, |t| KernelLaunch {
        kernel: t.source("trtc_norm_layer", NORM_LAYER, false, &defines),
        grid: t.grid(rows),
        block: t.block(),
        shared_bytes: 0,
        args: args.clone(),
    }))
}

pub fn instance_norm(op: &InstanceNorm, io: &LayerIo<'_>) -> Selection {
    let c = input(io, 0)?.shape.get(1).copied().unwrap_or(0);
    group_norm_with(c, op.epsilon, io)
}

pub fn group_norm(op: &GroupNorm, io: &LayerIo<'_>) -> Selection {
    group_norm_with(op.num_groups, op.epsilon, io)
}

fn group_norm_with(groups: usize, epsilon: f32, io: &LayerIo<'_>) -> Selection {
    let x = input(io, 0)?;
    let tx = float_type(x)?;
    if x.shape.len() < 2 || output(io, 0)?.dtype != x.dtype {
        return unsupported("unexpected input or output");
    }
    let c = x.shape[1];
    if groups == 0 || c % groups != 0 {
        return unsupported("channels do not split into groups");
    }
    let per_group = c / groups;
    let spatial = x.shape[2..].iter().product::<usize>() as u64;
    let len = per_group as u64 * spatial;
    if len > MAX_N {
        return unsupported(format!("groups of more than {MAX_N} elements"));
    }
    let (scale, bias) = (input(io, 1)?, input(io, 2)?);
    let div = |p: &trtc_runtime::TensorType| match p.len() {
        l if l == c => Some(1),
        l if l == groups => Some(per_group),
        _ => None,
    };
    let param_div = match (div(scale), div(bias)) {
        (Some(a), Some(b)) if a == b => a,
        _ => return unsupported("scale and bias hold different counts"),
    };
    let rows = (x.shape[0] * groups) as u64;
    let defines = [("TX", tx.to_string()), ("TS", float_type(scale)?.to_string()), ("TB", float_type(bias)?.to_string())];
    let args = vec![
        KernelArg::Input(0),
        KernelArg::Input(1),
        KernelArg::Input(2),
        KernelArg::Output(0),
        KernelArg::I64(rows as i64),
        KernelArg::I32(len as i32),
        KernelArg::I32(groups as i32),
        KernelArg::I32(per_group as i32),
        KernelArg::I32(spatial as i32),
        KernelArg::I32(param_div as i32),
        KernelArg::F32(epsilon),
    ];
    let view = rows_view(rows, len);
    Ok(team_candidates("norm_group", &view, true, |t| KernelLaunch {
        kernel: t.source("trtc_norm_group", NORM_GROUP, false, &defines),
        grid: t.grid(rows),
        block: t.block(),
        shared_bytes: 0,
        args: args.clone(),
    }))
}

/// Threads per block of the BatchNorm tactics; the heuristic takes the
/// smallest that covers a plane, or 256 for planes larger than all.
const BATCH_BLOCKS: [u32; 4] = [64, 128, 256, 512];

pub fn batch_norm(op: &BatchNorm, io: &LayerIo<'_>) -> Selection {
    let x = input(io, 0)?;
    let tx = float_type(x)?;
    if x.shape.len() < 2 || output(io, 0)?.dtype != x.dtype {
        return unsupported("unexpected input or output");
    }
    let c = x.shape[1];
    let planes = (x.shape[0] * c) as u64;
    let spatial = x.shape[2..].iter().product::<usize>() as u64;
    let mut defines = format!("#define TX {tx}\n");
    for (k, name) in ["TS", "TB", "TM", "TV"].iter().enumerate() {
        let p = input(io, k + 1)?;
        if p.len() != c {
            return unsupported("parameters are not per channel");
        }
        defines.push_str(&format!("#define {name} {}\n", float_type(p)?));
    }
    let kernel = KernelSource { entry: "trtc_norm_batch".into(), source: format!("{COMMON}\n{defines}\n{NORM_BATCH}") };
    let args = vec![
        KernelArg::Input(0),
        KernelArg::Input(1),
        KernelArg::Input(2),
        KernelArg::Input(3),
        KernelArg::Input(4),
        KernelArg::Output(0),
        KernelArg::I64(planes as i64),
        KernelArg::I32(c as i32),
        KernelArg::I64(spatial as i64),
        KernelArg::F32(op.epsilon),
    ];
    let first = BATCH_BLOCKS.iter().copied().find(|&b| b as u64 >= spatial).unwrap_or(256);
    let order = std::iter::once(first).chain(BATCH_BLOCKS.iter().copied().filter(|&b| b != first));
    Ok(order
        .map(|threads| Candidate {
            tactic: Tactic::NormBatch { block: threads },
            launches: vec![KernelLaunch {
                kernel: kernel.clone(),
                grid: [spatial.div_ceil(threads as u64).clamp(1, 65535 * 8) as u32, planes.min(65535) as u32, 1],
                block: [threads, 1, 1],
                shared_bytes: 0,
                args: args.clone(),
            }],
        })
        .collect())
}

pub fn lrn(op: &Lrn, io: &LayerIo<'_>) -> Selection {
    let x = input(io, 0)?;
    let tx = float_type(x)?;
    if x.shape.len() < 2 || op.size == 0 || output(io, 0)?.dtype != x.dtype {
        return unsupported("unexpected input, size or output");
    }
    let total = x.len() as u64;
    let spatial = x.shape[2..].iter().product::<usize>() as u64;
    let (grid, block) = geometry_1d(total);
    let k = (op.alpha as f64 / op.size as f64) as f32;
    Ok(vec![Candidate {
        tactic: Tactic::NormLrn { block: 256 },
        launches: vec![KernelLaunch {
            kernel: KernelSource { entry: "trtc_norm_lrn".into(), source: format!("{COMMON}\n#define TX {tx}\n{NORM_LRN}") },
            grid,
            block,
            shared_bytes: 0,
            args: vec![
                KernelArg::Input(0),
                KernelArg::Output(0),
                KernelArg::I64(total as i64),
                KernelArg::I32(x.shape[1] as i32),
                KernelArg::I64(spatial as i64),
                KernelArg::I32(((op.size - 1) / 2) as i32),
                KernelArg::I32((op.size / 2) as i32),
                KernelArg::F32(k),
                KernelArg::F32(op.bias),
                KernelArg::F32(op.beta),
            ],
        }],
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_norm_parameters_broadcast_as_trailing_dims() {
        assert_eq!(trailing_count(&[768], &[768]), Some(768));
        assert_eq!(trailing_count(&[1, 768], &[768]), Some(768));
        assert_eq!(trailing_count(&[4], &[3, 4]), Some(4));
        assert_eq!(trailing_count(&[1], &[3, 4]), Some(1));
        assert_eq!(trailing_count(&[3, 1], &[3, 4]), None);
        assert_eq!(trailing_count(&[2, 768], &[768]), None);
    }
}
