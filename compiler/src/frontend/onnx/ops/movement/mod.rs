//! Converters for the runtime's `movement` op family. Everything ONNX passes
//! as a tensor input that decides shapes (shape, axes, starts/ends, pads,
//! repeats, scales/sizes, ...) is read here at build time and stored in the
//! runtime op as a static attribute.

use super::Registry;
use crate::frontend::onnx::ctx::Ctx;
use crate::ir::Port;
use anyhow::{anyhow, bail, Result};
use trtc_runtime::ops::control::{ShapedByValues, ValueShapedOp};
use trtc_runtime::ops::movement::{DynamicReshape, Reshape, ReshapeDim};
use trtc_runtime::{DType, Tensor};

mod constants;
mod index;
mod pad_resize;
mod sampling;
mod shape;

pub fn register(r: &mut Registry) {
    shape::register(r);
    index::register(r);
    pad_resize::register(r);
    sampling::register(r);
    constants::register(r);
}

/// Largest constant (in bytes) a converter materializes at build time.
const MAX_CONSTANT_BYTES: usize = 1 << 30;

/// Resolves a possibly negative axis against `rank`.
fn axis(a: i64, rank: usize) -> Result<usize> {
    trtc_runtime::ops::util::normalize_axis(a, rank).map_err(|e| anyhow!("{e}"))
}

/// Resolves possibly negative axes against `rank`, rejecting repeats.
fn axes(a: &[i64], rank: usize) -> Result<Vec<usize>> {
    trtc_runtime::ops::util::normalize_axes(a, rank).map_err(|e| anyhow!("{e}"))
}

/// An integer list given as an attribute before `opset` and as input `i`
/// (which must be constant) from `opset` on. `None` when absent.
fn ints_attr_or_input(ctx: &Ctx, attr: &str, i: usize, since: i64) -> Result<Option<Vec<i64>>> {
    if ctx.opset < since {
        Ok(ctx.attrs.ints(attr)?)
    } else {
        ctx.opt_const_ints(i, attr)
    }
}

/// Non-negative dimensions from a constant shape-like list.
fn dims(values: &[i64], what: &str) -> Result<Vec<usize>> {
    values.iter().map(|&v| usize::try_from(v).map_err(|_| anyhow!("{what} has a negative value {v}"))).collect()
}

/// Reshapes `x` to `shape` (a no-op when it already has that shape). A
/// tensor whose size depends on the data gets a `DynamicReshape` that
/// follows its sizes at run time, each output axis taken from the input
/// axis it matches (see [`follow_sizes`]).
fn reshape_to(ctx: &mut Ctx, x: Port, shape: Vec<usize>) -> Result<Port> {
    let from = ctx.ty(x).shape.clone();
    if ctx.graph.is_data_sized(x) {
        if let Some(dims) = follow_sizes(&from, &shape) {
            return ctx.op1(DynamicReshape { dims }, &[Some(x)]);
        }
        bail!("cannot follow the sizes of {from:?}, which depend on the data, into {shape:?}");
    }
    if from == shape && !ctx.keep_identity_reshapes {
        return Ok(x);
    }
    ctx.op1(Reshape { shape }, &[Some(x)])
}

