//! The accuracy report of a reduced-precision engine: runs it and the FP32
//! reference engine on the same held-out batches and compares every output
//! (and, per layer, every tensor both engines compute), so a user can see
//! which layer to pin to fp32.
//!
//! Per layer there are two figures. The accumulated one compares the
//! layer's output in the reduced-precision engine, after every earlier
//! layer's error, with FP32. The isolated one reruns each reduced-precision
//! layer alone on the FP32 engine's values of its inputs (converted to the
//! types it reads: rounded to f16, or quantized with the scale its producer
//! requantizes with), so the layer that first goes wrong stands out instead
//! of those downstream of it; layers sort by it, worst first.
//!
//! Per tensor: cosine similarity over all elements of all batches, the max
//! relative error `max |ours - ref| / max |ref|` (relative to the tensor's
//! scale, so near-zero elements do not dominate), and for outputs whose last
//! axis holds class scores, the fraction of rows whose top-1 class agrees.

use crate::precision::calib::Batch;
use anyhow::Result;
use std::collections::HashMap;
use trtc_runtime::ops::elementwise::Cast;
use trtc_runtime::ops::precision::{requantize_fp8, Fp8Output, Int8Output, Precision, PrecisionOp};
use trtc_runtime::plan::{Plan, Storage, TensorId};
use trtc_runtime::{DType, Engine, Op, Tensor, TensorView};

/// Running comparison of one tensor.
#[derive(Clone, Debug, Default)]
struct Acc {
    dot: f64,
    norm_ref: f64,
    norm_ours: f64,
    max_abs_err: f64,
    max_abs_ref: f64,
    top1_rows: usize,
    top1_agree: usize,
    nan: bool,
}

impl Acc {
    fn add(&mut self, ours: &[f64], reference: &[f64], classes: Option<usize>) {
        for (&a, &b) in ours.iter().zip(reference) {
            if a.is_nan() != b.is_nan() {
                self.nan = true;
            }
            self.dot += a * b;
            self.norm_ours += a * a;
            self.norm_ref += b * b;
            self.max_abs_err = self.max_abs_err.max((a - b).abs());
            self.max_abs_ref = self.max_abs_ref.max(b.abs());
        }
        if let Some(k) = classes {
            for (ra, rb) in ours.chunks(k).zip(reference.chunks(k)) {
                self.top1_rows += 1;
                if argmax(ra) == argmax(rb) {
                    self.top1_agree += 1;
                }
            }
        }
    }

    fn agreement(&self) -> Agreement {
        let cosine = if self.nan {
            f64::NAN
        } else if self.norm_ref == 0.0 && self.norm_ours == 0.0 {
            1.0
        } else {
            self.dot / (self.norm_ref.sqrt() * self.norm_ours.sqrt()).max(f64::MIN_POSITIVE)
        };
        let max_rel_err = if self.max_abs_ref > 0.0 { self.max_abs_err / self.max_abs_ref } else { self.max_abs_err };
        Agreement { cosine, max_rel_err }
    }

    fn stat(&self, name: &str, layer: &str, precision: Precision) -> TensorAccuracy {
        let Agreement { cosine, max_rel_err } = self.agreement();
        TensorAccuracy {
            name: name.to_string(),
            layer: layer.to_string(),
            precision,
            cosine,
            max_rel_err,
            top1: (self.top1_rows > 0).then_some((self.top1_agree, self.top1_rows)),
            isolated: None,
        }
    }
}

fn argmax(v: &[f64]) -> usize {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best
}

/// The comparison of one tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorAccuracy {
    pub name: String,
    /// The layer that computes it in the reduced-precision engine.
    pub layer: String,
    pub precision: Precision,
    pub cosine: f64,
    pub max_rel_err: f64,
    /// (rows whose top-1 class agrees, rows), for class-score outputs.
    pub top1: Option<(usize, usize)>,
    /// The layer alone in reduced precision, its inputs from the FP32
    /// engine (per layer only; `None` for FP32 layers and outputs).
    pub isolated: Option<Agreement>,
}

/// How close a tensor is to FP32's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Agreement {
    pub cosine: f64,
    /// `max |ours - ref| / max |ref|`.
    pub max_rel_err: f64,
}

