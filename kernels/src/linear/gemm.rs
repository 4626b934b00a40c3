//! Placeholder: filled in by the gemm family.

use crate::{unsupported, LayerIo, Selection, SmLimits};

/// The launches of a gemm layer.
pub fn select(io: &LayerIo<'_>, _limits: &SmLimits) -> Selection {
    unsupported(format!("no CUDA kernel for {} yet", io.op.name()))
}
