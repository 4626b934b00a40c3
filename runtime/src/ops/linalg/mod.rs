//! Matrix products and convolutions: MatMul, Gemm, Conv, ConvTranspose,
//! Einsum, pooling. Matrix multiplies go through the `matrixmultiply` crate.

mod conv;
mod conv_transpose;
mod einsum;
mod gemm;
mod gemm_kernel;
pub(crate) mod integer;
mod matmul;
pub(crate) mod num;
mod pool;
mod unpool;
mod window;

pub use conv::Conv;
pub use conv_transpose::ConvTranspose;
pub use einsum::Einsum;
pub use gemm::Gemm;
pub use gemm_kernel::{gemm_f32, GemmArgs};
pub use integer::{ConvInteger, MatMulInteger};
pub use matmul::MatMul;
pub use pool::{Pool, PoolKind};
pub use unpool::MaxUnpool;
pub use window::Window;

crate::op_family!(LinalgOp => Linalg {
    MatMul(MatMul),
    Gemm(Gemm),
    Conv(Conv),
    ConvTranspose(ConvTranspose),
    Einsum(Einsum),
    Pool(Pool),
    MatMulInteger(MatMulInteger),
    ConvInteger(ConvInteger),
    MaxUnpool(MaxUnpool),
});
