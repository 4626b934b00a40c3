//! The ONNX frontend: decodes a model with `tract-onnx`'s protobuf types and
//! builds the IR, giving every tensor a static dtype and shape.

pub mod proto;
pub mod ctx;
pub mod ops;
mod control_flow;

use crate::ir::{Graph, Port};
use anyhow::{anyhow, bail, Context, Result};
use ops::Registry;
use prost::Message;
use proto::Attributes;
pub use proto::ExternalDataRoot;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use tract_onnx::pb;
use trtc_runtime::{Tensor, TensorType};

/// The opsets of the default ONNX domain trtc reads.
pub const MIN_OPSET: i64 = 1;
pub const MAX_OPSET: i64 = 22;

/// How to import a model.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Shapes for inputs, overriding (and resolving symbolic dims of) the
    /// model's declared shapes: `--shape NAME:1x3x224x224`.
    pub shapes: HashMap<String, Vec<usize>>,
    /// Inputs whose value is fixed at build time (shape tensors, like
    /// TensorRT's shape inputs). They stay bindings, checked at run time.
    pub input_values: HashMap<String, Tensor>,
    /// Keep every Loop as a layer that runs its body at run time, even one
    /// whose iterations are known: a model imported at several input
    /// shapes whose loop counts follow them then gives the same layers at
    /// each (see `build::import`).
    pub keep_loops: bool,
    /// Keep a Reshape (Flatten, Squeeze...) that is the identity at the
    /// shapes imported: a model imported at several input shapes then gives
    /// the same nodes at each, also where a size is 1 at some of them (a
    /// profile's `Flatten` of `[batch, 1]`). The optimizer removes those that
    /// stay identities.
    pub keep_identity_reshapes: bool,
    /// Inputs whose sizes are read when the engine runs, like the sizes of
    /// a tensor sized by the data: what the model computes from them
    /// (`Shape`, sizes and scales derived from it) stays computed at run
    /// time, from each run's input shapes, instead of being folded at the
    /// shapes imported. For models whose shape computations no profile
    /// rule generalizes (a detector's resize by a scale computed from the
    /// image's sizes, its padding to a multiple of 32); see `build::import`.
    pub sized_at_run_time: Vec<String>,
}

/// Imports an ONNX file. External data is read from the file's directory.
pub fn import_file(path: &Path, opts: &ImportOptions) -> Result<Graph> {
    let bytes = trtc_runtime::file::read(path).context("cannot read the model")?;
    let dir = path.parent().map(|p| if p.as_os_str().is_empty() { Path::new(".") } else { p }).map(Path::to_path_buf);
    import_bytes(&bytes, ExternalDataRoot { dir }, opts).with_context(|| format!("{}", path.display()))
}

/// Decodes a ModelProto.
pub fn decode(bytes: &[u8]) -> Result<pb::ModelProto> {
    let model = pb::ModelProto::decode(bytes).map_err(|e| anyhow!("not a valid ONNX model (protobuf decode failed: {e})"))?;
    if model.graph.is_none() {
        bail!("not a valid ONNX model (no graph)");
    }
    Ok(model)
}

/// The opset of the default domain.
pub fn default_opset(model: &pb::ModelProto) -> i64 {
    model.opset_import.iter().find(|o| o.domain.is_empty() || o.domain == "ai.onnx").map(|o| o.version).unwrap_or(1)
}

pub fn import_bytes(bytes: &[u8], root: ExternalDataRoot, opts: &ImportOptions) -> Result<Graph> {
    let model = decode(bytes)?;
    import_model(&model, root, opts)
}

/// Ops whose bodies are graphs, which the importer handles itself instead
/// of a converter: an `If` whose condition is known when the engine is
/// built is replaced by the branch it takes, a `Loop` whose trip count and
/// conditions are known is unrolled.
const CONTROL_FLOW: &[&str] = &["If", "Loop", "Scan"];

/// The most iterations a Loop is unrolled to, and the most body nodes all
/// its iterations may add together.
const MAX_UNROLL: i64 = 4096;
const MAX_UNROLLED_NODES: i64 = 1 << 20;

/// How deep subgraphs may nest (a hostile model could nest them deeper
/// than the stack allows).
const MAX_NESTING: usize = trtc_runtime::ops::control::MAX_DEPTH;

/// Lists every op type the model uses that trtc cannot convert, with one
/// node name each, subgraphs (If branches) included.
pub fn unsupported_ops(model: &pb::ModelProto, registry: &Registry) -> Vec<(String, String)> {
    fn walk(graph: &pb::GraphProto, registry: &Registry, depth: usize, missing: &mut BTreeMap<String, String>) {
        for (i, node) in graph.node.iter().enumerate() {
            let default_domain = node.domain.is_empty() || node.domain == "ai.onnx";
            let key = registry_key(node);
            let supported = registry.get(&key).is_some() || default_domain && CONTROL_FLOW.contains(&node.op_type.as_str());
            if !supported {
                missing.entry(key).or_insert_with(|| node_name(node, i));
            }
            if depth < MAX_NESTING {
                for g in subgraphs(node) {
                    walk(g, registry, depth + 1, missing);
                }
            }
        }
    }
    let mut missing: BTreeMap<String, String> = BTreeMap::new();
    walk(model.graph.as_ref().expect("checked by decode"), registry, 0, &mut missing);
    missing.into_iter().collect()
}

