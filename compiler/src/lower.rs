//! Lowering: the optimized IR becomes an execution plan (layers in order,
//! constants in the weights section, activations placed by the memory plan).

use crate::ir::{Graph, NodeKind, Port};
use anyhow::{bail, Result};
use std::collections::HashMap;
use trtc_runtime::engine::SECTION_ALIGN;
use trtc_runtime::memory::{self, Interval};
use trtc_runtime::plan::{FixedInput, Layer, Plan, Storage, TensorDesc, TensorId};

/// Options of lowering.
#[derive(Clone, Copy, Debug)]
pub struct LowerOptions {
    /// Reuse activation buffers whose live ranges do not overlap.
    pub reuse_buffers: bool,
}

impl Default for LowerOptions {
    fn default() -> Self {
        LowerOptions { reuse_buffers: true }
    }
}

/// A plan and the bytes of its weights section.
pub struct Lowered {
    pub plan: Plan,
    pub weights: Vec<u8>,
}

fn align(v: usize, a: usize) -> usize {
    v.div_ceil(a) * a
}

pub fn lower(graph: &Graph, opts: LowerOptions) -> Result<Lowered> {
    let mut plan = Plan::default();
    let mut weights: Vec<u8> = Vec::new();
    let mut ids: HashMap<Port, TensorId> = HashMap::new();
    let weight_align = SECTION_ALIGN as usize;

    let add_weight = |plan: &mut Plan, weights: &mut Vec<u8>, name: &str, t: &trtc_runtime::Tensor| -> TensorId {
        let offset = align(weights.len(), weight_align);
        weights.resize(offset, 0);
        weights.extend_from_slice(t.bytes());
        plan.tensors.push(TensorDesc {
            name: name.to_string(),
            ty: t.ty().clone(),
            storage: Storage::Weight { offset: offset as u64 },
        });
        plan.tensors.len() - 1
    };

    for &n in graph.inputs() {
        let o = &graph.node(n).outputs[0];
        plan.tensors.push(TensorDesc { name: o.name.clone(), ty: o.ty.clone(), storage: Storage::Arena { offset: 0 } });
        let id = plan.tensors.len() - 1;
        plan.inputs.push(id);
        ids.insert(Port { node: n, port: 0 }, id);
    }
    for (name, value) in graph.fixed_inputs() {
        let id = add_weight(&mut plan, &mut weights, name, value);
        plan.fixed_inputs.push(FixedInput { name: name.clone(), value: id });
    }
    for n in graph.topo_order() {
        let node = graph.node(n);
        match &node.kind {
            NodeKind::Input => {}
            NodeKind::Constant(t) => {
                let id = add_weight(&mut plan, &mut weights, &node.outputs[0].name, t);
                ids.insert(Port { node: n, port: 0 }, id);
            }
            NodeKind::Op(op) => {
                let inputs = graph.inputs_of(n).into_iter().map(|p| p.map(|p| ids[&p])).collect::<Vec<_>>();
                let mut outputs = Vec::with_capacity(node.outputs.len());
                for (port, o) in node.outputs.iter().enumerate() {
                    plan.tensors.push(TensorDesc {
                        name: o.name.clone(),
                        ty: o.ty.clone(),
                        storage: Storage::Arena { offset: 0 },
                    });
                    let id = plan.tensors.len() - 1;
                    ids.insert(Port { node: n, port }, id);
                    outputs.push(id);
                }
                plan.layers.push(Layer { name: node.name.clone(), op: op.clone(), inputs, outputs });
            }
        }
    }
    for o in graph.outputs() {
        let Some(&id) = ids.get(&o.port) else { bail!("output {} has no tensor", o.name) };
        plan.outputs.push((o.name.clone(), id));
    }
    // Drop weights nobody reads (constants folded into others).
    assign_memory(&mut plan, opts)?;
    plan.validate(weights.len() as u64).map_err(|e| anyhow::anyhow!("internal error: lowered plan is invalid: {e}"))?;
    Ok(Lowered { plan, weights })
}

fn assign_memory(plan: &mut Plan, opts: LowerOptions) -> Result<()> {
    let mut ranges = plan.live_ranges();
    // An input binding keeps its bytes for the whole run, as TensorRT's do:
    // a context may execute again without copying its inputs in (a CUDA
    // graph replay, `time_enqueues`), and a caller's input is never clobbered.
    let end = plan.layers.len();
    for &i in &plan.inputs {
        if let Some((_, last)) = &mut ranges[i] {
            *last = end;
        }
    }
    let (arena_ids, intervals): (Vec<TensorId>, Vec<Interval>) = ranges
        .iter()
        .enumerate()
        .filter_map(|(i, r)| r.map(|(first, last)| (i, Interval { bytes: plan.tensors[i].ty.bytes() as u64, first, last })))
        .unzip();
    let align = trtc_runtime::tensor::ALIGN.max(256) as u64;
    let without = memory::plan_without_reuse(&intervals, align);
    let chosen = if opts.reuse_buffers { memory::plan_with_reuse(&intervals, align) } else { without.clone() };
    for (k, &i) in arena_ids.iter().enumerate() {
        plan.tensors[i].storage = Storage::Arena { offset: chosen.offsets[k] };
    }
    plan.arena_bytes = chosen.arena_bytes;
    plan.arena_bytes_without_reuse = without.arena_bytes;
    Ok(())
}
