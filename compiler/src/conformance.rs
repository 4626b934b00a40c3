//! Runs ONNX's backend conformance cases (`model.onnx` plus
//! `test_data_set_*/input_N.pb` and `output_N.pb`) through the whole
//! pipeline: import, lower, serialize, load, CPU executor, compare.

use crate::build::BuildOptions;
use crate::frontend::onnx::{self, proto::ExternalDataRoot};
use anyhow::{anyhow, bail, Context, Result};
use prost::Message;
use std::path::{Path, PathBuf};
use tract_onnx::pb;
use trtc_runtime::{Engine, Tensor};

/// Op types outside trtc's scope: training, sequences, strings, randomness,
/// optional types. Cases using them are skipped.
pub const OUT_OF_SCOPE_OPS: &[&str] = &[
    // Training (the losses are in scope: exported inference graphs have them).
    "Adagrad",
    "Adam",
    "Momentum",
    "Gradient",
    // Sequences.
    "SequenceAt",
    "SequenceConstruct",
    "SequenceEmpty",
    "SequenceErase",
    "SequenceInsert",
    "SequenceLength",
    "SequenceMap",
    "ConcatFromSequence",
    "SplitToSequence",
    // Strings.
    "StringNormalizer",
    "StringConcat",
    "StringSplit",
    "RegexFullMatch",
    "TfIdfVectorizer",
    // Randomness.
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
    // Optional types.
    "Optional",
    "OptionalGetElement",
    "OptionalHasElement",
];

#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Passed,
    Failed(String),
    Skipped(String),
}

/// Tolerances of the comparison: |ours - expected| <= atol + rtol * |expected|.
#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance { rtol: 1e-4, atol: 1e-5 }
    }
}

fn read_pb(path: &Path) -> Result<pb::TensorProto> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    pb::TensorProto::decode(&bytes[..]).map_err(|e| anyhow!("{}: {e}", path.display()))
}

/// Why a model is out of scope, if it is.
fn out_of_scope(model: &pb::ModelProto) -> Option<String> {
    let g = model.graph.as_ref()?;
    for n in &g.node {
        if OUT_OF_SCOPE_OPS.contains(&n.op_type.as_str()) {
            return Some(format!("op {}", n.op_type));
        }
    }
    for vi in g.input.iter().chain(&g.output) {
        match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            None => return Some("sequence/map/optional type".into()),
            Some(pb::type_proto::Value::TensorType(t)) => {
                if t.elem_type == pb::tensor_proto::DataType::String as i32 {
                    return Some("string tensors".into());
                }
            }
        }
    }
    None
}

fn compare(name: &str, ours: &Tensor, want: &Tensor, tol: Tolerance) -> Result<()> {
    if ours.dtype() != want.dtype() {
        bail!("output {name}: dtype {} but expected {}", ours.dtype(), want.dtype());
    }
    if ours.shape() != want.shape() {
        bail!("output {name}: shape {:?} but expected {:?}", ours.shape(), want.shape());
    }
    let (a, b) = (ours.to_f64_vec(), want.to_f64_vec());
    let exact = !ours.dtype().is_float();
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        let ok = if exact {
            // The 8-bit floats compare exactly too, NaN matching NaN.
            x == y || (x.is_nan() && y.is_nan())
        } else if y.is_nan() {
            x.is_nan()
        } else if y.is_infinite() {
            x == y
        } else {
            (x - y).abs() <= tol.atol + tol.rtol * y.abs()
        };
        if !ok {
            bail!("output {name}: element {i} is {x}, expected {y}");
        }
    }
    Ok(())
}

/// The element type a value info declares, if it is a tensor trtc reads.
fn declared_dtype(vi: &pb::ValueInfoProto) -> Option<trtc_runtime::DType> {
    match vi.r#type.as_ref()?.value.as_ref()? {
        pb::type_proto::Value::TensorType(t) => onnx::proto::dtype(t.elem_type).ok(),
    }
}

/// onnx 1.16 stores bfloat16 test data as uint16 words: read those bits as
/// the bfloat16 the graph declares.
fn as_declared(t: Tensor, declared: Option<trtc_runtime::DType>) -> Result<Tensor> {
    match declared {
        Some(d) => crate::npz::as_binding_type(t, d),
        None => Ok(t),
    }
}

/// Runs one case directory.
pub fn run_case(dir: &Path, tol: Tolerance) -> Outcome {
    run_case_on(dir, tol, None)
}

