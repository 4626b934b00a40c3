//! FP16: every float layer that is safe in f16 runs with f16 tensors and f32
//! arithmetic inside (`HalfIo`), data-movement layers run natively on f16,
//! and weights are stored as f16. Graph inputs and outputs keep their dtypes:
//! casts are inserted at the boundaries and wherever an f32 layer meets an
//! f16 tensor.
//!
//! A layer stays in f32 when it is pinned to fp32, when one of its constant
//! inputs does not fit f16's range, when its op can produce values far
//! larger than its inputs (Exp, Pow, sums and products over axes, CumSum),
//! which would overflow f16's 65504, when it is control flow (If and Loop
//! run their sub-plans in f32), or when a tensor it reads or writes
//! was observed (running the FP32 engine on data, see `build`) beyond a
//! quarter of that range: values that overflow f16 stay in f32, so the
//! engine produces no infinity the FP32 one does not.

use super::PrecisionConfig;
use crate::ir::{wires, Graph, NodeKind, Patch, Port, Wire};
use anyhow::Result;
use half::f16;
use petgraph::stable_graph::NodeIndex;
use std::collections::{BTreeMap, HashMap, HashSet};
use trtc_runtime::ops::elementwise::{Cast, ElementwiseOp, UnaryKind};
use trtc_runtime::ops::precision::{Fp8Linear, Fp8Output, HalfIo, Int8Linear, Int8Output, Precision, PrecisionOp};
use trtc_runtime::ops::reduce::{ReduceKind, ReduceOp};
use trtc_runtime::{DType, Op, Tensor, TensorType};

/// Whether an op may run on f16 tensors (with f32 arithmetic).
fn fp16_safe(op: &Op) -> bool {
    match op {
        Op::Precision(_) | Op::Quant(_) => false,
        // Branches and loop bodies are sub-plans in f32, whose outputs may
        // be sized by the data: the layer keeps f32 tensors around them.
        Op::Control(_) => false,
        Op::Elementwise(ElementwiseOp::Cast(_) | ElementwiseOp::Pow(_)) => false,
        Op::Elementwise(ElementwiseOp::Unary(u)) => u.kind != UnaryKind::Exp,
        Op::Reduce(ReduceOp::Reduce(r)) => matches!(r.kind, ReduceKind::Mean | ReduceKind::Max | ReduceKind::Min),
        Op::Reduce(ReduceOp::CumSum(_)) => false,
        _ => true,
    }
}

/// The largest finite f16.
const F16_MAX: f32 = 65504.0;

/// The largest observed magnitude a tensor may have and still be stored in
/// f16: a quarter of its range, a margin for inputs beyond the data seen.
pub const F16_SAFE_RANGE: f32 = F16_MAX / 4.0;

/// The layers whose non-constant f32 inputs or outputs were observed
/// beyond [`F16_SAFE_RANGE`] (`ranges`: max |x| by tensor name), with the
/// reason.
fn out_of_range(graph: &Graph, ranges: &BTreeMap<String, f32>) -> BTreeMap<NodeIndex, String> {
    let too_big = |p: Port| -> Option<(String, f32)> {
        let o = &graph.node(p.node).outputs[p.port];
        if o.ty.dtype != DType::F32 || graph.node(p.node).constant().is_some() {
            return None;
        }
        ranges.get(&o.name).filter(|&&m| m > F16_SAFE_RANGE).map(|&m| (o.name.clone(), m))
    };
    let mut keep = BTreeMap::new();
    for n in graph.topo_order() {
        if graph.node(n).op().is_none() {
            continue;
        }
        let outs = (0..graph.node(n).outputs.len()).map(|port| Port { node: n, port });
        let found = graph.inputs_of(n).into_iter().flatten().chain(outs).find_map(too_big);
        if let Some((tensor, m)) = found {
            keep.insert(n, format!("tensor '{tensor}' reaches {m:.3e}, beyond f16's safe range ({F16_SAFE_RANGE})"));
        }
    }
    keep
}

/// An f32 constant as f16, if every finite value fits f16's range.
fn to_half(t: &Tensor) -> Option<Tensor> {
    let v = t.as_slice::<f32>().ok()?;
    if v.iter().any(|x| x.is_finite() && x.abs() > F16_MAX) {
        return None;
    }
    let mut h = vec![f16::ZERO; v.len()];
    half::slice::HalfFloatSliceExt::convert_from_f32_slice(h.as_mut_slice(), v);
    Tensor::from_vec(t.shape().to_vec(), h).ok()
}

struct Rewriter {
    /// f32 tensor -> its f16 version (converted constant or cast).
    half_of: HashMap<Port, Port>,
    /// Narrowed tensor -> a cast back to f32.
    full_of: HashMap<Port, Port>,
    /// Tensors this pass turned from f32 into f16.
    narrowed: HashSet<Port>,
}

