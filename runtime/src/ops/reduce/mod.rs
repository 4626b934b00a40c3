//! Reductions and normalizations: Reduce*, ArgMax/ArgMin, Softmax, TopK,
//! CumSum, BatchNorm, LayerNorm, InstanceNorm, GroupNorm...

mod softmax;

pub use softmax::Softmax;

crate::op_family!(ReduceOp => Reduce {
    Softmax(Softmax),
});
