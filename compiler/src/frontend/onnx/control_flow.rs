//! Control flow decided at run time: an If whose condition, or a Loop
//! whose trip count or conditions, are not known when the engine is built
//! (or a Loop or Scan too long to unroll) becomes a layer that holds its branches
//! or body as sub-plans (`trtc_runtime::ops::control`), run when the layer
//! runs.
//!
//! Each subgraph is imported into a graph of its own. The outer-scope
//! values it reads become that graph's inputs and the layer's extra inputs,
//! except constants, which are copied in so that the subgraph's converters
//! can fold them (a Reshape's target read from the outer scope).

use super::{if_branch, implicit_inputs, Importer, ScanSpec};
use crate::ir::{Graph, Port};
use anyhow::{anyhow, bail, Context, Result};
use std::collections::HashMap;
use tract_onnx::pb;
use trtc_runtime::dtype::DType;
use trtc_runtime::ops::control::{If, Loop, Scan, SubPlan};
use trtc_runtime::{Tensor, TensorType};

/// The iterations a Loop's scan outputs are planned for when its trip
/// count is not known (larger results live on the heap).
const NOMINAL_TRIPS: usize = 1;

/// A subgraph's outer-scope reads, split into values passed at run time
/// (the layer's extra inputs) and constants copied into the subgraph.
struct Captures {
    names: Vec<String>,
    ports: Vec<Port>,
    constants: Vec<(String, Tensor)>,
}

