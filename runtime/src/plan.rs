//! The execution plan an engine carries: tensors with their storage, layers
//! in execution order, and the input/output bindings.

use crate::error::{Error, Result};
use crate::ops::Op;
use crate::tensor::TensorType;
use serde::{Deserialize, Serialize};

/// Index of a tensor in [`Plan::tensors`].
pub type TensorId = usize;

/// Where a tensor's bytes live while the engine runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Storage {
    /// In the activation arena, at a byte offset chosen by the memory plan.
    Arena { offset: u64 },
    /// In the weights section, at a byte offset from the section's start.
    Weight { offset: u64 },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorDesc {
    /// The ONNX tensor name it came from.
    pub name: String,
    pub ty: TensorType,
    pub storage: Storage,
}

/// One step of execution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Layer {
    /// Traceable to the ONNX node(s) it came from.
    pub name: String,
    pub op: Op,
    /// `None` is an absent optional input.
    pub inputs: Vec<Option<TensorId>>,
    pub outputs: Vec<TensorId>,
}

/// An input binding whose value was fixed when the engine was built (a shape
/// tensor, like TensorRT's shape inputs): `run` checks the caller passes
/// exactly this value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FixedInput {
    pub name: String,
    /// A weight tensor holding the value.
    pub value: TensorId,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub tensors: Vec<TensorDesc>,
    /// Input bindings, in ONNX graph order; each is an arena tensor.
    pub inputs: Vec<TensorId>,
    /// Inputs fixed at build time; they take no part in execution.
    pub fixed_inputs: Vec<FixedInput>,
    /// Output bindings, in ONNX graph order, with their ONNX names (a tensor
    /// may be an output several times, or be an input or a weight).
    pub outputs: Vec<(String, TensorId)>,
    pub layers: Vec<Layer>,
    /// Bytes of the activation arena.
    pub arena_bytes: u64,
    /// Bytes the activations would take with no buffer reuse (for reports).
    pub arena_bytes_without_reuse: u64,
}

impl Plan {
    /// Checks everything the executor relies on, so that a corrupted or
    /// malicious plan is refused at load time instead of misbehaving:
    /// ids in range, sizes without overflow, storage in bounds, every layer's
    /// declared output types equal to what its op infers, and no two tensors
    /// that are live at the same time overlapping in the arena.
    /// The arithmetic a layer runs in (fp32, fp16 or int8), from its op and
    /// output types; see [`Op::precision`](crate::Op::precision).
    pub fn layer_precision(&self, layer: &Layer) -> crate::ops::precision::Precision {
        let tys: Vec<crate::tensor::TensorType> =
            layer.outputs.iter().filter_map(|&o| self.tensors.get(o)).map(|t| t.ty.clone()).collect();
        layer.op.precision(&tys)
    }

