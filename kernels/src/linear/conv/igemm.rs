//! The implicit-GEMM conv kernel (`conv_igemm.cu`): its tactics, the
//! heuristic order and the instantiation for one layer. See the parent
//! module for the tactic space and the heuristic in words.

use super::ConvLayer;
pub use crate::tactic::{ConvTactic, Variant};
use crate::Tactic;
use crate::{unsupported, Candidate, KernelLaunch, KernelSource, Selection, SmLimits, COMMON};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::DType;

const CONV_COMMON: &str = include_str!("../../../cuda/conv_common.cuh");
const MMA: &str = include_str!("../../../cuda/mma.cuh");
const SOURCE: &str = include_str!("../../../cuda/conv_igemm.cu");

impl Variant {
    fn code(self) -> u32 {
        match self {
            Variant::Simt => 0,
            Variant::Tf32 => 1,
            Variant::F16 => 2,
            Variant::I8 => 3,
            Variant::E4M3 => 4,
        }
    }

    /// The oldest architecture whose mma.sync the variant uses.
    fn min_sm(self) -> u32 {
        match self {
            Variant::E4M3 => 89,
            _ => 80,
        }
    }

    /// Whether ptxas lowers the variant's mma.sync on `sm` (e4m3 on
    /// Hopper: conversions and two f16 HMMAs, see `TcKind::emulated_on`);
    /// such tactics keep at most 32 accumulators per thread, or they spill.
    fn emulated_on(self, sm: u32) -> bool {
        self == Variant::E4M3 && sm >= 90
    }

    /// The k of one mma (the SIMT loop steps one k at a time).
    fn mma_k(self) -> u32 {
        match self {
            Variant::Simt => 1,
            Variant::Tf32 => 8,
            Variant::F16 => 16,
            Variant::I8 | Variant::E4M3 => 32,
        }
    }

    /// Consecutive k one loader thread gathers into one 32-bit register
    /// (two f16, four s8 or e4m3).
    fn k_group(self) -> u32 {
        match self {
            Variant::F16 => 2,
            Variant::I8 | Variant::E4M3 => 4,
            Variant::Simt | Variant::Tf32 => 1,
        }
    }

    /// The tensor-core variant for a storage dtype.
    fn mma_for(x: DType) -> Option<Variant> {
        match x {
            DType::F32 => Some(Variant::Tf32),
            DType::F16 => Some(Variant::F16),
            DType::I8 => Some(Variant::I8),
            DType::F8E4M3FN => Some(Variant::E4M3),
            _ => None,
        }
    }

    /// The tile-depth choices of the variant.
    fn tile_ks(self) -> [u32; 2] {
        match self {
            Variant::Simt => [8, 16],
            Variant::Tf32 => [16, 32],
            Variant::F16 => [32, 64],
            Variant::I8 | Variant::E4M3 => [64, 128],
        }
    }
}

/// Shapes tried, as `(tm, tn, a, b)`: SIMT outputs per thread, mma warps.
const SIMT_TILES: [(u32, u32, u32, u32); 8] = [
    (128, 128, 8, 8),
    (128, 64, 8, 4),
    (64, 128, 4, 8),
    (64, 64, 4, 4),
    (64, 32, 4, 2),
    (32, 64, 2, 4),
    (32, 32, 2, 2),
    (32, 32, 4, 4),
];
const MMA_TILES: [(u32, u32, u32, u32); 10] = [
    (128, 128, 2, 4),
    (256, 64, 4, 2),
    (128, 64, 2, 2),
    (64, 128, 2, 2),
    (64, 64, 2, 2),
    (128, 32, 4, 1),
    (32, 128, 1, 4),
    (64, 32, 2, 1),
    (32, 64, 1, 2),
    (32, 32, 1, 1),
];

/// Per-thread caps that keep the kernel within its registers.
const MAX_ACCUMULATORS: u32 = 64;
const MAX_STAGED: u32 = 16;

impl ConvTactic {
    pub fn threads(&self) -> u32 {
        match self.variant {
            Variant::Simt => (self.tm / self.a.max(1)) * (self.tn / self.b.max(1)),
            _ => self.a * self.b * 32,
        }
    }

    /// Pixels per thread of the A loader, or `None` if the threads do not
    /// divide the tile evenly.
    fn a_per_thread(&self) -> Option<u32> {
        let lanes = self.threads() * self.variant.k_group();
        let tpr = lanes / self.tk.max(1);
        (tpr > 0 && lanes.is_multiple_of(self.tk) && self.tm.is_multiple_of(tpr)).then(|| self.tm / tpr)
    }

