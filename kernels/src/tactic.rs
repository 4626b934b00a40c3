//! Tactics: what a candidate runs, with its tuning parameters. `Display`
//! is the name the engine's kernel table, the timing cache and `trtc
//! inspect` use (e.g. `gemm_simt 64x64x8 4x4`); `FromStr` reads any such
//! name back into the same tactic, so a name is an identity, not free text.

//!
//! The parameter types of each family's tactics are defined here, as data;
//! their methods (grids, sources, the tactics a family offers) live with
//! the family, which re-exports them.

use std::fmt;

/// A 1-D launch tactic: threads per block and elements each thread handles
/// (the grid shrinks accordingly; the kernels' grid-stride loops cover the
/// rest).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Launch1d {
    pub block: u32,
    pub per_thread: u32,
}

/// How one output (one row of the reduction) is shared among threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Team {
    /// `size` consecutive threads along x (1 to 1024, a power of two); a
    /// block of 256 threads holds several teams when smaller.
    Rows(u32),
    /// A column of `size` threads (1 to 32) in a block of 32 columns, one
    /// output per lane.
    Cols(u32),
}

/// Threads of a block of rows teams smaller than that (several teams per
/// block).
pub(crate) const ROW_BLOCK: u32 = 256;

impl Team {
    /// Teams in one block.
    pub fn teams(self) -> u32 {
        match self {
            Team::Rows(s) => (ROW_BLOCK / s).max(1),
            Team::Cols(_) => 32,
        }
    }
}

/// One tactic of the SIMT GEMM: a block computes a `tile_m x tile_n` tile in
/// steps of `tile_k`, each thread `thread_m x thread_n` outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct GemmTactic {
    pub tile_m: u32,
    pub tile_n: u32,
    pub tile_k: u32,
    pub thread_m: u32,
    pub thread_n: u32,
}

/// The mma instruction: f16 (m16n8k16), tf32 (m16n8k8) or s8 (m16n8k32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TcKind {
    F16,
    Tf32,
    S8,
    /// FP8 E4M3 operands, f32 accumulators (sm_89 and newer).
    E4M3,
}

impl TcKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            TcKind::F16 => "f16",
            TcKind::Tf32 => "tf32",
            TcKind::S8 => "s8",
            TcKind::E4M3 => "e4m3",
        }
    }
}

/// One tactic: a `bm x bn` block tile of `wm x wn` warps, `bk` elements of
/// K per pipeline stage, `stages` shared-memory buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TcTactic {
    pub kind: TcKind,
    pub bm: u32,
    pub bn: u32,
    pub bk: u32,
    pub wm: u32,
    pub wn: u32,
    pub stages: u32,
}

/// One tactic: `rows` rows of Y per block (1, 2, 4 or 8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemvTactic {
    pub rows: u32,
}

/// How a block computes its tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// FMA on CUDA cores: f32 (exact) or int32 for int8.
    Simt,
    /// mma.sync m16n8k8 on tf32-rounded f32 storage.
    Tf32,
    /// mma.sync m16n8k16 on f16 storage, f32 accumulators.
    F16,
    /// mma.sync m16n8k32 on int8 storage, int32 accumulators.
    I8,
    /// mma.sync m16n8k32 on FP8 E4M3 storage, f32 accumulators (sm_89 and
    /// newer).
    E4M3,
}

impl Variant {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Variant::Simt => "conv_simt",
            Variant::Tf32 => "conv_tf32",
            Variant::F16 => "conv_f16",
            Variant::I8 => "conv_i8",
            Variant::E4M3 => "conv_e4m3",
        }
    }
}

/// One tactic: a `tm x tn` tile (pixels x channels) in steps of `tk`; `a x b`
/// is the outputs per thread (SIMT) or the warps (mma) along the two axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvTactic {
    pub variant: Variant,
    pub tm: u32,
    pub tn: u32,
    pub tk: u32,
    pub a: u32,
    pub b: u32,
}

