//! CPU executor vs tract on the same models, in one run: median latency of
//! each over the same inputs, and the ratio. Used for benches/RESULTS.md.
//!
//! `cargo run --release --example cpu_vs_tract -- MODEL.onnx [INPUTS.npz] ...`
//! (without an npz, random inputs of the model's input types).

use std::time::Instant;
use tract_onnx::prelude::*;
use trtc::build::{build_file, BuildOptions};
use trtc_runtime::{DType, Engine, Tensor};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn to_tract(t: &Tensor) -> anyhow::Result<TValue> {
    let shape = t.shape().to_vec();
    Ok(match t.dtype() {
        DType::F32 => tract_ndarray::ArrayD::from_shape_vec(shape, t.as_slice::<f32>()?.to_vec())?.into_tensor().into_tvalue(),
        DType::I64 => tract_ndarray::ArrayD::from_shape_vec(shape, t.as_slice::<i64>()?.to_vec())?.into_tensor().into_tvalue(),
        d => anyhow::bail!("input dtype {d} not handled"),
    })
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let iterations = 20;
    println!("| model | trtc median (ms) | tract median (ms) | trtc / tract |\n|---|---|---|---|");
    for model in args.iter().filter(|a| a.ends_with(".onnx")) {
        let path = std::path::Path::new(model);
        let built = build_file(path, &BuildOptions::default())?;
        let engine = Engine::from_bytes(&built.engine)?;
        let stem = path.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
        let npz = path.with_file_name(format!("{stem}.inputs.npz"));
        let inputs: Vec<(String, Tensor)> = if npz.exists() {
            trtc::npz::read_npz(&npz)?
        } else {
            engine
                .inputs()
                .iter()
                .map(|b| Ok((b.name.clone(), trtc::random::tensor(&b.ty, 0)?)))
                .collect::<anyhow::Result<_>>()?
        };
        let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
        let mut ctx = engine.create_context()?;
        let tract = tract_onnx::onnx().model_for_path(path)?.into_optimized()?.into_runnable()?;
        // Tract takes inputs in the model's order: follow the engine's bindings.
        let tract_inputs = || -> anyhow::Result<TVec<TValue>> {
            engine
                .inputs()
                .iter()
                .map(|b| match inputs.iter().find(|(n, _)| *n == b.name) {
                    Some((_, t)) => to_tract(t),
                    None => anyhow::bail!("{} has no input '{}'", npz.display(), b.name),
                })
                .collect()
        };
        // Warm up both, then alternate runs so both see the same machine load.
        for _ in 0..3 {
            ctx.run(&refs)?;
            tract.run(tract_inputs()?)?;
        }
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..iterations {
            let t = Instant::now();
            ctx.run(&refs)?;
            ours.push(t.elapsed().as_secs_f64() * 1e3);
            let ins = tract_inputs()?;
            let t = Instant::now();
            tract.run(ins)?;
            theirs.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let (a, b) = (median(ours), median(theirs));
        println!("| {} | {a:.3} | {b:.3} | {:.2} |", stem, a / b);
    }
    Ok(())
}