#[derive(Clone, Debug, Default)]
pub struct AccuracyReport {
    pub batches: usize,
    pub outputs: Vec<TensorAccuracy>,
    /// Per layer, worst isolated cosine first, then worst accumulated
    /// cosine (with `per_layer`).
    pub layers: Vec<TensorAccuracy>,
}

/// The scale a quantized layer requantizes its output with, if it does.
fn output_scale(op: &Op) -> Option<f32> {
    match op {
        Op::Precision(PrecisionOp::Int8Linear(l)) => match l.output {
            Int8Output::Int8 { scale } => Some(scale),
            _ => None,
        },
        Op::Precision(PrecisionOp::Fp8Linear(l)) => match l.output {
            Fp8Output::Fp8 { scale } => Some(scale),
            _ => None,
        },
        _ => None,
    }
}

/// Values of a layer output as f64; int8 and FP8 outputs are dequantized
/// with the scale the layer requantized with.
fn values(op: &Op, v: &TensorView<'_>) -> Vec<f64> {
    let mut x = v.to_f64_vec();
    if let Some(scale) = output_scale(op) {
        x.iter_mut().for_each(|e| *e *= scale as f64);
    }
    x
}

/// Class scores: a float output of rank >= 2 whose last axis has 2 or more
/// entries.
fn classes(t: &Tensor) -> Option<usize> {
    let s = t.shape();
    (s.len() >= 2 && t.dtype().is_float() && s[s.len() - 1] >= 2).then(|| s[s.len() - 1])
}

/// Compares `candidate` with `reference` on `batches`.
pub fn evaluate(reference: &Engine, candidate: &Engine, batches: &[Batch], per_layer: bool) -> Result<AccuracyReport> {
    // Every core: results do not depend on the thread count.
    let mut ref_ctx = reference.create_context()?;
    let mut ctx = candidate.create_context()?;
    ref_ctx.set_threads(trtc_runtime::parallel::machine_threads())?;
    ctx.set_threads(trtc_runtime::parallel::machine_threads())?;
    let ref_plan = reference.plan();
    let plan = candidate.plan();
    let mut outputs: Vec<(String, Acc)> = Vec::new();
    let mut layers: HashMap<String, (String, Precision, Acc)> = HashMap::new();
    let mut isolated: HashMap<String, Acc> = HashMap::new();
    for batch in batches {
        let refs: Vec<(&str, &Tensor)> = batch.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let mut ref_tensors: HashMap<String, Vec<f64>> = HashMap::new();
        let mut ref_values: HashMap<String, Tensor> = HashMap::new();
        if per_layer {
            ref_values.extend(batch.iter().cloned());
        }
        let ref_out = ref_ctx.run_observed(&refs, |layer, outs| {
            if per_layer {
                for (&id, v) in layer.outputs.iter().zip(outs) {
                    if v.dtype.is_float() {
                        ref_tensors.insert(ref_plan.tensors[id].name.clone(), values(&layer.op, v));
                    }
                    if let Ok(t) = Tensor::from_bytes(ref_plan.tensors[id].ty.clone(), v.bytes) {
                        ref_values.insert(ref_plan.tensors[id].name.clone(), t);
                    }
                }
            }
        })?;
        if per_layer {
            for (name, ours, reference) in isolate(plan, candidate.weights(), &ref_values, &ref_tensors) {
                isolated.entry(name).or_default().add(&ours, &reference, None);
            }
        }
        let out = ctx.run_observed(&refs, |layer, outs| {
            if !per_layer {
                return;
            }
            let precision = plan.layer_precision(layer);
            for (&id, v) in layer.outputs.iter().zip(outs) {
                let name = &plan.tensors[id].name;
                if let Some(r) = ref_tensors.get(name) {
                    let ours = values(&layer.op, v);
                    if ours.len() == r.len() {
                        let e = layers.entry(name.clone()).or_insert_with(|| (layer.name.clone(), precision, Acc::default()));
                        e.2.add(&ours, r, None);
                    }
                }
            }
        })?;
        for (i, ((name, ours), (_, r))) in out.iter().zip(&ref_out).enumerate() {
            if outputs.len() <= i {
                outputs.push((name.clone(), Acc::default()));
            }
            outputs[i].1.add(&ours.to_f64_vec(), &r.to_f64_vec(), classes(r));
        }
    }
    let mut layer_stats: Vec<TensorAccuracy> = layers
        .iter()
        .map(|(n, (l, p, a))| TensorAccuracy { isolated: isolated.get(n).map(Acc::agreement), ..a.stat(n, l, *p) })
        .collect();
    // Worst first: a NaN (a broken layer) before any number; the isolated
    // figure first, the accumulated one among layers without one.
    let key = |s: &TensorAccuracy| {
        let iso = s.isolated.map_or(f64::INFINITY, |i| if i.cosine.is_nan() { f64::NEG_INFINITY } else { i.cosine });
        let acc = if s.cosine.is_nan() { f64::NEG_INFINITY } else { s.cosine };
        (iso, acc)
    };
    layer_stats.sort_by(|a, b| {
        let (ka, kb) = (key(a), key(b));
        ka.0.total_cmp(&kb.0).then(ka.1.total_cmp(&kb.1)).then_with(|| a.name.cmp(&b.name))
    });
    Ok(AccuracyReport {
        batches: batches.len(),
        outputs: outputs.iter().map(|(n, a)| a.stat(n, n, Precision::Fp32)).collect(),
        layers: layer_stats,
    })
}

