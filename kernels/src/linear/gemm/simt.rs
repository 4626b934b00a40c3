//! GEMM kernel instantiation: what a kernel computes besides its tile shape
//! ([`GemmSpec`]: operand types and layouts, epilogue), and the SIMT family
//! ([`GemmTactic`], `cuda/gemm_simt.cu`), which runs on CUDA cores for every
//! layout and type and is the fallback of every GEMM layer. The tensor-core
//! family and the choice between them live in `super` (`linear::gemm`).
//!
//! Every GEMM kernel takes the parameters of `cuda/gemm_common.cuh`, in this
//! order: `A`, `B`, `w_scale` (int8 and FP8 only), `E` (when the spec has an
//! addend), `R` (when it has a residual), `Y`, then `M`, `N`, `K`, `nz1`
//! (i32), `sa0`, `sa1`, `sb0`, `sb1` (i64), `se0`, `se1`, `ser`, `sec` (i64,
//! with an addend only), and `alpha`, `beta`, `x_scale`, `y_scale` (f32).

pub use crate::tactic::GemmTactic;
use crate::{KernelSource, SmLimits, COMMON, FLOAT8};
use trtc_runtime::DType;

const SIMT_SOURCE: &str = include_str!("../../../cuda/gemm_simt.cu");
/// Parameters, batching and epilogue shared by the GEMM kernels.
pub(crate) const GEMM_COMMON: &str = include_str!("../../../cuda/gemm_common.cuh");

/// The element type of A and B.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AbType {
    F32,
    F16,
    /// Int8 operands: int32 accumulation, per-channel weight scales.
    I8,
    /// FP8 E4M3 operands: f32 accumulation, per-channel weight scales.
    F8E4M3,
}

impl AbType {
    pub fn size(self) -> usize {
        match self {
            AbType::F32 => 4,
            AbType::F16 => 2,
            AbType::I8 | AbType::F8E4M3 => 1,
        }
    }

    fn c_type(self) -> &'static str {
        match self {
            AbType::F32 => "float",
            AbType::F16 => "f16",
            AbType::I8 => "i8",
            AbType::F8E4M3 => "f8e4m3",
        }
    }

    /// Quantized operands (int8 or FP8), scaled per channel in the epilogue.
    pub fn is_quantized(self) -> bool {
        matches!(self, AbType::I8 | AbType::F8E4M3)
    }
}

/// What a GEMM kernel computes, apart from its tactic: code that changes
/// with these is compiled per spec; sizes, strides and scalars are
/// arguments.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GemmSpec {
    pub ab: AbType,
    /// A is stored `[K, M]` (only the SIMT kernel reads that layout).
    pub trans_a: bool,
    /// B is stored `[N, K]` (K-contiguous) rather than `[K, N]`.
    pub trans_b: bool,
    /// The storage of the addend `E` (Gemm's C or a bias), if any.
    pub addend: Option<DType>,
    /// The storage of the residual, if any.
    pub residual: Option<DType>,
    /// The storage of Y: f32, f16, or i8 or f8e4m3fn (requantized by
    /// `y_scale`).
    pub out: DType,
    /// The activation, a CUDA expression of the f32 `v`.
    pub activation: Option<String>,
}

impl GemmSpec {
    /// `float8.cuh` when the operands or the output are FP8, else nothing.
    fn prelude(&self) -> &'static str {
        if self.ab == AbType::F8E4M3 || self.out == DType::F8E4M3FN {
            FLOAT8
        } else {
            ""
        }
    }

    /// A plain f32 row-major GEMM with an activation expression of `v`.
    pub fn f32(activation: &str) -> GemmSpec {
        GemmSpec {
            ab: AbType::F32,
            trans_a: false,
            trans_b: false,
            addend: None,
            residual: None,
            out: DType::F32,
            activation: Some(activation.to_string()),
        }
    }

    /// The `#define`s `gemm_common.cuh` reads, or `None` when a storage type
    /// has no kernel (only f32 and f16 addends, residuals and float outputs).
    pub fn defines(&self) -> Option<String> {
        let float = |d: DType| match d {
            DType::F32 => Some("float"),
            DType::F16 => Some("f16"),
            _ => None,
        };
        let out = match self.out {
            DType::I8 => "i8",
            DType::F8E4M3FN => "f8e4m3",
            d => float(d)?,
        };
        let e = self.addend.map(float).unwrap_or(Some("float"))?;
        let r = self.residual.map(float).unwrap_or(Some("float"))?;
        let act = self.activation.as_deref().unwrap_or("v");
        Some(format!(
            "{}#define AB_T {}\n#define GEMM_INT8 {}\n#define GEMM_FP8 {}\n#define OUT_T {out}\n#define OUT_INT8 {}\n\
             #define OUT_FP8 {}\n#define HAS_E {}\n#define E_T {e}\n\
             #define HAS_R {}\n#define R_T {r}\n#define TRANS_A {}\n#define TRANS_B {}\n#define ACT(v) ({act})\n",
            self.prelude(),
            self.ab.c_type(),
            (self.ab == AbType::I8) as u8,
            (self.ab == AbType::F8E4M3) as u8,
            (self.out == DType::I8) as u8,
            (self.out == DType::F8E4M3FN) as u8,
            self.addend.is_some() as u8,
            self.residual.is_some() as u8,
            self.trans_a as u8,
            self.trans_b as u8,
        ))
    }
}

