//! Ops whose output shape is read from an input's values at run time, like
//! TensorRT's shape tensors: TopK with a computed `k`, Reshape and Expand to
//! a computed shape, ConstantOfShape of a computed shape, Range and Slice
//! with computed bounds, Resize to computed sizes or scales, Pad by
//! computed pads, Tile by computed repeats. A detector computes those values from the sizes of
//! tensors sized by the data (`k = min(1000, number of candidates)`), or
//! from its input image's sizes in an engine that reads them at run time
//! (resize by `min(800 / shorter side, 1333 / longer side)`, pad to a
//! multiple of 32), so they are known only when the layer runs. Such a layer is itself sized by the data: `infer` gives the
//! room the build chose (what the layer gives when every tensor sized by the
//! data fills its room), and the run computes the actual output as a tensor
//! of its own, which the executor keeps in the arena when it fits that room
//! and on the heap otherwise.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::movement::reshape::resolve_reshape;
use crate::ops::movement::{resize_scales_and_sizes, AspectPolicy, Expand, Pad, PadMode, Resize, ResizeBy, Slice, Tile};
use crate::ops::reduce::TopK;
use crate::ops::util::broadcast_shapes;
use crate::ops::{input, Op, OpImpl};
use crate::tensor::{Tensor, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

/// Which op, with its attributes; the inputs are ONNX's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ValueShapedOp {
    /// Inputs: data, `k` (one integer).
    TopK { axis: usize, largest: bool, sorted: bool },
    /// Inputs: data, shape (ONNX Reshape: 0 copies, -1 infers).
    Reshape { allowzero: bool },
    /// Inputs: data, shape (broadcast with the data's shape).
    Expand,
    /// Input: shape; every element is `value` (one element of `dtype`).
    ConstantOfShape { dtype: DType, value: Vec<u8> },
    /// Inputs: start, limit, delta (scalars of one numeric type).
    Range,
    /// Inputs: data, starts, ends (ONNX Slice; `axes` normalized, `steps`
    /// non-zero, both known when the engine is built).
    Slice { axes: Vec<usize>, steps: Vec<i64> },
    /// Inputs: data, scales (floats) or sizes (integers) over `axes`.
    /// `template` holds the mode and coordinate rules (its own scales and
    /// sizes are those at the room).
    Resize { template: Resize, axes: Vec<usize>, by_sizes: bool, policy: AspectPolicy },
    /// Inputs: data, the constant value (optional), pads (`[begins...,
    /// ends...]` over `axes`, ONNX's order).
    Pad { mode: PadMode, axes: Vec<usize> },
    /// Inputs: data, repeats (one per axis).
    Tile,
}

/// A [`ValueShapedOp`] and the room its outputs have in the memory plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ShapedByValues {
    pub op: ValueShapedOp,
    pub room: Vec<TensorType>,
}

/// The integers of a shape-deciding input (any integer type).
fn ints(t: TensorView<'_>, what: &str) -> Result<Vec<i64>> {
    ensure_op!(t.dtype.is_int(), "{what} must be integers, got {}", t.dtype);
    ensure_op!(t.shape.len() <= 1, "{what} must be a scalar or a list, got shape {:?}", t.shape);
    t.to_i64_vec()
}

fn sizes(values: &[i64], what: &str) -> Result<Vec<usize>> {
    values.iter().map(|&v| usize::try_from(v).map_err(|_| crate::Error::op(format!("{what} has a negative value {v}")))).collect()
}

