//! trtc's CUDA kernels: the C sources (in `kernels/cuda/`, self-contained,
//! no CUDA headers so NVRTC alone compiles them) and, per kernel family, its
//! tunable parameters (the tactics the autotuner searches) and the code that
//! instantiates a source for one node.
//!
//! Families so far: `gemm` (SIMT f32 GEMM with a fused epilogue) and
//! `pointwise` (one kernel generated per pointwise expression).

pub mod activation;
pub mod gemm;
pub mod pointwise;

/// Device helpers every kernel source starts with.
pub const COMMON: &str = include_str!("../cuda/common.cuh");

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
