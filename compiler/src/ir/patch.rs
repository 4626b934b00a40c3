//! The rewrite API. A pass does not edit the graph: it reads it, proposes a
//! [`Patch`] (nodes to add, uses to move, nodes to rewrite in place, nodes to
//! drop), and the IR applies it with [`Graph::apply`], checking that nothing
//! still reads a node the patch drops.
//!
//! A patch is a list of steps, applied in the order they were recorded. The
//! order is part of the result: the graph reuses the slots of dropped nodes
//! for the nodes added after them, and the topological order (hence the IR
//! dump and the engine's layer order) breaks ties by slot.
//!
//! ```ignore
//! let mut patch = Patch::new();
//! let fused = patch.add_op(graph, "conv + relu", op, &[x.into(), w.into()])?;
//! patch.replace(relu_out, fused[0]); // uses move; the tensor keeps its name
//! patch.remove(relu);
//! patch.remove(conv);
//! graph.apply(patch)?;
//! ```

use super::{Edge, Graph, Node, NodeKind, Port, TensorInfo};
use anyhow::{bail, Result};
use petgraph::stable_graph::NodeIndex;
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use trtc_runtime::{Op, Tensor, TensorType};

/// A tensor a patch reads: one already in the graph, or an output of a node
/// the patch adds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Wire {
    Graph(Port),
    /// Output `port` of the patch's `node`-th added node.
    New {
        node: usize,
        port: usize,
    },
}

impl From<Port> for Wire {
    fn from(p: Port) -> Wire {
        Wire::Graph(p)
    }
}

/// Optional inputs as wires (a convenience for `add_op`).
pub fn wires(ports: &[Option<Port>]) -> Vec<Option<Wire>> {
    ports.iter().map(|p| p.map(Wire::from)).collect()
}

#[derive(Clone, Debug)]
struct NewNode {
    name: String,
    kind: NodeKind,
    inputs: Vec<Option<Wire>>,
    outputs: Vec<TensorInfo>,
}

#[derive(Clone, Debug)]
enum Step {
    /// Adds the patch's `usize`-th new node.
    Add(usize),
    /// Every use of `from` (edges and graph outputs) reads `to` instead.
    Shunt {
        from: Port,
        to: Wire,
    },
    /// Graph output `index` reads `to`; other uses of its tensor stay.
    SetOutput {
        index: usize,
        to: Wire,
    },
    /// Node `node` runs `op` on `inputs`; its outputs (types and names) stay.
    Rewrite {
        node: NodeIndex,
        op: Op,
        inputs: Vec<Option<Wire>>,
    },
    Remove(NodeIndex),
}

/// A proposed rewrite of a [`Graph`]; see the module documentation.
#[derive(Clone, Debug, Default)]
pub struct Patch {
    nodes: Vec<NewNode>,
    steps: Vec<Step>,
}

impl Patch {
    pub fn new() -> Patch {
        Patch::default()
    }

    /// Whether the patch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// The type of a wire: `graph` is the graph the patch is for.
    pub fn ty<'a>(&'a self, graph: &'a Graph, w: Wire) -> &'a TensorType {
        match w {
            Wire::Graph(p) => graph.ty(p),
            Wire::New { node, port } => &self.nodes[node].outputs[port].ty,
        }
    }

    fn push_node(&mut self, node: NewNode) -> usize {
        let i = self.nodes.len();
        self.nodes.push(node);
        self.steps.push(Step::Add(i));
        i
    }

    pub fn add_constant(&mut self, name: &str, value: Tensor) -> Wire {
        let ty = value.ty().clone();
        let node = self.push_node(NewNode {
            name: name.to_string(),
            kind: NodeKind::Constant(value),
            inputs: Vec::new(),
            outputs: vec![TensorInfo { name: name.to_string(), ty }],
        });
        Wire::New { node, port: 0 }
    }

    /// Adds an op node, inferring its output types (named `name`, `name:1`,
    /// ...). An op that rejects its inputs adds nothing and returns the error.
    pub fn add_op(&mut self, graph: &Graph, name: &str, op: Op, inputs: &[Option<Wire>]) -> trtc_runtime::Result<Vec<Wire>> {
        let types: Vec<Option<&TensorType>> = inputs.iter().map(|w| w.map(|w| self.ty(graph, w))).collect();
        let out_types = super::checked_infer(&op, &types)?;
        let outputs: Vec<TensorInfo> = out_types
            .into_iter()
            .enumerate()
            .map(|(i, ty)| TensorInfo { name: if i == 0 { name.to_string() } else { format!("{name}:{i}") }, ty })
            .collect();
        let n_out = outputs.len();
        let node = self.push_node(NewNode { name: name.to_string(), kind: NodeKind::Op(op), inputs: inputs.to_vec(), outputs });
        Ok((0..n_out).map(|port| Wire::New { node, port }).collect())
    }

