//! Converters for ONNX's recurrent layers, LSTM, GRU and RNN, onto the
//! runtime's `linalg::Recurrent`: the hidden size, direction, activations
//! (names, then `activation_alpha`/`activation_beta` taken in order by the
//! functions that have parameters, defaults where the lists run out), clip
//! and layout are resolved here.

use super::Registry;
use crate::frontend::onnx::ctx::Ctx;
use crate::ir::Port;
use anyhow::{bail, ensure, Result};
use trtc_runtime::ops::linalg::{Recurrent, RecurrentActivation, RecurrentCell, RecurrentDirection};

pub fn register(r: &mut Registry) {
    r.add("RNN", rnn);
    r.add("GRU", gru);
    r.add("LSTM", lstm);
}

fn rnn(ctx: &mut Ctx) -> Result<Vec<Port>> {
    recurrent(ctx, RecurrentCell::Rnn, &["Tanh"])
}

fn gru(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let linear_before_reset = ctx.attrs.int_or("linear_before_reset", 0)? != 0;
    recurrent(ctx, RecurrentCell::Gru { linear_before_reset }, &["Sigmoid", "Tanh"])
}

fn lstm(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let input_forget = ctx.attrs.int_or("input_forget", 0)? != 0;
    recurrent(ctx, RecurrentCell::Lstm { input_forget }, &["Sigmoid", "Tanh", "Tanh"])
}

fn recurrent(ctx: &mut Ctx, cell: RecurrentCell, default_activations: &[&str]) -> Result<Vec<Port>> {
    let direction = match ctx.attrs.string("direction")?.as_deref().map(|s| s.trim_end_matches('\0')) {
        None | Some("forward") => RecurrentDirection::Forward,
        Some("reverse") => RecurrentDirection::Reverse,
        Some("bidirectional") => RecurrentDirection::Bidirectional,
        Some(other) => bail!("direction '{other}' is not forward, reverse or bidirectional"),
    };
    let w_shape = ctx.input_ty(1)?.shape.clone();
    ensure!(w_shape.len() == 3, "W has shape {w_shape:?}; expected [directions, gates * hidden, input]");
    ensure!(
        w_shape[0] == direction.count(),
        "W holds {} directions, direction {direction:?} needs {}",
        w_shape[0],
        direction.count()
    );
    ensure!(w_shape[1] % cell.gates() == 0, "W's second dim {} is not {} gates times the hidden size", w_shape[1], cell.gates());
    let hidden_size = w_shape[1] / cell.gates();
    if let Some(h) = ctx.attrs.int("hidden_size")? {
        ensure!(h == hidden_size as i64, "hidden_size {h} does not match W's shape {w_shape:?} ({hidden_size})");
    }
    let clip = match ctx.attrs.float("clip")? {
        Some(c) if c.is_nan() || c < 0.0 => bail!("clip {c} must be a non-negative number"),
        c => c,
    };
    let batch_major = match ctx.attrs.int_or("layout", 0)? {
        0 => false,
        1 => true,
        l => bail!("layout {l} is not 0 or 1"),
    };
    let names = match ctx.attrs.strings("activations")? {
        Some(v) => v,
        None => default_activations.iter().map(|s| s.to_string()).collect(),
    };
    let per_dir = cell.activations();
    // One list for both directions of a bidirectional layer is read as the
    // same functions for each (as onnxruntime does).
    let names: Vec<String> =
        if names.len() == per_dir && direction.count() == 2 { names.iter().chain(&names).cloned().collect() } else { names };
    ensure!(
        names.len() == per_dir * direction.count(),
        "{} activations given, {} expected ({per_dir} per direction)",
        names.len(),
        per_dir * direction.count()
    );
    let mut alphas = ctx.attrs.floats("activation_alpha")?.unwrap_or_default().into_iter();
    let mut betas = ctx.attrs.floats("activation_beta")?.unwrap_or_default().into_iter();
    let activations = names.iter().map(|n| activation(n, &mut alphas, &mut betas)).collect::<Result<Vec<_>>>()?;
    let op = Recurrent { cell, direction, hidden_size, activations, clip, batch_major };
    let inputs: Vec<Option<Port>> = (0..ctx.num_inputs()).map(|i| ctx.opt_input(i)).collect();
    ctx.op(op, &inputs)
}

/// Parses one activation name, taking its parameters from the lists.
fn activation(
    name: &str,
    alphas: &mut impl Iterator<Item = f32>,
    betas: &mut impl Iterator<Item = f32>,
) -> Result<RecurrentActivation> {
    let mut alpha = |default: f32| alphas.next().unwrap_or(default);
    Ok(match name.trim_end_matches('\0').to_ascii_lowercase().as_str() {
        "relu" => RecurrentActivation::Relu,
        "tanh" => RecurrentActivation::Tanh,
        "sigmoid" => RecurrentActivation::Sigmoid,
        "softsign" => RecurrentActivation::Softsign,
        "softplus" => RecurrentActivation::Softplus,
        "leakyrelu" => RecurrentActivation::LeakyRelu { alpha: alpha(0.01) },
        "thresholdedrelu" => RecurrentActivation::ThresholdedRelu { alpha: alpha(1.0) },
        "elu" => RecurrentActivation::Elu { alpha: alpha(1.0) },
        "affine" => RecurrentActivation::Affine { alpha: alpha(1.0), beta: betas.next().unwrap_or(0.0) },
        "scaledtanh" => RecurrentActivation::ScaledTanh { alpha: alpha(1.0), beta: betas.next().unwrap_or(1.0) },
        "hardsigmoid" => RecurrentActivation::HardSigmoid { alpha: alpha(0.2), beta: betas.next().unwrap_or(0.5) },
        _ => bail!("activation '{name}' is not one ONNX's recurrent layers define"),
    })
}
