//! Matrix products and convolutions: MatMul, Gemm, Conv, ConvTranspose,
//! pooling. Matrix multiplies go through the `matrixmultiply` crate.

mod gemm_kernel;
mod matmul;

pub use gemm_kernel::{gemm_f32, GemmArgs};
pub use matmul::MatMul;

crate::op_family!(LinalgOp => Linalg {
    MatMul(MatMul),
});
