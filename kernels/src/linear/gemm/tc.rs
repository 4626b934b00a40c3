//! The tensor-core GEMM family (`cuda/gemm_tc.cu`): its tactics, which
//! layers they fit, the cost model that orders them, and instantiation.

use super::problem::Problem;
use crate::linear::gemm::simt::{AbType, GemmSpec, GEMM_COMMON};
pub use crate::tactic::{TcKind, TcTactic};
use crate::{KernelSource, SmLimits, COMMON};

const SOURCE: &str = include_str!("../../../cuda/gemm_tc.cu");
const MMA: &str = include_str!("../../../cuda/mma.cuh");

impl TcKind {
    /// The kind that multiplies operands of type `ab`.
    pub fn for_operands(ab: AbType) -> TcKind {
        match ab {
            AbType::F16 => TcKind::F16,
            AbType::F32 => TcKind::Tf32,
            AbType::I8 => TcKind::S8,
            AbType::F8E4M3 => TcKind::E4M3,
        }
    }

    fn element_bytes(self) -> u32 {
        match self {
            TcKind::F16 => 2,
            TcKind::Tf32 => 4,
            TcKind::S8 | TcKind::E4M3 => 1,
        }
    }

    /// The oldest architecture whose mma.sync takes this kind.
    pub fn min_sm(self) -> u32 {
        match self {
            TcKind::E4M3 => 89,
            _ => 80,
        }
    }

    /// Whether ptxas lowers this kind's mma.sync to other instructions on
    /// `sm`: on Hopper (sm_90) an e4m3 mma.sync becomes E4M3-to-f16
    /// conversions (`F2FP.F16.E4M3.UNPACK_B`) and two f16 HMMAs, whose
    /// temporaries cost registers (Ada, sm_89, has a native QMMA; Hopper's
    /// native FP8 path is wgmma).
    pub fn emulated_on(self, sm: u32) -> bool {
        self == TcKind::E4M3 && sm >= 90
    }

    /// The k-tile depths (in elements) offered: 64 or 128 bytes of K.
    fn depths(self) -> [u32; 2] {
        [64 / self.element_bytes(), 128 / self.element_bytes()]
    }
}

/// Block tiles and warp grids offered, largest first: warp tiles of 64x64
/// down to 16x32, blocks of 32 to 256 threads.
const TILES: [(u32, u32, u32, u32); 11] = [
    (128, 256, 2, 4),
    (256, 128, 4, 2),
    (128, 128, 2, 2),
    (128, 128, 2, 4),
    (128, 64, 2, 2),
    (64, 128, 2, 2),
    (64, 64, 2, 2),
    (64, 32, 2, 1),
    (32, 64, 1, 2),
    (32, 32, 1, 1),
    (16, 64, 1, 2),
];

impl TcTactic {
    pub fn threads(&self) -> u32 {
        self.wm * self.wn * 32
    }

    /// Static shared memory: `stages` buffers of the A and B tiles.
    pub fn shared_bytes(&self) -> u32 {
        self.stages * (self.bm + self.bn) * self.bk * self.kind.element_bytes()
    }

    /// mma tiles per warp along M and N.
    fn warp_tiles(&self) -> (u32, u32) {
        (self.bm / self.wm / 16, self.bn / self.wn / 8)
    }

    /// A rough count of registers per thread: the accumulators, one k-step
    /// of A and B fragments, addressing, and for an 8-bit `[K, N]` B the
    /// blocks of 16 words staged through registers.
    pub fn registers(&self, b_kmajor: bool) -> u32 {
        let (mi, ni) = self.warp_tiles();
        let staged = if matches!(self.kind, TcKind::S8 | TcKind::E4M3) && !b_kmajor {
            16 * ((self.bk / 16) * (self.bn / 4)).div_ceil(self.threads())
        } else {
            0
        };
        mi * ni * 4 + mi * 4 + ni * 2 + 40 + staged
    }

