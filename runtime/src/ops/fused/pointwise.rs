//! A chain or small DAG of f32 pointwise ops as one node carrying its
//! expression, for the GPU backend to generate one kernel from. Inputs
//! broadcast to the output shape. The CPU reference evaluates the program one
//! instruction at a time over blocks of elements that stay in cache (blocks
//! split over the context's threads), with the same f32 arithmetic as the
//! ops it replaces, so the results are bit-identical.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::elementwise::{apply_in_place_f32, apply_in_place_f32_in, BinaryKind, UnaryKind};
use crate::ops::util::{broadcast_shapes, broadcast_strides};
use crate::ops::OpImpl;
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

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
/// An operand within one block: a value for every element, or one block.
#[derive(Clone, Copy)]
enum Operand<'a> {
    Scalar(f32),
    Block(&'a [f32]),
}

/// Value `j` for the block of `len` elements at `start`: a scalar, a slice
/// of an input, or the buffer an earlier instruction wrote.
fn operand<'a>(
    scalars: &[Option<f32>],
    sources: &'a [Option<Cow<[f32]>>],
    buffers: &'a [Vec<f32>],
    j: usize,
    start: usize,
    len: usize,
) -> Operand<'a> {
    match (&scalars[j], &sources[j]) {
        (Some(s), _) => Operand::Scalar(*s),
        (None, Some(v)) => Operand::Block(&v[start..start + len]),
        (None, None) => Operand::Block(&buffers[j][..len]),
    }
}

/// An input broadcast to the output shape, read block by block (instead
/// of a copy of the whole output's size): its flat index advances by
/// `strides` (0 along broadcast axes) over the output's axes.
struct Broadcast<'a> {
    xs: &'a [f32],
    strides: Vec<usize>,
}

impl Broadcast<'_> {
    /// Writes the values of output elements `start..start + dst.len()`;
    /// `idx` is scratch for the output index (kept across blocks).
    fn fill(&self, out_shape: &[usize], start: usize, dst: &mut [f32], idx: &mut Vec<usize>) {
        let rank = out_shape.len();
        idx.clear();
        idx.resize(rank, 0);
        let mut rem = start;
        for d in (0..rank).rev() {
            idx[d] = rem % out_shape[d];
            rem /= out_shape[d];
        }
        let (inner, inner_stride) = (out_shape[rank - 1], self.strides[rank - 1]);
        let mut pos = 0;
        while pos < dst.len() {
            let base: usize = idx.iter().zip(&self.strides).map(|(i, s)| i * s).sum();
            let run = (inner - idx[rank - 1]).min(dst.len() - pos);
            // The innermost stride is 0 (broadcast) or 1 (a contiguous row).
            if inner_stride == 0 {
                dst[pos..pos + run].fill(self.xs[base]);
            } else {
                dst[pos..pos + run].copy_from_slice(&self.xs[base..base + run]);
            }
            pos += run;
            idx[rank - 1] += run;
            let mut d = rank - 1;
            while d > 0 && idx[d] == out_shape[d] {
                idx[d] = 0;
                d -= 1;
                idx[d] += 1;
            }
        }
    }
}

