//! Model frontends. Only ONNX for now.

pub mod onnx;