impl Importer<'_> {
    fn captures(&self, node: &pb::NodeProto, values: &HashMap<String, Port>) -> Captures {
        let mut c = Captures { names: Vec::new(), ports: Vec::new(), constants: Vec::new() };
        // A name in no scope is reported by the subgraph's import.
        for name in implicit_inputs(node, 0) {
            let Some(&p) = values.get(name) else { continue };
            match self.graph.node(p.node).constant() {
                Some(t) => c.constants.push((name.to_string(), t.clone())),
                None => {
                    c.names.push(name.to_string());
                    c.ports.push(p);
                }
            }
        }
        c
    }

    /// Imports `g` as a sub-plan whose inputs are `inputs` (name and type,
    /// in order) followed by the captured values.
    /// `sized` lists the inputs whose shapes change from one run of the body
    /// to the next (a loop-carried value that grows): they are imported as
    /// sized by the data.
    #[allow(clippy::too_many_arguments)]
    fn sub_plan(
        &self,
        g: &pb::GraphProto,
        inputs: &[(String, TensorType)],
        sized: &[usize],
        captures: &Captures,
        prefix: &str,
        depth: usize,
    ) -> Result<SubPlan> {
        let mut sub = Importer {
            registry: self.registry,
            opset: self.opset,
            root: self.root,
            graph: Graph::new(),
            keep_loops: self.keep_loops,
            keep_identity_reshapes: self.keep_identity_reshapes,
            room_values: HashMap::new(),
            in_body: true,
        };
        let mut scope: HashMap<String, Port> = HashMap::new();
        // The body's room world (see `Ctx::room_value`): each small input
        // (a loop's iteration number and carried values, a scan's slice) and
        // each small capture computed at run time holds zeros there, or the
        // capture's own room value. Sizes the body computes from them (a
        // mask resized to its box's size, then padded to the image) are then
        // those of one actual execution, so the body's layers see
        // consistent rooms at build time; each run computes its own.
        let zeros =
            |ty: &TensorType| (ty.len() <= super::ctx::ROOM_VALUE_ELEMENTS).then(|| Tensor::zeros(ty.clone()).ok()).flatten();
        for (k, (name, ty)) in inputs.iter().enumerate() {
            let p = sub.graph.add_input(name, ty.clone());
            if sized.contains(&k) {
                sub.graph.mark_data_sized(k);
            }
            if let Some(z) = zeros(ty) {
                sub.room_values.insert(p, z);
            }
            scope.insert(name.clone(), p);
        }
        for (name, &p) in captures.names.iter().zip(&captures.ports) {
            let ty = self.graph.ty(p).clone();
            let inner = sub.graph.add_input(name, ty.clone());
            scope.insert(name.clone(), inner);
            if self.graph.is_data_sized(p) {
                sub.graph.mark_data_sized(sub.graph.inputs().len() - 1);
            }
            if let Some(v) = self.room_values.get(&p).cloned().or_else(|| zeros(&ty)) {
                sub.room_values.insert(inner, v);
            }
        }
        for (name, t) in &captures.constants {
            scope.insert(name.clone(), sub.graph.add_constant(name, t.clone()));
        }
        sub.add_initializers(g, prefix, &mut scope)?;
        sub.nodes(g, &mut scope, prefix, depth + 1)?;
        for o in &g.output {
            let p = scope.get(&o.name).copied().ok_or_else(|| anyhow!("output '{}' is not produced", o.name))?;
            sub.graph.add_output(&o.name, p);
        }
        sub.graph.remove_dead_nodes();
        crate::ir::verify(&sub.graph)?;
        crate::ir::to_sub_plan(&sub.graph)
    }

    /// An If whose condition is computed at run time: both branches become
    /// sub-plans of one layer.
    pub(super) fn runtime_if(
        &mut self,
        node: &pb::NodeProto,
        name: &str,
        cond: Port,
        values: &HashMap<String, Port>,
        depth: usize,
    ) -> Result<Vec<Port>> {
        let captures = self.captures(node, values);
        let branch = |which: &str| -> Result<SubPlan> {
            let g = if_branch(node, which)?;
            self.sub_plan(g, &[], &[], &captures, &format!("{name}/{which}/"), depth).with_context(|| format!("in its {which}"))
        };
        let (then_branch, else_branch) = (branch("then_branch")?, branch("else_branch")?);
        if then_branch.outputs.len() < node.output.len() {
            bail!("its branches have {} outputs, the If {}", then_branch.outputs.len(), node.output.len());
        }
        let op = If::new(then_branch, else_branch).map_err(|e| anyhow!("{e}"))?;
        let mut inputs = vec![Some(cond)];
        inputs.extend(captures.ports.iter().map(|&p| Some(p)));
        self.graph.add_op(name, op.into(), &inputs).map_err(|e| anyhow!("{e}"))
    }

    /// A Loop run at run time: its body becomes a sub-plan, taking the
    /// iteration number, the condition, the loop-carried values and the
    /// outer-scope values it reads.
    pub(super) fn runtime_loop(
        &mut self,
        node: &pb::NodeProto,
        name: &str,
        inputs: &[Option<Port>],
        values: &HashMap<String, Port>,
        depth: usize,
    ) -> Result<Vec<Port>> {
        let body = super::Attributes { node }.graph("body")?.ok_or_else(|| anyhow!("it has no body graph"))?;
        let carried: Vec<Port> = inputs[2.min(inputs.len())..]
            .iter()
            .enumerate()
            .map(|(k, p)| p.ok_or_else(|| anyhow!("loop-carried input {k} is missing")))
            .collect::<Result<_>>()?;
        let mut body_inputs = vec![
            (body.input[0].name.clone(), TensorType::new(DType::I64, vec![])),
            (body.input[1].name.clone(), TensorType::new(DType::Bool, vec![])),
        ];
        for (vi, &p) in body.input[2..].iter().zip(&carried) {
            body_inputs.push((vi.name.clone(), self.graph.ty(p).clone()));
        }
        let captures = self.captures(node, values);
        let prefix = format!("{name}/body/");
        let mut sub = self.sub_plan(body, &body_inputs, &[], &captures, &prefix, depth).context("in its body")?;
        // The body is imported at the carried values' first shapes, which
        // its converters may have read (a Shape folded to a constant): a
        // body that changes them (a list of masks that grows by one each
        // iteration) is imported again with those values sized by the data,
        // whose sizes are read at run time.
        let changing = |sub: &SubPlan| -> Vec<usize> {
            sub.input_types()
                .skip(2)
                .zip(sub.output_types().skip(1))
                .enumerate()
                .filter(|(_, (i, o))| i != o)
                .map(|(k, _)| 2 + k)
                .collect()
        };
        let sized = changing(&sub);
        if !sized.is_empty() {
            sub = self.sub_plan(body, &body_inputs, &sized, &captures, &prefix, depth).context("in its body")?;
            let types: Vec<(TensorType, TensorType)> =
                sub.input_types().skip(2).zip(sub.output_types().skip(1)).map(|(i, o)| (i.clone(), o.clone())).collect();
            for (k, (entering, leaving)) in types.iter().enumerate() {
                if entering.dtype != leaving.dtype || entering.shape.len() != leaving.shape.len() {
                    bail!(
                        "loop-carried value {k} ('{}') enters the body as {entering} and leaves it as {leaving}; \
                         trtc runs loops whose carried values keep their types and ranks",
                        body.input[2 + k].name
                    );
                }
            }
        }
        let trips = inputs.first().copied().flatten();
        let nominal = trips
            .and_then(|p| self.graph.node(p.node).constant())
            .and_then(|t| t.to_i64_vec().ok())
            .and_then(|v| v.first().copied())
            .and_then(|m| usize::try_from(m).ok())
            .filter(|&m| m as i64 <= super::MAX_UNROLL)
            .unwrap_or(NOMINAL_TRIPS);
        let op = Loop::new(sub, carried.len(), nominal).map_err(|e| anyhow!("{e}"))?;
        let mut layer_inputs = vec![trips, inputs.get(1).copied().flatten()];
        layer_inputs.extend(carried.iter().map(|&p| Some(p)));
        layer_inputs.extend(captures.ports.iter().map(|&p| Some(p)));
        self.graph.add_op(name, op.into(), &layer_inputs).map_err(|e| anyhow!("{e}"))
    }

    /// A Scan run at run time: its body becomes a sub-plan taking the
    /// states, one element of each scan input and the outer-scope values
    /// it reads. `out_axes` normalizes `scan_output_axes` for the scan
    /// outputs' ranks.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn runtime_scan(
        &mut self,
        node: &pb::NodeProto,
        name: &str,
        spec: &ScanSpec,
        states: &[Port],
        scans: &[Port],
        values: &HashMap<String, Port>,
        out_axes: &dyn Fn(&[usize]) -> Result<Vec<usize>>,
    ) -> Result<Vec<Port>> {
        let body = spec.body;
        let mut body_inputs = Vec::with_capacity(states.len() + scans.len());
        for (vi, &p) in body.input.iter().zip(states) {
            body_inputs.push((vi.name.clone(), self.graph.ty(p).clone()));
        }
        for ((vi, &p), &a) in body.input[states.len()..].iter().zip(scans).zip(&spec.in_axes) {
            let t = self.graph.ty(p);
            if a >= t.shape.len() {
                bail!("a scan input has no axis to scan (it is a scalar)");
            }
            let mut shape = t.shape.clone();
            shape.remove(a);
            body_inputs.push((vi.name.clone(), TensorType::new(t.dtype, shape)));
        }
        let captures = self.captures(node, values);
        let sub =
            self.sub_plan(body, &body_inputs, &[], &captures, &format!("{name}/body/"), spec.depth).context("in its body")?;
        for (k, (entering, leaving)) in sub.input_types().zip(sub.output_types()).take(spec.n).enumerate() {
            if entering != leaving {
                bail!(
                    "state {k} ('{}') enters the body as {entering} and leaves it as {leaving}; trtc runs scans whose states keep their shapes",
                    body.input[k].name
                );
            }
        }
        let ranks: Vec<usize> = sub.output_types().skip(spec.n).map(|t| t.shape.len() + 1).collect();
        let op = Scan {
            states: spec.n,
            scan_inputs: scans.len(),
            input_axes: spec.in_axes.clone(),
            input_reverse: spec.in_reverse.clone(),
            output_axes: out_axes(&ranks)?,
            output_reverse: spec.out_reverse.clone(),
            body: Box::new(sub),
        };
        let mut inputs: Vec<Option<Port>> = states.iter().chain(scans).map(|&p| Some(p)).collect();
        inputs.extend(captures.ports.iter().map(|&p| Some(p)));
        self.graph.add_op(name, op.into(), &inputs).map_err(|e| anyhow!("{e}"))
    }
}
