//! Engines built for a GPU on a machine without one (`--target sm_90`):
//! - every testdata model, in FP32 and FP16 (and the Q/DQ int8 models),
//!   builds for sm_90, with each kernel compiled by NVRTC;
//! - the engine carries the same plan as the CPU engine and runs on the CPU
//!   executor with bit-identical outputs;
//! - every kernel instantiation those engines need also compiles for sm_80,
//!   sm_86 and sm_89, and the default tactics spill no registers.
//!
//! Needs libnvrtc (no GPU): `scripts/test.sh` installs it from PyPI.

mod common;

use common::{stem, testdata_models, testdata_npz};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use trtc::build::{build_graph, BuildOptions};
use trtc::cuda::kernel_table;
use trtc::cuda::nvrtc;
use trtc::tuning::Heuristic;
use trtc_kernels::KernelSource;
use trtc_runtime::{Engine, Target, Tensor};

const OTHER_SMS: [u32; 3] = [80, 86, 89];

fn require_nvrtc() {
    assert!(
        nvrtc::available(),
        "NVRTC is needed for this test: run scripts/test.sh, which installs nvidia-cuda-nvrtc into .cache/nvrtc ({:?})",
        nvrtc::library().err()
    );
}

fn qdq_models() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/qdq");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("testdata/qdq")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    v.sort();
    v
}

fn run(engine: &Engine, inputs: &[(String, Tensor)]) -> Vec<(String, Tensor)> {
    let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    engine.create_context().unwrap().run(&refs).unwrap()
}

#[test]
fn gpu_engines_of_every_testdata_model_build_and_run_on_the_cpu_executor() {
    require_nvrtc();
    let mut models: Vec<(PathBuf, &str)> = Vec::new();
    for m in testdata_models() {
        models.push((m.clone(), "fp32"));
        models.push((m, "fp16"));
    }
    for m in qdq_models() {
        models.push((m, "qdq"));
    }
    // Every distinct kernel the engines use, to compile for the other SMs.
    let mut sources: BTreeMap<(String, String), String> = BTreeMap::new();
    let (mut layers, mut host) = (0usize, 0usize);
    let mut host_ops: BTreeMap<String, usize> = BTreeMap::new();
    for (model, mode) in &models {
        let what = format!("{} {mode}", stem(model));
        let mut opts = BuildOptions::default();
        opts.precision.fp16 = *mode == "fp16";
        let graph = trtc::frontend::onnx::import_file(model, &opts.import).unwrap();
        let cpu = build_graph(graph.clone(), &opts).unwrap_or_else(|e| panic!("{what}: {e:#}"));
        opts.target = Target::Cuda { sm: 90, gpu_name: None };
        let gpu = build_graph(graph, &opts).unwrap_or_else(|e| panic!("{what} for sm_90: {e:#}"));
        let cpu = Engine::from_bytes(&cpu.engine).unwrap();
        let gpu_engine =
            Engine::from_bytes(&gpu.engine).unwrap_or_else(|e| panic!("{what}: the sm_90 engine does not load: {e}"));
        assert_eq!(gpu_engine.header().target, Target::Cuda { sm: 90, gpu_name: None });
        assert_eq!(cpu.plan(), gpu_engine.plan(), "{what}: the sm_90 engine has another plan");
        let table = gpu_engine.kernels().expect("kernel table");
        assert_eq!(table.sm, 90);
        let report = gpu.kernels.as_ref().expect("kernel report");
        assert!(report.spills.is_empty(), "{what}: default kernels spill registers: {:?}", report.spills);
        layers += gpu_engine.plan().layers.len();
        host += report.host_layers.len();
        for (layer, _) in &report.host_layers {
            let l = gpu_engine.plan().layers.iter().find(|l| &l.name == layer).unwrap();
            *host_ops.entry(l.op.display_name()).or_default() += 1;
        }
        // The same plan on the CPU executor: bit-identical outputs.
        let inputs = testdata_npz(model, "inputs");
        let (a, b) = (run(&cpu, &inputs), run(&gpu_engine, &inputs));
        for ((na, ta), (nb, tb)) in a.iter().zip(&b) {
            assert_eq!(na, nb);
            assert_eq!(ta.bytes(), tb.bytes(), "{what}: output {na} differs between the cpu and sm_90 engines");
        }
        let plan = gpu_engine.plan();
        for (src, tactic, layer) in kernel_table::select(plan, 90, &[], &mut Heuristic).unwrap().sources {
            sources.entry((src.entry.clone(), src.source.clone())).or_insert(format!("{what}: {layer} ({tactic})"));
        }
    }
    println!(
        "{} engines: {layers} layers, {host} on the host ({:.1}%), {} distinct kernels",
        models.len(),
        100.0 * host as f64 / layers.max(1) as f64,
        sources.len()
    );
    println!("host layers by op: {host_ops:?}");
    // The kernel selection depends only on the plan and the SM's limits,
    // which are the same for every SM trtc targets: compile the same sources.
    let list: Vec<(KernelSource, String, String)> =
        sources.into_iter().map(|((entry, source), first)| (KernelSource { entry, source }, String::new(), first)).collect();
    for sm in OTHER_SMS {
        let compiled = kernel_table::compile_all(&list, sm).unwrap_or_else(|e| panic!("sm_{sm}: {e:#}"));
        for ((src, _, first), c) in list.iter().zip(&compiled) {
            assert_eq!(&c.cubin[..4], b"\x7fELF", "{}: not a cubin", src.entry);
            assert_eq!(c.spill_store_bytes(), 0, "sm_{sm}: {} (first used by {first}) spills registers", src.entry);
        }
    }
}