/// The axes of a reshape from `from` to `to` (two room shapes of a tensor
/// sized by the data) as sizes read at run time: groups of input and output
/// axes with equal products are matched left to right; an output axis
/// alone against one input axis copies it, one against several input axes
/// is their product, unit axes are fixed, and of one input axis split into
/// several output axes the first is inferred from the element count, the
/// others fixed at their room sizes. `None` when two groups would need
/// inferring.
pub(crate) fn follow_sizes(from: &[usize], to: &[usize]) -> Option<Vec<ReshapeDim>> {
    let mut dims = Vec::with_capacity(to.len());
    let (mut i, mut j) = (0, 0);
    let mut inferred = false;
    while j < to.len() {
        if to[j] == 1 {
            dims.push(ReshapeDim::Fixed(1));
            j += 1;
            continue;
        }
        while i < from.len() && from[i] == 1 {
            i += 1;
        }
        if i < from.len() && from[i] == to[j] {
            dims.push(ReshapeDim::Copy(i));
            i += 1;
            j += 1;
            continue;
        }
        // A group: grow the smaller side until the products meet.
        let (mut a, mut b) = (*from.get(i)? as u128, to[j] as u128);
        let (i0, j0) = (i, j);
        i += 1;
        j += 1;
        while a != b {
            if a < b {
                a *= *from.get(i)? as u128;
                i += 1;
            } else {
                b *= *to.get(j)? as u128;
                j += 1;
            }
        }
        if j == j0 + 1 {
            dims.push(ReshapeDim::Merge { start: i0, end: i });
            continue;
        }
        if inferred {
            return None;
        }
        inferred = true;
        dims.push(ReshapeDim::Infer);
        dims.extend(to[j0 + 1..j].iter().map(|&d| ReshapeDim::Fixed(d)));
    }
    // Trailing unit input axes are dropped; anything else left is a mismatch.
    from[i..].iter().all(|&d| d == 1).then_some(dims)
}

/// `op` whose shape-deciding input is read when the layer runs (see
/// `ShapedByValues`): when that input is computed at run time and has a
/// room value ([`Ctx::room_value`]), or the data's size depends on the data
/// (a constant target then still meets the data's actual shape). `None`
/// otherwise: the converter reads a constant as usual.
pub(crate) fn shaped_by_values(ctx: &mut Ctx, op: ValueShapedOp) -> Result<Option<Vec<Port>>> {
    let inputs: Vec<Option<Port>> = (0..op.inputs()).map(|i| ctx.input(i).map(Some)).collect::<Result<_>>()?;
    shaped_by_values_of(ctx, op, &inputs)
}

/// [`shaped_by_values`] with the op's inputs in its own order (where it is
/// not the ONNX node's).
pub(crate) fn shaped_by_values_of(ctx: &mut Ctx, op: ValueShapedOp, inputs: &[Option<Port>]) -> Result<Option<Vec<Port>>> {
    let (si, n) = (op.shape_input(), op.inputs());
    if inputs.len() != n {
        bail!("{}: {} inputs, expected {n}", op.onnx_op(), inputs.len());
    }
    let data = if si == 0 { None } else { inputs[0] };
    let data_sized = data.is_some_and(|x| ctx.graph.is_data_sized(x));
    if inputs[si..].iter().all(|&p| p.is_some_and(|p| ctx.konst(p).is_some())) && !data_sized {
        return Ok(None);
    }
    let Some(values) =
        inputs[si..].iter().map(|&p| p.and_then(|p| ctx.room_value_of(p)).cloned()).collect::<Option<Vec<Tensor>>>()
    else {
        return Ok(None);
    };
    let views: Vec<_> = values.iter().map(Tensor::view).collect();
    let data_ty = data.map(|x| ctx.ty(x).clone());
    let room = match (op.output_types(data_ty.as_ref(), &views), &data_ty) {
        (Ok(room), _) => room,
        // In a body whose inputs are guessed, a guess that gives no valid
        // room (a keypoint heatmap resized by a box's size of 0) takes the
        // data's own: each run computes the actual output anyway.
        (Err(_), Some(d)) if ctx.in_body && op.shape_input() > 0 && !matches!(op, ValueShapedOp::TopK { .. }) => vec![d.clone()],
        (Err(e), _) => bail!("at the largest sizes: {e}"),
    };
    ctx.op(ShapedByValues { op, room }, inputs).map(Some)
}

/// Checks that a constant of `len` elements of `dtype` is small enough to build.
fn check_constant_size(len: usize, dtype: DType) -> Result<()> {
    match len.checked_mul(dtype.size()) {
        Some(n) if n <= MAX_CONSTANT_BYTES => Ok(()),
        _ => bail!("the constant output would hold {len} elements of {dtype}, too large to build"),
    }
}