/// The patch of one layer, and the conversions it adds, which become the
/// rewriter's once the patch is applied (later layers reuse them).
#[derive(Default)]
struct LayerPatch {
    patch: Patch,
    halves: HashMap<Port, Wire>,
    fulls: HashMap<Port, Wire>,
    narrowed: Vec<Wire>,
}

impl Rewriter {
    fn half(&self, graph: &Graph, lp: &mut LayerPatch, p: Port) -> Result<Option<Wire>> {
        if let Some(&h) = self.half_of.get(&p) {
            return Ok(Some(h.into()));
        }
        if let Some(&h) = lp.halves.get(&p) {
            return Ok(Some(h));
        }
        let name = format!("{}.fp16", graph.node(p.node).outputs[p.port].name);
        let h = match &graph.node(p.node).kind {
            NodeKind::Constant(t) => match to_half(t) {
                Some(h) => lp.patch.add_constant(&name, h),
                None => return Ok(None),
            },
            _ => lp.patch.add_op(graph, &name, Cast::new(DType::F16).into(), &[Some(p.into())])?[0],
        };
        lp.halves.insert(p, h);
        Ok(Some(h))
    }

    fn full(&self, graph: &Graph, lp: &mut LayerPatch, p: Port) -> Result<Wire> {
        if let Some(&f) = self.full_of.get(&p) {
            return Ok(f.into());
        }
        if let Some(&f) = lp.fulls.get(&p) {
            return Ok(f);
        }
        let name = format!("{}.fp32", graph.node(p.node).outputs[p.port].name);
        let f = lp.patch.add_op(graph, &name, Cast::new(DType::F32).into(), &[Some(p.into())])?[0];
        lp.fulls.insert(p, f);
        Ok(f)
    }

    /// Applies a layer's patch and keeps its conversions.
    fn commit(&mut self, graph: &mut Graph, lp: LayerPatch) -> Result<()> {
        let LayerPatch { patch, halves, fulls, narrowed } = lp;
        let applied = graph.apply(patch)?;
        self.half_of.extend(halves.into_iter().map(|(p, w)| (p, applied.port(w))));
        self.full_of.extend(fulls.into_iter().map(|(p, w)| (p, applied.port(w))));
        self.narrowed.extend(narrowed.into_iter().map(|w| applied.port(w)));
        Ok(())
    }

    /// Tries to run node `n` in f16; returns whether it did.
    fn try_half(&self, graph: &Graph, lp: &mut LayerPatch, n: NodeIndex, op: &Op) -> Result<bool> {
        let inputs = graph.inputs_of(n);
        let in_types: Vec<Option<TensorType>> = inputs.iter().map(|p| p.map(|p| graph.ty(p).clone())).collect();
        let out_types: Vec<TensorType> = graph.node(n).outputs.iter().map(|o| o.ty.clone()).collect();
        let touches_f32 = in_types.iter().flatten().chain(&out_types).any(|t| t.dtype == DType::F32);
        let any_f64 = in_types.iter().flatten().chain(&out_types).any(|t| t.dtype == DType::F64);
        if !touches_f32 || any_f64 || !fp16_safe(op) {
            return Ok(false);
        }
        // Constants first: one that does not fit f16 keeps the layer in f32
        // before any cast is added (the converted ones stay for later layers).
        for p in inputs.iter().flatten() {
            if graph.ty(*p).dtype == DType::F32 && graph.node(p.node).constant().is_some() && self.half(graph, lp, *p)?.is_none()
            {
                return Ok(false);
            }
        }
        let new_op: Op = match op {
            Op::Movement(_) => op.clone(),
            _ => HalfIo::new(op.clone()).into(),
        };
        // Check before adding casts: the types the op would see.
        let half_types: Vec<Option<TensorType>> = in_types
            .iter()
            .map(|t| {
                t.as_ref().map(|t| if t.dtype == DType::F32 { TensorType::new(DType::F16, t.shape.clone()) } else { t.clone() })
            })
            .collect();
        let refs: Vec<Option<&TensorType>> = half_types.iter().map(|t| t.as_ref()).collect();
        let Ok(new_out) = new_op.infer(&refs) else { return Ok(false) };
        if new_out.iter().any(|t| t.dtype == DType::F32) || new_out.len() != out_types.len() {
            return Ok(false);
        }
        let mut new_inputs = Vec::with_capacity(inputs.len());
        for p in &inputs {
            new_inputs.push(match p {
                Some(p) if graph.ty(*p).dtype == DType::F32 => self.half(graph, lp, *p)?,
                other => other.map(Wire::from),
            });
        }
        let new = lp.patch.replace_node(graph, n, new_op, &new_inputs)?;
        for (i, (old, new_t)) in out_types.iter().zip(&new_out).enumerate() {
            if old.dtype == DType::F32 && new_t.dtype == DType::F16 {
                lp.narrowed.push(new[i]);
            }
        }
        Ok(true)
    }