    /// The shape constraints of `gemm_tc.cu` and the target's limits (its
    /// architecture must have the kind's mma). `b_kmajor` is the B layout:
    /// `[N, K]` (true) or `[K, N]`.
    pub fn is_valid(&self, limits: &SmLimits, b_kmajor: bool) -> bool {
        let pow2 = |v: u32| v.is_power_of_two();
        let k_bytes = self.bk * self.kind.element_bytes();
        let shape = pow2(self.bm)
            && pow2(self.bn)
            && self.wm > 0
            && self.wn > 0
            && self.bm.is_multiple_of(self.wm * 16)
            && self.bn.is_multiple_of(self.wn * 16)
            && pow2(k_bytes)
            && k_bytes >= 32
            && self.stages >= 2;
        // The [K, N] layout: ldmatrix.trans for f16 (two chunks per row at
        // least), pairs of chunks spread over 8 bank groups for tf32, blocks
        // of 16 k x 4 columns transposed through registers for 8 bits.
        let b_layout = b_kmajor
            || match self.kind {
                TcKind::F16 => self.bn >= 16,
                TcKind::Tf32 => self.bn.is_multiple_of(32),
                TcKind::S8 | TcKind::E4M3 => self.bk.is_multiple_of(16),
            };
        // An emulated mma leaves room for at most 32 accumulators per
        // thread, and for 64 k of an 8-bit [K, N] B staged through
        // registers (larger tiles spill on sm_90; kernels/tests/gemm.rs
        // compiles every one).
        let (mi, ni) = self.warp_tiles();
        let fits_emulation = !self.kind.emulated_on(limits.sm) || (mi * ni * 4 <= 32 && (b_kmajor || self.bk <= 64));
        shape
            && b_layout
            && fits_emulation
            && limits.sm >= self.kind.min_sm()
            && self.threads() <= limits.max_threads_per_block
            && self.shared_bytes() <= limits.max_shared_bytes_per_block
            && self.registers(b_kmajor) <= 232
            && self.threads() * self.registers(b_kmajor) <= 65536
    }

    /// Every valid tactic of `kind` for the B layout, in a fixed order.
    pub fn all(kind: TcKind, limits: &SmLimits, b_kmajor: bool) -> Vec<TcTactic> {
        let mut v = Vec::new();
        for (bm, bn, wm, wn) in TILES {
            for bk in kind.depths() {
                // Three stages first: among equal estimates, the safer
                // pipeline depth wins.
                for stages in [3, 4, 2] {
                    let t = TcTactic { kind, bm, bn, bk, wm, wn, stages };
                    if t.is_valid(limits, b_kmajor) {
                        v.push(t);
                    }
                }
            }
        }
        v
    }

    pub fn grid(&self, p: &Problem) -> [u64; 3] {
        [p.n.div_ceil(self.bn as usize) as u64, p.m.div_ceil(self.bm as usize) as u64, p.batch() as u64]
    }

    /// The source of this tactic for `spec` (`None` when the spec's types
    /// have no kernel).
    pub fn source(&self, spec: &GemmSpec) -> Option<KernelSource> {
        let kind = match self.kind {
            TcKind::F16 => 0,
            TcKind::Tf32 => 1,
            TcKind::S8 => 2,
            TcKind::E4M3 => 3,
        };
        let defines = format!(
            "{}#define TC_KIND {kind}\n#define B_KMAJOR {}\n#define BM {}\n#define BN {}\n#define BK {}\n#define WM {}\n#define WN {}\n#define STAGES {}\n",
            spec.defines()?,
            spec.trans_b as u8,
            self.bm,
            self.bn,
            self.bk,
            self.wm,
            self.wn,
            self.stages
        );
        Some(KernelSource {
            entry: "trtc_gemm_tc".into(),
            source: format!("{COMMON}\n{MMA}\n{defines}\n{GEMM_COMMON}\n{SOURCE}"),
        })
    }
}

/// Why a layer's GEMM has no tensor-core kernel, or `None` when it has one:
/// A must be K-contiguous, and every row and batch entry of A and B must
/// start 16-byte aligned (cp.async, and the 8-bit `[K, N]` blocks).
pub fn misfit(p: &Problem) -> Option<String> {
    let kind = TcKind::for_operands(p.spec.ab);
    let per_chunk = (16 / kind.element_bytes()) as usize;
    if p.spec.trans_a {
        return Some("A is stored transposed".into());
    }
    let lead_b = if p.spec.trans_b { p.k } else { p.n };
    if !p.k.is_multiple_of(per_chunk) || !lead_b.is_multiple_of(per_chunk) {
        return Some(format!("rows are not 16-byte aligned (K {}, N {})", p.k, p.n));
    }
    if p.sa.iter().chain(&p.sb).any(|s| s % per_chunk as i64 != 0) {
        return Some("batch entries are not 16-byte aligned".into());
    }
    None
}

/// What the cost model knows of an architecture.
#[derive(Clone, Copy, Debug)]
struct Machine {
    sms: u64,
    shared_per_sm: u64,
    threads_per_sm: u64,
    blocks_per_sm: u64,
}