/// One way a kernel family computes a layer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Tactic {
    /// A 1-D launch of an elementwise, pointwise or movement family, named
    /// by the family (one word: no spaces): `elementwise_binary b256x4`.
    Launch { family: String, launch: Launch1d },
    /// A team reduction of a reduce family (one word): `reduce_axis rows 32x8`.
    Team { family: String, team: Team },
    /// The SIMT GEMM: `gemm_simt 64x64x8 4x4`.
    GemmSimt(GemmTactic),
    /// A tensor-core GEMM: `gemm_tc_f16 128x128x32 w2x2 s3`.
    GemmTc(TcTactic),
    /// GEMV (one row of A or few): `gemm_gemv r4`.
    Gemv(GemvTactic),
    /// An implicit-GEMM convolution: `conv_f16 64x64x32 w2x2`.
    ConvIgemm(ConvTactic),
    /// The direct depthwise convolution: `conv_dw o4 b128`.
    ConvDepthwise { outputs_per_thread: u32, block: u32 },
    /// The direct transposed convolution: `conv_t b256`.
    ConvTranspose { block: u32 },
    /// A convolution with an empty output: no launch.
    ConvEmpty,
    /// Fused attention: `attention_fused q16 w4`.
    Attention { queries: u32, warps: u32 },
    /// A windowed pool: `pool_window b256`.
    PoolWindow { block: u32 },
    /// BatchNormalization in inference: `norm_batch b256`.
    NormBatch { block: u32 },
    /// LRN: `norm_lrn b256`.
    NormLrn { block: u32 },
    /// LSTM, GRU or RNN, one block per batch entry and direction:
    /// `recurrent b256`.
    Recurrent { block: u32 },
    /// NonMaxSuppression, one block per batch entry and class: `nms b256`.
    Nms { block: u32 },
}

impl fmt::Display for Tactic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tactic::Launch { family, launch } => write!(f, "{family} b{}x{}", launch.block, launch.per_thread),
            Tactic::Team { family, team: Team::Rows(s) } => write!(f, "{family} rows {s}x{}", Team::Rows(*s).teams()),
            Tactic::Team { family, team: Team::Cols(s) } => write!(f, "{family} cols 32x{s}"),
            Tactic::GemmSimt(t) => {
                write!(f, "gemm_simt {}x{}x{} {}x{}", t.tile_m, t.tile_n, t.tile_k, t.thread_m, t.thread_n)
            }
            Tactic::GemmTc(t) => {
                write!(f, "gemm_tc_{} {}x{}x{} w{}x{} s{}", t.kind.name(), t.bm, t.bn, t.bk, t.wm, t.wn, t.stages)
            }
            Tactic::Gemv(t) => write!(f, "gemm_gemv r{}", t.rows),
            Tactic::ConvIgemm(t) => {
                let per = if t.variant == Variant::Simt { "t" } else { "w" };
                write!(f, "{} {}x{}x{} {per}{}x{}", t.variant.name(), t.tm, t.tn, t.tk, t.a, t.b)
            }
            Tactic::ConvDepthwise { outputs_per_thread, block } => write!(f, "conv_dw o{outputs_per_thread} b{block}"),
            Tactic::ConvTranspose { block } => write!(f, "conv_t b{block}"),
            Tactic::ConvEmpty => f.write_str("conv_empty"),
            Tactic::Attention { queries, warps } => write!(f, "attention_fused q{queries} w{warps}"),
            Tactic::PoolWindow { block } => write!(f, "pool_window b{block}"),
            Tactic::NormBatch { block } => write!(f, "norm_batch b{block}"),
            Tactic::NormLrn { block } => write!(f, "norm_lrn b{block}"),
            Tactic::Recurrent { block } => write!(f, "recurrent b{block}"),
            Tactic::Nms { block } => write!(f, "nms b{block}"),
        }
    }
}

/// A tactic name that does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadTactic(pub String);

impl fmt::Display for BadTactic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "'{}' is not a tactic name", self.0)
    }
}

impl std::error::Error for BadTactic {}