    /// Channels per thread of the B loader, likewise.
    fn b_per_thread(&self) -> Option<u32> {
        let kt = self.tk / self.variant.k_group();
        let rows = self.threads() / kt.max(1);
        (kt > 0 && self.threads().is_multiple_of(kt) && rows > 0 && self.tn.is_multiple_of(rows)).then(|| self.tn / rows)
    }

    fn accumulators(&self) -> u32 {
        self.tm * self.tn / self.threads().max(1)
    }

    /// The static shared memory of the two buffers (as the source lays them out).
    pub fn shared_bytes(&self) -> u32 {
        let (tm, tn, tk) = (self.tm, self.tn, self.tk);
        2 * match self.variant {
            Variant::Simt => 4 * (tk * tm + tk * (tn + 1)),
            Variant::Tf32 => 4 * (tk * (tm + 8) + tn * (tk + 4)),
            Variant::F16 => 2 * (tk * (tm + 8) + tn * (tk + 8)),
            Variant::I8 | Variant::E4M3 => tm * (tk + 16) + tn * (tk + 16),
        }
    }

    pub fn is_valid(&self, limits: &SmLimits) -> bool {
        let (tm, tn) = (self.tm, self.tn);
        let divides = self.a > 0 && self.b > 0 && tm.is_multiple_of(self.a) && tn.is_multiple_of(self.b);
        // mma warp tiles are whole m16 x n8 tiles.
        let warp_tiles =
            self.variant == Variant::Simt || divides && (tm / self.a).is_multiple_of(16) && (tn / self.b).is_multiple_of(8);
        let t = self.threads();
        divides
            && warp_tiles
            && limits.sm >= self.variant.min_sm()
            && (!self.variant.emulated_on(limits.sm) || self.accumulators() <= 32)
            && self.tk.is_multiple_of(self.variant.mma_k())
            && (32..=limits.max_threads_per_block).contains(&t)
            && t.is_multiple_of(32)
            && self.shared_bytes() <= limits.max_shared_bytes_per_block
            && self.accumulators() <= MAX_ACCUMULATORS
            && self.a_per_thread().is_some_and(|n| n <= MAX_STAGED)
            && self.b_per_thread().is_some_and(|n| n <= MAX_STAGED)
    }

    /// Every valid tactic of a variant, in a fixed order.
    fn all(variant: Variant, limits: &SmLimits) -> Vec<ConvTactic> {
        let tiles: &[(u32, u32, u32, u32)] = if variant == Variant::Simt { &SIMT_TILES } else { &MMA_TILES };
        let mut v = Vec::new();
        for &(tm, tn, a, b) in tiles {
            for tk in variant.tile_ks() {
                let t = ConvTactic { variant, tm, tn, tk, a, b };
                if t.is_valid(limits) {
                    v.push(t);
                }
            }
        }
        v
    }

    /// Estimated registers per thread: accumulators, staged loads, the
    /// loaders' per-row offsets, and a fixed overhead.
    fn registers(&self) -> u32 {
        let a = self.a_per_thread().unwrap_or(0);
        let b = self.b_per_thread().unwrap_or(0);
        (self.accumulators() + 4 * a + 2 * b + 40).min(255)
    }

    /// The heuristic's estimated time of a layer (arbitrary units): see the
    /// parent module.
    fn cost(&self, rows: u64, cols: u64, groups: u64, sms: u64, smem_per_sm: u64) -> f64 {
        let blocks = rows.div_ceil(self.tm as u64) * cols.div_ceil(self.tn as u64) * groups;
        let per_sm = blocks.div_ceil(sms);
        let by_regs = 65536 / (self.threads() * self.registers()).max(1) as u64;
        let by_smem = smem_per_sm / self.shared_bytes().max(1) as u64;
        let by_threads = 2048 / self.threads() as u64;
        let resident = by_regs.min(by_smem).min(by_threads).max(1).min(per_sm);
        let warps = resident * (self.threads() as u64 / 32);
        let efficiency = (warps as f64 / 8.0).min(1.0);
        let tile = (self.tm * self.tn + 16 * (self.tm + self.tn)) as f64;
        per_sm as f64 * tile / efficiency
    }

    fn source(&self, layer: &ConvLayer, idx64: bool) -> KernelSource {
        let shape = match self.variant {
            Variant::Simt => format!("#define THM {}\n#define THN {}\n", self.a, self.b),
            _ => format!("#define WARPS_M {}\n#define WARPS_N {}\n", self.a, self.b),
        };
        let defines = format!(
            "{}#define VARIANT {}\n#define TM {}\n#define TN {}\n#define TK {}\n{shape}#define POINTWISE {}\n#define IDX64 {}\n",
            layer.common_defines(),
            self.variant.code(),
            self.tm,
            self.tn,
            self.tk,
            layer.pointwise as u32,
            idx64 as u32,
        );
        KernelSource { entry: "trtc_conv_igemm".into(), source: format!("{COMMON}\n{MMA}\n{defines}\n{CONV_COMMON}\n{SOURCE}") }
    }
}

