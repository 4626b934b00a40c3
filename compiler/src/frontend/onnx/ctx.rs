//! What an op converter sees: the ONNX node, its inputs as IR ports, and a
//! way to add IR ops. Ops whose inputs are all constants are evaluated on
//! the spot with the runtime's reference implementation, so shape-computing
//! subgraphs (Shape -> Gather -> Concat -> Reshape) resolve to constants and
//! every tensor gets a static shape.

use super::proto::{Attributes, ExternalDataRoot};
use crate::ir::{Graph, Port};
use anyhow::{anyhow, bail, Result};
use std::collections::HashMap;
use tract_onnx::pb;
use trtc_runtime::{Op, Tensor, TensorType};

pub struct Ctx<'a> {
    pub node: &'a pb::NodeProto,
    pub attrs: Attributes<'a>,
    /// The model's opset for the default ONNX domain.
    pub opset: i64,
    pub(super) graph: &'a mut Graph,
    pub(super) inputs: Vec<Option<Port>>,
    pub(super) root: &'a ExternalDataRoot,
    pub(super) added: usize,
    /// `ImportOptions::keep_identity_reshapes`.
    pub keep_identity_reshapes: bool,
    /// See [`Ctx::room_value`].
    pub(super) room_values: &'a mut HashMap<Port, Tensor>,
    /// Whether the node is in a branch or loop body, whose room world
    /// starts from guessed inputs (zeros): a room the guess makes invalid
    /// (a resize by a scale of 0) is then replaced by another guess.
    pub in_body: bool,
}

/// The most elements a tensor may have to be given a room value (shape
/// arithmetic works on a few integers).
pub(super) const ROOM_VALUE_ELEMENTS: usize = 4096;

impl<'a> Ctx<'a> {
    /// The node's name (never empty: unnamed nodes get one at import).
    pub fn name(&self) -> &str {
        &self.node.name
    }

