//! Signal-processing front ends: the window functions HannWindow,
//! HammingWindow and BlackmanWindow (their size decides the output shape,
//! so it is known when the engine is built and the window is a constant),
//! DFT and STFT (their lengths and axis are read here, at build time).

use super::Registry;
use crate::frontend::onnx::ctx::Ctx;
use crate::frontend::onnx::proto;
use crate::ir::Port;
use anyhow::{anyhow, bail, ensure, Result};
use std::f64::consts::PI;
use trtc_runtime::ops::linalg::{Dft, Stft};
use trtc_runtime::{DType, Tensor};

pub fn register(r: &mut Registry) {
    r.add("HannWindow", |ctx| window(ctx, |x| 0.5 - 0.5 * (2.0 * x).cos()));
    r.add("HammingWindow", |ctx| {
        let alpha = 25.0 / 46.0;
        window(ctx, move |x| alpha - (1.0 - alpha) * (2.0 * x).cos())
    });
    r.add("BlackmanWindow", |ctx| window(ctx, |x| 0.42 - 0.5 * (2.0 * x).cos() + 0.08 * (4.0 * x).cos()));
    r.add("MelWeightMatrix", mel_weight_matrix);
    r.add("DFT", dft);
    r.add("STFT", stft);
}

/// A positive length that fits in memory's terms.
fn length(v: i64, what: &str) -> Result<usize> {
    match usize::try_from(v) {
        Ok(n) if n > 0 && v <= MAX_SIZE => Ok(n),
        _ => bail!("{what} {v} is not in 1..={MAX_SIZE}"),
    }
}

/// A scalar float input that must be constant.
fn const_float(ctx: &Ctx, i: usize, what: &str) -> Result<f64> {
    let t = ctx.require_const(i, what)?;
    match t.to_f64_vec().as_slice() {
        [v] if v.is_finite() => Ok(*v),
        _ => bail!("{what} must be one finite number, not {}", t.ty()),
    }
}

/// MelWeightMatrix: `[dft_length / 2 + 1, num_mel_bins]` triangular filters
/// spaced evenly on the mel scale (2595 log10(1 + f / 700)) between the
/// edge frequencies, each rising from its left neighbour's centre bin to
/// its own and falling to its right neighbour's, as ONNX defines it
/// (`num_mel_bins + 2` points, each rounded down to a spectrogram bin).
/// Built as a constant.
fn mel_weight_matrix(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let mels = ctx.require_const_int(0, "num_mel_bins")?;
    let dft_length = ctx.require_const_int(1, "dft_length")?;
    let sample_rate = ctx.require_const_int(2, "sample_rate")?;
    let (lower, upper) = (const_float(ctx, 3, "lower_edge_hertz")?, const_float(ctx, 4, "upper_edge_hertz")?);
    let mels = length(mels, "num_mel_bins")?;
    let dft_length = length(dft_length, "dft_length")?;
    let sample_rate = length(sample_rate, "sample_rate")? as f64;
    let bins = dft_length / 2 + 1;
    ensure!(bins.checked_mul(mels).is_some_and(|n| n as i64 <= MAX_SIZE), "the matrix of {bins} x {mels} is too large");
    let dtype = proto::dtype(ctx.attrs.int_or("output_datatype", 1)? as i32)?;
    ensure!(dtype != DType::Bool, "output_datatype {dtype} is not numeric");
    let mel = |hz: f64| 2595.0 * (1.0 + hz / 700.0).log10();
    let (low, high) = (mel(lower), mel(upper));
    let step = (high - low) / (mels + 2) as f64;
    let points: Vec<i64> = (0..mels + 2)
        .map(|i| {
            let hz = 700.0 * (10f64.powf((i as f64 * step + low) / 2595.0) - 1.0);
            ((dft_length as f64 + 1.0) * hz / sample_rate).floor() as i64
        })
        .collect();
    let in_range = |b: i64| usize::try_from(b).ok().filter(|&b| b < bins);
    let mut w = vec![0f64; bins * mels];
    for i in 0..mels {
        let (left, centre, right) = (points[i], points[i + 1], points[i + 2]);
        let mut set = |j: i64, v: f64| -> Result<()> {
            let j = in_range(j).ok_or_else(|| anyhow!("the mel filters reach bin {j}, past the {bins} bins of dft_length {dft_length} (is upper_edge_hertz above half the sample rate?)"))?;
            w[j * mels + i] = v;
            Ok(())
        };
        if centre == left {
            set(centre, 1.0)?;
        } else {
            for j in left..=centre {
                set(j, (j - left) as f64 / (centre - left) as f64)?;
            }
        }
        for j in centre..right {
            set(j, (right - j) as f64 / (right - centre) as f64)?;
        }
    }
    let t = Tensor::from_vec(vec![bins, mels], w)?;
    let t = super::cast(dtype, t)?;
    Ok(vec![ctx.constant(t)])
}

