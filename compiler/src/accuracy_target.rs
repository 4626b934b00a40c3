//! Accuracy-targeted mixed precision (`--accuracy-target cosine=0.999` or
//! `top1=0.99`): builds the engine as asked, measures it against the FP32
//! engine on held-out batches, and while the target does not hold, keeps
//! one more layer in higher precision (int8 to fp16 when the build allows
//! fp16, else to fp32; fp16 to fp32) and builds again. The layer chosen is
//! the one with the largest isolated error (the accuracy report's per-layer
//! figure: the layer alone in its precision on FP32 inputs) per unit of
//! cost, its multiply-adds (output elements times the reduction length of
//! its weight), ties broken by name, so the same data gives the same
//! choice. The pins it adds are `--layer-precision` patterns the user can
//! pass again.

use crate::accuracy::{evaluate, AccuracyReport, TensorAccuracy};
use crate::build::{build_graph, engine_of, BuildOptions, Built};
use crate::ir::Graph;
use crate::precision::calib::Batch;
use anyhow::{bail, Result};
use petgraph::stable_graph::NodeIndex;
use std::collections::HashMap;
use trtc_runtime::ops::precision::Precision;
use trtc_runtime::Engine;

/// What the engine must reach against the FP32 engine, on every output.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AccuracyTarget {
    /// Cosine similarity of each output.
    Cosine(f64),
    /// Fraction of rows whose top-1 class agrees, on each class-score
    /// output.
    Top1(f64),
}

impl std::str::FromStr for AccuracyTarget {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<AccuracyTarget> {
        let Some((metric, value)) = s.split_once('=') else {
            bail!("expected cosine=VALUE or top1=VALUE, e.g. cosine=0.999");
        };
        let make = match metric {
            "cosine" => AccuracyTarget::Cosine,
            "top1" => AccuracyTarget::Top1,
            _ => bail!("unknown metric '{metric}': expected cosine or top1"),
        };
        let v: f64 = value.parse().map_err(|_| anyhow::anyhow!("'{value}' is not a number"))?;
        if !(0.0..=1.0).contains(&v) {
            bail!("the target {v} must be in [0, 1]");
        }
        Ok(make(v))
    }
}

impl std::fmt::Display for AccuracyTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AccuracyTarget::Cosine(v) => write!(f, "cosine={v}"),
            AccuracyTarget::Top1(v) => write!(f, "top1={v}"),
        }
    }
}

impl AccuracyTarget {
    /// The worst output's figure (NaN counts as 0, the worst).
    fn measure(&self, report: &AccuracyReport) -> Result<f64> {
        let figures: Vec<f64> = match self {
            AccuracyTarget::Cosine(_) => report.outputs.iter().map(|o| o.cosine).collect(),
            AccuracyTarget::Top1(_) => {
                report.outputs.iter().filter_map(|o| o.top1).map(|(agree, rows)| agree as f64 / rows as f64).collect()
            }
        };
        if figures.is_empty() {
            bail!("--accuracy-target {self}: the model has no class-score output (rank >= 2, a float last axis of 2 or more)");
        }
        Ok(figures.into_iter().map(|v| if v.is_nan() { 0.0 } else { v }).fold(1.0, f64::min))
    }

    fn value(&self) -> f64 {
        match *self {
            AccuracyTarget::Cosine(v) | AccuracyTarget::Top1(v) => v,
        }
    }
}

/// What [`build_to_target`] did.
pub struct TargetOutcome {
    /// The last engine built: the one that meets the target, or the one
    /// with every candidate layer in higher precision.
    pub built: Built,
    /// The pins added, in the order chosen.
    pub pins: Vec<(String, Precision)>,
    /// The worst output's figure of the last engine.
    pub achieved: f64,
    pub met: bool,
    /// Engines built and measured.
    pub rounds: usize,
}

impl TargetOutcome {
    /// The pins as `trtc build` flags.
    pub fn flags(&self) -> String {
        let flags: Vec<String> = self
            .pins
            .iter()
            .map(|(layer, p)| format!("--layer-precision '{}={}'", layer.replace('\'', r"'\''"), p.name()))
            .collect();
        flags.join(" ")
    }
}