/// SMs of the usual part of an architecture (the heuristic's wave model).
fn sm_count(sm: u32) -> u64 {
    match sm {
        86 => 84,
        89 => 128,
        90.. => 132,
        _ => 108,
    }
}

/// Shared memory per SM available to blocks, in bytes.
fn smem_per_sm(sm: u32) -> u64 {
    match sm {
        80 | 87 => 164 * 1024,
        90.. => 228 * 1024,
        _ => 100 * 1024,
    }
}

/// Whether tensor cores are the heuristic's choice for this layer.
fn prefers_mma(layer: &ConvLayer, variant: Variant) -> bool {
    let mg = layer.m / layer.group;
    let k = layer.c / layer.group * layer.kernel.iter().product::<usize>();
    let min_k = if matches!(variant, Variant::I8 | Variant::E4M3) { 32 } else { 16 };
    mg >= 16 && k >= min_k
}

pub(super) fn candidates(layer: &ConvLayer, limits: &SmLimits) -> Selection {
    let Some(mma) = Variant::mma_for(layer.x) else {
        return unsupported(format!("conv: no implicit GEMM for {} storage", layer.x));
    };
    if layer.group > 65535 {
        return unsupported(format!("conv: {} groups exceed the grid's z extent", layer.group));
    }
    let pixels: usize = layer.output.iter().product();
    let rows = layer.n * pixels;
    let cols = layer.m / layer.group;
    if rows >= i32::MAX as usize {
        return unsupported(format!("conv: {rows} GEMM rows exceed 32-bit indexing"));
    }
    // Offsets into x are 32-bit unless x is large (a margin of one image
    // keeps even the out-of-image offsets of the gather in range).
    let idx64 = layer.input_len() >= (1 << 30);
    // Before sm_89 an FP8 layer has CUDA cores only (decoded operands,
    // f32 FMA).
    let order = if limits.sm < mma.min_sm() {
        vec![Variant::Simt]
    } else if prefers_mma(layer, mma) {
        vec![mma, Variant::Simt]
    } else {
        vec![Variant::Simt, mma]
    };
    let (sms, smem) = (sm_count(limits.sm), smem_per_sm(limits.sm));
    let mut out = Vec::new();
    for variant in order {
        let mut tactics = ConvTactic::all(variant, limits);
        let cost = |t: &ConvTactic| t.cost(rows as u64, cols as u64, layer.group as u64, sms, smem);
        tactics.sort_by(|a, b| cost(a).total_cmp(&cost(b)));
        for t in tactics {
            let blocks = (rows as u64).div_ceil(t.tm as u64) * (cols as u64).div_ceil(t.tn as u64);
            if blocks >= i32::MAX as u64 {
                continue;
            }
            let mut args = layer.epilogue_args();
            args.extend(layer.geometry_args());
            args.push(KernelArg::I32(layer.group as i32));
            out.push(Candidate {
                tactic: Tactic::ConvIgemm(t),
                launches: vec![KernelLaunch {
                    kernel: t.source(layer, idx64),
                    grid: [blocks as u32, 1, layer.group as u32],
                    block: [t.threads(), 1, 1],
                    shared_bytes: 0,
                    args,
                }],
            });
        }
    }
    if out.is_empty() {
        return unsupported("conv: no valid implicit-GEMM tactic");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tactic_space_is_valid_and_named_uniquely() {
        let l = SmLimits::for_sm(80);
        for v in [Variant::Simt, Variant::Tf32, Variant::F16, Variant::I8] {
            let all = ConvTactic::all(v, &l);
            assert!(all.len() >= 8, "{v:?}: {}", all.len());
            let mut names: Vec<String> = all.iter().map(|t| Tactic::ConvIgemm(*t).to_string()).collect();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), all.len());
        }
        // Too much shared memory, a warp tile that is not whole mma tiles.
        assert!(!ConvTactic { variant: Variant::Tf32, tm: 128, tn: 128, tk: 32, a: 2, b: 4 }.is_valid(&l));
        assert!(!ConvTactic { variant: Variant::F16, tm: 64, tn: 64, tk: 32, a: 8, b: 1 }.is_valid(&l));
        assert!(ConvTactic { variant: Variant::Tf32, tm: 128, tn: 128, tk: 16, a: 2, b: 4 }.is_valid(&l));
        // FP8 tensor cores from sm_89 only.
        assert!(ConvTactic::all(Variant::E4M3, &l).is_empty());
        assert!(ConvTactic::all(Variant::E4M3, &SmLimits::for_sm(89)).len() >= 8);
    }
}
