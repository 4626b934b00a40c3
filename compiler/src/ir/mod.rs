//! The IR: a `petgraph` graph of nodes (graph inputs, constants, ops) whose
//! edges carry tensors. Every tensor has a static dtype and shape.
//!
//! An edge `a -> b` with weight `Edge { src_port, dst_slot }` says that output
//! `src_port` of `a` feeds input slot `dst_slot` of `b`. A node has
//! `num_inputs` slots; a slot with no edge is an absent optional input.

mod dump;
mod fold;
mod verify;
mod patch;
mod sub_plan;

use petgraph::stable_graph::{NodeIndex, StableDiGraph};
use petgraph::visit::EdgeRef;
use petgraph::Direction;
use trtc_runtime::{Op, Tensor, TensorType};

pub use fold::keeps_weight_dequantize;
pub use patch::{wires, Applied, Patch, Wire};
pub use sub_plan::{from_sub_plan, to_sub_plan};
pub use verify::verify;

/// One output of one node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Port {
    pub node: NodeIndex,
    pub port: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edge {
    pub src_port: usize,
    pub dst_slot: usize,
}

#[derive(Clone, Debug)]
pub enum NodeKind {
    /// A graph input binding.
    Input,
    /// A weight or folded constant.
    Constant(Tensor),
    Op(Op),
}

/// A named tensor produced by a node.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub name: String,
    pub ty: TensorType,
}

#[derive(Clone, Debug)]
pub struct Node {
    /// Traceable to the ONNX node(s) it came from.
    pub name: String,
    pub kind: NodeKind,
    pub num_inputs: usize,
    pub outputs: Vec<TensorInfo>,
}

impl Node {
    pub fn op(&self) -> Option<&Op> {
        match &self.kind {
            NodeKind::Op(op) => Some(op),
            _ => None,
        }
    }

    pub fn kind_is_input(&self) -> bool {
        matches!(self.kind, NodeKind::Input)
    }

    pub fn constant(&self) -> Option<&Tensor> {
        match &self.kind {
            NodeKind::Constant(t) => Some(t),
            _ => None,
        }
    }
}

/// A graph output binding.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphOutput {
    pub name: String,
    pub port: Port,
}

/// The graph. Its storage is private to `ir/`: passes read it through the
/// methods below and change it only by applying a [`Patch`]. The `add_*`
/// methods build a graph (the frontend, tests).
#[derive(Clone, Debug, Default)]
pub struct Graph {
    g: StableDiGraph<Node, Edge>,
    /// Input nodes, in the ONNX model's order.
    inputs: Vec<NodeIndex>,
    outputs: Vec<GraphOutput>,
    /// Inputs whose value was fixed at build time (shape tensors): name and value.
    fixed_inputs: Vec<(String, Tensor)>,
    /// The names the model gives input dimensions (ONNX `dim_param`), per
    /// input: the axes that share a name must agree at run time.
    dim_names: Vec<(String, Vec<Option<String>>)>,
    /// The nodes whose outputs' sizes may depend on the data, as
    /// `add_op` and [`Graph::mark_data_sized`] record them (see
    /// [`Graph::is_data_sized`]).
    data_sized: std::collections::HashSet<NodeIndex>,
}

/// Infers an op's output types and checks that each fits in memory
/// addresses, so later code may use `TensorType::len`/`bytes` freely.
fn checked_infer(op: &Op, inputs: &[Option<&TensorType>]) -> trtc_runtime::Result<Vec<TensorType>> {
    let out_types = op.infer(inputs)?;
    if let Some(t) = out_types.iter().find(|t| t.checked_bytes().is_none()) {
        return Err(trtc_runtime::Error::op(format!("{}: output {t} is too large", op.name())));
    }
    Ok(out_types)
}

impl Graph {
    pub fn new() -> Graph {
        Graph::default()
    }

    pub fn node(&self, n: NodeIndex) -> &Node {
        &self.g[n]
    }

    /// Whether a node is (still) in the graph.
    pub fn contains(&self, n: NodeIndex) -> bool {
        self.g.contains_node(n)
    }

