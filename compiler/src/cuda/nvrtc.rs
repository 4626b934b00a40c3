//! NVRTC lives with the kernels (their tests compile them without the
//! compiler crate); re-exported here for the build side.

pub use trtc_kernels::nvrtc::*;