/// `prefix` followed by `N` numbers separated by `x`: `w2x2` -> [2, 2].
fn dims<const N: usize>(word: &str, prefix: &str) -> Option<[u32; N]> {
    let parts: Vec<u32> = word.strip_prefix(prefix)?.split('x').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    parts.try_into().ok()
}

/// `prefix` followed by one number: `b256` -> 256.
fn one(word: &str, prefix: &str) -> Option<u32> {
    dims::<1>(word, prefix).map(|[v]| v)
}

impl std::str::FromStr for Tactic {
    type Err = BadTactic;

    fn from_str(s: &str) -> Result<Tactic, BadTactic> {
        parse(s).ok_or_else(|| BadTactic(s.to_string()))
    }
}

fn parse(s: &str) -> Option<Tactic> {
    let words: Vec<&str> = s.split(' ').collect();
    let (family, rest) = words.split_first()?;
    match (*family, rest) {
        ("gemm_simt", [tile, thread]) => {
            let ([tile_m, tile_n, tile_k], [thread_m, thread_n]) = (dims(tile, "")?, dims(thread, "")?);
            Some(Tactic::GemmSimt(GemmTactic { tile_m, tile_n, tile_k, thread_m, thread_n }))
        }
        ("gemm_tc_f16" | "gemm_tc_tf32" | "gemm_tc_s8" | "gemm_tc_e4m3", [tile, warps, stages]) => {
            let kind = match *family {
                "gemm_tc_f16" => TcKind::F16,
                "gemm_tc_tf32" => TcKind::Tf32,
                "gemm_tc_s8" => TcKind::S8,
                _ => TcKind::E4M3,
            };
            let ([bm, bn, bk], [wm, wn], stages) = (dims(tile, "")?, dims(warps, "w")?, one(stages, "s")?);
            Some(Tactic::GemmTc(TcTactic { kind, bm, bn, bk, wm, wn, stages }))
        }
        ("gemm_gemv", [rows]) => Some(Tactic::Gemv(GemvTactic { rows: one(rows, "r")? })),
        ("conv_simt" | "conv_tf32" | "conv_f16" | "conv_i8" | "conv_e4m3", [tile, per]) => {
            let variant = match *family {
                "conv_simt" => Variant::Simt,
                "conv_tf32" => Variant::Tf32,
                "conv_f16" => Variant::F16,
                "conv_i8" => Variant::I8,
                _ => Variant::E4M3,
            };
            let ([tm, tn, tk], [a, b]) = (dims(tile, "")?, dims(per, if variant == Variant::Simt { "t" } else { "w" })?);
            Some(Tactic::ConvIgemm(ConvTactic { variant, tm, tn, tk, a, b }))
        }
        ("conv_dw", [o, b]) => Some(Tactic::ConvDepthwise { outputs_per_thread: one(o, "o")?, block: one(b, "b")? }),
        ("conv_t", [b]) => Some(Tactic::ConvTranspose { block: one(b, "b")? }),
        ("conv_empty", []) => Some(Tactic::ConvEmpty),
        ("attention_fused", [q, w]) => Some(Tactic::Attention { queries: one(q, "q")?, warps: one(w, "w")? }),
        ("pool_window", [b]) => Some(Tactic::PoolWindow { block: one(b, "b")? }),
        ("norm_batch", [b]) => Some(Tactic::NormBatch { block: one(b, "b")? }),
        ("norm_lrn", [b]) => Some(Tactic::NormLrn { block: one(b, "b")? }),
        ("recurrent", [b]) => Some(Tactic::Recurrent { block: one(b, "b")? }),
        ("nms", [b]) => Some(Tactic::Nms { block: one(b, "b")? }),
        // The team count follows from the size; a name with another
        // count is not one this trtc writes.
        (f, ["rows", shape]) if !f.is_empty() => {
            let [size, teams] = dims(shape, "")?;
            (size > 0 && Team::Rows(size).teams() == teams)
                .then(|| Tactic::Team { family: f.to_string(), team: Team::Rows(size) })
        }
        (f, ["cols", shape]) if !f.is_empty() => match dims(shape, "")? {
            [32, size] => Some(Tactic::Team { family: f.to_string(), team: Team::Cols(size) }),
            _ => None,
        },
        (f, [launch]) if !f.is_empty() => {
            let [block, per_thread] = dims(launch, "b")?;
            Some(Tactic::Launch { family: f.to_string(), launch: Launch1d { block, per_thread } })
        }
        _ => None,
    }
}

