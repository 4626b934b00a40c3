//! Pointwise fusion: chains and small DAGs of f32 elementwise ops (unary
//! math and activations, Add/Sub/Mul/Div) become one `Pointwise` node
//! carrying the expression. Runs after the other passes reach their fixed
//! point, so that epilogue fusion keeps first claim on what follows a
//! convolution or matrix multiply.

use super::Pass;
use crate::ir::{Graph, Patch, Port, Wire};
use anyhow::Result;
use petgraph::stable_graph::NodeIndex;
use std::collections::HashMap;
use trtc_runtime::ops::elementwise::ElementwiseOp;
use trtc_runtime::ops::fused::{Instr, Pointwise, PointwiseBinary};
use trtc_runtime::{DType, Op};

pub struct PointwiseFusion;

/// The most nodes one fused program absorbs. Past it the fused kernel gains
/// nothing (its inputs are read once either way) while its code grows, and
/// the expression builder, which recurses once per absorbed node, stays
/// shallow however long a chain of elementwise ops a model has.
const MAX_ABSORBED: usize = 64;

/// Whether a node is an f32 pointwise op the program can express.
fn eligible(graph: &Graph, n: NodeIndex) -> bool {
    let node = graph.node(n);
    if node.outputs.len() != 1 || node.outputs[0].ty.dtype != DType::F32 {
        return false;
    }
    match node.op() {
        Some(Op::Elementwise(ElementwiseOp::Unary(_))) => true,
        Some(Op::Elementwise(ElementwiseOp::Binary(b))) => {
            PointwiseBinary::from_kind(b.kind).is_some()
                && graph.inputs_of(n).iter().all(|p| p.is_some_and(|p| graph.ty(p).dtype == DType::F32))
        }
        _ => false,
    }
}

struct Builder<'g> {
    graph: &'g Graph,
    root_shape: Vec<usize>,
    program: Vec<Instr>,
    leaves: Vec<Port>,
    leaf_index: HashMap<Port, usize>,
    absorbed: Vec<NodeIndex>,
}

impl Builder<'_> {
    /// Whether the producer of `p` can be inlined into the program.
    fn inlinable(&self, p: Port, consumer: NodeIndex) -> bool {
        let g = self.graph;
        self.absorbed.len() < MAX_ABSORBED
            && eligible(g, p.node)
            && !g.is_output(p)
            && g.ty(p).shape == self.root_shape
            && g.consumers(p).iter().all(|(c, _)| *c == consumer)
    }

    fn value(&mut self, p: Port, consumer: NodeIndex) -> usize {
        let g = self.graph;
        if let Some(t) = g.node(p.node).constant() {
            if t.len() == 1 && t.dtype() == DType::F32 {
                self.program.push(Instr::Const(t.as_slice::<f32>().expect("f32")[0]));
                return self.program.len() - 1;
            }
        }
        if self.inlinable(p, consumer) {
            return self.node(p.node);
        }
        let k = match self.leaf_index.get(&p) {
            Some(&k) => k,
            None => {
                self.leaves.push(p);
                self.leaf_index.insert(p, self.leaves.len() - 1);
                self.leaves.len() - 1
            }
        };
        self.program.push(Instr::Input(k));
        self.program.len() - 1
    }

    fn node(&mut self, n: NodeIndex) -> usize {
        self.absorbed.push(n);
        let ins = self.graph.inputs_of(n);
        match self.graph.node(n).op() {
            Some(Op::Elementwise(ElementwiseOp::Unary(u))) => {
                let a = self.value(ins[0].expect("unary input"), n);
                self.program.push(Instr::Unary(u.kind, a));
            }
            Some(Op::Elementwise(ElementwiseOp::Binary(b))) => {
                let kind = PointwiseBinary::from_kind(b.kind).expect("eligible");
                // Both operands the same port (x * x): read it once.
                let a = self.value(ins[0].expect("binary input"), n);
                let b = if ins[1] == ins[0] { a } else { self.value(ins[1].expect("binary input"), n) };
                self.program.push(Instr::Binary(kind, a, b));
            }
            _ => unreachable!("only eligible nodes are inlined"),
        }
        self.program.len() - 1
    }
}

impl Pass for PointwiseFusion {
    fn name(&self) -> &'static str {
        "pointwise-fusion"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        let mut rewrites = 0;
        let mut order = graph.topo_order();
        order.reverse();
        let mut done = std::collections::HashSet::new();
        for r in order {
            if done.contains(&r) || !graph.contains(r) || !eligible(graph, r) {
                continue;
            }
            let out = Port { node: r, port: 0 };
            let root_shape = graph.ty(out).shape.clone();
            // A node its consumer can absorb is not a root.
            let cons = graph.consumers(out);
            if !graph.is_output(out)
                && cons.len() == 1
                && eligible(graph, cons[0].0)
                && graph.ty(Port { node: cons[0].0, port: 0 }).shape == root_shape
            {
                continue;
            }
            let mut b = Builder {
                graph,
                root_shape,
                program: Vec::new(),
                leaves: Vec::new(),
                leaf_index: HashMap::new(),
                absorbed: Vec::new(),
            };
            b.node(r);
            if b.absorbed.len() < 2 {
                continue;
            }
            done.extend(b.absorbed.iter().copied());
            let (program, leaves) = (b.program, b.leaves);
            let name = format!("{} (pointwise)", graph.node(r).name);
            let inputs: Vec<Option<Wire>> = leaves.iter().map(|&p| Some(p.into())).collect();
            let mut patch = Patch::new();
            let Ok(ports) = patch.add_op(graph, &name, Pointwise { program }.into(), &inputs) else { continue };
            if patch.ty(graph, ports[0]) != graph.ty(out) {
                continue;
            }
            patch.replace(graph, out, ports[0]);
            patch.remove(r);
            graph.apply(patch)?;
            rewrites += 1;
        }
        Ok(rewrites)
    }
}
