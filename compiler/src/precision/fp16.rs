//! FP16: every float layer that is safe in f16 runs with f16 tensors and f32
//! arithmetic inside (`HalfIo`), data-movement layers run natively on f16,
//! and weights are stored as f16. Graph inputs and outputs keep their dtypes:
//! casts are inserted at the boundaries and wherever an f32 layer meets an
//! f16 tensor.
//!
//! A layer stays in f32 when it is pinned to fp32, when one of its constant
//! inputs does not fit f16's range, or when its op can produce values far
//! larger than its inputs (Exp, Pow, sums and products over axes, CumSum),
//! which would overflow f16's 65504.

use super::{rebuild, PrecisionConfig};
use crate::ir::{Graph, NodeKind, Port};
use anyhow::Result;
use half::f16;
use std::collections::{HashMap, HashSet};
use trtc_runtime::ops::elementwise::{Cast, ElementwiseOp, UnaryKind};
use trtc_runtime::ops::precision::{HalfIo, Int8Output, Precision, PrecisionOp};
use trtc_runtime::ops::reduce::{ReduceKind, ReduceOp};
use trtc_runtime::{DType, Op, Tensor, TensorType};

/// Whether an op may run on f16 tensors (with f32 arithmetic).
fn fp16_safe(op: &Op) -> bool {
    match op {
        Op::Precision(_) | Op::Quant(_) => false,
        Op::Elementwise(ElementwiseOp::Cast(_) | ElementwiseOp::Pow(_)) => false,
        Op::Elementwise(ElementwiseOp::Unary(u)) => u.kind != UnaryKind::Exp,
        Op::Reduce(ReduceOp::Reduce(r)) => matches!(r.kind, ReduceKind::Mean | ReduceKind::Max | ReduceKind::Min),
        Op::Reduce(ReduceOp::CumSum(_)) => false,
        _ => true,
    }
}

/// The largest finite f16.
const F16_MAX: f32 = 65504.0;

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

impl Rewriter {
    fn half(&mut self, graph: &mut Graph, p: Port) -> Result<Option<Port>> {
        if let Some(&h) = self.half_of.get(&p) {
            return Ok(Some(h));
        }
        let name = format!("{}.fp16", graph.node(p.node).outputs[p.port].name);
        let h = match &graph.node(p.node).kind {
            NodeKind::Constant(t) => match to_half(t) {
                Some(h) => graph.add_constant(&name, h),
                None => return Ok(None),
            },
            _ => graph.add_op(&name, Cast::new(DType::F16).into(), &[Some(p)])?[0],
        };
        self.half_of.insert(p, h);
        Ok(Some(h))
    }

    fn full(&mut self, graph: &mut Graph, p: Port) -> Result<Port> {
        if let Some(&f) = self.full_of.get(&p) {
            return Ok(f);
        }
        let name = format!("{}.fp32", graph.node(p.node).outputs[p.port].name);
        let f = graph.add_op(&name, Cast::new(DType::F32).into(), &[Some(p)])?[0];
        self.full_of.insert(p, f);
        Ok(f)
    }

    /// Tries to run node `n` in f16; returns whether it did.
    fn try_half(&mut self, graph: &mut Graph, n: petgraph::stable_graph::NodeIndex, op: &Op) -> Result<bool> {
        let inputs = graph.inputs_of(n);
        let in_types: Vec<Option<TensorType>> = inputs.iter().map(|p| p.map(|p| graph.ty(p).clone())).collect();
        let out_types: Vec<TensorType> = graph.node(n).outputs.iter().map(|o| o.ty.clone()).collect();
        let touches_f32 = in_types.iter().flatten().chain(&out_types).any(|t| t.dtype == DType::F32);
        let any_f64 = in_types.iter().flatten().chain(&out_types).any(|t| t.dtype == DType::F64);
        if !touches_f32 || any_f64 || !fp16_safe(op) {
            return Ok(false);
        }
        // Constants first: one that does not fit f16 keeps the layer in f32
        // before any cast is added.
        for p in inputs.iter().flatten() {
            if graph.ty(*p).dtype == DType::F32 && graph.node(p.node).constant().is_some() && self.half(graph, *p)?.is_none() {
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
                Some(p) if graph.ty(*p).dtype == DType::F32 => self.half(graph, *p)?,
                other => *other,
            });
        }
        let new = rebuild(graph, n, new_op, &new_inputs)?;
        for (i, (old, new_t)) in out_types.iter().zip(&new_out).enumerate() {
            if old.dtype == DType::F32 && new_t.dtype == DType::F16 {
                self.narrowed.insert(Port { node: new, port: i });
            }
        }
        Ok(true)
    }
}

/// Rewrites the graph for FP16 as `cfg` allows.
pub fn to_fp16(graph: &mut Graph, cfg: &PrecisionConfig) -> Result<()> {
    let mut rw = Rewriter { half_of: HashMap::new(), full_of: HashMap::new(), narrowed: HashSet::new() };
    let declared: Vec<DType> = graph.outputs.iter().map(|o| graph.ty(o.port).dtype).collect();
    for n in graph.topo_order() {
        let Some(op) = graph.node(n).op().cloned() else { continue };
        let name = graph.node(n).name.clone();
        // Int8 layers choose their float output's dtype.
        if let Op::Precision(PrecisionOp::Int8Linear(l)) = &op {
            // Its float output is f16 in an fp16 build (or when pinned to
            // fp16), unless the layer is pinned to fp32.
            let half_output = match cfg.pinned(&name) {
                Some(Precision::Fp32) => false,
                Some(Precision::Fp16) => true,
                _ => cfg.fp16,
            };
            if l.output == Int8Output::F32 && half_output {
                let mut l = l.clone();
                l.output = Int8Output::F16;
                let inputs = graph.inputs_of(n);
                let new = rebuild(graph, n, l.into(), &inputs)?;
                rw.narrowed.insert(Port { node: new, port: 0 });
            }
            continue;
        }
        if cfg.allows(&name, Precision::Fp16) && rw.try_half(graph, n, &op)? {
            continue;
        }
        // The layer stays as it is; narrowed inputs go back to f32 unless the
        // op takes them as they are with unchanged outputs (Cast, compares of
        // two f16 tensors, Shape...).
        let inputs = graph.inputs_of(n);
        if !inputs.iter().flatten().any(|p| rw.narrowed.contains(p)) {
            continue;
        }
        let types: Vec<Option<&TensorType>> = inputs.iter().map(|p| p.map(|p| graph.ty(p))).collect();
        let outs: Vec<TensorType> = graph.node(n).outputs.iter().map(|o| o.ty.clone()).collect();
        if op.infer(&types).map(|t| t == outs).unwrap_or(false) {
            continue;
        }
        let mut new_inputs = Vec::with_capacity(inputs.len());
        for p in &inputs {
            new_inputs.push(match p {
                Some(p) if rw.narrowed.contains(p) => Some(rw.full(graph, *p)?),
                other => *other,
            });
        }
        rebuild(graph, n, op, &new_inputs)?;
    }
    // Outputs keep their declared dtypes.
    for (i, dtype) in declared.into_iter().enumerate() {
        let p = graph.outputs[i].port;
        if graph.ty(p).dtype != dtype {
            let f = rw.full(graph, p)?;
            graph.outputs[i].port = f;
        }
    }
    Ok(())
}