impl Machine {
    fn of(sm: u32) -> Machine {
        // A100 (sm_80), A10/A40/RTX 30 (sm_86), Orin (sm_87), L4/L40/RTX 40
        // (sm_89), H100/H200 (sm_90): a typical part of each.
        let (sms, shared_kib, threads, blocks) = match sm {
            80 => (108, 164, 2048, 32),
            86 => (84, 100, 1536, 16),
            87 => (16, 164, 1536, 16),
            89 => (100, 100, 1536, 24),
            90 => (132, 228, 2048, 32),
            _ => (108, 100, 1536, 16),
        };
        Machine { sms, shared_per_sm: shared_kib * 1024, threads_per_sm: threads, blocks_per_sm: blocks }
    }
}

/// Tensor-core multiply-adds per clock and SM with mma.sync (A100's rates;
/// only their ratio to the other terms matters).
fn macs_per_clock(kind: TcKind) -> f64 {
    match kind {
        TcKind::F16 => 1024.0,
        TcKind::Tf32 => 512.0,
        TcKind::S8 | TcKind::E4M3 => 2048.0,
    }
}

/// Clocks from issuing a k-tile's copies to using it (global memory
/// latency); `stages - 1` k-tiles are in flight at once.
const LOAD_LATENCY: f64 = 700.0;
/// Clocks a block spends outside its k-loop (prologue, epilogue, launch).
const BLOCK_OVERHEAD: f64 = 1500.0;

/// The estimated time of `t` on `p`, in clocks: whole waves of blocks over
/// the SMs (as many resident per SM as threads, registers and shared memory
/// allow), each k-step of a wave taking the longer of the SM's compute time
/// for its resident blocks and the load latency the pipeline leaves
/// exposed. Compute runs below the tensor cores' rate when the tiles'
/// shared-memory traffic per multiply-add (ldmatrix reads of the warp tile,
/// cp.async writes of the block tile) exceeds the SM's 128 bytes per clock,
/// or when fewer than 4 warps are resident.
pub fn cost(t: &TcTactic, p: &Problem, sm: u32) -> f64 {
    let mach = Machine::of(sm);
    let threads = t.threads() as u64;
    let regs = (t.registers(p.spec.trans_b) as u64).div_ceil(8) * 8;
    let occupancy = (mach.threads_per_sm / threads)
        .min(mach.shared_per_sm / (t.shared_bytes() as u64 + 1024))
        .min(65536 / (threads * regs))
        .min(mach.blocks_per_sm)
        .max(1);
    // Shared-memory bytes per multiply-add at 2 bytes per element (tf32
    // moves twice the bytes at half the rate, s8 half at twice: the same).
    let traffic = |a: f64, b: f64| 2.0 * (a + b) / (a * b);
    let (wtm, wtn) = ((t.bm / t.wm) as f64, (t.bn / t.wn) as f64);
    let bytes_per_mac = traffic(wtm, wtn) + traffic(t.bm as f64, t.bn as f64);
    let rate = macs_per_clock(t.kind) * (128.0 / 1024.0 / bytes_per_mac).min(1.0);
    let latency = LOAD_LATENCY / (t.stages - 1) as f64;
    let k_steps = p.k.div_ceil(t.bk as usize) as f64;
    let step_macs = t.bm as f64 * t.bn as f64 * t.bk as f64;
    let wave = |blocks_per_sm: u64| {
        let warps = (blocks_per_sm * threads / 32) as f64;
        let compute = blocks_per_sm as f64 * step_macs / (rate * (warps / 4.0).min(1.0));
        k_steps * compute.max(latency) + BLOCK_OVERHEAD
    };
    let tiles = (p.m.div_ceil(t.bm as usize) * p.n.div_ceil(t.bn as usize) * p.batch()) as u64;
    let slots = mach.sms * occupancy;
    let (full, rest) = (tiles / slots, tiles % slots);
    let mut time = full as f64 * wave(occupancy);
    if rest > 0 {
        time += wave(rest.div_ceil(mach.sms));
    }
    time
}

/// The valid tactics for `p` (which must fit, see [`misfit`]), cheapest
/// first by [`cost`].
pub fn ranked(p: &Problem, limits: &SmLimits) -> Vec<TcTactic> {
    let kind = TcKind::for_operands(p.spec.ab);
    let mut v: Vec<(f64, TcTactic)> = TcTactic::all(kind, limits, p.spec.trans_b)
        .into_iter()
        .filter(|t| p.m.div_ceil(t.bm as usize) <= 65535)
        .map(|t| (cost(&t, p, limits.sm), t))
        .collect();
    // Stable: among equal costs, the fixed order of `all` (larger tiles).
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v.into_iter().map(|(_, t)| t).collect()
}
