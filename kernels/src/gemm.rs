//! The SIMT f32 GEMM family: tactics (tile shapes) and instantiation.

use crate::{KernelSource, SmLimits, COMMON};

const SOURCE: &str = include_str!("../cuda/gemm_simt.cu");

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

impl GemmTactic {
    pub fn threads(&self) -> u32 {
        (self.tile_m / self.thread_m) * (self.tile_n / self.thread_n)
    }

    pub fn shared_bytes(&self) -> u32 {
        4 * self.tile_k * (self.tile_m + self.tile_n)
    }

    /// Whether the tactic divides evenly and fits the architecture.
    pub fn is_valid(&self, limits: &SmLimits) -> bool {
        let divides = self.thread_m > 0
            && self.thread_n > 0
            && self.tile_m % self.thread_m == 0
            && self.tile_n % self.thread_n == 0
            && self.tile_k > 0;
        divides
            && self.threads() >= 32
            && self.threads() <= limits.max_threads_per_block
            && self.shared_bytes() <= limits.max_shared_bytes_per_block
            && self.thread_m * self.thread_n <= 64
    }

    /// The documented default (opt level 0): 64x64x8 tiles, 4x4 per thread.
    pub fn default_for(m: usize, n: usize) -> GemmTactic {
        if m <= 32 || n <= 32 {
            GemmTactic { tile_m: 32, tile_n: 32, tile_k: 8, thread_m: 2, thread_n: 2 }
        } else {
            GemmTactic { tile_m: 64, tile_n: 64, tile_k: 8, thread_m: 4, thread_n: 4 }
        }
    }

    /// Every valid tactic for an architecture, in a fixed order.
    pub fn candidates(limits: &SmLimits) -> Vec<GemmTactic> {
        let mut v = Vec::new();
        for tile_m in [32, 64, 128] {
            for tile_n in [32, 64, 128] {
                for tile_k in [8, 16, 32] {
                    for thread_m in [2, 4, 8] {
                        for thread_n in [2, 4, 8] {
                            let t = GemmTactic { tile_m, tile_n, tile_k, thread_m, thread_n };
                            if t.is_valid(limits) {
                                v.push(t);
                            }
                        }
                    }
                }
            }
        }
        v
    }

    /// The source of this tactic with an epilogue expression of `v`.
    pub fn source(&self, epilogue: &str) -> KernelSource {
        let defines = format!(
            "#define TILE_M {}\n#define TILE_N {}\n#define TILE_K {}\n#define THREAD_M {}\n#define THREAD_N {}\n#define EPILOGUE(v) ({})\n",
            self.tile_m, self.tile_n, self.tile_k, self.thread_m, self.thread_n, epilogue
        );
        KernelSource { entry: "trtc_gemm_simt".into(), source: format!("{COMMON}\n{defines}\n{SOURCE}") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_tactics_are_rejected_before_compiling() {
        let l = SmLimits::for_sm(80);
        assert!(!GemmTactic { tile_m: 64, tile_n: 64, tile_k: 8, thread_m: 3, thread_n: 4 }.is_valid(&l));
        assert!(!GemmTactic { tile_m: 128, tile_n: 128, tile_k: 64, thread_m: 8, thread_n: 8 }.is_valid(&l));
        assert!(GemmTactic::default_for(256, 256).is_valid(&l));
        let c = GemmTactic::candidates(&l);
        assert!(c.len() > 20 && c.iter().all(|t| t.is_valid(&l)));
    }
}