    /// Every use of `from` reads `to` instead. When `to` is a new node's
    /// output it takes `from`'s tensor name, so tensors keep the names users
    /// and calibration tables know them by.
    pub fn replace(&mut self, graph: &Graph, from: Port, to: Wire) {
        if let Wire::New { node, port } = to {
            self.nodes[node].outputs[port].name = graph.node(from.node).outputs[from.port].name.clone();
        }
        self.shunt(from, to);
    }

    /// Every use of `from` reads `to` instead; names stay as they are.
    pub fn shunt(&mut self, from: Port, to: Wire) {
        self.steps.push(Step::Shunt { from, to });
    }

    /// Graph output `index` reads `to`; other readers of its old tensor stay.
    pub fn set_output(&mut self, index: usize, to: Wire) {
        self.steps.push(Step::SetOutput { index, to });
    }

    /// Node `n` runs `op` on `inputs` instead, in place: its slot, name and
    /// output tensors stay, so `op` must infer the types it had.
    pub fn rewrite(&mut self, graph: &Graph, n: NodeIndex, op: Op, inputs: &[Option<Wire>]) -> Result<()> {
        let types: Vec<Option<&TensorType>> = inputs.iter().map(|w| w.map(|w| self.ty(graph, w))).collect();
        let inferred = op.infer(&types).map_err(|e| anyhow::anyhow!("rewriting {}: {e}", graph.node(n).name))?;
        let declared: Vec<&TensorType> = graph.node(n).outputs.iter().map(|o| &o.ty).collect();
        if inferred.iter().collect::<Vec<_>>() != declared {
            bail!("rewriting {}: the new op infers {:?}, the node has {:?}", graph.node(n).name, inferred, declared);
        }
        self.steps.push(Step::Rewrite { node: n, op, inputs: inputs.to_vec() });
        Ok(())
    }

    /// Replaces op node `n` by a new node with the same name running `op` on
    /// `inputs`; its outputs take the old tensors' names and uses. Returns
    /// the new node's outputs.
    pub fn replace_node(&mut self, graph: &Graph, n: NodeIndex, op: Op, inputs: &[Option<Wire>]) -> Result<Vec<Wire>> {
        let old = graph.node(n);
        let outs = self.add_op(graph, &old.name, op, inputs).map_err(|e| anyhow::anyhow!("rewriting {}: {e}", old.name))?;
        if outs.len() != old.outputs.len() {
            bail!("rewriting {}: the new op has {} outputs, the node has {}", old.name, outs.len(), old.outputs.len());
        }
        for (port, &w) in outs.iter().enumerate() {
            self.replace(graph, Port { node: n, port }, w);
        }
        self.remove(n);
        Ok(outs)
    }

    /// Drops node `n`. Whatever still reads it when the patch is applied
    /// must be dropped by the same patch.
    pub fn remove(&mut self, n: NodeIndex) {
        self.steps.push(Step::Remove(n));
    }
}

/// Where an applied patch's new nodes landed.
#[derive(Clone, Debug)]
pub struct Applied {
    nodes: Vec<NodeIndex>,
}

impl Applied {
    /// The graph port of a wire of the applied patch.
    pub fn port(&self, w: Wire) -> Port {
        match w {
            Wire::Graph(p) => p,
            Wire::New { node, port } => Port { node: self.nodes[node], port },
        }
    }
}