/// Elements one block covers: every value of a block stays in L1 while the
/// program runs over it.
const BLOCK: usize = 1024;

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
        let program = &self.program;
        // Inputs, and the values that are the same for every element (folded
        // here with the arithmetic the blocks use).
        // Inputs with one value per element: the input itself, or the input
        // broadcast to the output shape.
        let mut sources: Vec<Option<Cow<[f32]>>> = Vec::with_capacity(program.len());
        let mut scalars: Vec<Option<f32>> = Vec::with_capacity(program.len());
        // Inputs broadcast to the output shape, filled into their buffer
        // for each block.
        let mut broadcasts: Vec<Option<Broadcast>> = Vec::with_capacity(program.len());
        for ins in program {
            let mut broadcast = None;
            let (source, scalar) = match *ins {
                Instr::Input(k) => {
                    let Some(x) = inputs[k] else { bail_op!("Pointwise: input {k} is missing") };
                    let xs = x.as_slice::<f32>()?;
                    if xs.len() == 1 {
                        (None, Some(xs[0]))
                    } else if x.shape == out_shape.as_slice() {
                        (Some(Cow::Borrowed(xs)), None)
                    } else {
                        ensure_op!(x.shape.len() <= out_shape.len(), "Pointwise: input {k} does not broadcast");
                        let strides = broadcast_strides(x.shape, &out_shape);
                        let last: usize = out_shape.iter().zip(&strides).map(|(&d, &s)| d.saturating_sub(1) * s).sum();
                        ensure_op!(n == 0 || last < xs.len(), "Pointwise: input {k} does not broadcast");
                        broadcast = Some(Broadcast { xs, strides });
                        (None, None)
                    }
                }
                Instr::Const(c) => (None, Some(c)),
                Instr::Unary(k, a) => (
                    None,
                    scalars[a].map(|s| {
                        let mut one = [s];
                        apply_in_place_f32(k, &mut one);
                        one[0]
                    }),
                ),
                Instr::Binary(op, a, b) => (None, scalars[a].zip(scalars[b]).map(|(x, y)| op.apply(x, y))),
            };
            sources.push(source);
            scalars.push(scalar);
            broadcasts.push(broadcast);
        }
        let out = outputs[0].as_mut_slice::<f32>()?;
        ensure_op!(out.len() == n, "Pointwise: result has the wrong size");
        if let Some(Some(s)) = scalars.last() {
            out.fill(*s);
            return Ok(());
        }
        ensure_op!(sources.iter().flatten().all(|v| v.len() == n), "Pointwise: an input has the wrong size");
        let last = program.len() - 1;
        // The mode is read here, on the run's thread, not on the workers.
        let math = crate::math::mode();
        crate::parallel::par_chunks_mut(out, BLOCK, crate::parallel::grain_elements(BLOCK), |first, chunk| {
            let mut buffers = vec![vec![0f32; BLOCK]; program.len()];
            let mut idx = Vec::new();
            for (b, out_block) in chunk.chunks_mut(BLOCK).enumerate() {
                let (start, len) = ((first + b) * BLOCK, out_block.len());
                for (i, b) in broadcasts.iter().enumerate() {
                    if let Some(b) = b {
                        b.fill(&out_shape, start, &mut buffers[i][..len], &mut idx);
                    }
                }
                // Inputs are read in place (or were just filled); every other
                // value that is not a scalar gets its buffer.
                for i in 0..program.len() {
                    if scalars[i].is_some() || sources[i].is_some() || broadcasts[i].is_some() {
                        continue;
                    }
                    let (done, rest) = buffers.split_at_mut(i);
                    let dst = &mut rest[0][..len];
                    let value = |j: usize| operand(&scalars, &sources, done, j, start, len);
                    match program[i] {
                        Instr::Input(_) | Instr::Const(_) => unreachable!("inputs and constants were skipped"),
                        Instr::Unary(k, a) => {
                            let Operand::Block(v) = value(a) else { unreachable!("a unary of a scalar is a scalar") };
                            dst.copy_from_slice(v);
                            apply_in_place_f32_in(math, k, dst);
                        }
                        Instr::Binary(op, a, b) => match (value(a), value(b)) {
                            (Operand::Block(x), Operand::Block(y)) => {
                                dst.iter_mut().zip(x.iter().zip(y)).for_each(|(o, (&x, &y))| *o = op.apply(x, y))
                            }
                            (Operand::Block(x), Operand::Scalar(y)) => {
                                dst.iter_mut().zip(x).for_each(|(o, &x)| *o = op.apply(x, y))
                            }
                            (Operand::Scalar(x), Operand::Block(y)) => {
                                dst.iter_mut().zip(y).for_each(|(o, &y)| *o = op.apply(x, y))
                            }
                            (Operand::Scalar(_), Operand::Scalar(_)) => unreachable!("a binary of scalars is a scalar"),
                        },
                    }
                }
                let Operand::Block(result) = operand(&scalars, &sources, &buffers, last, start, len) else {
                    unreachable!("a scalar result was filled above")
                };
                out_block.copy_from_slice(result);
            }
        });
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

    /// Inputs broadcast along leading, middle and trailing axes, over blocks
    /// that end inside rows: each element as computed one by one.
    #[test]
    fn broadcast_inputs_are_read_block_by_block() {
        let out = [2usize, 3, 37, 29];
        let n: usize = out.iter().product();
        let x = Tensor::from_vec(out.to_vec(), (0..n).map(|i| (i % 97) as f32 - 40.0).collect()).unwrap();
        let channel = Tensor::from_vec(vec![3, 1, 1], vec![0.5f32, -2.0, 3.0]).unwrap();
        let row = Tensor::from_vec(vec![1, 29], (0..29).map(|i| i as f32 * 0.25).collect()).unwrap();
        let column = Tensor::from_vec(vec![37, 1], (0..37).map(|i| 1.0 - i as f32).collect()).unwrap();
        // relu(x * channel + row) - column
        let program = vec![
            Instr::Input(0),
            Instr::Input(1),
            Instr::Binary(PointwiseBinary::Mul, 0, 1),
            Instr::Input(2),
            Instr::Binary(PointwiseBinary::Add, 2, 3),
            Instr::Unary(UnaryKind::Relu, 4),
            Instr::Input(3),
            Instr::Binary(PointwiseBinary::Sub, 5, 6),
        ];
        let op: Op = Pointwise { program }.into();
        let y = op.eval_owned(&[Some(&x), Some(&channel), Some(&row), Some(&column)]).unwrap().remove(0);
        let (xs, ys) = (x.as_slice::<f32>().unwrap(), y.as_slice::<f32>().unwrap());
        let (cs, rs, ks) =
            (channel.as_slice::<f32>().unwrap(), row.as_slice::<f32>().unwrap(), column.as_slice::<f32>().unwrap());
        for i in 0..n {
            let (w, h, c) = (i % 29, i / 29 % 37, i / (29 * 37) % 3);
            let want = (xs[i] * cs[c] + rs[w]).max(0.0) - ks[h];
            assert_eq!(ys[i], want, "element {i}");
        }
    }
}