/// How a case is built for the GPU it also runs on.
#[derive(Clone, Copy, Debug)]
pub struct GpuBuild {
    /// The SM of GPU 0.
    pub sm: u32,
    /// The tuning level (`--opt-level`); `None` is the build's default.
    pub opt_level: Option<u8>,
}

/// Runs one case directory; with `gpu`, a case that passes on the CPU is
/// also built for that GPU and run on the CUDA executor (GPU 0), whose
/// outputs must match the CPU executor's within [`GPU_TOLERANCE`].
pub fn run_case_on(dir: &Path, tol: Tolerance, gpu: Option<GpuBuild>) -> Outcome {
    match std::panic::catch_unwind(|| run_case_inner(dir, tol, gpu)) {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => Outcome::Failed(e.chain().map(|c| c.to_string()).collect::<Vec<_>>().join(": ")),
        Err(p) => Outcome::Failed(format!("PANIC: {}", crate::panic_message(p.as_ref()))),
    }
}

fn data_sets(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut sets: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("test_data_set")))
        .collect();
    sets.sort();
    Ok(sets)
}

fn numbered(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for i in 0.. {
        let p = dir.join(format!("{prefix}_{i}.pb"));
        if !p.exists() {
            break;
        }
        v.push(p);
    }
    v
}

fn run_case_inner(dir: &Path, tol: Tolerance, gpu: Option<GpuBuild>) -> Result<Outcome> {
    let model_path = dir.join("model.onnx");
    let bytes = std::fs::read(&model_path).with_context(|| format!("cannot read {}", model_path.display()))?;
    let model = onnx::decode(&bytes)?;
    if let Some(why) = out_of_scope(&model) {
        return Ok(Outcome::Skipped(why));
    }
    let g = model.graph.as_ref().expect("decoded");
    let inits: std::collections::HashSet<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
    let graph_inputs: Vec<&str> = g.input.iter().map(|v| v.name.as_str()).filter(|n| !inits.contains(n)).collect();
    let sets = data_sets(dir)?;
    if sets.is_empty() {
        bail!("no test_data_set in {}", dir.display());
    }
    for set in sets {
        let root = ExternalDataRoot { dir: Some(dir.to_path_buf()) };
        let mut inputs = Vec::new();
        for (i, p) in numbered(&set, "input").iter().enumerate() {
            let tp = read_pb(p)?;
            // Like onnx's backend runner: `input_i.pb` feeds the i-th graph
            // input, whatever name the file carries (some cases' files name
            // the tensor of the function they were made from).
            let name = graph_inputs.get(i).map_or_else(|| tp.name.clone(), |s| s.to_string());
            let t = onnx::proto::tensor(&tp, &root)?;
            let declared = g.input.iter().find(|vi| vi.name == name).and_then(declared_dtype);
            inputs.push((name, as_declared(t, declared)?));
        }
        let mut expected = Vec::new();
        for (i, p) in numbered(&set, "output").iter().enumerate() {
            let t = onnx::proto::tensor(&read_pb(p)?, &root)?;
            expected.push(as_declared(t, g.output.get(i).and_then(declared_dtype))?);
        }
        let mut opts = BuildOptions::default();
        for (name, t) in &inputs {
            opts.import.shapes.insert(name.clone(), t.shape().to_vec());
        }
        // Like TensorRT's shape inputs: an input whose value decides shapes
        // is fixed at build time. Integer inputs first, then any other input
        // the importer names as needed at build time.
        let mut fixed_ints = false;
        let graph = loop {
            match onnx::import_model(&model, root.clone(), &opts.import) {
                Ok(g) => break g,
                Err(e) => {
                    let msg = format!("{e:#}");
                    if !msg.contains("must be known when the engine is built") {
                        return Err(e);
                    }
                    let named = msg.split("tensor '").nth(1).and_then(|r| r.split('\'').next()).map(str::to_string);
                    let mut progress = false;
                    if !fixed_ints {
                        fixed_ints = true;
                        for (name, t) in &inputs {
                            if !t.dtype().is_float() && !opts.import.input_values.contains_key(name) {
                                opts.import.shapes.remove(name);
                                opts.import.input_values.insert(name.clone(), t.clone());
                                progress = true;
                            }
                        }
                    }
                    if !progress {
                        if let Some((name, t)) = named.and_then(|n| inputs.iter().find(|(i, _)| *i == n)) {
                            if !opts.import.input_values.contains_key(name) {
                                opts.import.shapes.remove(name);
                                opts.import.input_values.insert(name.clone(), t.clone());
                                progress = true;
                            }
                        }
                    }
                    if !progress {
                        return Err(e);
                    }
                }
            }
        };
        let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
        // Once with every pass, once with none: both must pass, and agree
        // (passes preserve outputs).
        let mut unoptimized = opts.clone();
        unoptimized.passes.disable_all = true;
        let run = |graph: crate::ir::Graph, opts: &BuildOptions| -> Result<Vec<(String, Tensor)>> {
            let built = crate::build::build_graph(graph, opts)?;
            let engine = Engine::from_bytes(&built.engine)?;
            let mut ctx = engine.create_context()?;
            Ok(ctx.run(&refs)?)
        };
        let graph_for_gpu = graph.clone();
        let outputs = run(graph.clone(), &opts)?;
        let plain = run(graph, &unoptimized).context("with all passes disabled")?;
        if outputs.len() != expected.len() {
            bail!("{} outputs, expected {}", outputs.len(), expected.len());
        }
        for (((name, ours), want), (_, unopt)) in outputs.iter().zip(&expected).zip(&plain) {
            compare(name, ours, want, tol)?;
            compare(name, unopt, want, tol).context("with all passes disabled")?;
            compare(name, ours, unopt, Tolerance { rtol: 1e-5, atol: 1e-6 }).context("passes on vs off")?;
        }
        if let Some(gpu) = gpu {
            let mut gpu_opts = opts.clone();
            gpu_opts.target = trtc_runtime::Target::Cuda { sm: gpu.sm, gpu_name: None };
            gpu_opts.tuning.opt_level = gpu.opt_level;
            let built = crate::build::build_graph(graph_for_gpu.clone(), &gpu_opts).context("building for the GPU")?;
            let engine = Engine::from_bytes(&built.engine)?;
            let gpu = crate::cuda::load(&engine, 0).context("loading the engine on the GPU")?;
            let on_gpu = gpu.create_context()?.run(&refs).context("on the GPU")?;
            for ((name, g), (_, c)) in on_gpu.iter().zip(&outputs) {
                compare_gpu(name, g, c).context("on the GPU")?;
            }
        }
    }
    Ok(Outcome::Passed)
}

