//! Quantization: QuantizeLinear, DequantizeLinear (and later the int8 kernels).

mod dequantize;

pub use dequantize::DequantizeLinear;

crate::op_family!(QuantOp => Quant {
    DequantizeLinear(DequantizeLinear),
});
