//! TEMPORARY: runs conformance cases with every input fixed (constant-folded).
use crate::frontend::onnx::{self, proto::ExternalDataRoot};
use prost::Message;

#[test]
fn tmp_fixed_input_cases() {
    let prefixes = std::env::var("MV_CASES").unwrap_or_default();
    let root = crate::conformance::default_root().join("node");
    let mut names: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    let (mut pass, mut fail) = (0, 0);
    for name in names {
        if !prefixes.split(',').any(|p| !p.is_empty() && name.starts_with(p)) || name.ends_with("_expanded") {
            continue;
        }
        let dir = root.join(&name);
        let r = (|| -> anyhow::Result<()> {
            let model = onnx::decode(&std::fs::read(dir.join("model.onnx"))?)?;
            let g = model.graph.as_ref().unwrap();
            let inits: std::collections::HashSet<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
            let gin: Vec<&str> = g
                .input
                .iter()
                .map(|v| v.name.as_str())
                .filter(|n| !inits.contains(n))
                .collect();
            let set = dir.join("test_data_set_0");
            let rt = ExternalDataRoot { dir: Some(dir.clone()) };
            let mut opts = crate::build::BuildOptions::default();
            for i in 0.. {
                let p = set.join(format!("input_{i}.pb"));
                if !p.exists() {
                    break;
                }
                let tp = tract_onnx::pb::TensorProto::decode(&std::fs::read(&p)?[..])?;
                let n = if tp.name.is_empty() {
                    gin[i].to_string()
                } else {
                    tp.name.clone()
                };
                opts.import.input_values.insert(n, onnx::proto::tensor(&tp, &rt)?);
            }
            let graph = onnx::import_model(&model, rt.clone(), &opts.import)?;
            for (i, out) in graph.outputs.iter().enumerate() {
                let p = set.join(format!("output_{i}.pb"));
                let want = onnx::proto::tensor(&tract_onnx::pb::TensorProto::decode(&std::fs::read(&p)?[..])?, &rt)?;
                let ours = graph
                    .node(out.port.node)
                    .constant()
                    .ok_or_else(|| anyhow::anyhow!("not constant"))?;
                anyhow::ensure!(
                    ours.shape() == want.shape(),
                    "output {i}: shape {:?} vs {:?}",
                    ours.shape(),
                    want.shape()
                );
                anyhow::ensure!(ours.dtype() == want.dtype(), "output {i}: dtype");
                for (k, (a, b)) in ours.to_f64_vec().iter().zip(want.to_f64_vec()).enumerate() {
                    anyhow::ensure!(
                        (a - b).abs() <= 1e-5 + 1e-4 * b.abs() || (a.is_nan() && b.is_nan()),
                        "output {i}: element {k}: {a} vs {b}\nours {:?}\nwant {:?}",
                        &ours.to_f64_vec()[..ours.len().min(64)],
                        &want.to_f64_vec()[..want.len().min(64)]
                    );
                }
            }
            Ok(())
        })();
        match r {
            Ok(()) => {
                pass += 1;
                println!("PASS {name}");
            }
            Err(e) => {
                fail += 1;
                println!("FAIL {name}: {e:#}");
            }
        }
    }
    println!("{pass} passed, {fail} failed");
}

#[test]
fn tmp_models() {
    use trtc_runtime::{Engine, Tensor};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/models");
    let filter = std::env::var("MV_MODELS").unwrap_or_default();
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    v.sort();
    for model in v {
        let stem = model.file_stem().unwrap().to_string_lossy().to_string();
        if !stem.contains(&filter) {
            continue;
        }
        let r = (|| -> anyhow::Result<f64> {
            let inputs = crate::npz::read_npz(&dir.join(format!("{stem}.inputs.npz")))?;
            let expected = crate::npz::read_npz(&dir.join(format!("{stem}.outputs.npz")))?;
            let built = crate::build::build_file(&model, &crate::build::BuildOptions::default())?;
            let engine = Engine::from_bytes(&built.engine)?;
            let mut ctx = engine.create_context()?;
            let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
            let t0 = std::time::Instant::now();
            let outputs = ctx.run(&refs)?;
            println!("  {stem} run {:?}", t0.elapsed());
            let mut worst = 0f64;
            for d in crate::compare::diff_all(&outputs, &expected)? {
                anyhow::ensure!(d.shape_ok, "output {} has the wrong shape", d.name);
                worst = worst.max(d.max_rel_to_scale);
            }
            Ok(worst)
        })();
        match r {
            Ok(e) => println!("MODEL {stem}: err {e:.2e}"),
            Err(e) => println!("MODEL {stem}: FAIL {e:#}"),
        }
    }
}
