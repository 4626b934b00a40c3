//! Placeholder: filled in by the reduce family.

use crate::{unsupported, LayerIo, Selection, SmLimits};

/// The candidates of a reduce layer.
pub fn candidates(io: &LayerIo<'_>, _limits: &SmLimits) -> Selection {
    unsupported(format!("no CUDA kernel for {} yet", io.op.name()))
}