impl ValueShapedOp {
    /// The ONNX op it computes.
    pub fn onnx_op(&self) -> &'static str {
        match self {
            ValueShapedOp::TopK { .. } => "TopK",
            ValueShapedOp::Reshape { .. } => "Reshape",
            ValueShapedOp::Expand => "Expand",
            ValueShapedOp::ConstantOfShape { .. } => "ConstantOfShape",
            ValueShapedOp::Slice { .. } => "Slice",
            ValueShapedOp::Range => "Range",
            ValueShapedOp::Resize { .. } => "Resize",
            ValueShapedOp::Pad { .. } => "Pad",
            ValueShapedOp::Tile => "Tile",
        }
    }

    /// The first input whose values decide the shape (the data, if any,
    /// comes before).
    pub fn shape_input(&self) -> usize {
        match self {
            ValueShapedOp::ConstantOfShape { .. } | ValueShapedOp::Range => 0,
            ValueShapedOp::Pad { .. } => 2,
            _ => 1,
        }
    }

    /// How many inputs it takes.
    pub fn inputs(&self) -> usize {
        match self {
            ValueShapedOp::ConstantOfShape { .. } => 1,
            ValueShapedOp::Slice { .. } | ValueShapedOp::Range | ValueShapedOp::Pad { .. } => 3,
            _ => 2,
        }
    }

    /// The output types for a data input of type `data` (none for
    /// ConstantOfShape) when the shape-deciding inputs hold `values`.
    pub fn output_types(&self, data: Option<&TensorType>, values: &[TensorView<'_>]) -> Result<Vec<TensorType>> {
        let types = self.unchecked_output_types(data, values)?;
        for t in &types {
            let fits = t.checked_bytes().is_some_and(|b| b <= MAX_BYTES);
            ensure_op!(fits, "{}: an output of shape {:?} is too large", self.onnx_op(), t.shape);
        }
        Ok(types)
    }

    fn unchecked_output_types(&self, data: Option<&TensorType>, values: &[TensorView<'_>]) -> Result<Vec<TensorType>> {
        let name = self.onnx_op();
        let data = || data.ok_or_else(|| crate::Error::op(format!("{name}: no data input")));
        let wanted = self.inputs() - self.shape_input();
        ensure_op!(values.len() == wanted, "{name}: {} shape-deciding inputs, expected {wanted}", values.len());
        if let ValueShapedOp::Range = self {
            let len = range_len(values[0], values[1], values[2])?;
            return Ok(vec![TensorType::new(values[0].dtype, vec![len])]);
        }
        if let ValueShapedOp::Resize { template, .. } = self {
            let resize = self.resize_at(template, data()?, values[0])?;
            return resize.infer(&[data().ok()]);
        }
        let all: Vec<Vec<i64>> =
            values.iter().map(|v| ints(*v, &format!("{name}'s shape-deciding input"))).collect::<Result<_>>()?;
        let values = &all[0];
        Ok(match self {
            ValueShapedOp::Range | ValueShapedOp::Resize { .. } => bail_op!("{name}: not a shape list"),
            ValueShapedOp::Tile => {
                let x = data()?;
                vec![Tile { repeats: sizes(values, "Tile's repeats")? }.infer(&[Some(x)])?.remove(0)]
            }
            ValueShapedOp::Pad { mode, axes } => {
                let x = data()?;
                vec![TensorType::new(
                    x.dtype,
                    Pad::over_axes(*mode, x.shape.len(), axes, values)?.infer(&[Some(x)])?.remove(0).shape,
                )]
            }
            ValueShapedOp::Slice { axes, steps } => {
                let x = data()?;
                let (starts, ends) = (&all[0], &all[1]);
                ensure_op!(
                    starts.len() == axes.len() && ends.len() == axes.len() && steps.len() == axes.len(),
                    "Slice: {} starts and {} ends for {} axes",
                    starts.len(),
                    ends.len(),
                    axes.len()
                );
                let op = Slice { axes: axes.clone(), starts: starts.clone(), ends: ends.clone(), steps: steps.clone() };
                op.infer(&[Some(x)])?
            }
            ValueShapedOp::TopK { axis, .. } => {
                let x = data()?;
                let k = match values.as_slice() {
                    [k] if *k >= 0 => *k as usize,
                    k => bail_op!("TopK: k must be one non-negative integer, got {k:?}"),
                };
                ensure_op!(*axis < x.shape.len(), "TopK: axis {axis} out of range for rank {}", x.shape.len());
                ensure_op!(k <= x.shape[*axis], "TopK: k = {k} exceeds the axis size {}", x.shape[*axis]);
                let mut shape = x.shape.clone();
                shape[*axis] = k;
                vec![TensorType::new(x.dtype, shape.clone()), TensorType::new(DType::I64, shape)]
            }
            ValueShapedOp::Reshape { allowzero } => {
                let x = data()?;
                vec![TensorType::new(x.dtype, resolve_reshape(&x.shape, values, *allowzero)?)]
            }
            ValueShapedOp::Expand => {
                let x = data()?;
                let target = sizes(values, "Expand's shape")?;
                vec![TensorType::new(x.dtype, broadcast_shapes(&[&x.shape, &target])?)]
            }
            ValueShapedOp::ConstantOfShape { dtype, value } => {
                ensure_op!(value.len() == dtype.size(), "ConstantOfShape: a value of {} bytes for {dtype}", value.len());
                vec![TensorType::new(*dtype, sizes(values, "ConstantOfShape's shape")?)]
            }
        })
    }
}

impl ValueShapedOp {
    /// The Resize that `template` becomes for data of type `x` when the
    /// scales or sizes input holds `values`.
    fn resize_at(&self, template: &Resize, x: &TensorType, values: TensorView<'_>) -> Result<Resize> {
        let ValueShapedOp::Resize { axes, by_sizes, policy, .. } = self else { bail_op!("not a Resize") };
        ensure_op!(values.shape.len() <= 1, "Resize: scales or sizes must be a list, got shape {:?}", values.shape);
        let by = if *by_sizes {
            ResizeBy::Sizes(ints(values, "Resize's sizes")?)
        } else {
            ensure_op!(values.dtype.is_float(), "Resize: scales must be floats, got {}", values.dtype);
            ResizeBy::Scales(values.to_f64_vec())
        };
        let (scales, sizes) = resize_scales_and_sizes(&x.shape, axes, &by, *policy)?;
        let roi = &template.roi;
        ensure_op!(
            roi.is_empty() || roi.len() == 2 * x.shape.len(),
            "Resize: roi of {} values for a rank-{} input",
            roi.len(),
            x.shape.len()
        );
        Ok(Resize { scales, sizes, ..template.clone() })
    }
}

impl ShapedByValues {
    /// Computes the outputs from the inputs' values.
    pub fn compute(&self, inputs: &[Option<TensorView<'_>>]) -> Result<Vec<Tensor>> {
        let name = self.op.onnx_op();
        let values: Vec<TensorView> =
            (self.op.shape_input()..self.op.inputs()).map(|i| input(inputs, i, name)).collect::<Result<_>>()?;
        let data = if self.op.shape_input() == 0 { None } else { Some(input(inputs, 0, name)?) };
        let types = self.op.output_types(data.map(|x| x.ty()).as_ref(), &values)?;
        match (&self.op, data) {
            (ValueShapedOp::TopK { axis, largest, sorted }, Some(x)) => {
                Op::from(TopK::new(*axis, types[0].shape[*axis], *largest, *sorted)).eval_views(&[Some(x)])
            }
            (ValueShapedOp::Reshape { .. }, Some(x)) => Ok(vec![Tensor::from_bytes(types[0].clone(), x.bytes)?]),
            (ValueShapedOp::Expand, Some(x)) => Op::from(Expand { shape: types[0].shape.clone() }).eval_views(&[Some(x)]),
            (ValueShapedOp::Slice { axes, steps }, Some(x)) => {
                let (starts, ends) = (values[0].to_i64_vec()?, values[1].to_i64_vec()?);
                Op::from(Slice { axes: axes.clone(), starts, ends, steps: steps.clone() }).eval_views(&[Some(x)])
            }
            (ValueShapedOp::Range, None) => Ok(vec![range(values[0], values[1], values[2])?]),
            (ValueShapedOp::Resize { template, .. }, Some(x)) => {
                Op::from(self.op.resize_at(template, &x.ty(), values[0])?).eval_views(&[Some(x)])
            }
            (ValueShapedOp::Tile, Some(x)) => {
                Op::from(Tile { repeats: sizes(&ints(values[0], "Tile's repeats")?, "Tile's repeats")? }).eval_views(&[Some(x)])
            }
            (ValueShapedOp::Pad { mode, axes }, Some(x)) => {
                let pads = ints(values[0], "Pad's pads")?;
                let value = inputs.get(1).copied().flatten();
                let value = if *mode == PadMode::Constant { value } else { None };
                Op::from(Pad::over_axes(*mode, x.shape.len(), axes, &pads)?).eval_views(&[Some(x), value])
            }
            (ValueShapedOp::ConstantOfShape { value, .. }, None) => {
                let n = types[0].len();
                Ok(vec![Tensor::from_bytes(types[0].clone(), &value.repeat(n))?])
            }
            _ => bail_op!("{name}: inputs do not match the op"),
        }
    }
}

/// One number of a Range input.
fn range_scalar(t: TensorView<'_>, what: &str) -> Result<f64> {
    ensure_op!(t.dtype.is_int() || t.dtype.is_float(), "Range: {what} is {}, not a number", t.dtype);
    match t.to_f64_vec().as_slice() {
        [v] => Ok(*v),
        _ => bail_op!("Range: {what} must be a scalar, got shape {:?}", t.shape),
    }
}

/// How many elements `Range(start, limit, delta)` gives (ONNX:
/// `max(ceil((limit - start) / delta), 0)`), refusing a zero or non-finite
/// delta, mixed types and more than 1 GiB.
pub fn range_len(start: TensorView<'_>, limit: TensorView<'_>, delta: TensorView<'_>) -> Result<usize> {
    ensure_op!(
        start.dtype == limit.dtype && start.dtype == delta.dtype,
        "Range: start, limit and delta differ in type ({}, {}, {})",
        start.dtype,
        limit.dtype,
        delta.dtype
    );
    let n = if start.dtype.is_float() {
        let (s, l, d) = (range_scalar(start, "start")?, range_scalar(limit, "limit")?, range_scalar(delta, "delta")?);
        ensure_op!(d != 0.0 && d.is_finite() && s.is_finite() && l.is_finite(), "invalid Range({s}, {l}, {d})");
        ((l - s) / d).ceil().max(0.0).min(u64::MAX as f64) as u128
    } else {
        let one = |t: TensorView<'_>, w: &str| -> Result<i128> {
            range_scalar(t, w)?;
            Ok(t.to_i64_vec()?[0] as i128)
        };
        let (s, l, d) = (one(start, "start")?, one(limit, "limit")?, one(delta, "delta")?);
        ensure_op!(d != 0, "Range delta cannot be 0");
        let span = l - s;
        if span != 0 && (span > 0) == (d > 0) {
            ((span.abs() + d.abs() - 1) / d.abs()) as u128
        } else {
            0
        }
    };
    let bytes = n.saturating_mul(start.dtype.size() as u128);
    ensure_op!(bytes <= MAX_BYTES as u128, "Range: {n} elements of {} are too many", start.dtype);
    Ok(n as usize)
}

/// `Range(start, limit, delta)`: `start + i * delta` for each element,
/// computed in f64 for floats and in i64 for integers, then stored as the
/// inputs' type.
pub fn range(start: TensorView<'_>, limit: TensorView<'_>, delta: TensorView<'_>) -> Result<Tensor> {
    let n = range_len(start, limit, delta)?;
    let dtype = start.dtype;
    let wide = if dtype.is_float() {
        let (s, d) = (start.to_f64_vec()[0], delta.to_f64_vec()[0]);
        Tensor::from_vec(vec![n], (0..n).map(|i| s + i as f64 * d).collect::<Vec<f64>>())?
    } else {
        let (s, d) = (start.to_i64_vec()?[0], delta.to_i64_vec()?[0]);
        Tensor::from_vec(vec![n], (0..n as i64).map(|i| s.wrapping_add(i.wrapping_mul(d))).collect::<Vec<i64>>())?
    };
    if wide.dtype() == dtype {
        return Ok(wide);
    }
    Ok(Op::from(crate::ops::elementwise::Cast { to: dtype }).eval_owned(&[Some(&wide)])?.remove(0))
}

/// The most bytes an output computed from values may hold (1 GiB, the
/// largest constant the importer builds): a larger one comes from a
/// corrupt or hostile value, refused instead of allocated.
const MAX_BYTES: usize = 1 << 30;

impl OpImpl for ShapedByValues {
    fn name(&self) -> &'static str {
        "ShapedByValues"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let name = self.op.onnx_op();
        let shape_input = self.op.shape_input();
        let wanted = self.op.inputs();
        ensure_op!(inputs.len() == wanted, "{name}: {} inputs, expected {wanted}", inputs.len());
        // Range and Resize (by scales) also take floats.
        let floats = matches!(self.op, ValueShapedOp::Range | ValueShapedOp::Resize { by_sizes: false, .. });
        for i in shape_input..wanted {
            let s = input(inputs, i, name)?;
            let numbers = s.dtype.is_int() || (floats && s.dtype.is_float());
            ensure_op!(
                numbers && s.shape.len() <= 1,
                "{name}: the shape-deciding input {i} is {s}, not a list of numbers it takes"
            );
        }
        let outputs = if matches!(self.op, ValueShapedOp::TopK { .. }) { 2 } else { 1 };
        ensure_op!(self.room.len() == outputs, "{name}: {} room types for {outputs} outputs", self.room.len());
        if shape_input >= 1 {
            let x = input(inputs, 0, name)?;
            ensure_op!(x.dtype == self.room[0].dtype, "{name}: input is {}, room is {}", x.dtype, self.room[0]);
            ensure_op!(self.room[0].checked_bytes().is_some(), "{name}: room {} is too large", self.room[0]);
        }
        Ok(self.room.clone())
    }

    fn data_dependent(&self) -> bool {
        true
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        for (o, t) in outputs.iter_mut().zip(self.compute(inputs)?) {
            ensure_op!(
                o.shape == t.shape() && o.dtype == t.dtype(),
                "{}: output {} where {} was expected",
                self.op.onnx_op(),
                t.ty(),
                o.ty()
            );
            o.bytes.copy_from_slice(t.bytes());
        }
        Ok(())
    }

    fn eval_unbounded(&self, inputs: &[Option<TensorView<'_>>]) -> Option<Result<Vec<Tensor>>> {
        Some(self.compute(inputs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(op: ValueShapedOp, room: Vec<TensorType>, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let inputs: Vec<Option<&Tensor>> = inputs.iter().map(|t| Some(*t)).collect();
        Op::from(ShapedByValues { op, room }).eval_owned(&inputs)
    }

    #[test]
    fn top_k_takes_k_from_its_input() {
        let x = Tensor::from_vec(vec![5], vec![3f32, 9.0, 1.0, 7.0, 5.0]).unwrap();
        let room = vec![TensorType::new(DType::F32, vec![5]), TensorType::new(DType::I64, vec![5])];
        let op = ValueShapedOp::TopK { axis: 0, largest: true, sorted: true };
        let out = run(op.clone(), room.clone(), &[&x, &Tensor::from_vec(vec![1], vec![2i64]).unwrap()]).unwrap();
        assert_eq!(out[0].as_slice::<f32>().unwrap(), &[9.0, 7.0]);
        assert_eq!(out[1].as_slice::<i64>().unwrap(), &[1, 3]);
        assert!(run(op, room, &[&x, &Tensor::scalar(6i64)]).unwrap_err().to_string().contains("exceeds"));
    }

    #[test]
    fn reshape_expand_and_fill_follow_the_values() {
        let x = Tensor::from_vec(vec![2, 3], vec![1f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let room = vec![TensorType::new(DType::F32, vec![6, 1])];
        let spec = Tensor::from_vec(vec![2], vec![-1i64, 2]).unwrap();
        let y = run(ValueShapedOp::Reshape { allowzero: false }, room.clone(), &[&x, &spec]).unwrap().remove(0);
        assert_eq!(y.shape(), &[3, 2]);
        let target = Tensor::from_vec(vec![3], vec![2i64, 1, 3]).unwrap();
        let y = run(ValueShapedOp::Expand, room, &[&x, &target]).unwrap().remove(0);
        assert_eq!(y.shape(), &[2, 2, 3]);
        let fill = ValueShapedOp::ConstantOfShape { dtype: DType::I64, value: 7i64.to_le_bytes().to_vec() };
        let room = vec![TensorType::new(DType::I64, vec![4])];
        let y = run(fill.clone(), room.clone(), &[&Tensor::from_vec(vec![2], vec![1i64, 3]).unwrap()]).unwrap().remove(0);
        assert_eq!(y.as_slice::<i64>().unwrap(), &[7, 7, 7]);
        let huge = Tensor::from_vec(vec![2], vec![1i64 << 40, 1 << 40]).unwrap();
        assert!(run(fill, room.clone(), &[&huge]).unwrap_err().to_string().contains("too large"));
        let wide = Tensor::from_vec(vec![3], vec![1i64 << 28, 2, 3]).unwrap();
        let room = vec![TensorType::new(DType::F32, vec![6, 1])];
        assert!(run(ValueShapedOp::Expand, room, &[&x, &wide]).unwrap_err().to_string().contains("too large"));
    }

    #[test]
    fn resize_and_pad_take_sizes_scales_and_pads_from_their_inputs() {
        use crate::ops::movement::{CoordinateMode, NearestMode, ResizeMode};
        let x = Tensor::from_vec(vec![1, 2, 3], vec![1f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let template = Resize {
            mode: ResizeMode::Nearest,
            coordinate_mode: CoordinateMode::Asymmetric,
            nearest_mode: NearestMode::Floor,
            cubic_coeff_a: -0.75,
            exclude_outside: false,
            extrapolation_value: 0.0,
            antialias: false,
            scales: vec![],
            sizes: vec![],
            roi: vec![],
        };
        let room = vec![TensorType::new(DType::F32, vec![1, 8, 8])];
        let by_sizes =
            ValueShapedOp::Resize { template: template.clone(), axes: vec![1, 2], by_sizes: true, policy: AspectPolicy::Stretch };
        let sizes = Tensor::from_vec(vec![2], vec![4i64, 3]).unwrap();
        let y = run(by_sizes.clone(), room.clone(), &[&x, &sizes]).unwrap().remove(0);
        assert_eq!(y.shape(), &[1, 4, 3]);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 4.0, 5.0, 6.0]);
        let negative = Tensor::from_vec(vec![2], vec![-4i64, 3]).unwrap();
        assert!(run(by_sizes, room.clone(), &[&x, &negative]).unwrap_err().to_string().contains("negative"));
        let by_scales = ValueShapedOp::Resize { template, axes: vec![2], by_sizes: false, policy: AspectPolicy::Stretch };
        let scales = Tensor::from_vec(vec![1], vec![0.5f32]).unwrap();
        let y = run(by_scales.clone(), room.clone(), &[&x, &scales]).unwrap().remove(0);
        assert_eq!(y.shape(), &[1, 2, 1]);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[1.0, 4.0]);
        let zero = Tensor::from_vec(vec![1], vec![0f32]).unwrap();
        assert!(run(by_scales.clone(), room.clone(), &[&x, &zero]).unwrap_err().to_string().contains("positive"));
        let huge = Tensor::from_vec(vec![1], vec![1e30f32]).unwrap();
        assert!(run(by_scales, room, &[&x, &huge]).unwrap_err().to_string().contains("too large"));

        let pad = ValueShapedOp::Pad { mode: PadMode::Constant, axes: vec![2] };
        let room = vec![TensorType::new(DType::F32, vec![1, 2, 8])];
        let value = Tensor::from_vec(vec![], vec![9f32]).unwrap();
        let pads = Tensor::from_vec(vec![2], vec![0i64, 2]).unwrap();
        let y = Op::from(ShapedByValues { op: pad.clone(), room: room.clone() })
            .eval_owned(&[Some(&x), Some(&value), Some(&pads)])
            .unwrap()
            .remove(0);
        assert_eq!(y.shape(), &[1, 2, 5]);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0, 9.0, 9.0, 4.0, 5.0, 6.0, 9.0, 9.0]);
        let y =
            Op::from(ShapedByValues { op: pad.clone(), room: room.clone() }).eval_owned(&[Some(&x), None, Some(&pads)]).unwrap();
        assert_eq!(y[0].as_slice::<f32>().unwrap()[3], 0.0);
        let wrong = Tensor::from_vec(vec![4], vec![0i64, 0, 1, 1]).unwrap();
        let err = Op::from(ShapedByValues { op: pad, room }).eval_owned(&[Some(&x), None, Some(&wrong)]).unwrap_err();
        assert!(err.to_string().contains("4 pads for 1 axes"), "{err}");
    }
}
