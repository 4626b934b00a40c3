//! Op semantics, written once.
//!
//! Every op the IR and the engine can hold is defined here: its shape and
//! dtype inference ([`OpImpl::infer`]) and its CPU reference implementation
//! ([`OpImpl::eval`]). Constant folding, calibration, the CPU executor and the
//! GPU tests all use these definitions. Ops are grouped in families, one
//! folder each, one op (or a few closely related ones) per file.
//!
//! Ops hold only static attributes: anything ONNX passes as a tensor input but
//! that decides shapes (Reshape's shape, Slice's starts, ...) is resolved by
//! the compiler at build time and stored as an attribute.

use crate::error::Result;
use crate::tensor::{Tensor, TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

pub mod util;
pub mod elementwise;
pub mod linalg;
pub mod movement;
pub mod quant;
pub mod reduce;
pub mod fused;
pub mod precision;
pub mod control;

/// What every op implements.
pub trait OpImpl: std::fmt::Debug {
    /// The op's name as shown in dumps and `inspect`, e.g. `"Conv"`.
    fn name(&self) -> &'static str;

    /// Output dtypes and shapes for the given inputs; `None` is an absent
    /// optional input. Must reject every input combination `eval` cannot run,
    /// so that an engine whose plan passes inference never fails in `eval`
    /// on shapes.
    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>>;

    /// Computes the outputs. `outputs` have the types `infer` returned and
    /// never alias the inputs.
    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()>;

    /// Whether the sizes of the outputs depend on the input values
    /// (NonMaxSuppression): `infer` then gives the largest they can be, the
    /// room the memory plan holds, and [`OpImpl::eval_sized`] their actual
    /// shapes.
    fn data_dependent(&self) -> bool {
        false
    }

    /// Like [`OpImpl::eval`], returning each output's actual shape: its
    /// values fill the start of the output's room, row-major in that shape.
    fn eval_sized(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<Vec<Vec<usize>>> {
        self.eval(inputs, outputs)?;
        Ok(outputs.iter().map(|o| o.shape.to_vec()).collect())
    }

    /// For a data-dependent op whose outputs have no size bound known when
    /// the engine is built (a Loop's stacked scan outputs, an If's branch
    /// outputs): computes them as tensors of their own, which the executor
    /// keeps in its arena when they fit the room `infer` gave and on the
    /// heap otherwise. `None`: the op writes into its room through
    /// [`OpImpl::eval_sized`].
    fn eval_unbounded(&self, _inputs: &[Option<TensorView<'_>>]) -> Option<Result<Vec<Tensor>>> {
        None
    }
}

/// Any op of any family.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    Elementwise(elementwise::ElementwiseOp),
    Reduce(reduce::ReduceOp),
    Linalg(linalg::LinalgOp),
    Movement(movement::MovementOp),
    Quant(quant::QuantOp),
    Fused(fused::FusedOp),
    Precision(precision::PrecisionOp),
    Control(control::ControlOp),
}

impl Op {
    /// The op as the engine stores it (postcard): every attribute, in a
    /// fixed order, and nothing else. Equal ops encode to equal bytes, and
    /// `runtime/tests/engine_encoding.rs` pins the encoding, so it changes
    /// only with [`FORMAT_VERSION`](crate::engine::FORMAT_VERSION); the
    /// timing cache keys layers by it.
    pub fn encoded(&self) -> Vec<u8> {
        // Ops are plain data (numbers, strings, vectors, enums), which
        // postcard always encodes.
        postcard::to_stdvec(self).expect("an op always encodes")
    }

    pub fn as_impl(&self) -> &dyn OpImpl {
        match self {
            Op::Elementwise(op) => op.as_impl(),
            Op::Reduce(op) => op.as_impl(),
            Op::Linalg(op) => op.as_impl(),
            Op::Movement(op) => op.as_impl(),
            Op::Quant(op) => op.as_impl(),
            Op::Fused(op) => op.as_impl(),
            Op::Precision(op) => op.as_impl(),
            Op::Control(op) => op.as_impl(),
        }
    }

    pub fn name(&self) -> &'static str {
        self.as_impl().name()
    }

    /// The name with the precision of a reduced-precision layer, e.g.
    /// `FusedConv@fp16` (int8 ops carry it in their name already), or the
    /// op a `ShapedByValues` computes (`TopK@values`).
    pub fn display_name(&self) -> String {
        match self {
            Op::Precision(precision::PrecisionOp::HalfIo(_)) => format!("{}@fp16", self.name()),
            Op::Control(control::ControlOp::ShapedByValues(s)) => format!("{}@values", s.op.onnx_op()),
            _ => self.name().to_string(),
        }
    }

    /// The op a precision wrapper runs, or the op itself.
    pub fn unwrapped(&self) -> &Op {
        match self {
            Op::Precision(precision::PrecisionOp::HalfIo(h)) => &h.inner,
            _ => self,
        }
    }

    /// The arithmetic this op runs in, given its output types: int8 layers,
    /// f16-wrapped layers and ops that produce f16 are reduced precision.
    pub fn precision(&self, outputs: &[TensorType]) -> precision::Precision {
        match self {
            Op::Precision(precision::PrecisionOp::Int8Linear(_)) => precision::Precision::Int8,
            Op::Precision(precision::PrecisionOp::Fp8Linear(_)) => precision::Precision::Fp8,
            Op::Precision(precision::PrecisionOp::HalfIo(_)) => precision::Precision::Fp16,
            _ if outputs.iter().any(|t| t.dtype == crate::dtype::DType::F16) => precision::Precision::Fp16,
            _ => precision::Precision::Fp32,
        }
    }

    pub fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        self.as_impl().infer(inputs)
    }

    /// Runs the op on owned tensors and returns owned outputs. Used by constant
    /// folding and tests; the executor uses [`OpImpl::eval`] on its arena.
    pub fn eval_owned(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>> {
        let views: Vec<Option<TensorView>> = inputs.iter().map(|t| t.map(|t| t.view())).collect();
        self.eval_views(&views)
    }

    /// Runs the op on views and returns owned outputs of their actual
    /// types (for sub-plans, which have no arena).
    pub fn eval_views(&self, inputs: &[Option<TensorView<'_>>]) -> Result<Vec<Tensor>> {
        if let Some(outputs) = self.as_impl().eval_unbounded(inputs) {
            return outputs;
        }
        let types: Vec<Option<TensorType>> = inputs.iter().map(|t| t.map(|t| t.ty())).collect();
        let types: Vec<Option<&TensorType>> = types.iter().map(Option::as_ref).collect();
        let out_types = self.infer(&types)?;
        let mut outputs = out_types.into_iter().map(Tensor::zeros).collect::<Result<Vec<_>>>()?;
        let mut out_views: Vec<TensorViewMut> = outputs.iter_mut().map(|t| t.view_mut()).collect();
        let shapes = self.as_impl().eval_sized(inputs, &mut out_views)?;
        drop(out_views);
        if !self.as_impl().data_dependent() {
            return Ok(outputs);
        }
        outputs
            .into_iter()
            .zip(shapes)
            .map(|(t, shape)| {
                let ty = TensorType::new(t.dtype(), shape);
                let n = ty.checked_bytes().filter(|&n| n <= t.bytes().len());
                let n = n.ok_or_else(|| crate::Error::op(format!("{}: an output larger than its room", self.name())))?;
                Tensor::from_bytes(ty, &t.bytes()[..n])
            })
            .collect()
    }
}

/// Implements `as_impl` and `From<Variant>` for a family enum whose variants
/// each wrap one op struct.
#[macro_export]
macro_rules! op_family {
    ($family:ident => $outer:ident { $($variant:ident($ty:ty)),* $(,)? }) => {
        #[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
        pub enum $family {
            $($variant($ty)),*
        }

        impl $family {
            pub fn as_impl(&self) -> &dyn $crate::ops::OpImpl {
                match self {
                    $($family::$variant(op) => op),*
                }
            }
        }

        impl From<$family> for $crate::ops::Op {
            fn from(op: $family) -> $crate::ops::Op {
                $crate::ops::Op::$outer(op)
            }
        }

        $(
            impl From<$ty> for $crate::ops::Op {
                fn from(op: $ty) -> $crate::ops::Op {
                    $crate::ops::Op::$outer($family::$variant(op))
                }
            }
        )*
    };
}

/// Fetches input `i`, failing when it is absent or out of range.
pub fn input<T: Copy>(inputs: &[Option<T>], i: usize, op: &str) -> Result<T> {
    match inputs.get(i) {
        Some(Some(t)) => Ok(*t),
        _ => Err(crate::error::Error::op(format!("{op}: missing input {i}"))),
    }
}

/// Fetches optional input `i` (absent when out of range).
pub fn opt_input<T: Copy>(inputs: &[Option<T>], i: usize) -> Option<T> {
    inputs.get(i).copied().flatten()
}
