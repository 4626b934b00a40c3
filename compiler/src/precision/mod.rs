//! Reduced precision, applied after the optimizer: FP16 (`--fp16`), INT8
//! from calibration scales (`--int8`), explicitly quantized (Q/DQ) models,
//! and per-layer pins (`--layer-precision NAME=fp32`).
//!
//! The order in `apply`: explicit Q/DQ layers become int8 layers first;
//! with `--int8`, layers whose input has a calibrated scale become int8;
//! then with `--fp16` every other float layer that is safe in f16 runs in
//! f16 with f32 arithmetic inside. Casts are inserted where precisions meet,
//! so every tensor keeps one dtype and the graph stays verifiable.

pub mod calib;
mod fp16;
mod glob;
mod int8;
mod qdq;

use crate::ir::Graph;
use anyhow::{bail, Result};
use std::collections::BTreeMap;
use trtc_runtime::ops::precision::Precision;

pub use fp16::to_fp16;
pub use int8::{fold_requantization, to_int8};
pub use qdq::{fold_int8_relu, fold_qdq};

/// Which precisions a build may use.
#[derive(Clone, Debug, Default)]
pub struct PrecisionConfig {
    pub fp16: bool,
    pub int8: bool,
    /// `--layer-precision PATTERN=PRECISION`, in the order given; the last
    /// matching pattern wins. Patterns are globs (`*`, `?`) over node names.
    pub layer_precisions: Vec<(String, Precision)>,
}

impl PrecisionConfig {
    /// Parses one `--layer-precision` value, `PATTERN=fp32|fp16|int8`.
    pub fn parse_pin(s: &str) -> Result<(String, Precision)> {
        let Some((pat, p)) = s.rsplit_once('=') else {
            bail!("--layer-precision {s}: expected NAME=PRECISION, e.g. '/fc/*=fp32'");
        };
        let Some(p) = Precision::parse(p) else {
            bail!("--layer-precision {s}: '{p}' is not a precision (fp32, fp16 or int8)");
        };
        if pat.is_empty() {
            bail!("--layer-precision {s}: empty layer name");
        }
        Ok((pat.to_string(), p))
    }

    /// The precision a layer is pinned to, if any pattern matches its name.
    pub fn pinned(&self, layer: &str) -> Option<Precision> {
        self.layer_precisions.iter().rev().find(|(pat, _)| glob::matches(pat, layer)).map(|&(_, p)| p)
    }

    /// Whether the layer may run in `p`: the build allows it and no pin
    /// says otherwise. A pin to a precision also allows it.
    fn allows(&self, layer: &str, p: Precision) -> bool {
        match self.pinned(layer) {
            Some(pin) => pin == p,
            None => match p {
                Precision::Fp32 => true,
                Precision::Fp16 => self.fp16,
                Precision::Int8 => self.int8,
            },
        }
    }
}

/// What `apply` did, for `-v` and tests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PrecisionReport {
    /// Layers by precision after the rewrite (casts and quantizers included).
    pub layers: BTreeMap<Precision, usize>,
    /// Int8-capable layers (Conv, Gemm, MatMul with constant weights) that
    /// stayed in float, with the reason.
    pub int8_fallbacks: Vec<(String, String)>,
    /// Layers FP16 would take that stayed in f32 for the observed range of
    /// a tensor they read or write, with the reason.
    pub fp16_range_fallbacks: Vec<(String, String)>,
    /// What FP16 observed tensor ranges on, as a sentence (`None` without
    /// FP16).
    pub fp16_range_source: Option<String>,
}

/// Applies the precision config to an optimized graph. `scales` are the
/// calibrated per-tensor activation scales (empty without `--int8`);
/// `ranges` the observed max |x| per tensor, which keep overflowing tensors
/// out of f16 (empty: none observed).
pub fn apply(
    graph: &mut Graph,
    cfg: &PrecisionConfig,
    scales: &BTreeMap<String, f32>,
    ranges: &BTreeMap<String, f32>,
) -> Result<PrecisionReport> {
    let mut report = PrecisionReport::default();
    fold_qdq(graph, cfg)?;
    if cfg.int8 {
        report.int8_fallbacks = to_int8(graph, cfg, scales)?;
    }
    fold_requantization(graph)?;
    fold_int8_relu(graph)?;
    if cfg.fp16 || cfg.layer_precisions.iter().any(|(_, p)| *p == Precision::Fp16) {
        report.fp16_range_fallbacks = to_fp16(graph, cfg, ranges)?;
    }
    graph.remove_dead_nodes();
    crate::ir::verify(graph)?;
    for n in graph.topo_order() {
        if let Some(op) = graph.node(n).op() {
            let tys: Vec<_> = graph.node(n).outputs.iter().map(|o| o.ty.clone()).collect();
            *report.layers.entry(op.precision(&tys)).or_default() += 1;
        }
    }
    Ok(report)
}
