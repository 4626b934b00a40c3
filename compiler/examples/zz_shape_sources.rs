use std::path::Path;
use trtc::build::{build_file, BuildOptions, ShapeProfile};
use trtc_kernels::{candidates, LayerIo, SmLimits};
use trtc_runtime::profile::ProfilePoint;
use trtc_runtime::{Engine, TensorType};

fn dims(v: &serde_json::Value) -> Vec<usize> {
    v.as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect()
}

fn main() {
    let dir = Path::new("testdata/dynamic");
    let m: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    let limits = SmLimits::for_sm(90);
    for model in m["models"].as_array().unwrap() {
        if model["status"] != "ok" {
            continue;
        }
        let p = model["profile"].as_object().unwrap();
        let at = |w: &str| -> Vec<(String, Vec<usize>)> { p.iter().map(|(n, r)| (n.clone(), dims(&r[w]))).collect() };
        let prof = ShapeProfile::from_flags(&at("min"), &at("opt"), &at("max")).unwrap();
        let opts = BuildOptions { profiles: vec![prof], ..Default::default() };
        let built = build_file(&dir.join(model["file"].as_str().unwrap()), &opts).unwrap();
        let engine = Engine::from_bytes(&built.engine).unwrap();
        let plan = engine.plan();
        let rp = &engine.profiles()[0];
        let mut points: Vec<Vec<TensorType>> = vec![];
        for pt in [ProfilePoint::Min, ProfilePoint::Opt, ProfilePoint::Max] {
            points.push(rp.bind_at(plan, pt).unwrap());
        }
        // cases' shapes
        for case in model["cases"].as_array().unwrap() {
            let arrays = trtc::npz::read_npz(&dir.join(case["file"].as_str().unwrap())).unwrap();
            let ins: Vec<TensorType> = plan
                .inputs
                .iter()
                .map(|&id| arrays.iter().find(|(n, _)| *n == plan.tensors[id].name).unwrap().1.ty().clone())
                .collect();
            points.push(trtc_runtime::profile::bind(plan, &ins).unwrap());
        }
        let (mut same, mut differ, mut missing, mut host) = (0, 0, 0, 0);
        let mut why = vec![];
        for layer in &plan.layers {
            let io_at = |types: &Vec<TensorType>| {
                candidates(
                    &LayerIo {
                        op: &layer.op,
                        inputs: layer.inputs.iter().map(|i| i.map(|i| &types[i])).collect(),
                        outputs: layer.outputs.iter().map(|&o| &types[o]).collect(),
                    },
                    &limits,
                )
            };
            let base = match io_at(&points[1]) {
                Ok(b) => b,
                Err(e) => {
                    host += 1;
                    why.push(format!("host {} {}", layer.op.name(), e));
                    continue;
                }
            };
            let chosen = &base[0];
            let mut ok = true;
            let mut miss = false;
            for pt in &points {
                match io_at(pt) {
                    Ok(c) => match c.iter().find(|c| c.tactic == chosen.tactic) {
                        Some(c2) => {
                            if c2.launches.iter().map(|l| &l.kernel).collect::<Vec<_>>()
                                != chosen.launches.iter().map(|l| &l.kernel).collect::<Vec<_>>()
                            {
                                ok = false;
                            }
                        }
                        None => {
                            miss = true;
                        }
                    },
                    Err(_) => miss = true,
                }
            }
            if miss {
                missing += 1;
                why.push(format!("missing {} {}", layer.op.name(), chosen.tactic));
            } else if ok {
                same += 1
            } else {
                differ += 1;
                why.push(format!("differ {} {}", layer.op.name(), chosen.tactic));
            }
        }
        println!("{}: layers {} same {same} differ {differ} missing {missing} host {host}", model["name"], plan.layers.len());
        for w in why.iter().take(12) {
            println!("   {w}");
        }
    }
}