/// The key of a node's converter: its op type in the default ONNX domain,
/// `domain:op_type` in any other (e.g. `trt:TRT_FP8QuantizeLinear`).
fn registry_key(node: &pb::NodeProto) -> String {
    if node.domain.is_empty() || node.domain == "ai.onnx" {
        node.op_type.clone()
    } else {
        format!("{}:{}", node.domain, node.op_type)
    }
}

/// The graphs a node's attributes hold (If's branches, Loop's body...).
fn subgraphs(node: &pb::NodeProto) -> impl Iterator<Item = &pb::GraphProto> {
    node.attribute.iter().flat_map(|a| a.g.iter().chain(&a.graphs))
}

/// The outer-scope names a node's subgraphs read: what their nodes (and
/// theirs, recursively) read that the subgraph itself does not define.
fn implicit_inputs(node: &pb::NodeProto, depth: usize) -> Vec<&str> {
    let mut free = Vec::new();
    if depth >= MAX_NESTING {
        return free;
    }
    for g in subgraphs(node) {
        let mut defined: std::collections::HashSet<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
        defined.extend(g.input.iter().map(|v| v.name.as_str()));
        defined.extend(g.node.iter().flat_map(|n| n.output.iter().map(String::as_str)));
        for n in &g.node {
            for x in n.input.iter().map(String::as_str).chain(implicit_inputs(n, depth + 1)) {
                if !x.is_empty() && !defined.contains(x) && !free.contains(&x) {
                    free.push(x);
                }
            }
        }
    }
    free
}

/// An If's branch `which` (`then_branch` or `else_branch`), which takes
/// no inputs.
fn if_branch<'n>(node: &'n pb::NodeProto, which: &str) -> Result<&'n pb::GraphProto> {
    let branch = node
        .attribute
        .iter()
        .find(|a| a.name == which)
        .and_then(|a| a.g.as_ref())
        .ok_or_else(|| anyhow!("it has no {which} graph"))?;
    if !branch.input.is_empty() {
        bail!("its {which} declares {} inputs; If branches take none", branch.input.len());
    }
    Ok(branch)
}

fn node_name(node: &pb::NodeProto, i: usize) -> String {
    if node.name.is_empty() {
        format!("{}_{i}", node.op_type)
    } else {
        node.name.clone()
    }
}

/// The names an input declares for its dimensions (`dim_param`).
fn dim_names(vi: &pb::ValueInfoProto) -> Vec<Option<String>> {
    let Some(pb::type_proto::Value::TensorType(t)) = vi.r#type.as_ref().and_then(|t| t.value.as_ref()) else { return Vec::new() };
    let dims = t.shape.as_ref().map(|s| s.dim.as_slice()).unwrap_or_default();
    dims.iter()
        .map(|d| match &d.value {
            Some(pb::tensor_shape_proto::dimension::Value::DimParam(p)) if !p.is_empty() => Some(p.clone()),
            _ => None,
        })
        .collect()
}

fn input_type(vi: &pb::ValueInfoProto, opts: &ImportOptions) -> Result<TensorType> {
    let Some(pb::type_proto::Value::TensorType(t)) = vi.r#type.as_ref().and_then(|t| t.value.as_ref()) else {
        bail!("input '{}' is not a tensor (sequences, maps and optionals are not supported)", vi.name);
    };
    let dtype = proto::dtype(t.elem_type).with_context(|| format!("input '{}'", vi.name))?;
    if let Some(shape) = opts.shapes.get(&vi.name) {
        if let Some(declared) = &t.shape {
            if declared.dim.len() != shape.len() {
                bail!("--shape {}: gives {} dimensions, the model declares {}", vi.name, shape.len(), declared.dim.len());
            }
            // --shape resolves symbolic dimensions; a static one must be given as it is.
            for (axis, (d, &given)) in declared.dim.iter().zip(shape).enumerate() {
                if let Some(pb::tensor_shape_proto::dimension::Value::DimValue(v)) = d.value {
                    if v >= 0 && v as usize != given {
                        bail!("--shape {}: dimension {axis} is {given}, but the model fixes it at {v}", vi.name);
                    }
                }
            }
        }
        return Ok(TensorType::new(dtype, shape.clone()));
    }
    let Some(declared) = &t.shape else {
        bail!("input '{}' has no declared shape; give it with --shape {}:DIMS", vi.name, vi.name);
    };
    let mut shape = Vec::with_capacity(declared.dim.len());
    for (axis, d) in declared.dim.iter().enumerate() {
        use pb::tensor_shape_proto::dimension::Value;
        match &d.value {
            Some(Value::DimValue(v)) if *v >= 0 => shape.push(*v as usize),
            Some(Value::DimParam(p)) => bail!(
                "input '{}' has a symbolic dimension '{p}' at axis {axis}; give its shape with --shape {}:DIMS (e.g. 1x3x224x224), or its range with --min-shapes, --opt-shapes and --max-shapes",
                vi.name,
                vi.name
            ),
            _ => bail!(
                "input '{}' has an unknown dimension at axis {axis}; give its shape with --shape {}:DIMS",
                vi.name,
                vi.name
            ),
        }
    }
    Ok(TensorType::new(dtype, shape))
}

