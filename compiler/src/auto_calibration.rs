//! The `auto` calibrator (`--calibrator auto`): for every tensor that an
//! int8 (or FP8) layer reads, the scale of whichever calibrator —
//! entropy, percentile 99.99 or min-max — gives the layers reading it the
//! least error against FP32, measured on the calibration batches.
//!
//! How: the optimized FP32 graph is rewritten once per candidate
//! calibrator, every tensor at that calibrator's scale, with quantized
//! layers writing f32 (no requantizing epilogue, so a layer's error depends
//! on its input's scale alone), and each rewritten engine's layers are run
//! alone on the FP32 engine's values (`accuracy::evaluate`'s isolated
//! figures). A tensor's error under a candidate is the sum of `1 - cosine`
//! over the quantized layers that read it; the least wins, entropy first
//! on a tie. Tensors no quantized layer reads keep the entropy scale.
//!
//! Choosing each tensor by its readers alone ignores how errors combine
//! downstream, so the mix is not better than every single calibrator on
//! every model (benches/RESULTS.md); checking the mix end to end against
//! the uniform candidates on the calibration batches was tried and did not
//! help on held-out data (eight batches are too few to rank them).

use crate::accuracy::evaluate;
use crate::ir::Graph;
use crate::precision::calib::calibrator::AUTO_CANDIDATES;
use crate::precision::calib::{Batch, CalibrationCache, Calibrator};
use crate::precision::PrecisionConfig;
use anyhow::{ensure, Result};
use std::collections::{BTreeMap, HashMap};
use trtc_runtime::ops::precision::PrecisionOp;
use trtc_runtime::ops::quant::QuantOp;
use trtc_runtime::{Engine, Op, Target};

/// The FP32 engine of a graph, on the CPU.
fn engine_of(graph: &Graph) -> Result<Engine> {
    let lowered = crate::lower::lower(graph, Default::default())?;
    Ok(Engine::from_bytes(&Engine::serialize(Target::Cpu, vec![], &lowered.plan, &lowered.weights, None)?)?)
}

/// Each quantized layer's output tensor and the tensor its quantizer reads.
fn quantized_inputs(graph: &Graph) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for n in graph.topo_order() {
        let quantized = matches!(graph.node(n).op(), Some(Op::Precision(PrecisionOp::Int8Linear(_) | PrecisionOp::Fp8Linear(_))));
        if !quantized {
            continue;
        }
        let Some(Some(q)) = graph.inputs_of(n).first().copied() else { continue };
        if !matches!(graph.node(q.node).op(), Some(Op::Quant(QuantOp::QuantizeLinear(_)))) {
            continue;
        }
        let Some(Some(x)) = graph.inputs_of(q.node).first().copied() else { continue };
        let x_name = graph.node(x.node).outputs[x.port].name.clone();
        out.insert(graph.node(n).outputs[0].name.clone(), x_name);
    }
    out
}

/// Chooses a scale per tensor from `candidates` (one cache per calibrator
/// of [`AUTO_CANDIDATES`], in that order) for the build `cfg` describes
/// (int8 or FP8, with its pins); returns the chosen cache, headed
/// `AutoCalibration`.
pub fn choose(
    graph: &Graph,
    cfg: &PrecisionConfig,
    candidates: &[CalibrationCache],
    batches: &[Batch],
) -> Result<CalibrationCache> {
    ensure!(candidates.len() == AUTO_CANDIDATES.len(), "the auto calibrator needs one cache per candidate");
    let reference = engine_of(graph)?;
    // Layers alone in int8/FP8: no fp16 around them, f32 outputs.
    let search = PrecisionConfig { fp16: false, keep_float_outputs: true, ..cfg.clone() };
    let mut errors: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (i, cache) in candidates.iter().enumerate() {
        let mut g = graph.clone();
        crate::precision::apply(&mut g, &search, &cache.scales, &BTreeMap::new())?;
        let reads = quantized_inputs(&g);
        let report = evaluate(&reference, &engine_of(&g)?, batches, true)?;
        for layer in &report.layers {
            let (Some(x), Some(iso)) = (reads.get(&layer.name), layer.isolated) else { continue };
            let e = if iso.cosine.is_nan() { 2.0 } else { 1.0 - iso.cosine };
            errors.entry(x.clone()).or_insert_with(|| vec![0.0; candidates.len()])[i] += e;
        }
    }
    let mut chosen = CalibrationCache::new(&Calibrator::Auto);
    chosen.scales = candidates[0].scales.clone();
    for (tensor, errs) in &errors {
        // The first of the least (entropy on a tie).
        let best = (0..errs.len()).fold(0, |b, i| if errs[i] < errs[b] { i } else { b });
        if let Some(&s) = candidates[best].scales.get(tensor) {
            chosen.scales.insert(tensor.clone(), s);
        }
    }
    Ok(chosen)
}
