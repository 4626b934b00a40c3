//! A chain or small DAG of f32 pointwise ops as one node carrying its
//! expression, for the GPU backend to generate one kernel from. Inputs
//! broadcast to the output shape. The CPU reference evaluates the program one
//! instruction at a time over whole tensors, with the same f32 arithmetic as
//! the ops it replaces, so the results are bit-identical.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::elementwise::{apply_in_place_f32, BinaryKind, UnaryKind};
use crate::ops::util::{broadcast_index_map, broadcast_shapes, broadcast_strides};
use crate::ops::OpImpl;
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

/// The binary operations a pointwise program may use (exact IEEE f32).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PointwiseBinary {
    Add,
    Sub,
    Mul,
    Div,
}

impl PointwiseBinary {
    pub fn from_kind(k: BinaryKind) -> Option<PointwiseBinary> {
        Some(match k {
            BinaryKind::Add => PointwiseBinary::Add,
            BinaryKind::Sub => PointwiseBinary::Sub,
            BinaryKind::Mul => PointwiseBinary::Mul,
            BinaryKind::Div => PointwiseBinary::Div,
            _ => return None,
        })
    }

    #[inline]
    fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            PointwiseBinary::Add => a + b,
            PointwiseBinary::Sub => a - b,
            PointwiseBinary::Mul => a * b,
            PointwiseBinary::Div => a / b,
        }
    }
}

/// One step of the program; operands name earlier steps by index.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Instr {
    /// The node's input `i`.
    Input(usize),
    Const(f32),
    Unary(UnaryKind, usize),
    Binary(PointwiseBinary, usize, usize),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pointwise {
    /// Steps in order; the last is the result.
    pub program: Vec<Instr>,
}

/// A step's value: one number, or the whole output's worth (an input of
/// the output's shape is read in place).
enum Value<'a> {
    Scalar(f32),
    Input(&'a [f32]),
    Full(Vec<f32>),
}

impl Value<'_> {
    fn full(&self) -> Option<&[f32]> {
        match self {
            Value::Scalar(_) => None,
            Value::Input(v) => Some(v),
            Value::Full(v) => Some(v),
        }
    }
}

impl Pointwise {
    fn check_program(&self, n_inputs: usize) -> Result<()> {
        ensure_op!(!self.program.is_empty(), "Pointwise: empty program");
        for (i, ins) in self.program.iter().enumerate() {
            let ok = match *ins {
                Instr::Input(k) => k < n_inputs,
                Instr::Const(_) => true,
                Instr::Unary(_, a) => a < i,
                Instr::Binary(_, a, b) => a < i && b < i,
            };
            ensure_op!(ok, "Pointwise: instruction {i} ({ins:?}) refers to a missing value");
        }
        Ok(())
    }
}

impl OpImpl for Pointwise {
    fn name(&self) -> &'static str {
        "Pointwise"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let mut shapes = Vec::with_capacity(inputs.len());
        for (i, t) in inputs.iter().enumerate() {
            let Some(t) = t else { bail_op!("Pointwise: input {i} is missing") };
            ensure_op!(t.dtype == DType::F32, "Pointwise: input {i} must be f32, got {t}");
            shapes.push(t.shape.as_slice());
        }
        self.check_program(inputs.len())?;
        Ok(vec![TensorType::new(DType::F32, broadcast_shapes(&shapes)?)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        self.check_program(inputs.len())?;
        let out_shape = outputs[0].shape.to_vec();
        let n: usize = out_shape.iter().product();
        let mut values: Vec<Value> = Vec::with_capacity(self.program.len());
        for ins in &self.program {
            let v = match *ins {
                Instr::Input(k) => {
                    let Some(x) = inputs[k] else { bail_op!("Pointwise: input {k} is missing") };
                    let xs = x.as_slice::<f32>()?;
                    if xs.len() == 1 {
                        Value::Scalar(xs[0])
                    } else if x.shape == out_shape.as_slice() {
                        Value::Input(xs)
                    } else {
                        let map = broadcast_index_map(&broadcast_strides(x.shape, &out_shape), &out_shape);
                        Value::Full(map.iter().map(|&i| xs[i]).collect())
                    }
                }
                Instr::Const(c) => Value::Scalar(c),
                Instr::Unary(k, a) => match (&values[a], values[a].full()) {
                    (Value::Scalar(s), _) => {
                        let mut one = [*s];
                        apply_in_place_f32(k, &mut one);
                        Value::Scalar(one[0])
                    }
                    (_, Some(v)) => {
                        let mut v = v.to_vec();
                        apply_in_place_f32(k, &mut v);
                        Value::Full(v)
                    }
                    (_, None) => unreachable!("a non-scalar value has data"),
                },
                Instr::Binary(op, a, b) => match (&values[a], &values[b]) {
                    (Value::Scalar(x), Value::Scalar(y)) => Value::Scalar(op.apply(*x, *y)),
                    (x, Value::Scalar(y)) => Value::Full(x.full().unwrap_or_default().iter().map(|&x| op.apply(x, *y)).collect()),
                    (Value::Scalar(x), y) => Value::Full(y.full().unwrap_or_default().iter().map(|&y| op.apply(*x, y)).collect()),
                    (x, y) => {
                        let (x, y) = (x.full().unwrap_or_default(), y.full().unwrap_or_default());
                        Value::Full(x.iter().zip(y).map(|(&x, &y)| op.apply(x, y)).collect())
                    }
                },
            };
            values.push(v);
        }
        let out = outputs[0].as_mut_slice::<f32>()?;
        match values.last() {
            Some(Value::Scalar(s)) => out.fill(*s),
            Some(v) => match v.full() {
                Some(v) if v.len() == n => out.copy_from_slice(v),
                _ => bail_op!("Pointwise: result has the wrong size"),
            },
            None => bail_op!("Pointwise: empty program"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn evaluates_a_small_dag_with_broadcasting() {
        // y = relu(a * 2 + b) - a, with b broadcast along rows.
        let p = Pointwise {
            program: vec![
                Instr::Input(0),
                Instr::Const(2.0),
                Instr::Binary(PointwiseBinary::Mul, 0, 1),
                Instr::Input(1),
                Instr::Binary(PointwiseBinary::Add, 2, 3),
                Instr::Unary(UnaryKind::Relu, 4),
                Instr::Binary(PointwiseBinary::Sub, 5, 0),
            ],
        };
        let a = Tensor::from_vec(vec![2, 2], vec![1f32, -1., 3., -4.]).unwrap();
        let b = Tensor::from_vec(vec![2], vec![0.5f32, 1.]).unwrap();
        let op: Op = p.into();
        let y = op.eval_owned(&[Some(&a), Some(&b)]).unwrap().remove(0);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[1.5, 1., 3.5, 4.]);
    }

    #[test]
    fn rejects_forward_references() {
        let p = Pointwise { program: vec![Instr::Unary(UnaryKind::Relu, 0)] };
        let t = TensorType::new(DType::F32, vec![2]);
        assert!(p.infer(&[Some(&t)]).is_err());
    }
}