/// Orders nodes so that each comes after the producers of its inputs (ONNX
/// requires this, but not every exporter obeys): Kahn's algorithm, taking
/// the ready node that comes first in the file, so the file order is kept
/// where it is valid. Also refuses a tensor written by two nodes (or by a
/// node and an input or initializer): ONNX graphs are in SSA form.
fn sorted_nodes<'a>(
    graph: &'a pb::GraphProto,
    known: &std::collections::HashSet<&'a str>,
) -> Result<Vec<(usize, &'a pb::NodeProto)>> {
    use std::cmp::Reverse;
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in graph.node.iter().enumerate() {
        for out in n.output.iter().filter(|o| !o.is_empty()) {
            if known.contains(out.as_str()) {
                bail!("node '{}' ({}) writes '{out}', which is already a graph input or initializer", node_name(n, i), n.op_type);
            }
            if let Some(&j) = producer.get(out.as_str()) {
                let other = &graph.node[j];
                bail!(
                    "tensor '{out}' is written by two nodes, '{}' ({}) and '{}' ({})",
                    node_name(other, j),
                    other.op_type,
                    node_name(n, i),
                    n.op_type
                );
            }
            producer.insert(out, i);
        }
    }
    // For each node, how many of its producers are not placed yet, and who
    // waits on each node.
    let mut waiting = vec![0usize; graph.node.len()];
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); graph.node.len()];
    for (i, n) in graph.node.iter().enumerate() {
        let mut producers: Vec<usize> = Vec::new();
        let reads = n.input.iter().map(String::as_str).chain(implicit_inputs(n, 0));
        for x in reads.filter(|x| !x.is_empty() && !known.contains(x)) {
            match producer.get(x) {
                Some(&j) => producers.push(j),
                None => {
                    bail!("node '{}' ({}) reads '{x}', which no node, input or initializer produces", node_name(n, i), n.op_type)
                }
            }
        }
        producers.sort_unstable();
        producers.dedup();
        waiting[i] = producers.len();
        for j in producers {
            dependents[j].push(i);
        }
    }
    let mut ready: std::collections::BinaryHeap<Reverse<usize>> =
        (0..graph.node.len()).filter(|&i| waiting[i] == 0).map(Reverse).collect();
    let mut out = Vec::with_capacity(graph.node.len());
    while let Some(Reverse(i)) = ready.pop() {
        out.push((i, &graph.node[i]));
        for &d in &dependents[i] {
            waiting[d] -= 1;
            if waiting[d] == 0 {
                ready.push(Reverse(d));
            }
        }
    }
    if out.len() < graph.node.len() {
        let i = (0..graph.node.len()).find(|&i| waiting[i] > 0).expect("an unplaced node");
        let n = &graph.node[i];
        bail!("node '{}' ({}) is part of a cycle: it depends on its own outputs", node_name(n, i), n.op_type);
    }
    Ok(out)
}

