//! The attention family: `FusedOp::Attention` as one fused kernel
//! (`kernels/cuda/attention_fused.cu`), computing what the CPU reference op
//! computes: the head split of `[batch, seq, heads * d]` Q, K, V, Q and K
//! scaled when the exporter scaled them, scores `Q·Kᵀ` then scaled (`Mul`
//! or `Div`), plus the additive mask broadcast to
//! `[batch, heads, seq_q, seq_k]`, a softmax over the keys with the
//! maximum subtracted (NaN probabilities zeroed with `nan_to_zero`), then
//! `P·V` merged back to `[batch, seq_q, heads * dv]`. Everything in f32;
//! f16 tensors (HalfIo layers, mask included) widen on load and the output
//! rounds once.
//!
//! | Case | Kernel |
//! |------|--------|
//! | seq_k ≤ 512, head dims d, dv ≤ 128, f32 or f16 tensors, any seq_q, with or without mask | fused, one block per (query tile, head, batch item) |
//! | longer key sequences, wider heads, other dtypes, empty tensors | host |
//!
//! A block keeps its query tile, the tile's whole score rows and a buffer
//! of 32 keys (or values) in dynamic shared memory, which must fit the
//! 48 KiB a block gets without opt-in:
//! `4 · (TQ·d + TQ·seq_k + 32·max(d + 1, 32·⌈dv / 32⌉))` bytes.
//!
//! # Tactics and heuristic
//!
//! A tactic is the query tile TQ and the warps per block W (each warp owns
//! TQ / W query rows), `attention_fused qTQ wW`, from (8, 4), (16, 4),
//! (32, 4), (16, 8), (32, 8), (64, 8), valid when its shared memory fits
//! and the tile is not larger than the query sequence needs. The heuristic
//! takes the largest 4-warp tile that still launches at least 264 blocks
//! (two per SM of the largest GPUs), else the smallest valid tile.

use crate::reduce::{float_type, input, output};
use crate::Tactic;
use crate::{unsupported, Candidate, KernelLaunch, KernelSource, LayerIo, Selection, SmLimits, Unsupported, COMMON};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::fused::{Attention, FusedOp, ScoreScale};
use trtc_runtime::ops::util::broadcast_strides;
use trtc_runtime::ops::Op;

const ATTENTION_FUSED: &str = include_str!("../cuda/attention_fused.cu");

/// The longest key sequence and the widest head the kernel takes.
pub const MAX_SEQ_K: usize = 512;
pub const MAX_HEAD_DIM: usize = 128;

/// Keys (or values) staged in shared memory at a time.
const KEY_CHUNK: usize = 32;

/// Blocks the heuristic wants in a launch.
const BUSY_BLOCKS: usize = 264;

/// (query tile, warps) of the tactics, in the order they are listed.
const TILES: [(usize, usize); 6] = [(8, 4), (16, 4), (32, 4), (16, 8), (32, 8), (64, 8)];

/// The candidates of an attention layer.
pub fn candidates(io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let Op::Fused(FusedOp::Attention(op)) = io.op else {
        return unsupported(format!("{}: not an attention layer", io.op.name()));
    };
    fused(op, io, limits).map_err(|Unsupported(why)| Unsupported(format!("Attention: {why}")))
}

/// The sizes of one layer.
struct Dims {
    batch: usize,
    heads: usize,
    sq: usize,
    sk: usize,
    d: usize,
    dv: usize,
}

impl Dims {
    /// Dynamic shared memory of a block with a query tile of `tq` rows.
    fn shared_bytes(&self, tq: usize) -> usize {
        let dvs = self.dv.div_ceil(32);
        4 * (tq * self.d + tq * self.sk + KEY_CHUNK * (self.d + 1).max(32 * dvs))
    }

    fn blocks(&self, tq: usize) -> usize {
        self.sq.div_ceil(tq) * self.heads * self.batch
    }
}