impl Graph {
    /// Applies a patch, step by step in the order they were recorded. Fails,
    /// naming the node, when a step refers to a node that is not there or
    /// the patch drops a node something it keeps still reads; the graph is
    /// then left half-rewritten, which the pass manager reports as the
    /// pass's error.
    pub fn apply(&mut self, patch: Patch) -> Result<Applied> {
        let Patch { nodes, steps } = patch;
        let mut nodes: Vec<Option<NewNode>> = nodes.into_iter().map(Some).collect();
        let mut placed: Vec<NodeIndex> = Vec::with_capacity(nodes.len());
        // (removed node, a node that read it): each reader must be removed
        // later in the same patch, which clears its entries. Tracking the
        // readers themselves, not their slots, stays right when an added
        // node reuses a removed node's slot.
        let mut readers: Vec<(String, NodeIndex)> = Vec::new();
        let resolve = |placed: &[NodeIndex], w: Wire| -> Result<Port> {
            match w {
                Wire::Graph(p) => Ok(p),
                Wire::New { node, port } => match placed.get(node) {
                    Some(&n) => Ok(Port { node: n, port }),
                    None => bail!("patch reads its node {node} before adding it"),
                },
            }
        };
        for step in steps {
            match step {
                Step::Add(i) => {
                    let NewNode { name, kind, inputs, outputs } = nodes[i].take().expect("each node is added once");
                    let ports = inputs.iter().map(|w| w.map(|w| resolve(&placed, w)).transpose()).collect::<Result<Vec<_>>>()?;
                    for p in ports.iter().flatten() {
                        self.check_port(*p, &name)?;
                    }
                    let node = self.g.add_node(Node { name, kind, num_inputs: inputs.len(), outputs });
                    for (slot, p) in ports.iter().enumerate() {
                        if let Some(p) = p {
                            self.g.add_edge(p.node, node, Edge { src_port: p.port, dst_slot: slot });
                        }
                    }
                    placed.push(node);
                }
                Step::Shunt { from, to } => {
                    let to = resolve(&placed, to)?;
                    self.check_port(from, "a shunt")?;
                    self.check_port(to, "a shunt")?;
                    self.replace_uses(from, to);
                }
                Step::SetOutput { index, to } => {
                    let to = resolve(&placed, to)?;
                    self.check_port(to, "an output")?;
                    let Some(o) = self.outputs.get_mut(index) else {
                        bail!("patch sets graph output {index}, which does not exist")
                    };
                    o.port = to;
                }
                Step::Rewrite { node, op, inputs } => {
                    if !self.g.contains_node(node) {
                        bail!("patch rewrites a node that is not in the graph");
                    }
                    let ports = inputs.iter().map(|w| w.map(|w| resolve(&placed, w)).transpose()).collect::<Result<Vec<_>>>()?;
                    let old: Vec<_> = self.g.edges_directed(node, Direction::Incoming).map(|e| e.id()).collect();
                    for e in old {
                        self.g.remove_edge(e);
                    }
                    for (slot, p) in ports.iter().enumerate() {
                        if let Some(p) = p {
                            self.check_port(*p, &self.g[node].name.clone())?;
                            self.g.add_edge(p.node, node, Edge { src_port: p.port, dst_slot: slot });
                        }
                    }
                    let n = &mut self.g[node];
                    n.kind = NodeKind::Op(op);
                    n.num_inputs = ports.len();
                }
                Step::Remove(node) => {
                    if !self.g.contains_node(node) {
                        bail!("patch removes a node that is not in the graph");
                    }
                    let name = &self.g[node].name;
                    if self.outputs.iter().any(|o| o.port.node == node) {
                        bail!("patch removes {name}, which a graph output still reads");
                    }
                    let name = name.clone();
                    readers.retain(|(_, r)| *r != node);
                    readers.extend(self.g.neighbors_directed(node, Direction::Outgoing).map(|r| (name.clone(), r)));
                    self.g.remove_node(node);
                }
            }
        }
        if let Some((name, r)) = readers.first() {
            bail!("patch removes {name}, which {} still reads", self.g[*r].name);
        }
        Ok(Applied { nodes: placed })
    }

    fn check_port(&self, p: Port, user: &str) -> Result<()> {
        if !self.g.contains_node(p.node) || p.port >= self.g[p.node].outputs.len() {
            bail!("{user} reads a tensor that is not in the graph");
        }
        Ok(())
    }