/// A tactic equals its name (`tactic == "gemm_gemv r4"`).
impl PartialEq<&str> for Tactic {
    fn eq(&self, name: &&str) -> bool {
        // Names are short; comparing the written name keeps one spelling.
        let written = self.to_string();
        written.as_str() == *name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_name_round_trips() {
        let all = [
            Tactic::Launch { family: "elementwise_binary".into(), launch: Launch1d { block: 256, per_thread: 4 } },
            Tactic::Team { family: "reduce_axis".into(), team: Team::Rows(32) },
            Tactic::Team { family: "reduce_axis".into(), team: Team::Rows(1024) },
            Tactic::Team { family: "softmax".into(), team: Team::Cols(8) },
            Tactic::GemmSimt(GemmTactic { tile_m: 64, tile_n: 64, tile_k: 8, thread_m: 4, thread_n: 4 }),
            Tactic::GemmTc(TcTactic { kind: TcKind::Tf32, bm: 128, bn: 64, bk: 32, wm: 2, wn: 2, stages: 3 }),
            Tactic::Gemv(GemvTactic { rows: 4 }),
            Tactic::ConvIgemm(ConvTactic { variant: Variant::Simt, tm: 64, tn: 32, tk: 8, a: 4, b: 4 }),
            Tactic::ConvIgemm(ConvTactic { variant: Variant::I8, tm: 128, tn: 64, tk: 64, a: 2, b: 2 }),
            Tactic::GemmTc(TcTactic { kind: TcKind::E4M3, bm: 64, bn: 64, bk: 64, wm: 2, wn: 2, stages: 3 }),
            Tactic::ConvIgemm(ConvTactic { variant: Variant::E4M3, tm: 128, tn: 64, tk: 64, a: 2, b: 2 }),
            Tactic::ConvDepthwise { outputs_per_thread: 4, block: 128 },
            Tactic::ConvTranspose { block: 256 },
            Tactic::ConvEmpty,
            Tactic::Attention { queries: 16, warps: 4 },
            Tactic::PoolWindow { block: 256 },
            Tactic::NormBatch { block: 64 },
            Tactic::NormLrn { block: 256 },
            Tactic::Recurrent { block: 128 },
            Tactic::Nms { block: 256 },
        ];
        for t in all {
            let name = t.to_string();
            assert_eq!(name.parse::<Tactic>(), Ok(t), "{name}");
        }
        assert_eq!(Tactic::Team { family: "r".into(), team: Team::Rows(32) }.to_string(), "r rows 32x8");
        assert_eq!(Tactic::Gemv(GemvTactic { rows: 2 }), "gemm_gemv r2");
    }

    #[test]
    fn malformed_names_are_refused_without_panicking() {
        for bad in [
            "",
            " ",
            "gemm_simt",
            "gemm_simt 64x64 4x4",
            "gemm_simt 64x64x8 4x4 extra",
            "gemm_tc_f16 128x128x32 w2x2",
            "gemm_tc_f64 128x128x32 w2x2 s3",
            "conv_simt 64x32x8 w4x4",
            "conv_empty b1",
            "reduce_axis rows 0x1",
            "reduce_axis rows 32x7",
            "reduce_axis cols 16x8",
            "elementwise_binary b256",
            "elementwise_binary b-1x4",
            "elementwise_binary b99999999999x1",
            "norm_lrn",
        ] {
            assert!(bad.parse::<Tactic>().is_err(), "{bad:?} parsed");
        }
    }
}
