//! Data movement: reshape, transpose, slice, concat, gather, pad, resize...

mod reshape;

pub use reshape::Reshape;

crate::op_family!(MovementOp => Movement {
    Reshape(Reshape),
});
