//! What a shape that varies costs on the CPU executor (issue 14's
//! benchmarks), for each model of `testdata/dynamic/` (legacy exports):
//!
//! - the engine built once with the manifest's profile, run at the
//!   profile's opt shape, against an engine built for that one shape
//!   (`--shape`), same inputs, one thread, interleaved rounds;
//! - the cost of switching a context to a new shape: runs that alternate
//!   between the opt shape and another shape of the profile, against runs
//!   that stay at each, per run (the difference is the re-binding: every
//!   tensor's shape inferred again).
//!
//! Medians of `ROUNDS` rounds of `RUNS` runs each. With `--at-run-time`,
//! the profile engines compute their sizes at run time
//! (`VaryingSizes::AtRunTime`, the fallback where no rule generalizes).
//! `cargo run --release -p trtc --example profile_overhead [--at-run-time] [FILTER]`

use std::path::{Path, PathBuf};
use std::time::Instant;
use trtc::build::{build_file, BuildOptions, ShapeProfile, VaryingSizes};
use trtc_runtime::math::Math;
use trtc_runtime::{Engine, ExecutionContext, Tensor};

const ROUNDS: usize = 7;
const RUNS: usize = 40;

fn dims(v: &serde_json::Value) -> Vec<usize> {
    v.as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect()
}

fn at(model: &serde_json::Value, which: &str) -> Vec<(String, Vec<usize>)> {
    model["profile"].as_object().unwrap().iter().map(|(n, r)| (n.clone(), dims(&r[which]))).collect()
}

fn engine(path: &Path, opts: &BuildOptions) -> anyhow::Result<Engine> {
    Ok(Engine::from_bytes(&build_file(path, opts)?.engine)?)
}

/// Inputs of the given shapes: a recorded case's values where the shapes
/// match, else ones (token ids and masks of 1 are valid for every model).
fn inputs(engine: &Engine, shapes: &[(String, Vec<usize>)]) -> anyhow::Result<Vec<(String, Tensor)>> {
    engine
        .inputs()
        .iter()
        .map(|b| {
            let shape = shapes.iter().find(|(n, _)| *n == b.name).map(|(_, d)| d.clone()).unwrap_or(b.ty.shape.clone());
            let n: usize = shape.iter().product();
            let t = match b.ty.dtype {
                trtc_runtime::DType::I64 => Tensor::from_vec(shape, vec![1i64; n])?,
                _ => Tensor::from_vec(shape, (0..n).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect::<Vec<f32>>())?,
            };
            Ok((b.name.clone(), t))
        })
        .collect()
}

fn context(engine: &Engine) -> anyhow::Result<ExecutionContext<'_>> {
    let mut ctx = engine.create_context()?;
    ctx.set_threads(1)?;
    ctx.set_math(Math::Fast);
    Ok(ctx)
}

/// Seconds per run over `RUNS` runs cycling through `each`.
fn time(ctx: &mut ExecutionContext<'_>, each: &[&[(String, Tensor)]]) -> anyhow::Result<f64> {
    let start = Instant::now();
    for i in 0..RUNS {
        let refs: Vec<(&str, &Tensor)> = each[i % each.len()].iter().map(|(n, t)| (n.as_str(), t)).collect();
        ctx.run(&refs)?;
    }
    Ok(start.elapsed().as_secs_f64() / RUNS as f64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let varying_sizes =
        if args.iter().any(|a| a == "--at-run-time") { VaryingSizes::AtRunTime } else { VaryingSizes::Generalized };
    let filter = args.iter().find(|a| !a.starts_with("--")).cloned().unwrap_or_default();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/dynamic");
    let manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json"))?)?;
    println!("| model | opt shape | static ms | profile ms | profile/static | other shape | stay opt ms | stay other ms | alternate ms | switch cost us |");
    println!("|---|---|---:|---:|---:|---|---:|---:|---:|---:|");
    for m in manifest["models"].as_array().unwrap() {
        let name = m["name"].as_str().unwrap();
        if !name.ends_with("_legacy") || !name.contains(&filter) {
            continue;
        }
        let path = dir.join(m["file"].as_str().unwrap());
        let profile = ShapeProfile::from_flags(&at(m, "min"), &at(m, "opt"), &at(m, "max"))?;
        let dynamic = engine(&path, &BuildOptions { profiles: vec![profile], varying_sizes, ..Default::default() })?;
        let mut fixed_opts = BuildOptions::default();
        for (n, d) in at(m, "opt") {
            fixed_opts.import.shapes.insert(n, d);
        }
        let fixed = engine(&path, &fixed_opts)?;
        let opt = inputs(&dynamic, &at(m, "opt"))?;
        // The other shape: the last recorded case's.
        let last = m["cases"].as_array().unwrap().last().unwrap();
        let other_shapes: Vec<(String, Vec<usize>)> =
            last["shapes"].as_object().unwrap().iter().map(|(n, d)| (n.clone(), dims(d))).collect();
        let other = inputs(&dynamic, &other_shapes)?;
        let (mut ctx_fixed, mut ctx_dyn) = (context(&fixed)?, context(&dynamic)?);
        let (mut t_fixed, mut t_dyn, mut t_other, mut t_alt) = (vec![], vec![], vec![], vec![]);
        for _ in 0..ROUNDS {
            t_fixed.push(time(&mut ctx_fixed, &[&opt])?);
            t_dyn.push(time(&mut ctx_dyn, &[&opt])?);
            t_other.push(time(&mut ctx_dyn, &[&other])?);
            t_alt.push(time(&mut ctx_dyn, &[&opt, &other])?);
        }
        let (f, d, o, a) = (median(t_fixed), median(t_dyn), median(t_other), median(t_alt));
        let show = |s: &[(String, Vec<usize>)]| {
            s.first().map(|(_, d)| d.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("x")).unwrap_or_default()
        };
        println!(
            "| {name} | {} | {:.3} | {:.3} | {:.3} | {} | {:.3} | {:.3} | {:.3} | {:.1} |",
            show(&at(m, "opt")),
            f * 1e3,
            d * 1e3,
            d / f,
            show(&other_shapes),
            d * 1e3,
            o * 1e3,
            a * 1e3,
            (a - (d + o) / 2.0) * 1e6
        );
    }
    Ok(())
}
