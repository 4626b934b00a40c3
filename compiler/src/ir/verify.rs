//! The IR's invariants, checked after every pass in debug builds and tests.

use super::{Graph, NodeKind};
use anyhow::{bail, Result};
use petgraph::visit::EdgeRef;
use petgraph::Direction;

/// Checks that the graph is acyclic, that every edge connects an existing
/// output to an existing slot, that no slot has two producers, and that every
/// op node's declared output types are what its op infers.
pub fn verify(graph: &Graph) -> Result<()> {
    // Kahn's algorithm orders every node of an acyclic graph (petgraph's
    // `is_cyclic_directed` recurses, and overflows the stack on long chains).
    if graph.topo_order().len() != graph.g.node_count() {
        bail!("graph has a cycle");
    }
    for n in graph.g.node_indices() {
        let node = &graph.g[n];
        let mut seen = vec![false; node.num_inputs];
        for e in graph.g.edges_directed(n, Direction::Incoming) {
            let w = e.weight();
            let src = &graph.g[e.source()];
            if w.src_port >= src.outputs.len() {
                bail!("edge from {} port {} which does not exist", src.name, w.src_port);
            }
            if w.dst_slot >= node.num_inputs || std::mem::replace(&mut seen[w.dst_slot], true) {
                bail!("node {} slot {} has a bad or duplicate edge", node.name, w.dst_slot);
            }
        }
        match &node.kind {
            NodeKind::Op(op) => {
                let inputs = graph.inputs_of(n);
                let types: Vec<_> = inputs.iter().map(|p| p.map(|p| graph.ty(p))).collect();
                let inferred = op.infer(&types).map_err(|e| anyhow::anyhow!("node {}: {e}", node.name))?;
                let declared: Vec<_> = node.outputs.iter().map(|o| o.ty.clone()).collect();
                if inferred != declared {
                    bail!("node {}: declared outputs {:?} but op infers {:?}", node.name, declared, inferred);
                }
            }
            NodeKind::Constant(t) => {
                if node.outputs.len() != 1 || &node.outputs[0].ty != t.ty() {
                    bail!("constant {} has a wrong declared type", node.name);
                }
            }
            NodeKind::Input => {
                if !graph.inputs.contains(&n) {
                    bail!("input node {} is not a graph input", node.name);
                }
            }
        }
    }
    for o in &graph.outputs {
        if !graph.g.contains_node(o.port.node) || o.port.port >= graph.g[o.port.node].outputs.len() {
            bail!("graph output {} refers to a missing tensor", o.name);
        }
    }
    Ok(())
}