    /// Every node's index, in slot order.
    pub fn node_ids(&self) -> impl Iterator<Item = NodeIndex> + '_ {
        self.g.node_indices()
    }

    /// Every node, in slot order.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> + '_ {
        self.g.node_weights()
    }

    /// Number of nodes of every kind (inputs and constants included).
    pub fn node_count(&self) -> usize {
        self.g.node_count()
    }

    /// The input nodes, in the model's order.
    pub fn inputs(&self) -> &[NodeIndex] {
        &self.inputs
    }

    /// The output bindings, in the model's order.
    pub fn outputs(&self) -> &[GraphOutput] {
        &self.outputs
    }

    /// Inputs whose value was fixed at build time: name and value.
    pub fn fixed_inputs(&self) -> &[(String, Tensor)] {
        &self.fixed_inputs
    }

    /// Binds a tensor as a graph output.
    pub fn add_output(&mut self, name: &str, port: Port) {
        self.outputs.push(GraphOutput { name: name.to_string(), port });
    }

    /// Records an input whose value the build fixed (it is not bound at run time).
    /// Records the names the model gives an input's dimensions.
    pub fn set_dim_names(&mut self, input: &str, names: Vec<Option<String>>) {
        self.dim_names.retain(|(n, _)| n != input);
        self.dim_names.push((input.to_string(), names));
    }

    /// The names the model gives an input's dimensions, if it names any.
    pub fn dim_names(&self, input: &str) -> Option<&[Option<String>]> {
        self.dim_names.iter().find(|(n, _)| n == input).map(|(_, d)| d.as_slice())
    }

    pub fn add_fixed_input(&mut self, name: &str, value: Tensor) {
        self.fixed_inputs.push((name.to_string(), value));
    }

    /// Renames a tensor (the frontend names tensors after the model's).
    pub fn set_tensor_name(&mut self, p: Port, name: &str) {
        self.g[p.node].outputs[p.port].name = name.to_string();
    }

    pub fn ty(&self, p: Port) -> &TensorType {
        &self.g[p.node].outputs[p.port].ty
    }

    pub fn add_input(&mut self, name: &str, ty: TensorType) -> Port {
        let node = self.g.add_node(Node {
            name: name.to_string(),
            kind: NodeKind::Input,
            num_inputs: 0,
            outputs: vec![TensorInfo { name: name.to_string(), ty }],
        });
        self.inputs.push(node);
        Port { node, port: 0 }
    }

    pub fn add_constant(&mut self, name: &str, value: Tensor) -> Port {
        let ty = value.ty().clone();
        let node = self.g.add_node(Node {
            name: name.to_string(),
            kind: NodeKind::Constant(value),
            num_inputs: 0,
            outputs: vec![TensorInfo { name: name.to_string(), ty }],
        });
        Port { node, port: 0 }
    }

    /// Adds an op node, inferring its output types. Output tensors are named
    /// `name`, `name:1`, `name:2`...
    pub fn add_op(&mut self, name: &str, op: Op, inputs: &[Option<Port>]) -> trtc_runtime::Result<Vec<Port>> {
        let types: Vec<Option<&TensorType>> = inputs.iter().map(|p| p.map(|p| self.ty(p))).collect();
        let out_types = checked_infer(&op, &types)?;
        let outputs = out_types
            .into_iter()
            .enumerate()
            .map(|(i, ty)| TensorInfo { name: if i == 0 { name.to_string() } else { format!("{name}:{i}") }, ty })
            .collect::<Vec<_>>();
        let n_out = outputs.len();
        let sized = op.as_impl().data_dependent() || inputs.iter().flatten().any(|p| self.data_sized.contains(&p.node));
        let node = self.g.add_node(Node { name: name.to_string(), kind: NodeKind::Op(op), num_inputs: inputs.len(), outputs });
        if sized {
            self.data_sized.insert(node);
        }
        for (slot, p) in inputs.iter().enumerate() {
            if let Some(p) = p {
                self.g.add_edge(p.node, node, Edge { src_port: p.port, dst_slot: slot });
            }
        }
        Ok((0..n_out).map(|port| Port { node, port }).collect())
    }

    /// The inputs of a node by slot.
    pub fn inputs_of(&self, n: NodeIndex) -> Vec<Option<Port>> {
        let mut slots = vec![None; self.g[n].num_inputs];
        for e in self.g.edges_directed(n, Direction::Incoming) {
            let w = e.weight();
            if w.dst_slot < slots.len() {
                slots[w.dst_slot] = Some(Port { node: e.source(), port: w.src_port });
            }
        }
        slots
    }

    /// Every (consumer node, slot) reading a port.
    pub fn consumers(&self, p: Port) -> Vec<(NodeIndex, usize)> {
        let mut v: Vec<(NodeIndex, usize)> = self
            .g
            .edges_directed(p.node, Direction::Outgoing)
            .filter(|e| e.weight().src_port == p.port)
            .map(|e| (e.target(), e.weight().dst_slot))
            .collect();
        v.sort();
        v
    }

    /// Whether a port is a graph output.
    pub fn is_output(&self, p: Port) -> bool {
        self.outputs.iter().any(|o| o.port == p)
    }

    /// Redirects every use of `from` (edges and graph outputs) to `to`.
    fn replace_uses(&mut self, from: Port, to: Port) {
        let edges: Vec<_> = self
            .g
            .edges_directed(from.node, Direction::Outgoing)
            .filter(|e| e.weight().src_port == from.port)
            .map(|e| (e.id(), e.target(), e.weight().dst_slot))
            .collect();
        for (id, target, slot) in edges {
            self.g.remove_edge(id);
            self.g.add_edge(to.node, target, Edge { src_port: to.port, dst_slot: slot });
        }
        for o in &mut self.outputs {
            if o.port == from {
                o.port = to;
            }
        }
    }

    /// Nodes in a deterministic topological order (Kahn's algorithm, ready
    /// nodes taken by lowest index).
    pub fn topo_order(&self) -> Vec<NodeIndex> {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut indeg: std::collections::HashMap<NodeIndex, usize> = self
            .g
            .node_indices()
            .map(|n| {
                let preds: std::collections::BTreeSet<NodeIndex> = self.g.neighbors_directed(n, Direction::Incoming).collect();
                (n, preds.len())
            })
            .collect();
        let mut ready: BinaryHeap<Reverse<NodeIndex>> = indeg.iter().filter(|(_, &d)| d == 0).map(|(&n, _)| Reverse(n)).collect();
        let mut order = Vec::with_capacity(indeg.len());
        while let Some(Reverse(n)) = ready.pop() {
            order.push(n);
            let succs: std::collections::BTreeSet<NodeIndex> = self.g.neighbors_directed(n, Direction::Outgoing).collect();
            for s in succs {
                let d = indeg.get_mut(&s).expect("node");
                *d -= 1;
                if *d == 0 {
                    ready.push(Reverse(s));
                }
            }
        }
        order
    }

    /// The same graph rebuilt without holes, its nodes in a topological
    /// order that breaks ties by node name: two graphs that differ only in
    /// the slots their nodes took (the model imported at two shapes, where
    /// converters made and dropped other temporary nodes) come out with the
    /// same node indices.
    pub fn compacted(&self) -> Graph {
        use std::cmp::Reverse;
        use std::collections::{BinaryHeap, HashMap};
        let key = |n: NodeIndex| Reverse((self.g[n].name.clone(), n));
        let mut indeg: HashMap<NodeIndex, usize> = self
            .g
            .node_indices()
            .map(|n| (n, self.g.neighbors_directed(n, Direction::Incoming).collect::<std::collections::BTreeSet<_>>().len()))
            .collect();
        let mut ready: BinaryHeap<_> = indeg.iter().filter(|(_, &d)| d == 0).map(|(&n, _)| key(n)).collect();
        let mut out = Graph {
            inputs: Vec::new(),
            outputs: Vec::new(),
            fixed_inputs: self.fixed_inputs.clone(),
            dim_names: self.dim_names.clone(),
            data_sized: Default::default(),
            g: StableDiGraph::default(),
        };
        let mut new_index = HashMap::new();
        // Inputs first, in the model's order.
        for &n in &self.inputs {
            new_index.insert(n, out.g.add_node(self.g[n].clone()));
        }
        while let Some(Reverse((_, n))) = ready.pop() {
            if let std::collections::hash_map::Entry::Vacant(slot) = new_index.entry(n) {
                slot.insert(out.g.add_node(self.g[n].clone()));
            }
            let succs: std::collections::BTreeSet<NodeIndex> = self.g.neighbors_directed(n, Direction::Outgoing).collect();
            for s in succs {
                let d = indeg.get_mut(&s).expect("node");
                *d -= 1;
                if *d == 0 {
                    ready.push(key(s));
                }
            }
        }
        for e in self.g.edge_indices() {
            let (a, b) = self.g.edge_endpoints(e).expect("edge");
            out.g.add_edge(new_index[&a], new_index[&b], self.g[e]);
        }
        out.inputs = self.inputs.iter().map(|n| new_index[n]).collect();
        out.data_sized = self.data_sized.iter().filter_map(|n| new_index.get(n).copied()).collect();
        out.outputs = self
            .outputs
            .iter()
            .map(|o| GraphOutput { name: o.name.clone(), port: Port { node: new_index[&o.port.node], port: o.port.port } })
            .collect();
        out
    }

    /// Whether `p`'s size may depend on the data: its node is an op whose
    /// output sizes do (NonMaxSuppression) or reads a tensor whose size
    /// does, or is a marked input. Recorded as nodes are added by
    /// `add_op` (the importer's graph); nodes a patch adds are not tracked.
    pub fn is_data_sized(&self, p: Port) -> bool {
        self.data_sized.contains(&p.node)
    }

    /// Every node `n` depends on, nearest first (breadth-first over inputs,
    /// each level by index).
    pub fn ancestors(&self, n: NodeIndex) -> Vec<NodeIndex> {
        let dir = Direction::Incoming;
        let mut seen = std::collections::HashSet::from([n]);
        let mut order = Vec::new();
        let mut level = vec![n];
        while !level.is_empty() {
            let next: std::collections::BTreeSet<NodeIndex> =
                level.iter().flat_map(|&m| self.g.neighbors_directed(m, dir)).filter(|m| seen.insert(*m)).collect();
            order.extend(next.iter().copied());
            level = next.into_iter().collect();
        }
        order
    }

    /// Marks input `input` (a position in [`Graph::inputs`]) as sized by
    /// the data: a sub-plan's capture of a tensor whose size depends on the
    /// data around it, or a model input whose sizes are read at run time
    /// (`ImportOptions::sized_at_run_time`).
    pub fn mark_data_sized(&mut self, input: usize) {
        self.data_sized.insert(self.inputs[input]);
    }

    /// Number of op nodes (what "node count" means in reports).
    pub fn op_count(&self) -> usize {
        self.g.node_weights().filter(|n| matches!(n.kind, NodeKind::Op(_))).count()
    }

    /// Removes nodes that no graph output depends on (inputs are kept).
    pub fn remove_dead_nodes(&mut self) -> usize {
        let mut live = std::collections::HashSet::new();
        let mut stack: Vec<NodeIndex> = self.outputs.iter().map(|o| o.port.node).collect();
        stack.extend(self.inputs.iter().copied());
        while let Some(n) = stack.pop() {
            if live.insert(n) {
                stack.extend(self.g.neighbors_directed(n, Direction::Incoming));
            }
        }
        let dead: Vec<NodeIndex> = self.g.node_indices().filter(|n| !live.contains(n)).collect();
        let count = dead.len();
        self.remove_nodes(dead);
        count
    }

    /// Removes nodes and their edges, newest first. petgraph keeps each
    /// node's edges in a singly linked list, newest at the head, so removing
    /// an edge walks its endpoints' lists: removing the consumers of a node
    /// with 100k consumers oldest first would take quadratic time, newest
    /// first takes linear time.
    fn remove_nodes(&mut self, mut nodes: Vec<NodeIndex>) {
        nodes.sort_unstable_by(|a, b| b.cmp(a));
        for n in nodes {
            self.g.remove_node(n);
        }
    }
}
