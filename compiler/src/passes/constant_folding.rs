//! Constant folding: an op whose inputs are all constants is replaced by its
//! result, computed with the runtime's reference implementation.

use super::Pass;
use crate::ir::{Graph, NodeKind, Patch, Port};
use anyhow::Result;

pub struct ConstantFolding {
    /// Results larger than this (bytes) are folded only when they are no
    /// larger than the constants they replace, so folding never inflates the
    /// engine (an Expand of a scalar to a huge shape stays an op).
    pub max_growth_bytes: usize,
}

impl Default for ConstantFolding {
    fn default() -> Self {
        ConstantFolding { max_growth_bytes: 1 << 20 }
    }
}

impl Pass for ConstantFolding {
    fn name(&self) -> &'static str {
        "constant-folding"
    }

    fn run(&self, graph: &mut Graph) -> Result<usize> {
        graph.rewrite_each(|graph, n| {
            let NodeKind::Op(op) = &graph.node(n).kind else { return Ok(None) };
            let inputs = graph.inputs_of(n);
            if inputs.iter().flatten().next().is_none() {
                return Ok(None);
            }
            let values: Option<Vec<Option<&trtc_runtime::Tensor>>> = inputs
                .iter()
                .map(|p| match p {
                    None => Some(None),
                    Some(p) => graph.node(p.node).constant().map(Some),
                })
                .collect();
            let Some(values) = values else { return Ok(None) };
            let first = values.first().copied().flatten().map(|t| t.dtype());
            if crate::ir::keeps_weight_dequantize(op, first) {
                return Ok(None);
            }
            let in_bytes: usize = values.iter().flatten().map(|t| t.bytes().len()).sum();
            let out_bytes: usize = graph.node(n).outputs.iter().map(|o| o.ty.bytes()).sum();
            if out_bytes > self.max_growth_bytes && out_bytes > in_bytes {
                return Ok(None);
            }
            let results = op.eval_owned(&values).map_err(|e| anyhow::anyhow!("folding {}: {e}", graph.node(n).name))?;
            let mut patch = Patch::new();
            for (port, (t, out)) in results.into_iter().zip(&graph.node(n).outputs).enumerate() {
                let c = patch.add_constant(&out.name, t);
                patch.shunt(Port { node: n, port }, c);
            }
            patch.remove(n);
            Ok(Some(patch))
        })
    }
}
