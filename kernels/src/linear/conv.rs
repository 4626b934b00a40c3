//! Placeholder: filled in by the conv family.

use crate::{unsupported, LayerIo, Selection, SmLimits};

/// The candidates of a conv layer.
pub fn candidates(io: &LayerIo<'_>, _limits: &SmLimits) -> Selection {
    unsupported(format!("no CUDA kernel for {} yet", io.op.name()))
}
