//! The synthetic layers, one file per kernel family.

mod elementwise;
mod edge;
mod movement;
mod reduce;
mod attention;
mod gemm;
mod conv;
mod control;
mod recurrent;
mod storage;

pub(crate) use attention::*;
pub(crate) use control::*;
pub(crate) use conv::*;
pub(crate) use edge::*;
pub(crate) use elementwise::*;
pub(crate) use gemm::*;
pub(crate) use movement::*;
pub(crate) use recurrent::*;
pub(crate) use reduce::*;
pub(crate) use storage::*;
