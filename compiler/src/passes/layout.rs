//! Layout cleanups: transpose chains and explicit zero padding before a
//! convolution.

use super::Pass;
use crate::ir::{Edge, Graph, Port};
use anyhow::Result;
use trtc_runtime::ops::linalg::LinalgOp;
use trtc_runtime::ops::movement::{MovementOp, PadMode, Transpose};
use trtc_runtime::Op;

/// `Transpose(Transpose(x))` becomes one Transpose with the composed
/// permutation, or disappears when the composition is the identity.
pub struct TransposeCancellation;

impl Pass for TransposeCancellation {
    fn name(&self) -> &'static str {
        "transpose-cancellation"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        let mut rewrites = 0;
        for n in graph.topo_order() {
            if !graph.g.contains_node(n) {
                continue;
            }
            let Some(Op::Movement(MovementOp::Transpose(outer))) = graph.node(n).op().cloned() else { continue };
            let Some(src) = graph.inputs_of(n)[0] else { continue };
            let Some(Op::Movement(MovementOp::Transpose(inner))) = graph.node(src.node).op().cloned() else { continue };
            let Some(x) = graph.inputs_of(src.node)[0] else { continue };
            // Output axis i of the outer is axis outer[i] of the inner's
            // output, which is axis inner[outer[i]] of x.
            let perm: Vec<usize> = outer.perm.iter().map(|&i| inner.perm[i]).collect();
            let out = Port { node: n, port: 0 };
            if perm.iter().enumerate().all(|(i, &p)| i == p) {
                graph.replace_uses(out, x);
                graph.g.remove_node(n);
            } else {
                let edge = graph.g.find_edge(src.node, n).expect("edge");
                graph.g.remove_edge(edge);
                graph.g.add_edge(x.node, n, Edge { src_port: x.port, dst_slot: 0 });
                graph.g[n].kind = crate::ir::NodeKind::Op(Transpose { perm }.into());
            }
            rewrites += 1;
        }
        Ok(rewrites)
    }
}

/// A constant-zero Pad of the spatial axes feeding a Conv becomes the Conv's
/// own padding.
pub struct PadFolding;

impl Pass for PadFolding {
    fn name(&self) -> &'static str {
        "pad-folding"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        let mut rewrites = 0;
        for n in graph.topo_order() {
            if !graph.g.contains_node(n) {
                continue;
            }
            let Some(Op::Linalg(LinalgOp::Conv(mut conv))) = graph.node(n).op().cloned() else { continue };
            let ins = graph.inputs_of(n);
            let Some(src) = ins[0] else { continue };
            let Some(Op::Movement(MovementOp::Pad(pad))) = graph.node(src.node).op().cloned() else { continue };
            if pad.mode != PadMode::Constant || pad.pads.iter().any(|&p| p < 0) {
                continue;
            }
            let pad_ins = graph.inputs_of(src.node);
            let zero = match pad_ins.get(1).copied().flatten() {
                None => true,
                Some(v) => graph.node(v.node).constant().is_some_and(|t| t.to_f64_vec().iter().all(|&x| x == 0.0)),
            };
            let rank = pad.pads.len() / 2;
            let spatial = conv.kernel_shape.len();
            if !zero || rank != spatial + 2 || pad.pads[0] != 0 || pad.pads[1] != 0 || pad.pads[rank] != 0 || pad.pads[rank + 1] != 0 {
                continue;
            }
            let Some(x) = pad_ins[0] else { continue };
            for i in 0..spatial {
                conv.pads[i] += pad.pads[2 + i] as usize;
                conv.pads[spatial + i] += pad.pads[rank + 2 + i] as usize;
            }
            let edge = graph.g.find_edge(src.node, n).expect("edge");
            graph.g.remove_edge(edge);
            graph.g.add_edge(x.node, n, Edge { src_port: x.port, dst_slot: 0 });
            graph.g[n].kind = crate::ir::NodeKind::Op(conv.into());
            rewrites += 1;
        }
        Ok(rewrites)
    }
}
