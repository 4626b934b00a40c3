//! Which nodes constant folding leaves in place even when every input is a
//! constant. The frontend folds while importing and the constant-folding
//! pass folds after every rewrite; both ask here.

use trtc_runtime::ops::quant::QuantOp;
use trtc_runtime::{DType, Op};

/// Whether constant folding must keep this node: a DequantizeLinear of an
/// int8 or FP8 (E4M3FN) tensor (a quantized weight), which the Q/DQ rewrite
/// (`precision`) folds into an int8 or FP8 layer instead, so that the layer
/// sees the quantized weight.
pub fn keeps_weight_dequantize(op: &Op, first_input: Option<DType>) -> bool {
    matches!(op, Op::Quant(QuantOp::DequantizeLinear(_))) && matches!(first_input, Some(DType::I8 | DType::F8E4M3FN))
}