/// A layer's cost in multiply-adds: its output elements times the
/// reduction length of its constant weight (input 1: elements per output
/// channel), or its output elements alone.
fn cost(graph: &Graph, n: NodeIndex) -> f64 {
    let out: usize = graph.node(n).outputs.iter().map(|o| o.ty.len()).sum();
    let reduction = graph
        .inputs_of(n)
        .get(1)
        .copied()
        .flatten()
        .filter(|p| graph.node(p.node).constant().is_some())
        .map(|p| graph.ty(p))
        .and_then(|w| w.shape.first().map(|&c| w.len() / c.max(1)))
        .unwrap_or(1);
    (out.max(1) * reduction.max(1)) as f64
}

/// The next layer to keep in higher precision, and the precision: the
/// largest isolated error per multiply-add among reduced-precision layers
/// not pinned yet.
fn choose(
    report: &AccuracyReport,
    graph: &Graph,
    opts: &BuildOptions,
    pinned: &[(String, Precision)],
) -> Option<(String, Precision)> {
    let error = |l: &TensorAccuracy| l.isolated.map(|i| if i.cosine.is_nan() { 2.0 } else { 1.0 - i.cosine });
    let up = |l: &TensorAccuracy| {
        if matches!(l.precision, Precision::Int8 | Precision::Fp8) && opts.precision.fp16 {
            Precision::Fp16
        } else {
            Precision::Fp32
        }
    };
    let nodes: HashMap<&str, NodeIndex> = graph.topo_order().into_iter().map(|n| (graph.node(n).name.as_str(), n)).collect();
    let mut best: Option<(f64, &TensorAccuracy)> = None;
    for l in &report.layers {
        // A pin already made for this layer (one whose name did not take)
        // is not made again.
        if l.precision == Precision::Fp32 || pinned.iter().any(|(name, p)| *name == l.layer && *p == up(l)) {
            continue;
        }
        let Some(e) = error(l) else { continue };
        let score = e / nodes.get(l.layer.as_str()).map_or(1.0, |&n| cost(graph, n));
        let better = match best {
            None => true,
            Some((s, b)) => score > s || (score == s && l.layer < b.layer),
        };
        if better {
            best = Some((score, l));
        }
    }
    let (_, l) = best?;
    Some((l.layer.clone(), up(l)))
}

/// Builds `graph` with `opts`, then keeps layers in higher precision until
/// the engine meets `target` on `batches` against the FP32 engine (see the
/// module's notes), or no reduced-precision layer is left.
pub fn build_to_target(graph: Graph, opts: &BuildOptions, target: AccuracyTarget, batches: &[Batch]) -> Result<TargetOutcome> {
    if batches.is_empty() {
        bail!("--accuracy-target needs at least one batch");
    }
    let mut opts = opts.clone();
    let mut pins: Vec<(String, Precision)> = Vec::new();
    let mut reference: Option<Engine> = None;
    let mut rounds = 0;
    loop {
        let built = build_graph(graph.clone(), &opts)?;
        rounds += 1;
        let reference = match &reference {
            Some(r) => r,
            None => reference.insert(Engine::from_bytes(&engine_of(&built.reference, Default::default(), vec![])?)?),
        };
        let report = evaluate(reference, &Engine::from_bytes(&built.engine)?, batches, true)?;
        let achieved = target.measure(&report)?;
        if achieved >= target.value() {
            return Ok(TargetOutcome { built, pins, achieved, met: true, rounds });
        }
        let Some(pin) = choose(&report, &built.graph, &opts, &pins) else {
            return Ok(TargetOutcome { built, pins, achieved, met: false, rounds });
        };
        opts.precision.layer_precisions.push(pin.clone());
        pins.push(pin);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_with_clear_errors() {
        assert_eq!("cosine=0.999".parse::<AccuracyTarget>().unwrap(), AccuracyTarget::Cosine(0.999));
        assert_eq!("top1=0.99".parse::<AccuracyTarget>().unwrap(), AccuracyTarget::Top1(0.99));
        for (bad, needle) in [
            ("0.999", "expected cosine=VALUE"),
            ("cosine=high", "'high' is not a number"),
            ("cosine=1.5", "must be in [0, 1]"),
            ("psnr=30", "unknown metric 'psnr'"),
        ] {
            let e = bad.parse::<AccuracyTarget>().unwrap_err().to_string();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }
}