    /// Number of inputs the node lists (absent optional ones included).
    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }

    pub fn opt_input(&self, i: usize) -> Option<Port> {
        self.inputs.get(i).copied().flatten()
    }

    pub fn input(&self, i: usize) -> Result<Port> {
        self.opt_input(i).ok_or_else(|| anyhow!("missing required input {i}"))
    }

    pub fn ty(&self, p: Port) -> &TensorType {
        self.graph.ty(p)
    }

    pub fn input_ty(&self, i: usize) -> Result<&TensorType> {
        Ok(self.graph.ty(self.input(i)?))
    }

    /// The value of a port when it is a constant.
    pub fn konst(&self, p: Port) -> Option<&Tensor> {
        self.graph.node(p.node).constant()
    }

    /// The value of input `i` when present and constant.
    pub fn const_input(&self, i: usize) -> Option<&Tensor> {
        self.opt_input(i).and_then(|p| self.konst(p))
    }

    /// [`Ctx::require_const`] for an input holding exactly one integer
    /// (a scalar or a one-element tensor).
    pub fn require_const_int(&self, i: usize, what: &str) -> Result<i64> {
        let t = self.require_const(i, what)?;
        match t.to_i64_vec()?.as_slice() {
            [v] => Ok(*v),
            _ => anyhow::bail!("{what} must be one integer, not {}", t.ty()),
        }
    }

    /// The value of input `i`, which must be known at build time (it decides
    /// shapes). `what` names it in the error.
    pub fn require_const(&self, i: usize, what: &str) -> Result<&Tensor> {
        let p = self.input(i)?;
        let name = self.node.input.get(i).map(String::as_str).unwrap_or("?");
        if self.graph.node(p.node).kind_is_input() {
            // A graph input deciding shapes: TensorRT's shape input.
            return self.konst(p).ok_or_else(|| {
                anyhow!(
                    "input {i} ({what}, tensor '{name}') must be known when the engine is built; \
                     it is a graph input: give its value with --input-value {name}:FILE.npy"
                )
            });
        }
        self.konst(p).ok_or_else(|| {
            anyhow!(
                "input {i} ({what}, tensor '{name}') must be known when the engine is built; \
                 it is computed at run time, which trtc does not support for this input"
            )
        })
    }

    /// The value input `i` has in the *room world*: a tensor computed at run
    /// time from the sizes of tensors sized by the data (the number of
    /// boxes NonZero kept, read by `Shape`; an input's sizes read at run
    /// time) takes there the value it has when every such tensor fills the
    /// room the memory plan gives it (every element non-zero, every box
    /// kept, every input at its planned shape). Ops that read shapes from such
    /// values (TopK's `k`, Reshape's shape) become layers sized by the data
    /// whose room is their output in that world, so the layers after them
    /// see the same consistent shapes at build time. A constant input is
    /// its own room value.
    pub fn room_value(&self, i: usize) -> Option<&Tensor> {
        self.room_value_of(self.opt_input(i)?)
    }

    /// [`Ctx::room_value`] of any port.
    pub fn room_value_of(&self, p: Port) -> Option<&Tensor> {
        self.konst(p).or_else(|| self.room_values.get(&p))
    }

    /// Records `value` as `p`'s room value (see [`Ctx::room_value`]).
    pub fn set_room_value(&mut self, p: Port, value: Tensor) {
        self.room_values.insert(p, value);
    }

    /// Optional integer list input (like Slice's axes), constant when present.
    pub fn opt_const_ints(&self, i: usize, what: &str) -> Result<Option<Vec<i64>>> {
        match self.opt_input(i) {
            None => Ok(None),
            Some(_) => Ok(Some(self.require_const(i, what)?.to_i64_vec()?)),
        }
    }

    /// Adds an op node reading `inputs` (folded to constants when every input
    /// is constant) and returns its outputs.
    pub fn op(&mut self, op: impl Into<Op>, inputs: &[Option<Port>]) -> Result<Vec<Port>> {
        let op = op.into();
        let name = if self.added == 0 { self.node.name.clone() } else { format!("{}#{}", self.node.name, self.added) };
        self.added += 1;
        let all_const = inputs.iter().flatten().all(|p| self.graph.node(p.node).constant().is_some());
        let first = inputs.first().copied().flatten().map(|p| self.graph.ty(p).dtype);
        if all_const && inputs.iter().any(|p| p.is_some()) && !crate::ir::keeps_weight_dequantize(&op, first) {
            let values: Vec<Option<&Tensor>> =
                inputs.iter().map(|p| p.map(|p| self.graph.node(p.node).constant().expect("constant"))).collect();
            let outs = op.eval_owned(&values).map_err(|e| anyhow!("{}: {e}", op.name()))?;
            let n = outs.len();
            return Ok(outs
                .into_iter()
                .enumerate()
                .map(|(i, t)| self.graph.add_constant(&if n == 1 { name.clone() } else { format!("{name}:{i}") }, t))
                .collect());
        }
        let outs = self.graph.add_op(&name, op.clone(), inputs).map_err(|e| anyhow!("{}: {e}", op.name()))?;
        self.propagate_room_values(&op, inputs, &outs);
        Ok(outs)
    }

    /// Evaluates `op` in the room world (see [`Ctx::room_value`]) when its
    /// inputs are small constants or room values, at least one of them a
    /// room value, and records its outputs' room values.
    fn propagate_room_values(&mut self, op: &Op, inputs: &[Option<Port>], outs: &[Port]) {
        if self.room_values.is_empty() || !inputs.iter().flatten().any(|p| self.room_values.contains_key(p)) {
            return;
        }
        let mut values = Vec::with_capacity(inputs.len());
        for p in inputs {
            match p {
                None => values.push(None),
                Some(p) => match self.konst(*p).or_else(|| self.room_values.get(p)) {
                    Some(t) if t.len() <= ROOM_VALUE_ELEMENTS => values.push(Some(t)),
                    _ => return,
                },
            }
        }
        let Ok(results) = op.eval_owned(&values) else { return };
        if results.iter().any(|t| t.len() > ROOM_VALUE_ELEMENTS) {
            return;
        }
        for (&p, t) in outs.iter().zip(results) {
            self.room_values.insert(p, t);
        }
    }

    /// [`Ctx::op`] for ops with one output.
    pub fn op1(&mut self, op: impl Into<Op>, inputs: &[Option<Port>]) -> Result<Port> {
        let outs = self.op(op, inputs)?;
        match outs.as_slice() {
            [p] => Ok(*p),
            _ => bail!("expected one output, got {}", outs.len()),
        }
    }

    /// Adds a constant tensor.
    pub fn constant(&mut self, t: Tensor) -> Port {
        let name = format!("{}#c{}", self.node.name, self.added);
        self.added += 1;
        self.graph.add_constant(&name, t)
    }

    /// Decodes a tensor-valued attribute.
    pub fn tensor_attr(&self, name: &str) -> Result<Option<Tensor>> {
        self.attrs.tensor(name, self.root)
    }
}