#[test]
fn target_flag_is_parsed_with_clear_errors() {
    use kernel_table::TargetSpec;
    assert_eq!("cpu".parse::<TargetSpec>().unwrap(), TargetSpec::Cpu);
    assert_eq!("cuda".parse::<TargetSpec>().unwrap(), TargetSpec::Cuda);
    assert_eq!("sm_89".parse::<TargetSpec>().unwrap(), TargetSpec::Sm(89));
    let e = "sm_75".parse::<TargetSpec>().unwrap_err().to_string();
    assert!(e.contains("sm_80"), "{e}");
    let e = "gpu".parse::<TargetSpec>().unwrap_err().to_string();
    assert!(e.contains("expected cpu, cuda or sm_XX"), "{e}");
}

mod tuning {
    //! Tactic choice from a timing cache, without a GPU: the cache decides,
    //! and the same model, flags and cache give a byte-identical engine.

    use super::*;
    use trtc::cuda::TuningOptions;
    use trtc::tuning::{op_signature, source_hash, Device, Entry, TimingCache, TimingKey, CANDIDATES_PER_LEVEL};

    fn model() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/models/example_cnn.onnx")
    }

    fn build(tuning: TuningOptions) -> anyhow::Result<trtc::build::Built> {
        let opts = BuildOptions { target: Target::Cuda { sm: 90, gpu_name: None }, tuning, ..Default::default() };
        trtc::build::build_file(&model(), &opts)
    }

    /// A cache that makes the last considered candidate of every layer the
    /// fastest, so a tuned build differs from the heuristic one.
    fn write_cache(path: &Path, plan: &trtc_runtime::plan::Plan, level: u8) -> usize {
        let device = Device { gpu: "Test GPU".into(), sm: 90, driver: 13000, nvrtc: nvrtc::version().unwrap() };
        let mut cache = TimingCache::new();
        let mut tunable = 0;
        for layer in &plan.layers {
            let io = kernel_table::layer_io(plan, layer);
            let Ok(candidates) = trtc_kernels::candidates(&io, &trtc_kernels::SmLimits::for_sm(90)) else { continue };
            let considered = &candidates[..candidates.len().min(CANDIDATES_PER_LEVEL[level as usize])];
            if considered.len() > 1 {
                tunable += 1;
            }
            for (i, c) in considered.iter().enumerate() {
                let key = TimingKey { device: device.clone(), op: op_signature(&io), tactic: c.tactic.to_string() };
                let median_us = Some(100.0 - i as f64);
                cache.insert(key, Entry { source_hash: source_hash(c), median_us, runs: 10 });
            }
        }
        cache.save(path).unwrap();
        tunable
    }

    /// What an engine computes and how: its plan, weights and kernel table,
    /// without the header (whose provenance flags name the tuning options).
    fn contents(engine: &[u8]) -> (trtc_runtime::plan::Plan, Vec<u8>, Option<trtc_runtime::kernels::KernelTable>) {
        let e = Engine::from_bytes(engine).unwrap();
        (e.plan().clone(), e.weights().to_vec(), e.kernels().cloned())
    }

    #[test]
    fn a_timing_cache_decides_tactics_and_builds_are_byte_identical() {
        require_nvrtc();
        let dir = common::TempDir::new("tuning");
        let cache = dir.path("timing.cache");
        let heuristic = build(TuningOptions::default()).unwrap();
        let plan = Engine::from_bytes(&heuristic.engine).unwrap().plan().clone();
        let tunable = write_cache(&cache, &plan, 3);
        assert!(tunable > 0, "example_cnn has no layer with several candidates");
        let bytes_before = std::fs::read(&cache).unwrap();
        let with_cache = || TuningOptions { opt_level: Some(3), timing_cache: Some(cache.clone()), error_on_cache_miss: true };
        let a = build(with_cache()).unwrap();
        let b = build(with_cache()).unwrap();
        assert_eq!(a.engine, b.engine, "same model, flags and timing cache: the engines differ");
        assert_ne!(contents(&a.engine), contents(&heuristic.engine), "the timing cache changed no tactic");
        assert_eq!(std::fs::read(&cache).unwrap(), bytes_before, "a fully cached build rewrote the cache");
        let report = a.kernels.as_ref().unwrap();
        assert!(report.tuning_summary.contains("(cached)"), "{}", report.tuning_summary);
        // Same plan, other kernels: the CPU executor's outputs do not change.
        let inputs = testdata_npz(&model(), "inputs");
        let (x, y) = (
            run(&Engine::from_bytes(&a.engine).unwrap(), &inputs),
            run(&Engine::from_bytes(&heuristic.engine).unwrap(), &inputs),
        );
        assert_eq!(x.iter().map(|(_, t)| t.bytes()).collect::<Vec<_>>(), y.iter().map(|(_, t)| t.bytes()).collect::<Vec<_>>());
    }

    #[test]
    fn cache_misses_and_corrupted_caches() {
        require_nvrtc();
        let dir = common::TempDir::new("tuning-miss");
        let cache = dir.path("timing.cache");
        // An empty cache with --error-on-cache-miss: the error names a layer
        // and a tactic.
        let e = build(TuningOptions { opt_level: Some(3), timing_cache: Some(cache.clone()), error_on_cache_miss: true })
            .err()
            .expect("a miss must fail the build");
        let msg = format!("{e:#}");
        assert!(msg.contains("is not in the timing cache"), "{msg}");
        // Without it, a machine without the GPU falls back to the heuristic
        // tactics: the same engine as an untuned build, and no cache written.
        let heuristic = build(TuningOptions::default()).unwrap();
        let fallback =
            build(TuningOptions { opt_level: Some(3), timing_cache: Some(cache.clone()), error_on_cache_miss: false }).unwrap();
        assert_eq!(contents(&fallback.engine), contents(&heuristic.engine));
        assert!(!cache.exists());
        assert!(fallback.kernels.unwrap().tuning_summary.contains("heuristic"));
        // A corrupted cache is ignored with a warning.
        let garbage = format!("trtc-timing-cache {} crc32=00000000\ngarbage", trtc::tuning::FORMAT_VERSION);
        std::fs::write(&cache, garbage).unwrap();
        let built =
            build(TuningOptions { opt_level: Some(3), timing_cache: Some(cache.clone()), error_on_cache_miss: false }).unwrap();
        let warnings = built.kernels.unwrap().warnings.join("\n");
        assert!(warnings.contains("corrupted"), "{warnings}");
        assert_eq!(contents(&built.engine), contents(&heuristic.engine));
    }
}
