//! trtc's CUDA kernels: the C sources (in `kernels/cuda/`, self-contained,
//! no CUDA headers so NVRTC alone compiles them) and, per kernel family, its
//! tunable parameters (the tactics the autotuner searches) and the code that
//! instantiates a source for one layer.
//!
//! [`candidates`] is the entry point: given a layer (its op and the types of
//! its tensors) and the target's limits, it returns every valid tactic for
//! the layer, each with the launches that compute it, the heuristic choice
//! first; or why the layer has no kernel (it then runs on the host). The
//! autotuner times the candidates; without tuning, [`select`] takes the
//! first. Each family lives in its own module and follows
//! the CPU reference op of the runtime exactly, including the f16 rounding
//! of `HalfIo` layers (load widens to f32, store rounds once).

// Modules are declared lowest layer first, and each uses only modules
// declared above it (checked by `cargo xtask layers`).
pub mod tactic;
pub mod activation;
pub mod elementwise;
pub mod pointwise;
pub mod movement;
pub mod reduce;
pub mod attention;
pub mod linear;
pub mod planner;
pub mod emu;
pub mod nvrtc;

pub use planner::FamilyPlanner;
pub use tactic::Tactic;

use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::precision::PrecisionOp;
use trtc_runtime::ops::Op;
use trtc_runtime::{DType, TensorType};

/// Device helpers every kernel source starts with.
pub const COMMON: &str = include_str!("../cuda/common.cuh");
/// The 8-bit float formats in CUDA (`float8.cuh`): storage casts, Q/DQ and
/// the FP8 GEMM and convolution kernels include it after [`COMMON`].
pub const FLOAT8: &str = include_str!("../cuda/float8.cuh");

/// A kernel ready for NVRTC: its source and the name of its entry point.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelSource {
    pub entry: String,
    pub source: String,
}

/// Limits of a GPU architecture that decide which tactics are valid.
#[derive(Clone, Copy, Debug)]
pub struct SmLimits {
    pub sm: u32,
    pub max_threads_per_block: u32,
    pub max_shared_bytes_per_block: u32,
}

impl SmLimits {
    /// The limits of the compute capabilities trtc targets (sm_80 and up:
    /// 48 KiB of static shared memory per block, 1024 threads).
    pub fn for_sm(sm: u32) -> SmLimits {
        SmLimits { sm, max_threads_per_block: 1024, max_shared_bytes_per_block: 48 * 1024 }
    }
}

/// A layer as the kernel families see it: the op (precision wrappers
/// removed) and the types of its tensors, which say the storage dtype (an
/// `HalfIo` layer's tensors are f16).
#[derive(Clone, Debug)]
pub struct LayerIo<'a> {
    pub op: &'a Op,
    /// `None` is an absent optional input.
    pub inputs: Vec<Option<&'a TensorType>>,
    pub outputs: Vec<&'a TensorType>,
}

/// One launch of one kernel instantiation.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelLaunch {
    pub kernel: KernelSource,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    pub args: Vec<KernelArg>,
}

/// Why a layer has no kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported(pub String);

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One way to compute a layer.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The family and its tactic parameters, unique among the layer's
    /// candidates and stable across builds (the timing cache stores its
    /// name), e.g. `gemm_simt 64x64x8 4x4`.
    pub tactic: Tactic,
    /// The launches, in order, on one stream.
    pub launches: Vec<KernelLaunch>,
}

/// What a family returns for one layer: its valid candidates, the
/// heuristic choice first (never empty when `Ok`).
pub type Selection = Result<Vec<Candidate>, Unsupported>;

/// Shorthand for a family's refusal.
pub fn unsupported<T>(why: impl Into<String>) -> Result<T, Unsupported> {
    Err(Unsupported(why.into()))
}

/// The heuristic (untuned) candidate of a layer.
pub fn select(io: &LayerIo<'_>, limits: &SmLimits) -> Result<Candidate, Unsupported> {
    match candidates(io, limits)?.into_iter().next() {
        Some(c) => Ok(c),
        None => unsupported(format!("{}: no valid tactic", io.op.name())),
    }
}

/// Every valid candidate of a layer, the heuristic choice first.
pub fn candidates(io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let op = match io.op {
        Op::Precision(PrecisionOp::HalfIo(h)) => &h.inner,
        op => op,
    };
    let io = LayerIo { op, ..io.clone() };
    match op {
        Op::Elementwise(_) | Op::Quant(_) => elementwise::candidates(&io, limits),
        Op::Fused(trtc_runtime::ops::fused::FusedOp::Pointwise(p)) => pointwise::candidates(p, &io, limits),
        Op::Fused(trtc_runtime::ops::fused::FusedOp::Attention(_)) => attention::candidates(&io, limits),
        Op::Fused(trtc_runtime::ops::fused::FusedOp::Linear(_)) | Op::Linalg(_) => match op {
            Op::Linalg(
                trtc_runtime::ops::linalg::LinalgOp::Pool(_)
                | trtc_runtime::ops::linalg::LinalgOp::RoiAlign(_)
                | trtc_runtime::ops::linalg::LinalgOp::NonMaxSuppression(_),
            ) => reduce::candidates(&io, limits),
            _ => linear::candidates(&io, limits),
        },
        Op::Precision(PrecisionOp::Int8Linear(_) | PrecisionOp::Fp8Linear(_)) => linear::candidates(&io, limits),
        Op::Reduce(_) => reduce::candidates(&io, limits),
        Op::Movement(_) => movement::candidates(&io, limits),
        Op::Precision(PrecisionOp::HalfIo(_)) => unsupported("nested HalfIo"),
        // Control flow has no kernel of its own: the kernel table runs the
        // steps of an If's branches or a Loop's body as kernels where it
        // can, the control decided on the host.
        Op::Control(_) => unsupported(format!("{}: control flow decided at run time runs on the host", op.name())),
    }
}

/// The CUDA C type that stores `dtype` (f16 is the `f16` struct of
/// `common.cuh`); `None` for types no kernel handles (bf16, f64, and the
/// storage-only 8-bit floats and 4-bit integers, which run on the host).
pub fn c_type(dtype: DType) -> Option<&'static str> {
    Some(match dtype {
        DType::F32 => "float",
        DType::F16 => "f16",
        DType::I8 => "signed char",
        DType::U8 | DType::Bool => "unsigned char",
        DType::I16 => "short",
        DType::U16 => "unsigned short",
        DType::I32 => "int",
        DType::U32 => "unsigned int",
        DType::I64 => "long long",
        DType::U64 => "unsigned long long",
        DType::BF16 | DType::F64 => return None,
        DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ | DType::I4 | DType::U4 => return None,
    })
}

/// Threads per block of the simple one-element-per-thread kernels.
pub const BLOCK_1D: u32 = 256;

/// Grid and block for `n` independent elements, one per thread, with a
/// grid-stride loop in the kernel when `n` needs more than the grid's cap
/// (enough blocks to fill any GPU trtc targets several times over).
pub fn geometry_1d(n: u64) -> ([u32; 3], [u32; 3]) {
    let blocks = n.div_ceil(BLOCK_1D as u64).clamp(1, 65535 * 8);
    ([blocks as u32, 1, 1], [BLOCK_1D, 1, 1])
}
