//! NonMaxSuppression (`nms.cu`): one block per batch entry and class keeps
//! boxes round by round (a block-wide maximum picks the next one, the same
//! pass drops the candidates it overlaps), writing its rows into its own
//! stretch of the output's room; a second launch moves the rows together
//! and writes their number to the layer's first counter, which the executor
//! reads back as the output's size in this run (`KernelArg::Counts`). The
//! candidates' bits live in dynamic shared memory, one per box.

use super::input;
use crate::tactic::Tactic;
use crate::{unsupported, Candidate, KernelLaunch, KernelSource, LayerIo, Selection, SmLimits, COMMON};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::linalg::NonMaxSuppression;
use trtc_runtime::DType;

const NMS: &str = include_str!("../../cuda/nms.cu");

/// Threads per block of the per-class launch the tactics offer.
const BLOCKS: [u32; 4] = [128, 256, 512, 1024];

/// The heuristic block: 256 threads, or more where each of 256 threads
/// would own more than 4 words of candidate bits (every round passes over
/// all of them; a class of thousands of boxes runs as many rounds as it
/// keeps boxes).
fn heuristic_block(words: usize, max_threads: u32) -> u32 {
    let wanted = (words.div_ceil(4) as u32).next_power_of_two().clamp(256, 1024);
    wanted.min(max_threads)
}

pub fn nms(op: &NonMaxSuppression, io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let boxes = input(io, 0)?;
    let scores = input(io, 1)?;
    let rows = match io.outputs.first() {
        Some(t) if t.dtype == DType::I64 && t.shape.len() == 2 && t.shape[1] == 3 => t.shape[0],
        Some(t) => return unsupported(format!("output {t}")),
        None => return unsupported("no output"),
    };
    let (b, n) = match boxes.shape.as_slice() {
        [b, n, 4] if boxes.dtype == DType::F32 => (*b, *n),
        _ => return unsupported(format!("boxes {boxes}")),
    };
    let c = match scores.shape.as_slice() {
        [sb, c, sn] if scores.dtype == DType::F32 && *sb == b && *sn == n => *c,
        _ => return unsupported(format!("scores {scores}")),
    };
    for (k, want) in [(2, DType::I64), (3, DType::F32), (4, DType::F32)] {
        if let Some(Some(t)) = io.inputs.get(k) {
            if t.dtype != want || t.len() != 1 {
                return unsupported(format!("input {k} {t}"));
            }
        }
    }
    let room = op.max_per_class.map_or(n, |m| m.min(n));
    let groups = b.checked_mul(c).filter(|&g| g < u32::MAX as usize);
    let Some(groups) = groups else { return unsupported(format!("{b} x {c} batches and classes")) };
    if groups.checked_mul(room) != Some(rows) {
        return unsupported(format!("an output room of {rows} rows for {groups} classes of {room}"));
    }
    let bitmap_bytes = n.div_ceil(32) * 4;
    if n >= u32::MAX as usize || bitmap_bytes > limits.max_shared_bytes_per_block as usize {
        return unsupported(format!("{n} boxes (a bit each must fit in shared memory)"));
    }
    let source = format!("{COMMON}\n#define CENTER {}\n{NMS}", u8::from(op.center_point_box));
    let kernel = |entry: &str| KernelSource { entry: entry.into(), source: source.clone() };
    let counts = KernelArg::Counts(groups as u32 + 1);
    // The optional scalars: present ones by address and in a bit mask,
    // absent ones as the boxes' address (never read).
    let has = |k: usize| matches!(io.inputs.get(k), Some(Some(_)));
    let mut per_class = vec![KernelArg::Output(0), counts, KernelArg::Input(0), KernelArg::Input(1)];
    per_class.extend((2..5).map(|k| KernelArg::Input(if has(k) { k as u32 } else { 0 })));
    per_class.push(KernelArg::I32((2..5).filter(|&k| has(k)).map(|k| 1 << (k - 2)).sum()));
    per_class.extend([c, n, room].map(|v| KernelArg::I64(v as i64)));
    let compact = KernelLaunch {
        kernel: kernel("trtc_nms_compact"),
        grid: [1, 1, 1],
        block: [256, 1, 1],
        shared_bytes: 0,
        args: vec![KernelArg::Output(0), counts, KernelArg::I64(groups as i64), KernelArg::I64(room as i64)],
    };
    let first = heuristic_block(n.div_ceil(32), limits.max_threads_per_block);
    let others = BLOCKS.into_iter().filter(|&b| b != first && b <= limits.max_threads_per_block);
    Ok(std::iter::once(first)
        .chain(others)
        .map(|block| {
            let mut launches = Vec::with_capacity(2);
            if groups > 0 {
                launches.push(KernelLaunch {
                    kernel: kernel("trtc_nms_classes"),
                    grid: [groups as u32, 1, 1],
                    block: [block, 1, 1],
                    shared_bytes: bitmap_bytes as u32,
                    args: per_class.clone(),
                });
            }
            launches.push(compact.clone());
            Candidate { tactic: Tactic::Nms { block }, launches }
        })
        .collect())
}
