//! Elementwise ops: unary math, binary arithmetic with numpy broadcasting,
//! comparisons, logic, Pow, Where, Clip, Cast.

mod broadcast;
mod erf;
mod fast_f32;
mod float;
mod binary;
mod cast;
mod classify;
mod clip;
mod compare;
mod not;
mod pow;
mod select;
mod unary;

pub use binary::{Binary, BinaryKind};
pub use cast::{Cast, CastNoSaturate};
pub use classify::{IsInf, IsNaN};
pub use clip::Clip;
pub use compare::{Compare, CompareKind};
pub use not::{BitwiseNot, Not};
pub use pow::Pow;
pub use select::Where;
pub use unary::{apply_in_place_f32, apply_in_place_f32_in, Unary, UnaryKind};

crate::op_family!(ElementwiseOp => Elementwise {
    Unary(Unary),
    Binary(Binary),
    Compare(Compare),
    Pow(Pow),
    Where(Where),
    Clip(Clip),
    Cast(Cast),
    Not(Not),
    BitwiseNot(BitwiseNot),
    IsNaN(IsNaN),
    IsInf(IsInf),
    CastNoSaturate(CastNoSaturate),
});
