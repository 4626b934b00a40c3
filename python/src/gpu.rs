//! An engine loaded on a GPU, as one owned value.

use std::sync::Arc;
use trtc_runtime::executor::cuda::CudaEngine;

type CudaEngineOf<'a> = CudaEngine<'a>;

self_cell::self_cell!(
    /// An engine loaded on a GPU, owning the engine it borrows.
    pub struct GpuEngine {
        owner: Arc<trtc_runtime::Engine>,
        #[covariant]
        dependent: CudaEngineOf,
    }
);
