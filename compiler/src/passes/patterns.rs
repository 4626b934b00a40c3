//! Pattern recognition of functions exporters spell out in primitives.

use super::Pass;
use crate::ir::{Graph, Port};
use anyhow::Result;
use petgraph::stable_graph::NodeIndex;
use trtc_runtime::ops::elementwise::{BinaryKind, ElementwiseOp, Unary, UnaryKind};
use trtc_runtime::Op;

fn binary(graph: &Graph, n: NodeIndex, kind: BinaryKind) -> Option<(Port, Port)> {
    match graph.node(n).op()? {
        Op::Elementwise(ElementwiseOp::Binary(b)) if b.kind == kind => {
            let ins = graph.inputs_of(n);
            Some((ins[0]?, ins[1]?))
        }
        _ => None,
    }
}

/// The scalar value of a constant port (any shape with one element).
fn scalar(graph: &Graph, p: Port) -> Option<f64> {
    let t = graph.node(p.node).constant()?;
    (t.len() == 1).then(|| t.to_f64_vec()[0])
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * b.abs().max(1.0)
}

/// The sole consumer of a port (not a graph output).
fn sole(graph: &Graph, p: Port) -> Option<NodeIndex> {
    if graph.is_output(p) {
        return None;
    }
    match graph.consumers(p).as_slice() {
        [(c, _)] => Some(*c),
        _ => None,
    }
}

/// The other operand of a binary node, given one.
fn other(a: (Port, Port), this: Port) -> Option<Port> {
    if a.0 == this {
        Some(a.1)
    } else if a.1 == this {
        Some(a.0)
    } else {
        None
    }
}

/// GELU in its erf form, `x * 0.5 * (1 + erf(x / sqrt(2)))`, in the orders
/// the exporters emit, becomes one `Gelu` node (which the epilogue fusion
/// then folds into the MatMul before it).
pub struct GeluPattern;

impl GeluPattern {
    /// Matches at an Erf node; returns (x, the last node of the pattern).
    fn match_at(graph: &Graph, erf: NodeIndex) -> Option<(Port, NodeIndex)> {
        match graph.node(erf).op()? {
            Op::Elementwise(ElementwiseOp::Unary(u)) if u.kind == UnaryKind::Erf => {}
            _ => return None,
        }
        let scaled = graph.inputs_of(erf)[0]?;
        // x / sqrt(2) or x * (1 / sqrt(2)).
        let x = if let Some((a, b)) = binary(graph, scaled.node, BinaryKind::Div) {
            scalar(graph, b).filter(|&c| close(c, std::f64::consts::SQRT_2)).map(|_| a)?
        } else {
            let (a, b) = binary(graph, scaled.node, BinaryKind::Mul)?;
            match (scalar(graph, a), scalar(graph, b)) {
                (_, Some(c)) if close(c, std::f64::consts::FRAC_1_SQRT_2) => a,
                (Some(c), _) if close(c, std::f64::consts::FRAC_1_SQRT_2) => b,
                _ => return None,
            }
        };
        sole(graph, scaled)?;
        let erf_out = Port { node: erf, port: 0 };
        let add = sole(graph, erf_out)?;
        let one = other(binary(graph, add, BinaryKind::Add)?, erf_out)?;
        if !scalar(graph, one).is_some_and(|c| close(c, 1.0)) {
            return None;
        }
        let add_out = Port { node: add, port: 0 };
        let m1 = sole(graph, add_out)?;
        let f1 = other(binary(graph, m1, BinaryKind::Mul)?, add_out)?;
        let m1_out = Port { node: m1, port: 0 };
        let is_half = |p: Port| scalar(graph, p).is_some_and(|c| close(c, 0.5));
        if f1 == x {
            // (x * (1 + erf)) * 0.5
            let m2 = sole(graph, m1_out)?;
            let f2 = other(binary(graph, m2, BinaryKind::Mul)?, m1_out)?;
            return is_half(f2).then_some((x, m2));
        }
        if is_half(f1) {
            // x * ((1 + erf) * 0.5)
            let m2 = sole(graph, m1_out)?;
            let f2 = other(binary(graph, m2, BinaryKind::Mul)?, m1_out)?;
            return (f2 == x).then_some((x, m2));
        }
        // (x * 0.5) * (1 + erf)
        let (a, b) = binary(graph, f1.node, BinaryKind::Mul)?;
        sole(graph, f1)?;
        let ok = (a == x && is_half(b)) || (b == x && is_half(a));
        ok.then_some((x, m1))
    }
}

impl Pass for GeluPattern {
    fn name(&self) -> &'static str {
        "gelu-pattern"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        let mut rewrites = 0;
        for n in graph.topo_order() {
            if !graph.g.contains_node(n) {
                continue;
            }
            let Some((x, last)) = Self::match_at(graph, n) else { continue };
            if graph.ty(x).dtype != trtc_runtime::DType::F32 && !graph.ty(x).dtype.is_float() {
                continue;
            }
            let name = format!("{} (gelu)", graph.node(last).name);
            let out_name = graph.node(last).outputs[0].name.clone();
            let g = graph.add_op(&name, Unary::new(UnaryKind::Gelu).into(), &[Some(x)]).map_err(|e| anyhow::anyhow!("{e}"))?[0];
            graph.g[g.node].outputs[0].name = out_name;
            graph.replace_uses(Port { node: last, port: 0 }, g);
            // The pattern's other nodes are now dead; dead-nodes removes them.
            graph.g.remove_node(last);
            rewrites += 1;
        }
        Ok(rewrites)
    }
}