    pub fn validate(&self, weights_len: u64) -> Result<()> {
        let bad = |m: String| Err(Error::invalid(m));
        let n = self.tensors.len();
        let mut sizes = Vec::with_capacity(n);
        for (i, t) in self.tensors.iter().enumerate() {
            let Some(bytes) = t.ty.checked_bytes() else {
                return bad(format!("tensor {i} ({}) size overflows", t.name));
            };
            let (offset, limit) = match t.storage {
                Storage::Arena { offset } => (offset, self.arena_bytes),
                Storage::Weight { offset } => (offset, weights_len),
            };
            if offset % crate::tensor::ALIGN as u64 != 0 {
                return bad(format!("tensor {} is not aligned", t.name));
            }
            match offset.checked_add(bytes as u64) {
                Some(end) if end <= limit => {}
                _ => return bad(format!("tensor {} lies outside its storage", t.name)),
            }
            sizes.push(bytes as u64);
        }
        // The arena is allocated when a context is created: it may not claim
        // more than its tensors reach (rounded up to the planner's alignment).
        let arena_end = self
            .tensors
            .iter()
            .zip(&sizes)
            .filter_map(|(t, &b)| match t.storage {
                Storage::Arena { offset } => Some(offset + b),
                Storage::Weight { .. } => None,
            })
            .max()
            .unwrap_or(0);
        if self.arena_bytes > arena_end.div_ceil(4096) * 4096 + 4096 {
            return bad(format!("arena of {} bytes is larger than its tensors need ({arena_end})", self.arena_bytes));
        }
        let check_id = |id: TensorId| if id < n { Ok(()) } else { Err(Error::invalid(format!("tensor id {id} out of range"))) };
        let is_arena = |id: TensorId| matches!(self.tensors[id].storage, Storage::Arena { .. });
        for &i in &self.inputs {
            check_id(i)?;
            if !is_arena(i) {
                return bad(format!("input {} is not in the arena", self.tensors[i].name));
            }
        }
        for f in &self.fixed_inputs {
            check_id(f.value)?;
            if is_arena(f.value) {
                return bad(format!("fixed input {} has no stored value", f.name));
            }
        }
        for (_, o) in &self.outputs {
            check_id(*o)?;
        }
        // Tensors written by layers: each exactly once, in the arena, never an input.
        let mut produced = vec![false; n];
        for &i in &self.inputs {
            produced[i] = true;
        }
        for (li, layer) in self.layers.iter().enumerate() {
            let mut types = Vec::with_capacity(layer.inputs.len());
            for inp in &layer.inputs {
                match inp {
                    Some(id) => {
                        check_id(*id)?;
                        if is_arena(*id) && !produced[*id] {
                            return bad(format!("layer {} reads {} before it is written", layer.name, self.tensors[*id].name));
                        }
                        types.push(Some(&self.tensors[*id].ty));
                    }
                    None => types.push(None),
                }
            }
            let inferred = layer.op.infer(&types).map_err(|e| Error::invalid(format!("layer {li} ({}): {e}", layer.name)))?;
            if inferred.len() != layer.outputs.len() {
                return bad(format!("layer {} has {} outputs, its op makes {}", layer.name, layer.outputs.len(), inferred.len()));
            }
            for (&o, ty) in layer.outputs.iter().zip(&inferred) {
                check_id(o)?;
                if !is_arena(o) || produced[o] {
                    return bad(format!(
                        "layer {} writes {} which is not a fresh arena tensor",
                        layer.name, self.tensors[o].name
                    ));
                }
                if &self.tensors[o].ty != ty {
                    return bad(format!(
                        "layer {}: output {} declared {} but the op makes {}",
                        layer.name, self.tensors[o].name, self.tensors[o].ty, ty
                    ));
                }
                produced[o] = true;
            }
        }
        for (name, o) in &self.outputs {
            if is_arena(*o) && !produced[*o] {
                return bad(format!("output {name} is never written"));
            }
        }
        self.check_no_live_overlap(&sizes)
    }

    /// Per tensor, whether its size depends on the data: the outputs of a
    /// layer sized by the data (NonMaxSuppression, NonZero, TopK with a
    /// computed `k`...) and everything computed from them. Their types in
    /// the plan are the most they can be.
    pub fn data_sized(&self) -> Vec<bool> {
        let mut sized = vec![false; self.tensors.len()];
        for layer in &self.layers {
            if layer.op.as_impl().data_dependent() || layer.inputs.iter().flatten().any(|&id| sized[id]) {
                for &o in &layer.outputs {
                    sized[o] = true;
                }
            }
        }
        sized
    }

    /// Live ranges `[first, last]` in layer steps of every arena tensor:
    /// inputs are live from step 0, outputs until the end.
    pub fn live_ranges(&self) -> Vec<Option<(usize, usize)>> {
        let mut ranges: Vec<Option<(usize, usize)>> = vec![None; self.tensors.len()];
        let end = self.layers.len();
        for &i in &self.inputs {
            ranges[i] = Some((0, 0));
        }
        for (step, layer) in self.layers.iter().enumerate() {
            for &o in &layer.outputs {
                ranges[o] = Some((step, step));
            }
            for id in layer.inputs.iter().flatten() {
                if let Some((_, last)) = &mut ranges[*id] {
                    *last = (*last).max(step);
                }
            }
        }
        for (_, o) in &self.outputs {
            if let Some((_, last)) = &mut ranges[*o] {
                *last = end;
            }
        }
        for (i, t) in self.tensors.iter().enumerate() {
            if !matches!(t.storage, Storage::Arena { .. }) {
                ranges[i] = None;
            }
        }
        ranges
    }

    fn check_no_live_overlap(&self, sizes: &[u64]) -> Result<()> {
        let ranges = self.live_ranges();
        // Sweep by start step; compare against tensors still live.
        let mut live_tensors: Vec<(usize, usize, usize, u64)> = ranges
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match (r, &self.tensors[i].storage) {
                (Some((first, last)), Storage::Arena { offset }) if sizes[i] > 0 => Some((*first, *last, i, *offset)),
                _ => None,
            })
            .collect();
        live_tensors.sort();
        let mut live: Vec<(usize, usize, u64)> = Vec::new();
        for (start, last, i, a0) in live_tensors {
            live.retain(|&(j_last, _, _)| j_last >= start);
            let a1 = a0 + sizes[i];
            for &(_, j, b0) in &live {
                if a0 < b0 + sizes[j] && b0 < a1 {
                    return Err(Error::invalid(format!(
                        "tensors {} and {} overlap in the arena while both are live",
                        self.tensors[i].name, self.tensors[j].name
                    )));
                }
            }
            live.push((last, i, a0));
        }
        Ok(())
    }
}