pub fn import_model(model: &pb::ModelProto, root: ExternalDataRoot, opts: &ImportOptions) -> Result<Graph> {
    let registry = Registry::onnx();
    let opset = default_opset(model);
    if !(MIN_OPSET..=MAX_OPSET).contains(&opset) {
        bail!("opset {opset} is not supported (trtc reads opsets {MIN_OPSET} to {MAX_OPSET})");
    }
    let missing = unsupported_ops(model, &registry);
    if !missing.is_empty() {
        let list: Vec<String> = missing.iter().map(|(op, node)| format!("{op} (node '{node}')")).collect();
        bail!("unsupported ONNX ops: {}", list.join(", "));
    }
    let gp = model.graph.as_ref().expect("checked by decode");
    let mut graph = Graph::new();
    let mut values: HashMap<String, Port> = HashMap::new();

    for init in &gp.initializer {
        let t = proto::tensor(init, &root)?;
        let p = graph.add_constant(&init.name, t);
        values.insert(init.name.clone(), p);
    }
    if !gp.sparse_initializer.is_empty() {
        bail!("sparse initializers are not supported");
    }
    let input_names = || {
        gp.input
            .iter()
            .filter(|vi| !gp.initializer.iter().any(|i| i.name == vi.name))
            .map(|vi| vi.name.as_str())
            .collect::<Vec<_>>()
    };
    for name in opts.shapes.keys() {
        if !gp.input.iter().any(|vi| &vi.name == name) {
            bail!("--shape names '{name}', which is not an input of the model (its inputs: {:?})", input_names());
        }
    }
    for vi in &gp.input {
        if values.contains_key(&vi.name) {
            continue; // An initializer listed as an input (IR < 4): a constant.
        }
        if let Some(v) = opts.input_values.get(&vi.name) {
            let p = graph.add_constant(&vi.name, v.clone());
            graph.add_fixed_input(&vi.name, v.clone());
            values.insert(vi.name.clone(), p);
            continue;
        }
        let ty = input_type(vi, opts)?;
        if ty.checked_bytes().is_none() {
            bail!("input '{}' of shape {} is too large", vi.name, ty);
        }
        let p = graph.add_input(&vi.name, ty);
        if opts.sized_at_run_time.contains(&vi.name) {
            graph.mark_data_sized(graph.inputs().len() - 1);
        }
        let names = dim_names(vi);
        if names.iter().any(Option::is_some) {
            graph.set_dim_names(&vi.name, names);
        }
        values.insert(vi.name.clone(), p);
    }
    for name in opts.input_values.keys() {
        if !gp.input.iter().any(|vi| &vi.name == name) {
            bail!("--input-value names '{name}', which is not an input of the model (its inputs: {:?})", input_names());
        }
    }

    let mut importer = Importer {
        registry: &registry,
        opset,
        root: &root,
        graph,
        keep_loops: opts.keep_loops,
        keep_identity_reshapes: opts.keep_identity_reshapes,
        room_values: HashMap::new(),
        in_body: false,
    };
    importer.nodes(gp, &mut values, "", 0)?;
    let mut graph = importer.graph;
    let mut output_names = std::collections::HashSet::new();
    for vi in &gp.output {
        if !output_names.insert(vi.name.as_str()) {
            bail!("graph output '{}' is listed twice", vi.name);
        }
        let Some(&p) = values.get(&vi.name) else {
            bail!("graph output '{}' is not produced by any node (or uses an unsupported optional output)", vi.name);
        };
        graph.add_output(&vi.name, p);
    }
    // Report reads of unsupported optional outputs clearly.
    graph.remove_dead_nodes();
    crate::ir::verify(&graph)?;
    Ok(graph)
}

/// Converts a graph's nodes into the IR, recursing into the branches of
/// the control-flow ops it folds.
struct Importer<'a> {
    registry: &'a Registry,
    opset: i64,
    root: &'a ExternalDataRoot,
    graph: Graph,
    /// `ImportOptions::keep_loops`.
    keep_loops: bool,
    /// `ImportOptions::keep_identity_reshapes`.
    keep_identity_reshapes: bool,
    /// [`ctx::Ctx::room_value`]: what the small integer tensors computed
    /// from the sizes of tensors sized by the data hold when each of those
    /// fills its room.
    room_values: HashMap<Port, Tensor>,
    /// Whether this imports a branch or loop body (`Ctx::in_body`).
    in_body: bool,
}

