//! Elementwise ops: unary math, binary arithmetic with numpy broadcasting,
//! comparisons, logic, Where, Clip, Cast.

mod binary;

pub use binary::{Binary, BinaryKind};

crate::op_family!(ElementwiseOp => Elementwise {
    Binary(Binary),
});
