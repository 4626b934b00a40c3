//! Fused ops made by the optimizer's fusion passes. Each computes exactly
//! what the chain of ops it replaces computes, in the same order and
//! precision, so the CPU executor's results do not change when a pass
//! fuses; the GPU backend runs each as one kernel.

mod attention;
mod epilogue;
mod linear;
mod pointwise;

pub use attention::{Attention, ScoreScale};
pub use epilogue::{Activation, Epilogue};
pub use linear::{Linear, LinearKind};
pub use pointwise::{Instr, Pointwise, PointwiseBinary};

crate::op_family!(FusedOp => Fused {
    Linear(Linear),
    Attention(Attention),
    Pointwise(Pointwise),
});
