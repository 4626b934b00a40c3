//! The GEMV family (`cuda/gemm_gemv.cu`): GEMMs of few rows on CUDA cores,
//! B streamed once by many blocks. A tactic is the rows of Y per block.

use crate::linear::gemm::simt::{AbType, GemmSpec, GEMM_COMMON};
pub use crate::tactic::GemvTactic;
use crate::{KernelSource, COMMON};

const SOURCE: &str = include_str!("../../../cuda/gemm_gemv.cu");

/// GEMMs with at most this many rows (per batch entry) get GEMV candidates.
pub const MAX_ROWS: usize = 16;

impl GemvTactic {
    pub const THREADS: u32 = 256;

    /// The tactics for `m` rows, fewest rows per block first: no more rows
    /// per block than `m` needs.
    pub fn for_rows(m: usize) -> Vec<GemvTactic> {
        if m > MAX_ROWS {
            return Vec::new();
        }
        [1, 2, 4, 8].into_iter().filter(|&r| r == 1 || (r as usize) < 2 * m).map(|rows| GemvTactic { rows }).collect()
    }

    /// Grid: column groups (8 columns per block for a `[N, K]` B, 32
    /// otherwise), row groups, batch.
    pub fn grid(&self, m: usize, n: usize, batch: usize, trans_b: bool) -> [u64; 3] {
        let cols = if trans_b { 8 } else { 32 };
        [n.div_ceil(cols) as u64, m.div_ceil(self.rows as usize) as u64, batch as u64]
    }

    /// The source of this tactic for `spec` (`None` when the spec's types
    /// have no kernel).
    pub fn source(&self, spec: &GemmSpec) -> Option<KernelSource> {
        let load = if spec.ab == AbType::I8 { "((int)*(p))" } else { "ld(p)" };
        let defines = format!("{}#define LOAD_AB(p) {load}\n#define ROWS {}\n", spec.defines()?, self.rows);
        Some(KernelSource { entry: "trtc_gemm_gemv".into(), source: format!("{COMMON}\n{defines}\n{GEMM_COMMON}\n{SOURCE}") })
    }
}