impl GemmTactic {
    pub fn threads(&self) -> u32 {
        (self.tile_m / self.thread_m) * (self.tile_n / self.thread_n)
    }

    /// Static shared memory: one k-step of A and B, 4 bytes per element
    /// (f32 or int32 accumulator type).
    pub fn shared_bytes(&self) -> u32 {
        4 * self.tile_k * (self.tile_m + self.tile_n)
    }

    /// Whether the tactic divides evenly and fits the architecture.
    pub fn is_valid(&self, limits: &SmLimits) -> bool {
        let divides = self.thread_m > 0
            && self.thread_n > 0
            && self.tile_m.is_multiple_of(self.thread_m)
            && self.tile_n.is_multiple_of(self.thread_n)
            && self.tile_k > 0;
        divides
            && self.threads() >= 32
            && self.threads() <= limits.max_threads_per_block
            && self.shared_bytes() <= limits.max_shared_bytes_per_block
            && self.thread_m * self.thread_n <= 64
    }

    /// The default: 64x64x8 tiles with 4x4 outputs per thread, or 32x32x8
    /// with 2x2 when M or N is small.
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

    /// The few tactics a layer offers the autotuner: the default for its
    /// shape first, then a spread of tile shapes (the full space of
    /// [`GemmTactic::candidates`] would mostly cost compile time).
    pub fn for_layer(m: usize, n: usize, limits: &SmLimits) -> Vec<GemmTactic> {
        let mut v = vec![GemmTactic::default_for(m, n)];
        for (tile_m, tile_n, tile_k, thread_m, thread_n) in
            [(32, 32, 8, 2, 2), (64, 64, 8, 4, 4), (64, 64, 16, 4, 4), (128, 64, 8, 8, 4), (128, 128, 8, 8, 8)]
        {
            let t = GemmTactic { tile_m, tile_n, tile_k, thread_m, thread_n };
            if !v.contains(&t) && t.is_valid(limits) {
                v.push(t);
            }
        }
        v
    }

    /// Grid for an `m x n` result with `batch` entries (x: column tiles,
    /// y: row tiles, z: batch).
    pub fn grid(&self, m: usize, n: usize, batch: usize) -> [u64; 3] {
        [n.div_ceil(self.tile_n as usize) as u64, m.div_ceil(self.tile_m as usize) as u64, batch as u64]
    }

    /// The source of this tactic for a plain f32 row-major GEMM with an
    /// activation expression of `v`.
    pub fn source(&self, activation: &str) -> KernelSource {
        self.source_for(&GemmSpec::f32(activation)).expect("an f32 spec has a kernel")
    }

    /// The source of this tactic for `spec` (`None` when the spec's types
    /// have no kernel).
    pub fn source_for(&self, spec: &GemmSpec) -> Option<KernelSource> {
        let load = if spec.ab == AbType::I8 { "((int)*(p))" } else { "ld(p)" };
        let defines = format!(
            "{}#define LOAD_AB(p) {load}\n#define TILE_M {}\n#define TILE_N {}\n#define TILE_K {}\n#define THREAD_M {}\n#define THREAD_N {}\n",
            spec.defines()?,
            self.tile_m,
            self.tile_n,
            self.tile_k,
            self.thread_m,
            self.thread_n
        );
        Some(KernelSource {
            entry: "trtc_gemm_simt".into(),
            source: format!("{COMMON}\n{defines}\n{GEMM_COMMON}\n{SIMT_SOURCE}"),
        })
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
        let f = GemmTactic::for_layer(8, 1000, &l);
        assert_eq!(f[0], GemmTactic::default_for(8, 1000));
        assert!(f.iter().all(|t| t.is_valid(&l)));
    }
}
