//! Signal-processing front ends: the window functions HannWindow,
//! HammingWindow and BlackmanWindow. Their size decides the output shape,
//! so it is known when the engine is built and the window is a constant.

use super::Registry;
use crate::frontend::onnx::ctx::Ctx;
use crate::frontend::onnx::proto;
use crate::ir::Port;
use anyhow::{anyhow, bail, Result};
use std::f64::consts::PI;
use trtc_runtime::ops::elementwise::Cast;
use trtc_runtime::{DType, Op, Tensor};

pub fn register(r: &mut Registry) {
    r.add("HannWindow", |ctx| window(ctx, |x| 0.5 - 0.5 * (2.0 * x).cos()));
    r.add("HammingWindow", |ctx| {
        let alpha = 25.0 / 46.0;
        window(ctx, move |x| alpha - (1.0 - alpha) * (2.0 * x).cos())
    });
    r.add("BlackmanWindow", |ctx| window(ctx, |x| 0.42 - 0.5 * (2.0 * x).cos() + 0.08 * (4.0 * x).cos()));
}

/// The largest window built (its values are a constant of the engine).
const MAX_SIZE: i64 = 1 << 24;

/// A window of `size` values `w(pi * n / N)`, `N = size` when `periodic`
/// (the default), `size - 1` when symmetric, as ONNX defines them (a
/// symmetric window of size 1 divides by zero, as the reference does).
fn window(ctx: &mut Ctx, w: impl Fn(f64) -> f64) -> Result<Vec<Port>> {
    let size = ctx.require_const(0, "size")?;
    let size = match size.to_i64_vec()?.as_slice() {
        [s] => *s,
        _ => bail!("size must be one integer, not {}", size.ty()),
    };
    if !(0..=MAX_SIZE).contains(&size) {
        bail!("size {size} is not in 0..={MAX_SIZE}");
    }
    let periodic = ctx.attrs.int_or("periodic", 1)? != 0;
    let dtype = proto::dtype(ctx.attrs.int_or("output_datatype", 1)? as i32)?;
    if dtype == DType::Bool {
        bail!("output_datatype {dtype} is not numeric");
    }
    let n = if periodic { size } else { size - 1 } as f64;
    let values: Vec<f64> = (0..size).map(|i| w(PI * i as f64 / n)).collect();
    let t = Tensor::from_vec(vec![size as usize], values)?;
    let t = Op::from(Cast::new(dtype)).eval_owned(&[Some(&t)]).map_err(|e| anyhow!("{e}"))?.remove(0);
    Ok(vec![ctx.constant(t)])
}