    /// Rewrites one layer as `cfg` allows (and not in f16 when
    /// `keep_f32`), into `lp`.
    fn layer(
        &self,
        graph: &Graph,
        cfg: &PrecisionConfig,
        keep_f32: bool,
        lp: &mut LayerPatch,
        n: NodeIndex,
        op: &Op,
    ) -> Result<()> {
        let name = &graph.node(n).name;
        // Int8 and FP8 layers choose their float output's dtype: f16 in an
        // fp16 build (or when pinned to fp16), unless pinned to fp32.
        if let Op::Precision(PrecisionOp::Int8Linear(_) | PrecisionOp::Fp8Linear(_)) = op {
            let half_output = match cfg.pinned(name) {
                Some(Precision::Fp32) => false,
                Some(Precision::Fp16) => true,
                _ => cfg.fp16,
            };
            let narrowed: Option<Op> = match op {
                Op::Precision(PrecisionOp::Int8Linear(l)) if half_output && l.output == Int8Output::F32 => {
                    Some(Int8Linear { output: Int8Output::F16, ..l.clone() }.into())
                }
                Op::Precision(PrecisionOp::Fp8Linear(l)) if half_output && l.output == Fp8Output::F32 => {
                    Some(Fp8Linear { output: Fp8Output::F16, ..l.clone() }.into())
                }
                _ => None,
            };
            if let Some(op) = narrowed {
                let inputs = wires(&graph.inputs_of(n));
                let new = lp.patch.replace_node(graph, n, op, &inputs)?;
                lp.narrowed.push(new[0]);
            }
            return Ok(());
        }
        if cfg.allows(name, Precision::Fp16) && !keep_f32 && self.try_half(graph, lp, n, op)? {
            return Ok(());
        }
        // The layer stays as it is; narrowed inputs go back to f32 unless the
        // op takes them as they are with unchanged outputs (Cast, compares of
        // two f16 tensors, Shape...).
        let inputs = graph.inputs_of(n);
        if !inputs.iter().flatten().any(|p| self.narrowed.contains(p)) {
            return Ok(());
        }
        let types: Vec<Option<&TensorType>> = inputs.iter().map(|p| p.map(|p| graph.ty(p))).collect();
        let outs: Vec<TensorType> = graph.node(n).outputs.iter().map(|o| o.ty.clone()).collect();
        if op.infer(&types).map(|t| t == outs).unwrap_or(false) {
            return Ok(());
        }
        let mut new_inputs = Vec::with_capacity(inputs.len());
        for p in &inputs {
            new_inputs.push(match p {
                Some(p) if self.narrowed.contains(p) => Some(self.full(graph, lp, *p)?),
                other => other.map(Wire::from),
            });
        }
        lp.patch.replace_node(graph, n, op.clone(), &new_inputs)?;
        Ok(())
    }
}

/// Rewrites the graph for FP16 as `cfg` allows; `ranges` are the observed
/// max |x| of tensors by name (empty when nothing was observed). Returns
/// the layers kept in f32 for their ranges (a pin to fp16 overrides), with
/// the reason.
pub fn to_fp16(graph: &mut Graph, cfg: &PrecisionConfig, ranges: &BTreeMap<String, f32>) -> Result<Vec<(String, String)>> {
    let mut rw = Rewriter { half_of: HashMap::new(), full_of: HashMap::new(), narrowed: HashSet::new() };
    let declared: Vec<DType> = graph.outputs().iter().map(|o| graph.ty(o.port).dtype).collect();
    let mut keep = out_of_range(graph, ranges);
    keep.retain(|&n, _| cfg.pinned(&graph.node(n).name) != Some(Precision::Fp16));
    let mut kept = Vec::new();
    for n in graph.topo_order() {
        let Some(op) = graph.node(n).op().cloned() else { continue };
        let mut lp = LayerPatch::default();
        let why = keep.get(&n);
        if let Some(why) = why.filter(|_| cfg.allows(&graph.node(n).name, Precision::Fp16)) {
            kept.push((graph.node(n).name.clone(), why.clone()));
        }
        rw.layer(graph, cfg, why.is_some(), &mut lp, n, &op)?;
        rw.commit(graph, lp)?;
    }
    // Outputs keep their declared dtypes.
    for (i, dtype) in declared.into_iter().enumerate() {
        let p = graph.outputs()[i].port;
        if graph.ty(p).dtype != dtype {
            let mut lp = LayerPatch::default();
            let f = rw.full(graph, &mut lp, p)?;
            lp.patch.set_output(i, f);
            rw.commit(graph, lp)?;
        }
    }
    Ok(kept)
}
