//! The branches and loop bodies of control-flow layers get the passes too:
//! each sub-plan, as a graph of its own, is optimized like the model
//! (recursively, for control flow nested in it) and put back into its
//! layer. Sub-plans keep f32; precision passes do not reach them.

use super::PassOptions;
use crate::ir::{from_sub_plan, to_sub_plan, wires, Graph, Patch};
use anyhow::{Context, Result};
use trtc_runtime::ops::control::{ControlOp, If, Loop, Scan, SubPlan};
use trtc_runtime::Op;

/// Optimizes every sub-plan of the graph's control-flow layers; returns how
/// many layers changed.
pub fn optimize_sub_plans(graph: &mut Graph, opts: &PassOptions) -> Result<usize> {
    let control: Vec<_> = graph.node_ids().filter(|&n| matches!(graph.node(n).op(), Some(Op::Control(_)))).collect();
    let mut changed = 0;
    for n in control {
        let node = graph.node(n);
        let Some(Op::Control(op)) = node.op() else { continue };
        let name = node.name.clone();
        let optimized: Op = match op {
            ControlOp::If(i) => If::new(optimized(&i.then_branch, opts)?, optimized(&i.else_branch, opts)?)
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .into(),
            ControlOp::Loop(l) => {
                Loop::new(optimized(&l.body, opts)?, l.carried, l.nominal_trips).map_err(|e| anyhow::anyhow!("{e}"))?.into()
            }
            ControlOp::Scan(s) => Scan { body: Box::new(optimized(&s.body, opts)?), ..s.clone() }.into(),
            ControlOp::ShapedByValues(_) => continue,
        };
        if Some(&optimized) == graph.node(n).op() {
            continue;
        }
        let mut patch = Patch::new();
        patch.rewrite(graph, n, optimized, &wires(&graph.inputs_of(n)))?;
        graph.apply(patch).with_context(|| format!("optimizing the sub-plans of {name}"))?;
        changed += 1;
    }
    Ok(changed)
}

/// One sub-plan through the passes.
fn optimized(sub: &SubPlan, opts: &PassOptions) -> Result<SubPlan> {
    let mut g = from_sub_plan(sub)?;
    super::optimize(&mut g, opts)?;
    to_sub_plan(&g)
}
