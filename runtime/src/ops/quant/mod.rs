//! Quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
//! and the quantized products QLinearMatMul and QLinearConv (their integer
//! kernels live with the other matrix products in `linalg`).

mod common;
mod dequantize;
mod dynamic_quantize;
mod qlinear;
mod quantize;

pub use common::int_range;
pub use dequantize::DequantizeLinear;
pub use dynamic_quantize::DynamicQuantizeLinear;
pub use qlinear::{QLinearConv, QLinearMatMul};
pub use quantize::QuantizeLinear;

crate::op_family!(QuantOp => Quant {
    QuantizeLinear(QuantizeLinear),
    DequantizeLinear(DequantizeLinear),
    DynamicQuantizeLinear(DynamicQuantizeLinear),
    QLinearMatMul(QLinearMatMul),
    QLinearConv(QLinearConv),
});