/// Reruns every reduced-precision layer of `plan` alone on the FP32
/// engine's values (`ref_values`, by tensor name); returns, per output both
/// engines compute, (name, ours, FP32's) as f64 (int8 dequantized).
fn isolate(
    plan: &Plan,
    weights: &[u8],
    ref_values: &HashMap<String, Tensor>,
    ref_f64: &HashMap<String, Vec<f64>>,
) -> Vec<(String, Vec<f64>, Vec<f64>)> {
    let mut computed: HashMap<TensorId, Tensor> = HashMap::new();
    let mut out = Vec::new();
    // The scale each int8 or FP8 tensor's producer requantizes with.
    let int8_scales: HashMap<TensorId, f32> = plan
        .layers
        .iter()
        .filter_map(|l| output_scale(&l.op).map(|scale| l.outputs.iter().map(move |&o| (o, scale))))
        .flatten()
        .collect();
    for layer in &plan.layers {
        let inputs: Option<Vec<Option<Tensor>>> = layer
            .inputs
            .iter()
            .map(|i| match i {
                None => Some(None),
                Some(id) => fed(plan, weights, ref_values, &computed, &int8_scales, *id).map(Some),
            })
            .collect();
        // An input neither engine's FP32 values give (nor a conversion of
        // them): the layer cannot be isolated.
        let Some(inputs) = inputs else { continue };
        let refs: Vec<Option<&Tensor>> = inputs.iter().map(Option::as_ref).collect();
        let Ok(results) = layer.op.eval_owned(&refs) else { continue };
        let reduced = plan.layer_precision(layer) != Precision::Fp32;
        for (&id, t) in layer.outputs.iter().zip(results) {
            let name = &plan.tensors[id].name;
            if reduced && t.dtype() != DType::Bool {
                if let Some(r) = ref_f64.get(name) {
                    let ours = values(&layer.op, &t.view());
                    if ours.len() == r.len() {
                        out.push((name.clone(), ours, r.clone()));
                    }
                }
            }
            computed.insert(id, t);
        }
    }
    out
}

