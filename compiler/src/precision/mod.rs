//! Reduced precision, applied after the optimizer: FP16 (`--fp16`), INT8
//! and FP8 from calibration scales (`--int8`, `--fp8`), explicitly quantized
//! (Q/DQ) models, and per-layer pins (`--layer-precision NAME=fp32`).
//!
//! The order in `apply`: explicit Q/DQ layers become int8 or FP8 layers
//! first; with `--int8` (`--fp8`), layers whose input has a calibrated
//! scale become int8 (FP8); then with `--fp16` every other float layer that
//! is safe in f16 runs in f16 with f32 arithmetic inside. Casts are
//! inserted where precisions meet, so every tensor keeps one dtype and the
//! graph stays verifiable.

pub mod calib;
mod fp16;
mod glob;
mod quantized;
mod qdq;

use crate::ir::Graph;
use anyhow::{bail, Result};
use std::collections::BTreeMap;
use trtc_runtime::ops::precision::Precision;

pub use fp16::to_fp16;
pub use qdq::{fold_qdq, fold_quantized_relu};
pub use quantized::{fold_requantization, to_quantized, QuantFormat};

/// Which precisions a build may use.
#[derive(Clone, Debug, Default)]
pub struct PrecisionConfig {
    pub fp16: bool,
    pub int8: bool,
    /// FP8 E4M3 (`--fp8`): like `int8`, for GPUs with FP8 tensor cores
    /// (sm_89 and newer) and the CPU executor.
    pub fp8: bool,
    /// Quantized layers write f32 instead of requantizing for the next
    /// quantized layer (the `auto` calibrator's search measures each
    /// layer's error with its input's scale alone).
    pub keep_float_outputs: bool,
    /// `--layer-precision PATTERN=PRECISION`, in the order given; the last
    /// matching pattern wins. Patterns are globs (`*`, `?`) over node names.
    pub layer_precisions: Vec<(String, Precision)>,
}

impl PrecisionConfig {
    /// Parses one `--layer-precision` value, `PATTERN=fp32|fp16|int8|fp8`.
    pub fn parse_pin(s: &str) -> Result<(String, Precision)> {
        let Some((pat, p)) = s.rsplit_once('=') else {
            bail!("--layer-precision {s}: expected NAME=PRECISION, e.g. '/fc/*=fp32'");
        };
        let Some(p) = Precision::parse(p) else {
            bail!("--layer-precision {s}: '{p}' is not a precision (fp32, fp16, int8 or fp8)");
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

    /// Whether the build's flags ask for precision `p` (fp32 always).
    pub fn enables(&self, p: Precision) -> bool {
        match p {
            Precision::Fp32 => true,
            Precision::Fp16 => self.fp16,
            Precision::Int8 => self.int8,
            Precision::Fp8 => self.fp8,
        }
    }

    /// Whether the build enables `p` or some pin asks for it.
    fn wants(&self, p: Precision) -> bool {
        self.enables(p) || self.layer_precisions.iter().any(|(_, q)| *q == p)
    }

    /// Whether the layer may run in `p`: the build allows it and no pin
    /// says otherwise. A pin to a precision also allows it.
    fn allows(&self, layer: &str, p: Precision) -> bool {
        match self.pinned(layer) {
            Some(pin) => pin == p,
            None => self.enables(p),
        }
    }
}

/// What `apply` did, for `-v` and tests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PrecisionReport {
    /// Layers by precision after the rewrite (casts and quantizers included).
    pub layers: BTreeMap<Precision, usize>,
    /// Int8- or FP8-capable layers (Conv, Gemm, MatMul with constant
    /// weights) that stayed in float under `--int8` or `--fp8`, with the
    /// reason.
    pub int8_fallbacks: Vec<(String, String)>,
    /// Layers FP16 would take that stayed in f32 for the observed range of
    /// a tensor they read or write, with the reason.
    pub fp16_range_fallbacks: Vec<(String, String)>,
    /// What FP16 observed tensor ranges on, as a sentence (`None` without
    /// FP16).
    pub fp16_range_source: Option<String>,
}

/// Applies the precision config to an optimized graph. `scales` are the
/// calibrated per-tensor int8 activation scales, `amax / 127` (empty
/// without `--int8` or `--fp8`);
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
    for format in [QuantFormat::Int8, QuantFormat::Fp8] {
        if cfg.wants(format.precision()) {
            report.int8_fallbacks.extend(to_quantized(graph, cfg, scales, format)?);
        }
    }
    if !cfg.keep_float_outputs {
        fold_requantization(graph)?;
    }
    fold_quantized_relu(graph)?;
    if cfg.wants(Precision::Fp16) {
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