/// How far a GPU output may be from the CPU executor's, relative to the
/// largest magnitude of the CPU output: TF32 tensor cores round inputs to
/// 10 mantissa bits (the CUDA issue's 3e-3); integer and boolean outputs
/// must be equal.
pub const GPU_TOLERANCE: f64 = 3e-3;

/// Compares a GPU output with the CPU executor's: same type, and the
/// largest error relative to the CPU output's scale (`compare::diff`) within
/// [`GPU_TOLERANCE`] for floats, zero for integers and booleans.
pub fn compare_gpu(name: &str, gpu: &Tensor, cpu: &Tensor) -> Result<()> {
    let d = crate::compare::diff(name, gpu, cpu);
    if gpu.dtype() != cpu.dtype() || !d.shape_ok {
        bail!("output {name}: {} on the GPU, {} on the CPU", gpu.ty(), cpu.ty());
    }
    let tol = if cpu.dtype().is_float() { GPU_TOLERANCE } else { 0.0 };
    if d.max_rel_to_scale > tol {
        bail!("output {name}: on the GPU, max error {:.3e} of the CPU output's scale (tolerance {tol:.1e})", d.max_rel_to_scale);
    }
    Ok(())
}

/// Every case directory under `root/<subset>`, sorted, as `subset/name`.
pub fn list_cases(root: &Path, subsets: &[&str]) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for s in subsets {
        let d = root.join(s);
        let mut cases: Vec<PathBuf> = std::fs::read_dir(&d)
            .with_context(|| format!("conformance data missing at {} (run scripts/fetch-conformance.sh)", d.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("model.onnx").exists())
            .collect();
        cases.sort();
        for c in cases {
            let name = format!("{s}/{}", c.file_name().unwrap().to_string_lossy());
            out.push((name, c));
        }
    }
    Ok(out)
}

/// The default location of the suite, fetched by `scripts/fetch-conformance.sh`.
pub fn default_root() -> PathBuf {
    if let Ok(p) = std::env::var("TRTC_ONNX_BACKEND_DATA") {
        return PathBuf::from(p);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cache/onnx-backend-1.16.2")
}

pub const SUBSETS: &[&str] = &["node", "pytorch-converted", "pytorch-operator", "simple"];
