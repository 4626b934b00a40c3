//! Common-subexpression elimination: two ops with the same op, attributes and
//! inputs compute the same thing; keep one. Equal small constants merge too.

use super::Pass;
use crate::ir::{Graph, NodeKind, Port};
use anyhow::Result;

pub struct CommonSubexpressions;

/// Constants up to this size are compared byte for byte.
const MAX_CONST_BYTES: usize = 4096;

impl Pass for CommonSubexpressions {
    fn name(&self) -> &'static str {
        "cse"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        let mut rewrites = 0;
        let order = graph.topo_order();
        // Representatives seen so far, keyed by a cheap hash of op name and
        // inputs; full equality is checked on collision.
        let mut seen: std::collections::HashMap<String, Vec<petgraph::stable_graph::NodeIndex>> = Default::default();
        // Merged nodes lose their uses at once and are removed at the end,
        // together (see `Graph::remove_nodes`).
        let mut merged = Vec::new();
        for n in order {
            if !graph.g.contains_node(n) {
                continue;
            }
            let key = match &graph.node(n).kind {
                NodeKind::Input => continue,
                NodeKind::Constant(t) if t.bytes().len() <= MAX_CONST_BYTES => format!("const {}", t.ty()),
                NodeKind::Constant(_) => continue,
                NodeKind::Op(op) => format!("{} {:?}", op.name(), graph.inputs_of(n)),
            };
            let candidates = seen.entry(key).or_default();
            let same = candidates.iter().copied().find(|&m| {
                let (a, b) = (graph.node(m), graph.node(n));
                match (&a.kind, &b.kind) {
                    (NodeKind::Constant(x), NodeKind::Constant(y)) => x == y,
                    (NodeKind::Op(x), NodeKind::Op(y)) => x == y && graph.inputs_of(m) == graph.inputs_of(n),
                    _ => false,
                }
            });
            match same {
                Some(m) => {
                    for port in 0..graph.node(n).outputs.len() {
                        let from = Port { node: n, port };
                        // Keep graph outputs' own tensors bound where they are.
                        graph.replace_uses(from, Port { node: m, port });
                    }
                    merged.push(n);
                    rewrites += 1;
                }
                None => candidates.push(n),
            }
        }
        graph.remove_nodes(merged);
        Ok(rewrites)
    }
}
