//! Common-subexpression elimination: two ops with the same op, attributes and
//! inputs compute the same thing; keep one. Equal small constants merge too.

use super::Pass;
use crate::ir::{Graph, NodeKind, Patch, Port};
use anyhow::Result;
use petgraph::stable_graph::NodeIndex;
use std::collections::HashMap;
use trtc_runtime::TensorType;

pub struct CommonSubexpressions;

/// What two nodes must share to be compared in full.
#[derive(PartialEq, Eq, Hash)]
enum Bucket {
    Constant(TensorType),
    Op(&'static str, Vec<Option<Port>>),
}

/// Constants up to this size are compared byte for byte.
const MAX_CONST_BYTES: usize = 4096;

impl Pass for CommonSubexpressions {
    fn name(&self) -> &'static str {
        "cse"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        let mut rewrites = 0;
        let order = graph.topo_order();
        // Representatives seen so far, keyed by what is cheap to compare
        // (op name and inputs, or a constant's type); full equality is
        // checked within a bucket.
        let mut seen: HashMap<Bucket, Vec<NodeIndex>> = HashMap::new();
        // Merged nodes lose their uses at once and are removed at the end,
        // together, newest first (see `Graph::remove_nodes`).
        let mut merged = Vec::new();
        for n in order {
            let key = match &graph.node(n).kind {
                NodeKind::Input => continue,
                NodeKind::Constant(t) if t.bytes().len() <= MAX_CONST_BYTES => Bucket::Constant(t.ty().clone()),
                NodeKind::Constant(_) => continue,
                NodeKind::Op(op) => Bucket::Op(op.name(), graph.inputs_of(n)),
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
                    let mut patch = Patch::new();
                    for port in 0..graph.node(n).outputs.len() {
                        patch.shunt(Port { node: n, port }, Port { node: m, port }.into());
                    }
                    graph.apply(patch)?;
                    merged.push(n);
                    rewrites += 1;
                }
                None => candidates.push(n),
            }
        }
        merged.sort_unstable_by(|a, b| b.cmp(a));
        let mut patch = Patch::new();
        for n in merged {
            patch.remove(n);
        }
        graph.apply(patch)?;
        Ok(rewrites)
    }
}
