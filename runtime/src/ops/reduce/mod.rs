//! Reductions and normalizations: Reduce*, ArgMax/ArgMin, Softmax, TopK,
//! CumSum, BatchNorm, LayerNorm, InstanceNorm, GroupNorm...

mod common;
mod arg;
mod batchnorm;
mod cumsum;
mod group_norm;
mod layer_norm;
mod lp_norm;
mod lrn;
mod mvn;
mod nll_loss;
#[allow(clippy::module_inception)]
mod reduce;
mod softmax;
mod topk;

pub use arg::{ArgKind, ArgMinMax};
pub use batchnorm::BatchNorm;
pub use cumsum::CumSum;
pub use group_norm::{GroupNorm, InstanceNorm};
pub use layer_norm::LayerNorm;
pub use lp_norm::LpNorm;
pub use lrn::Lrn;
pub use mvn::Mvn;
pub use nll_loss::{LossReduction, NllLoss};
pub use reduce::{Reduce, ReduceKind};
pub use softmax::{Softmax, SoftmaxKind};
pub use topk::TopK;

crate::op_family!(ReduceOp => Reduce {
    Reduce(Reduce),
    ArgMinMax(ArgMinMax),
    Softmax(Softmax),
    CumSum(CumSum),
    TopK(TopK),
    BatchNorm(BatchNorm),
    InstanceNorm(InstanceNorm),
    GroupNorm(GroupNorm),
    LayerNorm(LayerNorm),
    LpNorm(LpNorm),
    Lrn(Lrn),
    Mvn(Mvn),
    NllLoss(NllLoss),
});
