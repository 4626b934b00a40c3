//! The CUDA build side: finding NVRTC, compiling kernels to cubins.

pub mod nvrtc;
