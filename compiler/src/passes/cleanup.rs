//! Cleanup passes: dead nodes, and ops that do nothing.

use super::Pass;
use crate::ir::{Graph, NodeKind, Patch, Port};
use anyhow::Result;
use trtc_runtime::ops::movement::{MovementOp, ReshapeDim};
use trtc_runtime::ops::Op;

/// Removes nodes no graph output depends on.
pub struct DeadNodes;

impl Pass for DeadNodes {
    fn name(&self) -> &'static str {
        "dead-nodes"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        Ok(graph.remove_dead_nodes())
    }
}

/// Removes single-input ops whose output is bit-identical to their input:
/// a Reshape, Expand or Tile to the same shape, a Cast to the same dtype, an
/// Identity-like copy, a DynamicReshape that copies every axis (an identity
/// at every shape); and collapses Reshape chains into one Reshape.
pub struct NoOpRemoval;

/// Ops that only reinterpret or copy their data when input and output types
/// are equal.
const COPY_WHEN_SAME_TYPE: &[&str] = &["Reshape", "Cast", "Identity", "Expand", "Tile"];

impl Pass for NoOpRemoval {
    fn name(&self) -> &'static str {
        "no-op-removal"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        graph.rewrite_each(|graph, n| {
            let NodeKind::Op(op) = &graph.node(n).kind else { return Ok(None) };
            let name = op.name();
            let inputs = graph.inputs_of(n);
            if inputs.len() != 1 || graph.node(n).outputs.len() != 1 {
                return Ok(None);
            }
            let Some(src) = inputs[0] else { return Ok(None) };
            let out = Port { node: n, port: 0 };
            let mut patch = Patch::new();
            let identity_at_every_shape = match op {
                Op::Movement(MovementOp::DynamicReshape(d)) => {
                    d.dims.len() == graph.ty(src).shape.len()
                        && d.dims.iter().enumerate().all(|(i, dim)| *dim == ReshapeDim::Copy(i))
                }
                _ => false,
            };
            if (COPY_WHEN_SAME_TYPE.contains(&name) || identity_at_every_shape) && graph.ty(src) == graph.ty(out) {
                // A graph output that is directly a graph input must stay a copy
                // only if the names differ; outputs are bound by name, so keep it.
                if graph.is_output(out) && graph.node(src.node).kind_is_input() {
                    return Ok(None);
                }
                patch.shunt(out, src.into());
                patch.remove(n);
                return Ok(Some(patch));
            }
            // Reshape(Reshape(x)) -> Reshape(x).
            if name == "Reshape" {
                let producer = graph.node(src.node);
                if producer.op().is_some_and(|p| p.name() == "Reshape")
                    && graph.consumers(src).len() == 1
                    && !graph.is_output(src)
                {
                    if let Some(inner) = graph.inputs_of(src.node)[0] {
                        patch.rewrite(graph, n, op.clone(), &[Some(inner.into())])?;
                        patch.remove(src.node);
                        return Ok(Some(patch));
                    }
                }
            }
            Ok(None)
        })
    }
}
