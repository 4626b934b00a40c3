//! Matrix products and convolutions: MatMul, Gemm, Conv, ConvTranspose,
//! DeformConv, Einsum, pooling, RoiAlign, Det, the recurrent layers (LSTM, GRU, RNN),
//! Col2Im, DFT and STFT. Matrix multiplies go through `gemm_kernel`: the
//! `matrixmultiply` crate in the exact mode, `sgemm`'s packed kernel in the fast one.

mod gemm_args;
mod sgemm;
mod gemm_kernel;
pub(crate) mod num;
mod window;
mod matmul;
mod gemm;
mod einsum;
mod depthwise;
mod conv_geometry;
mod phase_planes;
mod direct_window;
mod depthwise_f32;
mod conv_packed;
#[cfg(test)]
mod conv_reference;
mod depthwise_phases;
mod conv_direct;
mod conv_dots;
mod conv;
mod conv_transpose;
mod deform_conv;
pub(crate) mod integer;
mod max_pool_f32;
mod pool;
mod unpool;
mod col2im;
mod det;
mod recurrent;
mod roi_align;
mod nms;
mod spectral;

pub use col2im::Col2Im;
pub use conv::Conv;
pub use conv_transpose::ConvTranspose;
pub use deform_conv::DeformConv;
pub use det::Det;
pub use einsum::Einsum;
pub use gemm::Gemm;
pub use gemm_kernel::{gemm_f32, GemmArgs};
pub use integer::{ConvInteger, MatMulInteger};
pub use matmul::MatMul;
pub use nms::NonMaxSuppression;
pub use pool::{Pool, PoolKind};
pub use recurrent::{Recurrent, RecurrentActivation, RecurrentCell, RecurrentDirection};
pub use roi_align::RoiAlign;
pub use spectral::{Dft, Stft};
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
    Det(Det),
    Recurrent(Recurrent),
    Col2Im(Col2Im),
    Dft(Dft),
    Stft(Stft),
    RoiAlign(RoiAlign),
    DeformConv(DeformConv),
    NonMaxSuppression(NonMaxSuppression),
});
