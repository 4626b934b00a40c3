//! GPU engines whose shapes vary, built on a machine without a GPU
//! (`--target sm_90`, kernels compiled by NVRTC): every model of
//! `testdata/dynamic` and `testdata/dynamic_more`, and every model of
//! `testdata/control_flow` with a
//! profile builds ONCE for sm_90 with it, and
//! - at every shape of a sweep through the profile (the recorded cases'
//!   shapes, each varying dimension's whole range when it is short, or its
//!   ends and pseudo-random sizes in between), every layer the kernel table
//!   runs on the GPU gets launches at those shapes from the kernel families
//!   ([`FamilyPlanner`]), each launching a module the engine carries: no
//!   layer falls back to the host. A shape the model itself does not take
//!   (a layer does not infer there) is skipped and counted;
//! - the engine runs on the CPU executor and matches onnxruntime at every
//!   recorded shape, as the CPU-target engine does.
//!
//! Needs libnvrtc (no GPU): `scripts/test.sh` installs it from PyPI.

mod common;
mod recorded;

use trtc::build::{build_file, BuildOptions};
use trtc::cuda::nvrtc;
use trtc_kernels::FamilyPlanner;
use trtc_runtime::kernels::LayerKernels;
use trtc_runtime::profile::Profile;
use trtc_runtime::{Engine, Target, TensorType};

/// Input shapes sweeping `profile` (binding order): each varying axis
/// through its range in lockstep with the others (every size when the
/// range has at most 24, otherwise its 6 lowest and highest and 12
/// pseudo-random ones), axes that share a dimension equal.
fn sweep(profile: &Profile) -> Vec<Vec<Vec<usize>>> {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        rng >> 33
    };
    let mut out = Vec::new();
    for t in 0..24usize {
        let r = next();
        let mut s: Vec<Vec<usize>> = profile
            .inputs
            .iter()
            .map(|inp| {
                inp.min
                    .iter()
                    .zip(&inp.max)
                    .map(|(&lo, &hi)| {
                        let n = hi - lo + 1;
                        match t {
                            _ if n <= 24 => lo + t % n,
                            0..6 => lo + t,
                            6..12 => hi - (t - 6),
                            _ => lo + (r as usize) % n,
                        }
                        .min(hi)
                    })
                    .collect()
            })
            .collect();
        for d in &profile.shared {
            let (i0, a0) = d.axes[0];
            let v = s[i0][a0];
            for &(i, a) in &d.axes[1..] {
                s[i][a] = v;
            }
        }
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

#[test]
fn gpu_engines_whose_shapes_vary_have_kernels_at_every_shape_of_their_profile() {
    assert!(nvrtc::available(), "NVRTC is needed for this test: run scripts/test.sh ({:?})", nvrtc::library().err());
    let (mut passed, mut failures, mut shapes_checked, mut shapes_skipped) = (0, Vec::new(), 0, 0);
    let mut models = Vec::new();
    for folder in ["dynamic", "dynamic_more", "control_flow"] {
        let dir = recorded::testdata(folder);
        let manifest = recorded::manifest(&dir);
        for m in manifest["models"].as_array().unwrap() {
            if m.get("profile").is_some() || folder != "control_flow" {
                models.push((dir.clone(), m.clone()));
            }
        }
    }
    assert!(models.len() >= 20, "expected the models of testdata/dynamic and control_flow, found {}", models.len());
    for (dir, m) in &models {
        let dir = || dir.clone();
        let name = m["name"].as_str().unwrap();
        if m["status"] != "ok" {
            failures.push(format!("{name}: not exported: {}", m["error"]));
            continue;
        }
        let opts = BuildOptions {
            profiles: vec![recorded::profile(m).unwrap()],
            target: Target::Cuda { sm: 90, gpu_name: None },
            ..Default::default()
        };
        let built = match build_file(&dir().join(m["file"].as_str().unwrap()), &opts) {
            Ok(b) => b,
            Err(e) => {
                failures.push(format!("{name}: does not build for sm_90: {e:#}"));
                continue;
            }
        };
        let engine = Engine::from_bytes(&built.engine).unwrap();
        // Without the kernel families to compute launches, loading on a GPU
        // is refused before anything else, saying what to use.
        let refused = engine.cuda(0).unwrap_err().to_string();
        assert!(refused.contains("cuda_with_planner"), "{refused}");
        let plan = engine.plan();
        let table = engine.kernels().expect("a GPU engine");
        let device = table.layers.iter().filter(|l| matches!(l, LayerKernels::Device(_))).count();
        let mut problems = Vec::new();
        let mut shapes: Vec<Vec<Vec<usize>>> = sweep(&engine.profiles()[0]);
        for case in m["cases"].as_array().unwrap() {
            let arrays = trtc::npz::read_npz(&dir().join(case["file"].as_str().unwrap())).unwrap();
            let s: Vec<Vec<usize>> = plan
                .inputs
                .iter()
                .map(|&id| arrays.iter().find(|(n, _)| *n == plan.tensors[id].name).unwrap().1.ty().shape.clone())
                .collect();
            if !shapes.contains(&s) {
                shapes.push(s);
            }
        }
        for s in &shapes {
            let inputs: Vec<TensorType> =
                plan.inputs.iter().zip(s).map(|(&id, shape)| TensorType::new(plan.tensors[id].ty.dtype, shape.clone())).collect();
            let Ok(types) = trtc_runtime::profile::bind(plan, &inputs) else {
                shapes_skipped += 1;
                continue;
            };
            shapes_checked += 1;
            let at = table.at_types(plan, &types, &FamilyPlanner);
            for ((layer, before), after) in plan.layers.iter().zip(&table.layers).zip(&at) {
                if let (LayerKernels::Device(_), LayerKernels::Host { reason }) = (before, after) {
                    problems.push(format!(
                        "at {s:?} layer {} ({}) falls back to the host: {reason}",
                        layer.name,
                        layer.op.name()
                    ));
                }
            }
        }
        let err = recorded::worst_error(&engine, m, &dir());
        match (problems.first(), err) {
            (None, Ok(e)) if e <= 1e-4 => {
                passed += 1;
                println!(
                    "ok   {name}: {device} of {} layers on the GPU at {} shapes; CPU executor max err / max |ref| = {e:.2e}",
                    plan.layers.len(),
                    shapes.len()
                );
            }
            (Some(p), _) => failures.push(format!("{name}: {} fallbacks, first {p}", problems.len())),
            (None, Ok(e)) => failures.push(format!("{name}: max err / max |ref| = {e:.2e} > 1e-4")),
            (None, Err(e)) => failures.push(format!("{name}: {e:#}")),
        }
    }
    for f in &failures {
        println!("FAIL {f}");
    }
    println!(
        "dynamic sm_90 engines: {passed} passed, {} failed; {shapes_checked} shapes checked, {shapes_skipped} skipped (the model does not take them)",
        failures.len()
    );
    assert!(failures.is_empty(), "{} models failed:\n{}", failures.len(), failures.join("\n"));
}