fn fused(op: &Attention, io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let (q, k, v) = (input(io, 0)?, input(io, 1)?, input(io, 2)?);
    let out = output(io, 0)?;
    let types = [float_type(q)?, float_type(k)?, float_type(v)?, float_type(out)?];
    if [q, k, v, out].iter().any(|t| t.shape.len() != 3 || t.is_empty()) {
        return unsupported("q, k, v and the output must be non-empty [batch, seq, hidden]");
    }
    let heads = op.num_heads;
    if heads == 0 || q.shape[2] % heads != 0 || v.shape[2] % heads != 0 || q.shape[2] != k.shape[2] {
        return unsupported("hidden sizes do not split into heads");
    }
    let dims = Dims { batch: q.shape[0], heads, sq: q.shape[1], sk: k.shape[1], d: q.shape[2] / heads, dv: v.shape[2] / heads };
    if dims.sk > MAX_SEQ_K || dims.d > MAX_HEAD_DIM || dims.dv > MAX_HEAD_DIM {
        return unsupported(format!(
            "seq_k {}, head dims {} and {} (the fused kernel takes up to {MAX_SEQ_K} keys and {MAX_HEAD_DIM} per head)",
            dims.sk, dims.d, dims.dv
        ));
    }
    if dims.batch > 65535 || heads > 65535 || dims.sq > i32::MAX as usize / 2 {
        return unsupported("too many batch items, heads or queries for the grid");
    }
    let mask = if op.mask {
        let m = input(io, 3)?;
        let full = [dims.batch, heads, dims.sq, dims.sk];
        if m.shape.len() > 4 || !m.shape.iter().rev().zip(full.iter().rev()).all(|(&a, &b)| a == b || a == 1) {
            return unsupported(format!("mask {:?} does not broadcast to {full:?}", m.shape));
        }
        Some((float_type(m)?, broadcast_strides(&m.shape, &full)))
    } else {
        None
    };
    let fits = |tq: usize| dims.shared_bytes(tq) <= limits.max_shared_bytes_per_block as usize;
    let useful = |tq: usize| tq <= dims.sq.next_power_of_two().max(8);
    let valid: Vec<(usize, usize)> = TILES
        .iter()
        .copied()
        .filter(|&(tq, w)| fits(tq) && useful(tq) && w * 32 <= limits.max_threads_per_block as usize)
        .collect();
    let Some(&smallest) = valid.first() else {
        return unsupported("no query tile fits in shared memory");
    };
    let first = valid
        .iter()
        .copied()
        .filter(|&(tq, w)| w == 4 && dims.blocks(tq) >= BUSY_BLOCKS)
        .max_by_key(|&(tq, _)| tq)
        .unwrap_or(smallest);
    let order = std::iter::once(first).chain(valid.iter().copied().filter(|&t| t != first));
    Ok(order.map(|(tq, warps)| candidate(op, &dims, tq, warps, &types, mask.as_ref())).collect())
}

fn candidate(
    op: &Attention,
    dims: &Dims,
    tq: usize,
    warps: usize,
    types: &[&str; 4],
    mask: Option<&(&str, Vec<usize>)>,
) -> Candidate {
    let mut defines = format!(
        "#define TQ {tq}\n#define WARPS {warps}\n#define DVS {}\n#define TQT {}\n#define TKT {}\n#define TVT {}\n#define TOT {}\n#define HAS_MASK {}\n",
        dims.dv.div_ceil(32),
        types[0],
        types[1],
        types[2],
        types[3],
        u32::from(mask.is_some())
    );
    let mut args = vec![KernelArg::Input(0), KernelArg::Input(1), KernelArg::Input(2)];
    if let Some((tm, strides)) = mask {
        defines.push_str(&format!("#define TMT {tm}\n"));
        args.push(KernelArg::Input(3));
        args.extend(strides.iter().map(|&s| KernelArg::I64(s as i64)));
    }
    let (s_scale, s_div) = match op.score_scale {
        None => (1.0, 0),
        Some(ScoreScale::Mul(c)) => (c, 0),
        Some(ScoreScale::Div(c)) => (c, 1),
    };
    args.extend([
        KernelArg::Output(0),
        KernelArg::I32(dims.heads as i32),
        KernelArg::I32(dims.sq as i32),
        KernelArg::I32(dims.sk as i32),
        KernelArg::I32(dims.d as i32),
        KernelArg::I32(dims.dv as i32),
        KernelArg::F32(op.q_scale.unwrap_or(1.0)),
        KernelArg::F32(op.k_scale.unwrap_or(1.0)),
        KernelArg::F32(s_scale),
        KernelArg::I32(s_div),
        KernelArg::I32(i32::from(op.nan_to_zero)),
    ]);
    Candidate {
        // Both come from the small tile tables above.
        tactic: Tactic::Attention { queries: tq as u32, warps: warps as u32 },
        launches: vec![KernelLaunch {
            kernel: KernelSource {
                entry: "trtc_attention_fused".into(),
                source: format!("{COMMON}\n{defines}\n{ATTENTION_FUSED}"),
            },
            grid: [dims.sq.div_ceil(tq) as u32, dims.heads as u32, dims.batch as u32],
            block: [(warps * 32) as u32, 1, 1],
            shared_bytes: dims.shared_bytes(tq) as u32,
            args,
        }],
    }
}