/// A tensor of `dtype` from f64 values (rounded toward zero for integers,
/// non-zero for booleans).
pub(crate) fn tensor_from_f64(dtype: DType, shape: Vec<usize>, values: &[f64]) -> Result<Tensor> {
    use half::{bf16, f16};
    let t = match dtype {
        DType::F32 => Tensor::from_vec(shape, values.iter().map(|&v| v as f32).collect()),
        DType::F64 => Tensor::from_vec(shape, values.to_vec()),
        DType::F16 => Tensor::from_vec(shape, values.iter().map(|&v| f16::from_f64(v)).collect()),
        DType::BF16 => Tensor::from_vec(shape, values.iter().map(|&v| bf16::from_f64(v)).collect()),
        DType::I8 => Tensor::from_vec(shape, values.iter().map(|&v| v as i8).collect()),
        DType::I16 => Tensor::from_vec(shape, values.iter().map(|&v| v as i16).collect()),
        DType::I32 => Tensor::from_vec(shape, values.iter().map(|&v| v as i32).collect()),
        DType::I64 => Tensor::from_vec(shape, values.iter().map(|&v| v as i64).collect()),
        DType::U8 => Tensor::from_vec(shape, values.iter().map(|&v| v as u8).collect()),
        DType::U16 => Tensor::from_vec(shape, values.iter().map(|&v| v as u16).collect()),
        DType::U32 => Tensor::from_vec(shape, values.iter().map(|&v| v as u32).collect()),
        DType::U64 => Tensor::from_vec(shape, values.iter().map(|&v| v as u64).collect()),
        DType::Bool => {
            let b: Vec<bool> = values.iter().map(|&v| v != 0.0).collect();
            Tensor::from_bools(shape, &b)
        }
        // The storage-only types: converted as Cast converts.
        d => return crate::frontend::onnx::ops::cast(d, Tensor::from_vec(shape, values.to_vec())?),
    };
    t.map_err(|e| anyhow!("{e}"))
}

/// A tensor of `shape` whose every element is the single element of `value`.
fn filled(shape: Vec<usize>, value: &Tensor) -> Result<Tensor> {
    if value.len() != 1 {
        bail!("expected a one-element value, got {:?}", value.shape());
    }
    let n: usize = shape.iter().product();
    check_constant_size(n, value.dtype())?;
    let bytes = value.bytes().repeat(n);
    Tensor::from_bytes(trtc_runtime::TensorType::new(value.dtype(), shape), &bytes).map_err(|e| anyhow!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::follow_sizes;
    use trtc_runtime::ops::movement::ReshapeDim::*;

    #[test]
    fn reshapes_of_tensors_sized_by_the_data_follow_their_sizes() {
        assert_eq!(follow_sizes(&[1000], &[1000, 1]), Some(vec![Copy(0), Fixed(1)]));
        assert_eq!(follow_sizes(&[1, 1000, 4], &[1000, 4]), Some(vec![Copy(1), Copy(2)]));
        assert_eq!(follow_sizes(&[1000, 4], &[4000]), Some(vec![Merge { start: 0, end: 2 }]));
        assert_eq!(follow_sizes(&[4000], &[1000, 4]), Some(vec![Infer, Fixed(4)]));
        assert_eq!(follow_sizes(&[6, 10, 4], &[60, 4]), Some(vec![Merge { start: 0, end: 2 }, Copy(2)]));
        let flatten = vec![Merge { start: 0, end: 2 }, Merge { start: 2, end: 4 }];
        assert_eq!(follow_sizes(&[100, 91, 28, 28], &[9100, 784]), Some(flatten));
        assert_eq!(follow_sizes(&[60, 20], &[6, 10, 4, 5]), None);
        assert_eq!(follow_sizes(&[6, 4], &[6, 5]), None);
    }
}