impl Importer<'_> {
    /// Converts `gp`'s nodes in dependency order; `values` maps every name
    /// in scope (inputs, initializers, outer scopes) to its tensor and
    /// receives the nodes' outputs. Node names get `prefix`.
    fn nodes(&mut self, gp: &pb::GraphProto, values: &mut HashMap<String, Port>, prefix: &str, depth: usize) -> Result<()> {
        let known_names: Vec<String> = values.keys().cloned().collect();
        let known: std::collections::HashSet<&str> = known_names.iter().map(String::as_str).collect();
        let order = sorted_nodes(gp, &known)?;
        for (i, node) in order {
            let name = format!("{prefix}{}", node_name(node, i));
            let mut inputs = Vec::with_capacity(node.input.len());
            for x in &node.input {
                if x.is_empty() {
                    inputs.push(None);
                } else {
                    let p = values.get(x).copied().ok_or_else(|| anyhow!("node '{name}' reads unknown tensor '{x}'"))?;
                    inputs.push(Some(p));
                }
            }
            if CONTROL_FLOW.contains(&node.op_type.as_str()) && depth >= MAX_NESTING {
                bail!("node '{name}' ({}): subgraphs nest more than {MAX_NESTING} deep", node.op_type);
            }
            let outs = if node.op_type == "If" {
                self.fold_if(node, &name, &inputs, values, depth).with_context(|| format!("node '{name}' (If)"))?
            } else if node.op_type == "Loop" {
                self.import_loop(node, &name, &inputs, values, depth).with_context(|| format!("node '{name}' (Loop)"))?
            } else if node.op_type == "Scan" {
                self.unroll_scan(node, &name, &inputs, values, depth).with_context(|| format!("node '{name}' (Scan)"))?
            } else {
                if (Attributes { node }).has_graph() {
                    bail!("node '{name}' ({}): ops with subgraphs are not supported", node.op_type);
                }
                let convert = self.registry.get(&registry_key(node)).expect("checked by unsupported_ops");
                let mut named = node.clone();
                named.name = name.clone();
                let mut ctx = ctx::Ctx {
                    node: &named,
                    attrs: Attributes { node: &named },
                    opset: self.opset,
                    graph: &mut self.graph,
                    inputs,
                    root: self.root,
                    added: 0,
                    keep_identity_reshapes: self.keep_identity_reshapes,
                    room_values: &mut self.room_values,
                    in_body: self.in_body,
                };
                convert(&mut ctx).with_context(|| format!("node '{name}' ({})", node.op_type))?
            };
            for (k, out_name) in node.output.iter().enumerate() {
                if out_name.is_empty() {
                    continue;
                }
                match outs.get(k) {
                    Some(&p) => {
                        // Name the tensor after the ONNX output when it is fresh.
                        if self.graph.node(p.node).outputs[p.port].name.starts_with(&name) {
                            self.graph.set_tensor_name(p, out_name);
                        }
                        values.insert(out_name.clone(), p);
                    }
                    None => {
                        // Unsupported optional output: only an error if used.
                    }
                }
            }
        }
        Ok(())
    }

    /// An If whose condition is a constant (an initializer, a value fixed
    /// with `--input-value`, or anything folded from those and static
    /// shapes) becomes the branch it takes: the branch's nodes join the
    /// graph, reading the outer scope directly, and its outputs are the
    /// If's. A condition computed at run time makes a layer that holds both
    /// branches (`control_flow.rs`).
    fn fold_if(
        &mut self,
        node: &pb::NodeProto,
        name: &str,
        inputs: &[Option<Port>],
        values: &HashMap<String, Port>,
        depth: usize,
    ) -> Result<Vec<Port>> {
        let cond = inputs.first().copied().flatten().ok_or_else(|| anyhow!("no condition input"))?;
        let Some(c) = self.graph.node(cond.node).constant() else {
            return self.runtime_if(node, name, cond, values, depth);
        };
        let taken = match c.to_f64_vec().as_slice() {
            [v] => *v != 0.0,
            _ => bail!("the condition is {}, not one value", c.ty()),
        };
        let which = if taken { "then_branch" } else { "else_branch" };
        let branch = if_branch(node, which)?;
        let mut scope = values.clone();
        self.add_initializers(branch, &format!("{name}/"), &mut scope)?;
        self.nodes(branch, &mut scope, &format!("{name}/"), depth + 1).with_context(|| format!("in its {which}"))?;
        if branch.output.len() < node.output.len() {
            bail!("its {which} has {} outputs, the If {}", branch.output.len(), node.output.len());
        }
        branch
            .output
            .iter()
            .map(|o| scope.get(&o.name).copied().ok_or_else(|| anyhow!("{which} output '{}' is not produced", o.name)))
            .collect()
    }

    /// Adds a subgraph's initializers as constants named with `prefix`,
    /// in scope under their own names.
    fn add_initializers(&mut self, g: &pb::GraphProto, prefix: &str, scope: &mut HashMap<String, Port>) -> Result<()> {
        for init in &g.initializer {
            let t = proto::tensor(init, self.root)?;
            let p = self.graph.add_constant(&format!("{prefix}{}", init.name), t);
            scope.insert(init.name.clone(), p);
        }
        Ok(())
    }

    /// The value of a constant scalar condition or count, `None` when it
    /// is computed at run time.
    fn constant_scalar(&self, p: Port, what: &str) -> Result<Option<f64>> {
        let Some(t) = self.graph.node(p.node).constant() else { return Ok(None) };
        match t.to_f64_vec().as_slice() {
            [v] => Ok(Some(*v)),
            _ => bail!("its {what} is {}, not one value", t.ty()),
        }
    }

    /// A Loop: unrolled when its iterations are known and few enough, else
    /// a layer that runs its body (`control_flow.rs`).
    fn import_loop(
        &mut self,
        node: &pb::NodeProto,
        name: &str,
        inputs: &[Option<Port>],
        values: &HashMap<String, Port>,
        depth: usize,
    ) -> Result<Vec<Port>> {
        if self.keep_loops {
            return self.runtime_loop(node, name, inputs, values, depth);
        }
        match self.unroll_loop(node, name, inputs, values, depth)? {
            Some(outs) => Ok(outs),
            // The nodes of iterations unrolled before the loop turned out
            // to depend on run-time values are dead; import drops them.
            None => self.runtime_loop(node, name, inputs, values, depth),
        }
    }

    /// A Loop whose trip count and every iteration's condition are
    /// constants is unrolled: the body's nodes join the graph once per
    /// iteration (at most 4096), the iteration number a constant, the
    /// loop-carried values passed along; scan outputs are stacked along a
    /// new first axis. `None` when it cannot be (a count or condition
    /// computed at run time, too many iterations or nodes).
    fn unroll_loop(
        &mut self,
        node: &pb::NodeProto,
        name: &str,
        inputs: &[Option<Port>],
        values: &HashMap<String, Port>,
        depth: usize,
    ) -> Result<Option<Vec<Port>>> {
        let body = Attributes { node }.graph("body")?.ok_or_else(|| anyhow!("it has no body graph"))?;
        let n_carried = inputs.len().saturating_sub(2);
        if body.input.len() != n_carried + 2 || body.output.len() < n_carried + 1 {
            bail!(
                "its body has {} inputs and {} outputs; with {n_carried} loop-carried values it needs {} inputs and at least {} outputs",
                body.input.len(),
                body.output.len(),
                n_carried + 2,
                n_carried + 1
            );
        }
        let n_scan = body.output.len() - 1 - n_carried;
        let trips = match inputs.first().copied().flatten() {
            Some(p) => match self.constant_scalar(p, "trip count")? {
                Some(m) => Some(m as i64),
                None => return Ok(None),
            },
            None => None,
        };
        // A known trip count is checked at once; otherwise each iteration is.
        let budget_exceeded = |iterations: i64| iterations.saturating_mul(body.node.len() as i64) > MAX_UNROLLED_NODES;
        if trips.is_some_and(|m| m > MAX_UNROLL || budget_exceeded(m)) {
            return Ok(None);
        }
        let mut cond = match inputs.get(1).copied().flatten() {
            Some(p) => match self.constant_scalar(p, "condition")? {
                Some(c) => c != 0.0,
                None => return Ok(None),
            },
            None => true,
        };
        let mut carried: Vec<Port> = inputs[2..]
            .iter()
            .enumerate()
            .map(|(k, p)| p.ok_or_else(|| anyhow!("loop-carried input {k} is missing")))
            .collect::<Result<_>>()?;
        let mut scans: Vec<Vec<Port>> = vec![Vec::new(); n_scan];
        let mut i = 0i64;
        while cond && trips.is_none_or(|m| i < m) {
            if i >= MAX_UNROLL || budget_exceeded(i + 1) {
                return Ok(None);
            }
            let prefix = format!("{name}/{i}/");
            let mut scope = values.clone();
            let iteration = self.graph.add_constant(&format!("{prefix}iteration"), Tensor::scalar(i));
            let cond_in = self.graph.add_constant(&format!("{prefix}cond"), Tensor::from_bools(Vec::<usize>::new(), &[cond])?);
            scope.insert(body.input[0].name.clone(), iteration);
            scope.insert(body.input[1].name.clone(), cond_in);
            for (vi, &p) in body.input[2..].iter().zip(&carried) {
                scope.insert(vi.name.clone(), p);
            }
            self.add_initializers(body, &prefix, &mut scope)?;
            self.nodes(body, &mut scope, &prefix, depth + 1).with_context(|| format!("in iteration {i}"))?;
            let out = |j: usize| body_output(body, &scope, j);
            cond = match self.constant_scalar(out(0)?, "condition")? {
                Some(c) => c != 0.0,
                None => return Ok(None),
            };
            carried = (1..=n_carried).map(out).collect::<Result<_>>()?;
            for (s, scan) in scans.iter_mut().enumerate() {
                scan.push(out(1 + n_carried + s)?);
            }
            i += 1;
        }
        if scans.iter().any(Vec::is_empty) {
            // No iteration runs: the body's import gives the scan outputs'
            // element types and shapes.
            return Ok(None);
        }
        let mut outs = carried;
        for (s, scan) in scans.into_iter().enumerate() {
            outs.push(self.stack(&format!("{name}/scan{s}"), &scan, 0).with_context(|| format!("scan output {s}"))?);
        }
        Ok(Some(outs))
    }

    /// Tensors of one shape stacked along a new axis `axis`: each reshaped
    /// with a 1 there, then concatenated.
    fn stack(&mut self, name: &str, parts: &[Port], axis: usize) -> Result<Port> {
        let mut rows = Vec::with_capacity(parts.len());
        for (k, &p) in parts.iter().enumerate() {
            let mut shape = self.graph.ty(p).shape.clone();
            if axis > shape.len() {
                bail!("axis {axis} is out of range for rank {}", shape.len() + 1);
            }
            shape.insert(axis, 1);
            let op = trtc_runtime::ops::movement::Reshape { shape };
            let r = self.graph.add_op(&format!("{name}/{k}"), op.into(), &[Some(p)]).map_err(|e| anyhow!("{e}"))?;
            rows.push(Some(r[0]));
        }
        let concat = trtc_runtime::ops::movement::Concat { axis };
        Ok(self.graph.add_op(name, concat.into(), &rows).map_err(|e| anyhow!("{e}"))?[0])
    }

    /// Element `index` of `x` along `axis`, that axis dropped (a Gather by
    /// a constant scalar index).
    fn slice_at(&mut self, name: &str, x: Port, axis: usize, index: usize) -> Result<Port> {
        let idx = self.graph.add_constant(&format!("{name}/index"), Tensor::scalar(index as i64));
        let op = trtc_runtime::ops::movement::Gather { axis };
        Ok(self.graph.add_op(name, op.into(), &[Some(x), Some(idx)]).map_err(|e| anyhow!("{e}"))?[0])
    }

    /// A Scan is unrolled: its sequence length is a static dimension of its
    /// scan inputs. Each step slices every scan input along its axis
    /// (from the end for direction 1), runs the body on the state and the
    /// slices, and passes the new state on; each scan output is the
    /// per-step values stacked along its axis (in reverse for direction
    /// 1). Scan-8 has a batch axis first and an optional sequence_lens; it
    /// is unrolled once per batch entry, every length equal to the full
    /// sequence.
    fn unroll_scan(
        &mut self,
        node: &pb::NodeProto,
        name: &str,
        inputs: &[Option<Port>],
        values: &HashMap<String, Port>,
        depth: usize,
    ) -> Result<Vec<Port>> {
        let attrs = Attributes { node };
        let body = attrs.graph("body")?.ok_or_else(|| anyhow!("it has no body graph"))?;
        let m = attrs.int("num_scan_inputs")?.ok_or_else(|| anyhow!("it has no num_scan_inputs"))?;
        let batched = self.opset < 9;
        let given = if batched { &inputs[1.min(inputs.len())..] } else { inputs };
        let m = usize::try_from(m)
            .ok()
            .filter(|&m| m >= 1 && m <= given.len())
            .ok_or_else(|| anyhow!("num_scan_inputs {m} must be between 1 and its {} state and scan inputs", given.len()))?;
        let given: Vec<Port> =
            given.iter().enumerate().map(|(k, p)| p.ok_or_else(|| anyhow!("input {k} is missing"))).collect::<Result<_>>()?;
        let (states, scans) = given.split_at(given.len() - m);
        let n = states.len();
        if body.input.len() != n + m || body.output.len() < n {
            bail!(
                "its body has {} inputs and {} outputs; with {n} state and {m} scan inputs it needs {} inputs and at least {n} outputs",
                body.input.len(),
                body.output.len(),
                n + m
            );
        }
        let k = body.output.len() - n;
        let directions = |attr: &str, count: usize| -> Result<Vec<bool>> {
            let v = attrs.ints(attr)?.unwrap_or_else(|| vec![0; count]);
            if v.len() != count || v.iter().any(|&d| d != 0 && d != 1) {
                bail!("{attr} {v:?} must hold {count} values, each 0 or 1");
            }
            Ok(v.into_iter().map(|d| d == 1).collect())
        };
        let axes = |attr: &str, ranks: &[usize]| -> Result<Vec<usize>> {
            let v = attrs.ints(attr)?.unwrap_or_else(|| vec![0; ranks.len()]);
            if v.len() != ranks.len() {
                bail!("{attr} {v:?} must hold {} values", ranks.len());
            }
            v.iter()
                .zip(ranks)
                .map(|(&a, &r)| trtc_runtime::ops::util::normalize_axis(a, r).map_err(|e| anyhow!("{attr}: {e}")))
                .collect()
        };
        // Scan-8 names the input directions `directions` and has no axes.
        let in_reverse = directions(if batched { "directions" } else { "scan_input_directions" }, m)?;
        let out_reverse = if batched { vec![false; k] } else { directions("scan_output_directions", k)? };
        let ranks: Vec<usize> =
            scans.iter().map(|&p| self.graph.ty(p).shape.len().saturating_sub(usize::from(batched))).collect();
        let in_axes = if batched { vec![0; m] } else { axes("scan_input_axes", &ranks)? };
        let spec = ScanSpec { body, n, in_axes, in_reverse, out_reverse, depth };
        if !batched {
            // A sequence too long to unroll, empty, or (with `keep_loops`)
            // any: one layer that runs the body.
            let lengths: Vec<Option<usize>> =
                scans.iter().zip(&spec.in_axes).map(|(&p, &a)| self.graph.ty(p).shape.get(a).copied()).collect();
            let len = lengths.first().copied().flatten().unwrap_or(0) as i64;
            let unrollable = len > 0 && len <= MAX_UNROLL && len.saturating_mul(body.node.len() as i64) <= MAX_UNROLLED_NODES;
            if self.keep_loops || !unrollable {
                let out_axes = |ranks: &[usize]| axes("scan_output_axes", ranks);
                return self.runtime_scan(node, name, &spec, states, scans, values, &out_axes);
            }
            let (mut outs, scanned) = self.scan_steps(&spec, name, states, scans, values)?;
            let out_ranks: Vec<usize> = scanned.iter().map(|steps| self.graph.ty(steps[0]).shape.len() + 1).collect();
            let out_axes = axes("scan_output_axes", &out_ranks)?;
            for (s, steps) in scanned.iter().enumerate() {
                outs.push(
                    self.stack(&format!("{name}/scan{s}"), steps, out_axes[s]).with_context(|| format!("scan output {s}"))?,
                );
            }
            return Ok(outs);
        }
        if let Some(lens) = inputs.first().copied().flatten() {
            let full = scans.first().map_or(0, |&p| self.graph.ty(p).shape.get(1).copied().unwrap_or(0));
            match self.graph.node(lens.node).constant() {
                Some(t) if t.to_f64_vec().iter().all(|&l| l == full as f64) => {}
                _ => bail!("its sequence_lens must be known when the engine is built and equal the full length {full}"),
            }
        }
        let batch = given.first().map_or(0, |&p| self.graph.ty(p).shape.first().copied().unwrap_or(0));
        if given.iter().any(|&p| self.graph.ty(p).shape.first() != Some(&batch)) {
            bail!("its inputs do not share a batch dimension");
        }
        let mut per_batch: Vec<Vec<Port>> = vec![Vec::new(); n + k];
        for b in 0..batch {
            let prefix = format!("{name}/batch{b}");
            let pick = |me: &mut Self, ports: &[Port], what: &str| -> Result<Vec<Port>> {
                ports.iter().enumerate().map(|(j, &p)| me.slice_at(&format!("{prefix}/{what}{j}"), p, 0, b)).collect()
            };
            let (st, sc) = (pick(self, states, "state")?, pick(self, scans, "scan")?);
            let (outs, scanned) = self.scan_steps(&spec, &prefix, &st, &sc, values)?;
            for (j, p) in outs.into_iter().enumerate() {
                per_batch[j].push(p);
            }
            for (s, steps) in scanned.iter().enumerate() {
                let stacked = self.stack(&format!("{prefix}/scan{s}"), steps, 0)?;
                per_batch[n + s].push(stacked);
            }
        }
        if batch == 0 {
            bail!("its batch is empty, so its outputs have no known shape");
        }
        per_batch.iter().enumerate().map(|(j, parts)| self.stack(&format!("{name}/out{j}"), parts, 0)).collect()
    }

    /// Runs a Scan's steps: returns the final state and, per scan output,
    /// its values in output order (reversed for direction 1).
    fn scan_steps(
        &mut self,
        spec: &ScanSpec,
        name: &str,
        states: &[Port],
        scans: &[Port],
        values: &HashMap<String, Port>,
    ) -> Result<(Vec<Port>, Vec<Vec<Port>>)> {
        let body = spec.body;
        let lengths: Vec<usize> = scans
            .iter()
            .zip(&spec.in_axes)
            .map(|(&p, &a)| self.graph.ty(p).shape.get(a).copied())
            .collect::<Option<_>>()
            .ok_or_else(|| anyhow!("a scan input has no axis to scan (it is a scalar)"))?;
        let len = lengths.first().copied().unwrap_or(0);
        if lengths.iter().any(|&l| l != len) {
            bail!("its scan inputs have different lengths along their scan axes");
        }
        if len == 0 {
            bail!("its sequence is empty, so its scan outputs have no known shape");
        }
        if len as i64 > MAX_UNROLL || (len as i64).saturating_mul(body.node.len() as i64) > MAX_UNROLLED_NODES {
            bail!(
                "it scans {len} steps of a {}-node body; trtc unrolls at most {MAX_UNROLL} steps and {MAX_UNROLLED_NODES} nodes",
                body.node.len()
            );
        }
        let mut state = states.to_vec();
        let mut scanned: Vec<Vec<Port>> = vec![Vec::new(); body.output.len() - spec.n];
        for t in 0..len {
            let prefix = format!("{name}/{t}/");
            let mut scope = values.clone();
            for (vi, &p) in body.input.iter().zip(&state) {
                scope.insert(vi.name.clone(), p);
            }
            for (j, &x) in scans.iter().enumerate() {
                let at = if spec.in_reverse[j] { len - 1 - t } else { t };
                let slice = self.slice_at(&format!("{prefix}in{j}"), x, spec.in_axes[j], at)?;
                scope.insert(body.input[spec.n + j].name.clone(), slice);
            }
            self.add_initializers(body, &prefix, &mut scope)?;
            self.nodes(body, &mut scope, &prefix, spec.depth + 1).with_context(|| format!("in step {t}"))?;
            let out = |j: usize| body_output(body, &scope, j);
            state = (0..spec.n).map(out).collect::<Result<_>>()?;
            for (s, steps) in scanned.iter_mut().enumerate() {
                steps.push(out(spec.n + s)?);
            }
        }
        for (steps, &reverse) in scanned.iter_mut().zip(&spec.out_reverse) {
            if reverse {
                steps.reverse();
            }
        }
        Ok((state, scanned))
    }
}

/// The tensor a Loop or Scan body's output `j` names in its scope.
fn body_output(body: &pb::GraphProto, scope: &HashMap<String, Port>, j: usize) -> Result<Port> {
    let name = &body.output[j].name;
    scope.get(name).copied().ok_or_else(|| anyhow!("body output '{name}' is not produced"))
}

/// What a Scan's steps need besides their inputs.
struct ScanSpec<'g> {
    body: &'g pb::GraphProto,
    /// Number of state variables.
    n: usize,
    in_axes: Vec<usize>,
    in_reverse: Vec<bool>,
    out_reverse: Vec<bool>,
    depth: usize,
}
