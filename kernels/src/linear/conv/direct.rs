//! The direct conv kernels: depthwise (`conv_depthwise.cu`) and transposed
//! (`conv_transpose.cu`), their tactics and instantiation.

use super::ConvLayer;
use crate::Tactic;
use crate::{unsupported, Candidate, KernelLaunch, KernelSource, Selection, SmLimits, COMMON};
use trtc_runtime::kernels::KernelArg;

const CONV_COMMON: &str = include_str!("../../../cuda/conv_common.cuh");
const DEPTHWISE: &str = include_str!("../../../cuda/conv_depthwise.cu");
const TRANSPOSE: &str = include_str!("../../../cuda/conv_transpose.cu");

/// Blocks of a grid-stride launch over `work` items: enough to fill any GPU
/// trtc targets several times, capped so the grid stays small.
fn grid_for(work: u64, block: u32) -> [u32; 3] {
    [work.div_ceil(block as u64).clamp(1, 1 << 20) as u32, 1, 1]
}

/// Whether a grid-stride loop over `work` items needs 64-bit indices (its
/// 32-bit unsigned index must not wrap when it steps past the end).
fn needs_idx64(work: u64) -> u32 {
    (work >= 1 << 31) as u32
}

/// Depthwise tactics `(outputs per thread, threads per block)`, the
/// heuristic's first.
fn depthwise_tactics(ow: usize) -> Vec<(u32, u32)> {
    let first = if ow >= 28 {
        4
    } else if ow >= 8 {
        2
    } else {
        1
    };
    let mut v = vec![(first, 256)];
    for opt in [1, 2, 4] {
        for block in [256, 128] {
            if (opt, block) != (first, 256) {
                v.push((opt, block));
            }
        }
    }
    v
}

pub(super) fn depthwise_candidates(layer: &ConvLayer, limits: &SmLimits) -> Selection {
    let [od, oh, ow] = layer.output;
    let mut out = Vec::new();
    for (opt, block) in depthwise_tactics(ow) {
        if block > limits.max_threads_per_block {
            continue;
        }
        let work = (layer.n * layer.m * od * oh * ow.div_ceil(opt as usize)) as u64;
        let defines =
            format!("{}#define OPT {opt}\n#define BLOCK {block}\n#define IDX64 {}\n", layer.common_defines(), needs_idx64(work));
        let mut args = layer.epilogue_args();
        args.extend(layer.geometry_args());
        args.push(KernelArg::I64(work as i64));
        out.push(Candidate {
            tactic: Tactic::ConvDepthwise { outputs_per_thread: opt, block },
            launches: vec![KernelLaunch {
                kernel: KernelSource {
                    entry: "trtc_conv_depthwise".into(),
                    source: format!("{COMMON}\n{defines}\n{CONV_COMMON}\n{DEPTHWISE}"),
                },
                grid: grid_for(work, block),
                block: [block, 1, 1],
                shared_bytes: 0,
                args,
            }],
        });
    }
    if out.is_empty() {
        return unsupported("depthwise conv: no valid tactic");
    }
    Ok(out)
}

pub(super) fn transpose_candidates(layer: &ConvLayer, limits: &SmLimits) -> Selection {
    let work = layer.output_len() as u64;
    let mut out = Vec::new();
    for block in [256, 128] {
        if block > limits.max_threads_per_block {
            continue;
        }
        let defines = format!(
            "{}#define BLOCK {block}\n#define CONV3D {}\n#define IDX64 {}\n",
            layer.storage(),
            layer.is_3d() as u32,
            needs_idx64(work)
        );
        let mut args = vec![
            KernelArg::Input(0),
            KernelArg::Input(1),
            KernelArg::Input(layer.bias.map_or(0, |b| b.0)),
            KernelArg::Output(0),
            KernelArg::I32(layer.bias.is_some() as i32),
        ];
        args.extend(layer.geometry_args());
        args.push(KernelArg::I32(layer.group as i32));
        args.push(KernelArg::I64(work as i64));
        out.push(Candidate {
            tactic: Tactic::ConvTranspose { block },
            launches: vec![KernelLaunch {
                kernel: KernelSource { entry: "trtc_conv_transpose".into(), source: format!("{COMMON}\n{defines}\n{TRANSPOSE}") },
                grid: grid_for(work, block),
                block: [block, 1, 1],
                shared_bytes: 0,
                args,
            }],
        });
    }
    if out.is_empty() {
        return unsupported("ConvTranspose: no valid tactic");
    }
    Ok(out)
}