/// The value a layer of the reduced-precision plan reads as tensor `id`
/// when everything before it ran in FP32: a weight as it is; FP32's tensor
/// of the same name converted to this one's type (f16 and bf16 rounded,
/// int8 and FP8 quantized with the scale its producer requantizes with); else the
/// value its producer computed on such inputs (the casts and quantizers the
/// precision passes insert have no FP32 counterpart).
fn fed(
    plan: &Plan,
    weights: &[u8],
    ref_values: &HashMap<String, Tensor>,
    computed: &HashMap<TensorId, Tensor>,
    int8_scales: &HashMap<TensorId, f32>,
    id: TensorId,
) -> Option<Tensor> {
    let desc = plan.tensors.get(id)?;
    if let Storage::Weight { offset } = desc.storage {
        let bytes = weights.get(offset as usize..offset as usize + desc.ty.bytes())?;
        return Tensor::from_bytes(desc.ty.clone(), bytes).ok();
    }
    if let Some(r) = ref_values.get(&desc.name).filter(|r| r.shape() == desc.ty.shape.as_slice()) {
        if r.dtype() == desc.ty.dtype {
            return Some(r.clone());
        }
        match desc.ty.dtype {
            DType::F16 | DType::BF16 if r.dtype() == DType::F32 => {
                return Op::from(Cast::new(desc.ty.dtype)).eval_owned(&[Some(r)]).ok()?.pop();
            }
            DType::I8 => {
                if let Some(&scale) = int8_scales.get(&id) {
                    let q: Vec<i8> =
                        r.to_f64_vec().iter().map(|v| (v / scale as f64).round_ties_even().clamp(-128.0, 127.0) as i8).collect();
                    return Tensor::from_vec(desc.ty.shape.clone(), q).ok();
                }
            }
            DType::F8E4M3FN if r.dtype() == DType::F32 => {
                if let Some(&scale) = int8_scales.get(&id) {
                    let q: Vec<u8> = r.as_slice::<f32>().ok()?.iter().map(|&v| requantize_fp8(v, scale)).collect();
                    return Tensor::from_bytes(desc.ty.clone(), &q).ok();
                }
            }
            _ => {}
        }
    }
    computed.get(&id).cloned()
}

impl AccuracyReport {
    /// The report as text; `max_layers` limits the per-layer table.
    pub fn text(&self, max_layers: usize) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(s, "{:<32} {:>10} {:>12} {:>18}", "output", "cosine", "max rel err", "top-1 agreement");
        for o in &self.outputs {
            let top1 = match o.top1 {
                Some((a, n)) => format!("{:.1}% ({a}/{n})", 100.0 * a as f64 / n as f64),
                None => "-".into(),
            };
            let _ = writeln!(s, "{:<32} {:>10.6} {:>12.3e} {:>18}", o.name, o.cosine, o.max_rel_err, top1);
        }
        if !self.layers.is_empty() {
            let _ = writeln!(
                s,
                "per layer, worst isolated first ({} of {}); isolated: the layer alone in its precision, inputs from FP32; \
                 accumulated: after every earlier layer's error",
                self.layers.len().min(max_layers),
                self.layers.len()
            );
            let _ = writeln!(
                s,
                "  {:<40} {:<5} {:>16} {:>16} {:>18} {:>18}",
                "layer", "prec", "isolated cosine", "isolated max err", "accumulated cosine", "accumulated max err"
            );
            for l in self.layers.iter().take(max_layers) {
                let (ic, ie) = match l.isolated {
                    Some(i) => (format!("{:.6}", i.cosine), format!("{:.3e}", i.max_rel_err)),
                    None => ("-".into(), "-".into()),
                };
                let _ = writeln!(
                    s,
                    "  {:<40} {:<5} {ic:>16} {ie:>16} {:>18.6} {:>18.3e}",
                    l.layer,
                    l.precision.name(),
                    l.cosine,
                    l.max_rel_err
                );
            }
        }
        s
    }

    /// The report as one JSON object, for scripts: `batches`, `outputs` and
    /// `layers` (worst first), each entry with `name`, `layer`, `precision`,
    /// `cosine`, `max_rel_err`, and `top1` ([agree, rows]) or `isolated`
    /// ({`cosine`, `max_rel_err`}) where they apply (NaN written as null).
    pub fn json(&self) -> serde_json::Value {
        use serde_json::json;
        let num = |x: f64| serde_json::Number::from_f64(x).map_or(serde_json::Value::Null, serde_json::Value::Number);
        let entry = |t: &TensorAccuracy| {
            let mut v = json!({
                "name": t.name,
                "layer": t.layer,
                "precision": t.precision.name(),
                "cosine": num(t.cosine),
                "max_rel_err": num(t.max_rel_err),
            });
            if let Some((a, n)) = t.top1 {
                v["top1"] = json!([a, n]);
            }
            if let Some(i) = t.isolated {
                v["isolated"] = json!({ "cosine": num(i.cosine), "max_rel_err": num(i.max_rel_err) });
            }
            v
        };
        json!({
            "batches": self.batches,
            "outputs": self.outputs.iter().map(entry).collect::<Vec<_>>(),
            "layers": self.layers.iter().map(entry).collect::<Vec<_>>(),
        })
    }
}
