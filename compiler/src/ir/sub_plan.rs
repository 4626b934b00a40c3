//! Sub-plans (the branches and bodies of control-flow layers) as IR graphs
//! and back: the importer builds a subgraph as a graph, and generalizing a
//! model over its profiles generalizes the graphs of its sub-plans.

use super::{Graph, NodeKind, Port};
use anyhow::{anyhow, Result};
use std::collections::HashMap;
use trtc_runtime::ops::control::{Constant, Step, SubPlan};
use trtc_runtime::TensorType;

/// A subgraph's IR as a sub-plan: its inputs, constants and op nodes in
/// topological order.
pub fn to_sub_plan(graph: &Graph) -> Result<SubPlan> {
    let mut values: Vec<(String, TensorType)> = Vec::new();
    let mut ids: HashMap<Port, usize> = HashMap::new();
    fn add(
        values: &mut Vec<(String, TensorType)>,
        ids: &mut HashMap<Port, usize>,
        p: Port,
        name: &str,
        ty: &TensorType,
    ) -> usize {
        values.push((name.to_string(), ty.clone()));
        ids.insert(p, values.len() - 1);
        values.len() - 1
    }
    let mut inputs = Vec::new();
    for &n in graph.inputs() {
        let o = &graph.node(n).outputs[0];
        inputs.push(add(&mut values, &mut ids, Port { node: n, port: 0 }, &o.name, &o.ty));
    }
    let mut constants = Vec::new();
    let mut steps = Vec::new();
    for n in graph.topo_order() {
        let node = graph.node(n);
        match &node.kind {
            NodeKind::Input => {}
            NodeKind::Constant(t) => {
                let id = add(&mut values, &mut ids, Port { node: n, port: 0 }, &node.outputs[0].name, &node.outputs[0].ty);
                constants.push((id, Constant(t.clone())));
            }
            NodeKind::Op(op) => {
                let step_inputs = graph.inputs_of(n).into_iter().map(|p| p.map(|p| ids[&p])).collect();
                let outputs = node
                    .outputs
                    .iter()
                    .enumerate()
                    .map(|(port, o)| add(&mut values, &mut ids, Port { node: n, port }, &o.name, &o.ty))
                    .collect();
                steps.push(Step { name: node.name.clone(), op: op.clone(), inputs: step_inputs, outputs });
            }
        }
    }
    let outputs = graph.outputs().iter().map(|o| ids[&o.port]).collect();
    SubPlan::new(values, inputs, constants, steps, outputs).map_err(|e| anyhow!("internal error: {e}"))
}

/// A sub-plan as a graph: its inputs (in order), constants and steps, its
/// outputs named after their values. Node names are the steps' (each
/// output of a step named as its op's outputs are), so the same sub-plan
/// at other shapes gives the same nodes in the same order.
pub fn from_sub_plan(sub: &SubPlan) -> Result<Graph> {
    let mut g = Graph::new();
    let mut ports: HashMap<usize, Port> = HashMap::new();
    for &id in &sub.inputs {
        let (name, ty) = &sub.values[id];
        ports.insert(id, g.add_input(name, ty.clone()));
    }
    for (id, c) in &sub.constants {
        ports.insert(*id, g.add_constant(&sub.values[*id].0, c.0.clone()));
    }
    for step in &sub.steps {
        let inputs: Vec<Option<Port>> = step.inputs.iter().map(|i| i.map(|id| ports[&id])).collect();
        let outs = g.add_op(&step.name, step.op.clone(), &inputs).map_err(|e| anyhow!("step {}: {e}", step.name))?;
        for (&o, p) in step.outputs.iter().zip(outs) {
            ports.insert(o, p);
        }
    }
    for &o in &sub.outputs {
        g.add_output(&sub.values[o].0, ports[&o]);
    }
    Ok(g)
}
