//! The accuracy report of a reduced-precision engine: runs it and the FP32
//! reference engine on the same held-out batches and compares every output
//! (and, per layer, every tensor both engines compute), so a user can see
//! which layer to pin to fp32.
//!
//! Per tensor: cosine similarity over all elements of all batches, the max
//! relative error `max |ours - ref| / max |ref|` (relative to the tensor's
//! scale, so near-zero elements do not dominate), and for outputs whose last
//! axis holds class scores, the fraction of rows whose top-1 class agrees.

use crate::precision::calib::Batch;
use anyhow::Result;
use std::collections::HashMap;
use trtc_runtime::ops::precision::{Int8Output, Precision, PrecisionOp};
use trtc_runtime::{Engine, Op, Tensor, TensorView};

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

    fn stat(&self, name: &str, layer: &str, precision: Precision) -> TensorAccuracy {
        let cosine = if self.nan {
            f64::NAN
        } else if self.norm_ref == 0.0 && self.norm_ours == 0.0 {
            1.0
        } else {
            self.dot / (self.norm_ref.sqrt() * self.norm_ours.sqrt()).max(f64::MIN_POSITIVE)
        };
        let max_rel_err = if self.max_abs_ref > 0.0 { self.max_abs_err / self.max_abs_ref } else { self.max_abs_err };
        TensorAccuracy {
            name: name.to_string(),
            layer: layer.to_string(),
            precision,
            cosine,
            max_rel_err,
            top1: (self.top1_rows > 0).then_some((self.top1_agree, self.top1_rows)),
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
}

#[derive(Clone, Debug, Default)]
pub struct AccuracyReport {
    pub batches: usize,
    pub outputs: Vec<TensorAccuracy>,
    /// Per layer, worst cosine first (with `per_layer`).
    pub layers: Vec<TensorAccuracy>,
}

/// Values of a layer output as f64; int8 outputs are dequantized with the
/// scale the layer requantized with.
fn values(op: &Op, v: &TensorView<'_>) -> Vec<f64> {
    let mut x = v.to_f64_vec();
    if let Op::Precision(PrecisionOp::Int8Linear(l)) = op {
        if let Int8Output::Int8 { scale } = l.output {
            x.iter_mut().for_each(|e| *e *= scale as f64);
        }
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
    let mut ref_ctx = reference.create_context()?;
    let mut ctx = candidate.create_context()?;
    let ref_plan = reference.plan();
    let plan = candidate.plan();
    let mut outputs: Vec<(String, Acc)> = Vec::new();
    let mut layers: HashMap<String, (String, Precision, Acc)> = HashMap::new();
    for batch in batches {
        let refs: Vec<(&str, &Tensor)> = batch.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let mut ref_tensors: HashMap<String, Vec<f64>> = HashMap::new();
        let ref_out = ref_ctx.run_observed(&refs, |layer, outs| {
            if per_layer {
                for (&id, v) in layer.outputs.iter().zip(outs) {
                    if v.dtype.is_float() {
                        ref_tensors.insert(ref_plan.tensors[id].name.clone(), values(&layer.op, v));
                    }
                }
            }
        })?;
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
    let mut layer_stats: Vec<TensorAccuracy> = layers.iter().map(|(n, (l, p, a))| a.stat(n, l, *p)).collect();
    layer_stats.sort_by(|a, b| a.cosine.total_cmp(&b.cosine).then_with(|| a.name.cmp(&b.name)));
    // NaN (a broken layer) sorts first too.
    layer_stats.sort_by_key(|s| !s.cosine.is_nan());
    Ok(AccuracyReport {
        batches: batches.len(),
        outputs: outputs.iter().map(|(n, a)| a.stat(n, n, Precision::Fp32)).collect(),
        layers: layer_stats,
    })
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
            let _ = writeln!(s, "per layer, worst first ({} of {}):", self.layers.len().min(max_layers), self.layers.len());
            let _ = writeln!(s, "  {:<40} {:<5} {:>10} {:>12}", "layer", "prec", "cosine", "max rel err");
            for l in self.layers.iter().take(max_layers) {
                let _ = writeln!(s, "  {:<40} {:<5} {:>10.6} {:>12.3e}", l.layer, l.precision.name(), l.cosine, l.max_rel_err);
            }
        }
        s
    }
}