    /// Offers every node, in topological order, to `propose`, and applies
    /// the patches it returns; nodes an earlier patch dropped are skipped.
    /// Returns how many patches were applied.
    pub fn rewrite_each(&mut self, mut propose: impl FnMut(&Graph, NodeIndex) -> Result<Option<Patch>>) -> Result<usize> {
        let mut applied = 0;
        for n in self.topo_order() {
            if !self.contains(n) {
                continue;
            }
            if let Some(patch) = propose(self, n)? {
                self.apply(patch)?;
                applied += 1;
            }
        }
        Ok(applied)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trtc_runtime::ops::elementwise::{Unary, UnaryKind};
    use trtc_runtime::ops::movement::Reshape;
    use trtc_runtime::DType;

    fn unary(kind: UnaryKind) -> Op {
        Unary::new(kind).into()
    }

    /// `x -> relu -> neg -> y`.
    fn chain() -> (Graph, Port, Port, Port) {
        let mut g = Graph::new();
        let x = g.add_input("x", TensorType::new(DType::F32, vec![2, 3]));
        let r = g.add_op("relu", unary(UnaryKind::Relu), &[Some(x)]).unwrap()[0];
        let n = g.add_op("neg", unary(UnaryKind::Neg), &[Some(r)]).unwrap()[0];
        g.add_output("y", n);
        (g, x, r, n)
    }

    #[test]
    fn replace_moves_uses_and_keeps_the_tensor_name() {
        let (mut g, x, r, n) = chain();
        let mut patch = Patch::new();
        let e = patch.add_op(&g, "exp", unary(UnaryKind::Exp), &[Some(x.into())]).unwrap()[0];
        patch.replace(&g, r, e);
        patch.remove(r.node);
        let applied = g.apply(patch).unwrap();
        let e = applied.port(e);
        assert_eq!(g.node(e.node).outputs[0].name, "relu");
        assert_eq!(g.inputs_of(n.node), vec![Some(e)]);
        assert!(!g.contains(r.node) || g.node(r.node).name == "exp");
        super::super::verify(&g).unwrap();
    }

    #[test]
    fn removing_a_node_that_is_still_read_fails_and_names_it() {
        let (mut g, _, r, _) = chain();
        let mut patch = Patch::new();
        patch.remove(r.node);
        let err = g.apply(patch).unwrap_err().to_string();
        assert_eq!(err, "patch removes relu, which neg still reads");
    }

    #[test]
    fn removing_a_graph_output_fails() {
        let (mut g, _, _, n) = chain();
        let mut patch = Patch::new();
        patch.remove(n.node);
        assert_eq!(g.apply(patch).unwrap_err().to_string(), "patch removes neg, which a graph output still reads");
    }

    #[test]
    fn a_chain_removed_together_is_fine() {
        let (mut g, x, r, n) = chain();
        let mut patch = Patch::new();
        patch.set_output(0, x.into());
        patch.remove(r.node);
        patch.remove(n.node);
        g.apply(patch).unwrap();
        assert_eq!(g.op_count(), 0);
        assert_eq!(g.outputs()[0].port, x);
    }

    #[test]
    fn rewrite_keeps_the_node_and_checks_its_types() {
        let (mut g, x, r, n) = chain();
        let mut patch = Patch::new();
        patch.rewrite(&g, n.node, unary(UnaryKind::Abs), &[Some(x.into())]).unwrap();
        let err = patch.rewrite(&g, n.node, Reshape { shape: vec![3, 2] }.into(), &[Some(x.into())]).unwrap_err();
        assert!(err.to_string().starts_with("rewriting neg: the new op infers"), "{err}");
        g.apply(patch).unwrap();
        assert_eq!(g.inputs_of(n.node), vec![Some(x)]);
        assert_eq!(g.node(n.node).op().map(|o| o.name()), Some("Abs"));
        assert!(g.consumers(r).is_empty());
    }

    #[test]
    fn steps_apply_in_order_so_an_added_node_reuses_a_removed_slot() {
        let (mut g, x, r, n) = chain();
        let mut patch = Patch::new();
        patch.shunt(r, x.into());
        patch.remove(r.node);
        let e = patch.add_op(&g, "exp", unary(UnaryKind::Exp), &[Some(x.into())]).unwrap()[0];
        patch.shunt(n, e);
        patch.remove(n.node);
        let applied = g.apply(patch).unwrap();
        // StableGraph hands out the most recently freed slot first.
        assert_eq!(applied.port(e).node, r.node);
        assert_eq!(g.outputs()[0].port, applied.port(e));
    }

    #[test]
    fn a_node_added_into_a_freed_slot_cannot_keep_reading_a_removed_node() {
        let (mut g, x, r, n) = chain();
        let mut patch = Patch::new();
        // neg goes first; exp takes its slot and reads relu, which then goes.
        patch.set_output(0, x.into());
        patch.remove(n.node);
        patch.add_op(&g, "exp", unary(UnaryKind::Exp), &[Some(r.into())]).unwrap();
        patch.remove(r.node);
        assert_eq!(g.apply(patch).unwrap_err().to_string(), "patch removes relu, which exp still reads");
    }

    #[test]
    fn an_op_that_rejects_its_inputs_adds_nothing() {
        let (g, x, _, _) = chain();
        let mut patch = Patch::new();
        assert!(patch.add_op(&g, "bad", Reshape { shape: vec![5] }.into(), &[Some(x.into())]).is_err());
        assert!(patch.is_empty());
    }

    #[test]
    fn rewrite_each_skips_nodes_an_earlier_patch_dropped() {
        let (mut g, x, _, _) = chain();
        let mut seen = Vec::new();
        // At relu, drop both ops; neg must not be offered afterwards.
        let applied = g
            .rewrite_each(|g, n| {
                seen.push(g.node(n).name.clone());
                if g.node(n).name != "relu" {
                    return Ok(None);
                }
                let neg = g.consumers(Port { node: n, port: 0 })[0].0;
                let mut patch = Patch::new();
                patch.set_output(0, x.into());
                patch.remove(n);
                patch.remove(neg);
                Ok(Some(patch))
            })
            .unwrap();
        assert_eq!(applied, 1);
        assert_eq!(seen, ["x", "relu"]);
    }
}