/// DFT: opset 17 takes the axis as an attribute (default 1), opset 20 as
/// input 2 (default -2); negative axes count from the back, the complex
/// axis included.
fn dft(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let ty = ctx.ty(x).clone();
    let rank = ty.shape.len() as i64;
    ensure!(rank >= 2, "input is {ty}; expected [batch, signal..., 1 or 2]");
    let axis = if ctx.opset >= 20 {
        if ctx.opt_input(2).is_some() {
            ctx.require_const_int(2, "axis")?
        } else {
            -2
        }
    } else {
        ctx.attrs.int_or("axis", 1)?
    };
    let a = if axis < 0 { axis + rank } else { axis };
    ensure!((0..rank - 1).contains(&a), "axis {axis} is not a signal axis of {ty}");
    let a = a as usize;
    let len = match ctx.opt_input(1) {
        Some(_) => length(ctx.require_const_int(1, "dft_length")?, "dft_length")?,
        None => ty.shape[a],
    };
    let inverse = ctx.attrs.int_or("inverse", 0)? != 0;
    let onesided = ctx.attrs.int_or("onesided", 0)? != 0;
    Ok(vec![ctx.op1(Dft { axis: a, length: len, inverse, onesided }, &[Some(x)])?])
}

/// STFT: the frame step and length decide the shape; the frame length
/// comes from input 3 or else from the window's length.
fn stft(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let frame_step = length(ctx.require_const_int(1, "frame_step")?, "frame_step")?;
    let window = ctx.opt_input(2);
    let window_len = window.map(|w| ctx.ty(w).shape.clone());
    let frame_length = match (ctx.opt_input(3), &window_len) {
        (Some(_), w) => {
            let n = length(ctx.require_const_int(3, "frame_length")?, "frame_length")?;
            if let Some(w) = w {
                ensure!(w.as_slice() == [n], "the window has shape {w:?}, frame_length is {n}");
            }
            n
        }
        (None, Some(w)) if w.len() == 1 => w[0],
        (None, Some(w)) => bail!("the window has shape {w:?}, expected one axis"),
        (None, None) => bail!("STFT needs a window or a frame_length"),
    };
    let onesided = ctx.attrs.int_or("onesided", 1)? != 0;
    Ok(vec![ctx.op1(Stft { frame_step, frame_length, onesided }, &[Some(x), window])?])
}

/// The largest window built (its values are a constant of the engine).
const MAX_SIZE: i64 = 1 << 24;

/// A window of `size` values `w(pi * n / N)`, `N = size` when `periodic`
/// (the default), `size - 1` when symmetric, as ONNX defines them (a
/// symmetric window of size 1 divides by zero, as the reference does).
fn window(ctx: &mut Ctx, w: impl Fn(f64) -> f64) -> Result<Vec<Port>> {
    let size = ctx.require_const_int(0, "size")?;
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
    let t = super::cast(dtype, t)?;
    Ok(vec![ctx.constant(t)])
}
