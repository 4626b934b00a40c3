//! Constant, Identity, Dropout (inference mode).

use super::Registry;
use crate::frontend::onnx::ctx::Ctx;
use crate::ir::Port;
use anyhow::{anyhow, bail, Result};
use trtc_runtime::Tensor;

pub fn register(r: &mut Registry) {
    r.add("Constant", constant);
    r.add("Identity", identity);
    r.add("Dropout", dropout);
}

fn constant(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let a = &ctx.attrs;
    let t = if let Some(t) = ctx.tensor_attr("value")? {
        t
    } else if let Some(v) = a.float("value_float")?.filter(|_| a.has("value_float")) {
        Tensor::scalar(v)
    } else if let Some(v) = a.floats("value_floats")? {
        Tensor::from_vec(vec![v.len()], v)?
    } else if let Some(v) = a.int("value_int")?.filter(|_| a.has("value_int")) {
        Tensor::scalar(v)
    } else if let Some(v) = a.ints("value_ints")? {
        Tensor::from_vec(vec![v.len()], v)?
    } else if a.has("sparse_value") {
        bail!("sparse constants are not supported");
    } else {
        bail!("Constant without a supported value attribute");
    };
    Ok(vec![ctx.constant(t)])
}

fn identity(ctx: &mut Ctx) -> Result<Vec<Port>> {
    Ok(vec![ctx.input(0)?])
}

/// Dropout at inference is the identity; the optional mask output is all true.
fn dropout(ctx: &mut Ctx) -> Result<Vec<Port>> {
    if ctx.opt_input(2).is_some() {
        let t = ctx.require_const(2, "training_mode")?;
        let training = t.to_f64_vec().first().copied().unwrap_or(0.0) != 0.0;
        // With ratio 0, training-mode Dropout drops nothing: the identity.
        let ratio_zero =
            training && ctx.opt_input(1).is_some() && ctx.require_const(1, "ratio")?.to_f64_vec().first() == Some(&0.0);
        if training && !ratio_zero {
            bail!("Dropout in training mode is not supported (it is random); export the model in eval mode");
        }
    }
    let x = ctx.input(0)?;
    let mut outs = vec![x];
    if ctx.node.output.len() > 1 && !ctx.node.output[1].is_empty() {
        let ty = ctx.ty(x).clone();
        let ones = vec![true; ty.len()];
        let mask = Tensor::from_bools(ty.shape.clone(), &ones).map_err(|e| anyhow!("{e}"))?;
        outs.push(ctx.constant(mask));
    }
    Ok(outs)
}
