//! The `trtc` command line. See `trtc --help` and design.md §2.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use trtc::build::{self, BuildOptions};
use trtc::cuda::kernel_table::TargetSpec;
use trtc::inspect;

#[derive(Parser)]
#[command(name = "trtc", version, about = "Compiles ONNX models into engines and runs them")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compiles an ONNX model into an engine file.
    Build(Box<BuildArgs>),
    /// Runs an engine on inputs from an .npz file (or random inputs).
    Run(RunArgs),
    /// Prints an engine's header, bindings, layers and memory without running it.
    Inspect(InspectArgs),
    /// Compares two .npz files of outputs (ours, then the reference).
    Compare(CompareArgs),
    /// Measures an engine's latency on random inputs (trtexec-style).
    Bench(BenchArgs),
    /// Runs INT8 calibration only and writes the calibration cache
    /// (TensorRT's text format).
    Calibrate(CalibrateArgs),
    /// Serves engines to Triton's clients over HTTP (KServe v2), from a model
    /// repository or one engine. Runs `trtc-serve` (the trtc-server crate),
    /// installed beside `trtc`; `trtc serve --help` lists its flags.
    #[command(disable_help_flag = true)]
    Serve(ServeArgs),
    /// The GPU test suite (see `trtc::gpu_check`): every testdata model on
    /// the CUDA executor against the CPU executor.
    #[command(hide = true)]
    GpuCheck(GpuCheckArgs),
}

#[derive(clap::Args)]
struct GpuCheckArgs {
    /// Only the cases whose `MODEL MODE` (or conformance case name) contains this.
    #[arg(long, default_value = "")]
    filter: String,
    /// Skip the testdata models.
    #[arg(long)]
    no_models: bool,
    /// List the model cases and exit.
    #[arg(long)]
    list: bool,
    /// Also run the ONNX conformance suite in this folder on the GPU.
    #[arg(long, value_name = "DIR")]
    conformance: Option<PathBuf>,
    /// Write the model results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// The tuning level of every build, as `trtc build --opt-level` (0: the
    /// heuristic tactics, no timing; the default tunes).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(0..=5))]
    opt_level: Option<u8>,
    /// Only the K-th of N equal parts of the conformance suite (K/N, K from
    /// 0), for N processes in parallel.
    #[arg(long, value_name = "K/N")]
    shard: Option<trtc::gpu_check::Shard>,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Everything after `serve`, passed to `trtc-serve` unchanged.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<std::ffi::OsString>,
}

/// Calibration flags shared by `build --int8`/`--fp8` and `calibrate`.
#[derive(clap::Args)]
struct CalibFlags {
    /// Calibration batches: a folder of .npz files (keys are input names) or
    /// .npy files (single-input models), one batch per file. With --fp16
    /// alone: the data FP16 observes tensor ranges on (random batches
    /// otherwise).
    #[arg(long, value_name = "DIR")]
    calib: Option<PathBuf>,
    /// Use at most N calibration batches.
    #[arg(long, value_name = "N")]
    calib_batches: Option<usize>,
    /// entropy (TensorRT's EntropyCalibration2), minmax, or percentile[=P]
    /// (default P = 99.99). Default: entropy, or minmax with --fp8 (FP8's
    /// exponent covers the range an int8 grid clips).
    #[arg(long)]
    calibrator: Option<trtc::precision::calib::Calibrator>,
    /// Calibration cache in TensorRT's format: reused when the file exists
    /// (no calibration runs), written after calibrating otherwise.
    #[arg(long, value_name = "FILE")]
    calib_cache: Option<PathBuf>,
    /// With profiles whose shapes vary: the shapes of the random batches
    /// FP16 observes ranges on (NAME:DIMS[,NAME:DIMS...]); the first
    /// profile's opt shapes otherwise. Batches from --calib take their own
    /// shapes.
    #[arg(long, value_name = "NAME:DIMS,...")]
    calib_shapes: Option<String>,
}

impl CalibFlags {
    /// The calibration options; `fp8` picks minmax as the default
    /// calibrator.
    fn options(&self, fp8: bool) -> Result<build::Int8Options> {
        use trtc::precision::calib::Calibrator;
        let calibrator = self.calibrator.unwrap_or(if fp8 { Calibrator::MinMax } else { Calibrator::Entropy });
        if self.calib_batches == Some(0) {
            bail!("--calib-batches must be at least 1");
        }
        Ok(build::Int8Options {
            calib_dir: self.calib.clone(),
            calib: trtc::precision::calib::CalibOptions {
                calibrator,
                max_batches: self.calib_batches,
                progress: std::io::IsTerminal::is_terminal(&std::io::stderr()),
            },
            cache: self.calib_cache.clone(),
            calib_shapes: match &self.calib_shapes {
                Some(s) => parse_shape_list("--calib-shapes", s)?,
                None => Vec::new(),
            },
            ..Default::default()
        })
    }
}

#[derive(clap::Args)]
struct CalibrateArgs {
    /// The ONNX model.
    model: PathBuf,
    /// Where to write the calibration cache.
    #[arg(short, long)]
    output: PathBuf,
    /// Input shapes, resolving symbolic dimensions: NAME:1x3x224x224, a
    /// comma-separated list of them (as trtexec's --shapes), or repeated.
    #[arg(long = "shape", value_name = "NAME:DIMS")]
    shapes: Vec<String>,
    #[command(flatten)]
    calib: CalibFlags,
}

#[derive(clap::Args)]
struct BenchArgs {
    engine: PathBuf,
    /// Timed runs (at least this many; see --duration).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=MAX_ITERATIONS))]
    iterations: u64,
    /// Keep running until this many seconds have passed (and --iterations
    /// runs were made).
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// Untimed runs first.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(0..=MAX_ITERATIONS))]
    warmup: u64,
    /// Where to run: the GPU when the engine has kernels for it and one is
    /// present, else the CPU (auto), or either (cpu, cuda).
    #[arg(long, value_enum, default_value_t = DeviceFlag::Auto)]
    device: DeviceFlag,
    /// On the GPU, launch layer by layer instead of replaying a CUDA graph.
    #[arg(long)]
    no_cuda_graph: bool,
    /// Inputs, keyed by ONNX input name (random inputs when absent).
    #[arg(long, value_name = "NPZ", conflicts_with = "shapes")]
    inputs: Option<PathBuf>,
    #[command(flatten)]
    shapes: RandomShapes,
    /// Also time each layer of the CPU executor, over as many further runs
    /// as --iterations, and print them slowest first.
    #[arg(long)]
    profile: bool,
    #[command(flatten)]
    cpu: CpuArgs,
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct CompareArgs {
    ours: PathBuf,
    reference: PathBuf,
    /// Fail when max |ours - ref| / max |ref| exceeds this on any output.
    #[arg(long, default_value_t = 1e-4, value_parser = parse_tolerance)]
    tolerance: f64,
}

#[derive(clap::Args)]
struct BuildArgs {
    /// The ONNX model.
    model: PathBuf,
    /// Where to write the engine.
    #[arg(short, long)]
    output: PathBuf,
    /// Input shapes, resolving symbolic dimensions: NAME:1x3x224x224, a
    /// comma-separated list of them (as trtexec's --shapes), or repeated.
    #[arg(long = "shape", value_name = "NAME:DIMS")]
    shapes: Vec<String>,
    /// An optimization profile's smallest shapes: NAME:DIMS[,NAME:DIMS...],
    /// e.g. input_ids:1x1,attention_mask:1x1 (as trtexec's --minShapes).
    /// With --opt-shapes and --max-shapes, the inputs' shapes may vary at
    /// run time within the range. Repeat the three
    /// flags for more profiles: the k-th of each belongs to profile k.
    #[arg(long = "min-shapes", value_name = "NAME:DIMS,...")]
    min_shapes: Vec<String>,
    /// The profile's shapes tactics are chosen for.
    #[arg(long = "opt-shapes", value_name = "NAME:DIMS,...")]
    opt_shapes: Vec<String>,
    /// The profile's largest shapes: the engine's memory is planned for them.
    #[arg(long = "max-shapes", value_name = "NAME:DIMS,...")]
    max_shapes: Vec<String>,
    /// Fix an input's value at build time (a shape tensor): NAME:FILE.npy (repeatable).
    #[arg(long = "input-value", value_name = "NAME:FILE")]
    input_values: Vec<String>,
    /// Target: cpu (default), cuda (the GPU of this machine) or sm_XX (a
    /// compute capability, e.g. sm_80, sm_86, sm_89, sm_90; no GPU needed).
    /// GPU engines carry their kernels as cubins and still run on the CPU.
    #[arg(long, default_value = "cpu")]
    target: String,
    /// How hard to tune GPU kernels, like TensorRT's builderOptimizationLevel:
    /// 0 = heuristic tactics only (no GPU needed); 1-5 time 4, 8, 16, 64 or
    /// all candidates per layer. Default: 3 with the target's GPU present or
    /// a timing cache, else 0.
    #[arg(long, value_name = "0-5", value_parser = clap::value_parser!(u8).range(0..=5))]
    opt_level: Option<u8>,
    /// A timing cache file: read (timings found there are not measured
    /// again) and updated after tuning; shared between builds and models.
    #[arg(long, value_name = "FILE")]
    timing_cache: Option<PathBuf>,
    /// Fail when a tactic's timing is not in the timing cache, instead of
    /// measuring it (reproducible CI builds).
    #[arg(long)]
    error_on_cache_miss: bool,
    /// Do not reuse activation buffers (for comparison).
    #[arg(long)]
    no_buffer_reuse: bool,
    /// Skip an optimization pass by name (repeatable; `all` skips every pass).
    #[arg(long = "disable-pass", value_name = "NAME")]
    disable_passes: Vec<String>,
    /// Write Graphviz files of the graph before and after optimization
    /// (DIR/imported.dot, DIR/optimized.dot).
    #[arg(long, value_name = "DIR")]
    dump_graph: Option<PathBuf>,
    /// Print per-pass node counts and times, and the optimized IR.
    #[arg(short, long)]
    verbose: bool,
    /// Run layers in f16 where safe (f32 accumulation; inputs and outputs
    /// keep their dtypes).
    #[arg(long)]
    fp16: bool,
    /// Run Conv/Gemm/MatMul layers in int8 with calibrated scales (needs
    /// --calib or --calib-cache); other layers fall back to fp16 with --fp16,
    /// else fp32.
    #[arg(long)]
    int8: bool,
    /// Run Conv/Gemm/MatMul layers in FP8 (E4M3, f32 accumulation) with
    /// calibrated scales, like --int8; GPU targets need sm_89 or newer.
    #[arg(long, conflicts_with = "int8")]
    fp8: bool,
    #[command(flatten)]
    calib: CalibFlags,
    /// Pin layers to a precision: PATTERN=fp32|fp16|int8|fp8, globs over
    /// layer names (repeatable; the last match wins), like trtexec's
    /// --layerPrecisions.
    #[arg(long = "layer-precision", value_name = "PATTERN=PREC")]
    layer_precisions: Vec<String>,
    /// After building, compare the engine with the FP32 reference and print
    /// cosine similarity, max relative error and top-1 agreement per output.
    #[arg(long)]
    accuracy_report: bool,
    /// Held-out batches for --accuracy-report (as for --calib; keep them
    /// disjoint from the calibration set). Random inputs when absent.
    #[arg(long, value_name = "DIR")]
    accuracy_data: Option<PathBuf>,
    /// With --accuracy-report, also compare every layer: alone in its
    /// precision on FP32 inputs (isolated, worst first) and after every
    /// earlier layer's error (accumulated).
    #[arg(long)]
    per_layer: bool,
    /// With --accuracy-report, also write the report as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    accuracy_json: Option<PathBuf>,
    /// Keep the most sensitive layers in higher precision until every
    /// output reaches the target against the FP32 engine: cosine=V or
    /// top1=V, on --accuracy-data (random inputs when absent).
    #[arg(long, value_name = "METRIC=VALUE")]
    accuracy_target: Option<trtc::accuracy_target::AccuracyTarget>,
}

/// How `run` and `bench` set up the CPU executor.
#[derive(clap::Args)]
struct CpuArgs {
    /// Threads each layer of the CPU executor may use (default: every core
    /// of this machine). Outputs do not depend on it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=trtc_runtime::parallel::MAX_THREADS as u64))]
    threads: Option<u64>,
    /// On the CPU executor, the reference f32 arithmetic (bit-reproducible)
    /// instead of the faster kernels whose results differ within tested
    /// bounds (small-batch matrix products, Sigmoid, SiLU, recurrent layers).
    #[arg(long)]
    exact: bool,
}

impl CpuArgs {
    /// A CPU execution context with `--threads` threads (or one per core),
    /// in fast f32 mode unless `--exact`.
    fn context<'e>(&self, engine: &'e trtc_runtime::Engine) -> Result<trtc_runtime::ExecutionContext<'e>> {
        let count = self.threads.map_or_else(trtc_runtime::parallel::machine_threads, |n| n as usize);
        let mut ctx = engine.create_context()?;
        ctx.set_threads(count)?;
        ctx.set_math(if self.exact { trtc_runtime::math::Math::Exact } else { trtc_runtime::math::Math::Fast });
        Ok(ctx)
    }
}

/// The shapes of random inputs, for an engine whose shapes vary.
#[derive(clap::Args)]
struct RandomShapes {
    /// Shapes of the random inputs, NAME:DIMS[,NAME:DIMS...] (repeatable),
    /// inside the engine's profiles; other inputs take their profile's opt
    /// shape.
    #[arg(long, value_name = "NAME:DIMS")]
    shapes: Vec<String>,
}

impl RandomShapes {
    /// The input bindings with the shapes random inputs take: the first
    /// profile's opt shapes, overridden by `--shapes`.
    fn bindings(&self, engine: &trtc_runtime::Engine) -> Result<Vec<trtc_runtime::BindingInfo>> {
        let mut bindings = opt_bindings(engine);
        for one in &self.shapes {
            for (name, dims) in parse_shape_list("--shapes", one)? {
                let Some(b) = bindings.iter_mut().find(|b| b.name == name) else {
                    let names: Vec<&str> = engine.inputs().iter().map(|b| b.name.as_str()).collect();
                    bail!("--shapes {one}: unknown input '{name}'; the engine's inputs are {names:?}");
                };
                if engine.profiles().is_empty() && b.ty.shape != dims {
                    bail!("--shapes {one}: the engine's input '{name}' is fixed at {}", b.ty);
                }
                b.ty.shape = dims;
            }
        }
        Ok(bindings)
    }
}

#[derive(clap::Args)]
struct RunArgs {
    engine: PathBuf,
    /// Inputs, keyed by ONNX input name. Random inputs when absent.
    #[arg(long, conflicts_with = "shapes")]
    inputs: Option<PathBuf>,
    #[command(flatten)]
    shapes: RandomShapes,
    /// Write the outputs, keyed by ONNX output name.
    #[arg(long)]
    save_outputs: Option<PathBuf>,
    /// Where to run (see `trtc bench --help`).
    #[arg(long, value_enum, default_value_t = DeviceFlag::Auto)]
    device: DeviceFlag,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    cpu: CpuArgs,
}

#[derive(clap::Args)]
struct InspectArgs {
    engine: PathBuf,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
    /// Print only the engine's format and trtc versions, without loading it.
    #[arg(long)]
    version_only: bool,
}

/// The most runs `bench` makes (its latencies are kept in memory).
const MAX_ITERATIONS: u64 = 100_000_000;

fn parse_tolerance(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        _ => Err(format!("'{s}' is not a tolerance (a finite number, at least 0)")),
    }
}

/// One occurrence of --min-shapes, --opt-shapes or --max-shapes:
/// NAME:DIMS[,NAME:DIMS...].
fn parse_shape_list(flag: &str, one: &str) -> Result<Vec<(String, Vec<usize>)>> {
    one.split(',')
        .map(|entry| {
            let (name, dims) = entry
                .rsplit_once(':')
                .ok_or_else(|| anyhow!("{flag} {one}: expected NAME:DIMS[,NAME:DIMS...], e.g. input:1x3x224x224"))?;
            let dims = dims
                .split('x')
                .map(|d| d.trim().parse::<usize>().map_err(|_| anyhow!("{flag} {one}: '{d}' is not a dimension")))
                .collect::<Result<Vec<_>>>()?;
            Ok((name.to_string(), dims))
        })
        .collect()
}

/// `--shape NAME:DIMS[,NAME:DIMS...]`: dims separated by `x` (or by
/// commas, `x:1,3,224,224`); a comma followed by `NAME:` starts the next
/// input, as in trtexec's `--shapes`. An empty DIMS is a scalar.
fn parse_shape(s: &str) -> Result<Vec<(String, Vec<usize>)>> {
    let mut entries: Vec<String> = Vec::new();
    for token in s.split(',') {
        match entries.last_mut() {
            Some(last) if !token.contains(':') => {
                last.push(',');
                last.push_str(token);
            }
            _ => entries.push(token.to_string()),
        }
    }
    entries
        .iter()
        .map(|entry| {
            let (name, dims) = entry
                .rsplit_once(':')
                .filter(|(name, _)| !name.is_empty())
                .ok_or_else(|| anyhow!("--shape {s}: expected NAME:DIMS[,NAME:DIMS...], e.g. input:1x3x224x224"))?;
            let dims = if dims.is_empty() {
                Vec::new()
            } else {
                dims.split(['x', ','])
                    .map(|d| d.trim().parse::<usize>().map_err(|_| anyhow!("--shape {s}: '{d}' is not a dimension")))
                    .collect::<Result<Vec<_>>>()?
            };
            Ok((name.to_string(), dims))
        })
        .collect()
}

/// The options `trtc build` asks for, checked: flags that only make sense
/// together are refused apart, with the flag to add.
impl TryFrom<&BuildArgs> for BuildOptions {
    type Error = anyhow::Error;

    fn try_from(a: &BuildArgs) -> Result<BuildOptions> {
        let mut opts = BuildOptions::default();
        for s in &a.shapes {
            opts.import.shapes.extend(parse_shape(s)?);
        }
        let (n_min, n_opt, n_max) = (a.min_shapes.len(), a.opt_shapes.len(), a.max_shapes.len());
        if n_min != n_opt || n_min != n_max {
            bail!(
                "--min-shapes, --opt-shapes and --max-shapes go together, once per profile: given {n_min}, {n_opt} and {n_max} times"
            );
        }
        for (k, ((min, opt), max)) in a.min_shapes.iter().zip(&a.opt_shapes).zip(&a.max_shapes).enumerate() {
            let (min, opt, max) = (
                parse_shape_list("--min-shapes", min)?,
                parse_shape_list("--opt-shapes", opt)?,
                parse_shape_list("--max-shapes", max)?,
            );
            let profile = trtc::build::ShapeProfile::from_flags(&min, &opt, &max);
            let profile = if n_min > 1 { profile.with_context(|| format!("profile {k}"))? } else { profile? };
            if let Some((name, _)) = profile.inputs.iter().find(|(n, _)| opts.import.shapes.contains_key(n)) {
                bail!("input '{name}' has both --shape and a --min/--opt/--max-shapes range");
            }
            opts.profiles.push(profile);
        }
        trtc::build::check_profiles(&opts.profiles)?;
        for s in &a.input_values {
            let (name, file) = s.split_once(':').ok_or_else(|| anyhow!("--input-value {s}: expected NAME:FILE.npy"))?;
            let t = trtc::npz::read_npy_file(std::path::Path::new(file)).with_context(|| format!("--input-value {name}"))?;
            opts.import.input_values.insert(name.to_string(), t);
        }
        opts.target = match a.target.parse::<trtc::cuda::kernel_table::TargetSpec>()? {
            TargetSpec::Cpu => trtc_runtime::Target::Cpu,
            TargetSpec::Sm(sm) => trtc_runtime::Target::Cuda { sm, gpu_name: None },
            TargetSpec::Cuda => {
                let gpu = trtc::cuda::present_gpu()
                    .context("--target cuda compiles for the GPU of this machine (use --target sm_XX to build for another)")?;
                trtc_runtime::Target::Cuda { sm: gpu.sm, gpu_name: Some(gpu.name) }
            }
        };
        opts.lower.reuse_buffers = !a.no_buffer_reuse;
        if matches!(opts.target, trtc_runtime::Target::Cuda { .. }) {
            opts.tuning = trtc::cuda::TuningOptions {
                opt_level: a.opt_level,
                timing_cache: a.timing_cache.clone(),
                error_on_cache_miss: a.error_on_cache_miss,
            };
        } else if a.opt_level.is_some() || a.timing_cache.is_some() || a.error_on_cache_miss {
            bail!("--opt-level, --timing-cache and --error-on-cache-miss tune GPU kernels: give --target cuda or sm_XX");
        }
        opts.passes.disabled = a.disable_passes.clone();
        opts.precision.fp16 = a.fp16;
        opts.precision.int8 = a.int8;
        opts.precision.fp8 = a.fp8;
        for p in &a.layer_precisions {
            opts.precision.layer_precisions.push(trtc::precision::PrecisionConfig::parse_pin(p)?);
        }
        if a.int8 || a.fp8 {
            opts.int8 = a.calib.options(a.fp8)?;
        } else if a.calib.calib_cache.is_some() {
            bail!("--calib-cache needs --int8 or --fp8");
        } else if a.calib.calib.is_some() || a.calib.calib_shapes.is_some() {
            // FP16 observes tensor ranges on the calibration data, or on
            // random batches of --calib-shapes.
            if !a.fp16 {
                let flag = if a.calib.calib.is_some() { "--calib" } else { "--calib-shapes" };
                bail!("{flag} needs --int8, --fp8 or --fp16");
            }
            opts.int8 = a.calib.options(false)?;
        } else if a.calib.calibrator.is_some() {
            bail!("--calibrator needs --int8 or --fp8");
        }
        if (a.per_layer || a.accuracy_json.is_some()) && !a.accuracy_report {
            bail!("--per-layer and --accuracy-json go with --accuracy-report");
        }
        if a.accuracy_data.is_some() && !a.accuracy_report && a.accuracy_target.is_none() {
            bail!("--accuracy-data goes with --accuracy-report or --accuracy-target");
        }
        if a.accuracy_target.is_some() && !a.fp16 && !a.int8 && !a.fp8 {
            bail!("--accuracy-target needs reduced precision to trade: give --fp16, --int8 or --fp8");
        }
        Ok(opts)
    }
}

fn cmd_build(a: BuildArgs) -> Result<()> {
    let opts = BuildOptions::try_from(&a)?;
    let start = std::time::Instant::now();
    let imported = build::import_reporting(&build::ModelSource::File(a.model.clone()), &opts)?;
    if let Some(why) = &imported.sizes_at_run_time {
        eprintln!("note: the model's sizes are computed at run time from each run's input shapes ({why})");
    }
    let graph = imported.graph;
    if let Some(dir) = &a.dump_graph {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        trtc_runtime::file::write(&dir.join("imported.dot"), graph.to_dot().as_bytes())?;
    }
    let built = match a.accuracy_target {
        None => build::build_graph(graph, &opts)?,
        Some(target) => {
            let (batches, source) = accuracy_batches(&graph, a.accuracy_data.as_deref())?;
            let outcome = trtc::accuracy_target::build_to_target(graph, &opts, target, &batches)?;
            let what = if outcome.met { "met" } else { "NOT met (every reduced-precision layer tried)" };
            eprintln!(
                "accuracy target {target} {what}: {:.8} on {} batches {source}; {} layers kept in higher precision ({} builds)",
                outcome.achieved,
                batches.len(),
                outcome.pins.len(),
                outcome.rounds
            );
            if !outcome.pins.is_empty() {
                eprintln!("  reuse with: {}", trtc::text::printable(&outcome.flags()));
            }
            outcome.built
        }
    };
    if let Some(dir) = &a.dump_graph {
        trtc_runtime::file::write(&dir.join("optimized.dot"), built.graph.to_dot().as_bytes())?;
    }
    print_build_report(&a, &built);
    trtc_runtime::file::write(&a.output, &built.engine).context("cannot write the engine")?;
    eprintln!(
        "built {} ({} layers, {} bytes) in {:.2} s",
        a.output.display(),
        built.graph.op_count(),
        built.engine.len(),
        start.elapsed().as_secs_f64()
    );
    if a.accuracy_report {
        if let Some(p) = &a.accuracy_json {
            trtc_runtime::file::check_writable(p)?;
        }
        let report = accuracy_report(&built, a.accuracy_data.as_deref(), a.per_layer)?;
        if let Some(p) = &a.accuracy_json {
            trtc_runtime::file::write(p, format!("{}\n", report.json()).as_bytes()).context("cannot write the accuracy JSON")?;
        }
    }
    Ok(())
}

/// What the build did, on stderr: calibration, precisions, kernels, and
/// with `-v` the passes and the optimized IR.
fn print_build_report(a: &BuildArgs, built: &build::Built) {
    let quant = if a.fp8 { "fp8" } else { "int8" };
    if let Some((cache, from_file)) = &built.calibration {
        match (from_file, &a.calib.calib_cache) {
            (true, Some(p)) => eprintln!("{quant}: {} scales from the calibration cache {}", cache.scales.len(), p.display()),
            (false, Some(p)) => eprintln!(
                "{quant}: calibrated {} tensors ({}), cache written to {}",
                cache.scales.len(),
                cache.calibrator,
                p.display()
            ),
            _ => eprintln!("{quant}: calibrated {} tensors ({})", cache.scales.len(), cache.calibrator),
        }
    }
    use trtc_runtime::ops::precision::Precision;
    if a.fp16
        || a.int8
        || a.fp8
        || !a.layer_precisions.is_empty()
        || built.precision.layers.contains_key(&Precision::Int8)
        || built.precision.layers.contains_key(&Precision::Fp8)
    {
        let counts: Vec<String> = built.precision.layers.iter().map(|(p, n)| format!("{n} {}", p.name())).collect();
        eprintln!("precision: {} layers", counts.join(", "));
        for (layer, why) in &built.precision.int8_fallbacks {
            eprintln!("  not {quant}: {layer}: {why}");
        }
        if let Some(source) = &built.precision.fp16_range_source {
            eprintln!("fp16: {source}");
        }
        for (layer, why) in &built.precision.fp16_range_fallbacks {
            eprintln!("  kept in fp32: {}: {why}", trtc::text::printable(layer));
        }
    }
    if let Some(k) = &built.kernels {
        eprintln!(
            "kernels: {} layers on the GPU, {} on the host; {} cubins ({} KiB) compiled in {:.2} s",
            k.device_layers,
            k.host_layers.len(),
            k.modules,
            k.cubin_bytes / 1024,
            k.compile_time.as_secs_f64()
        );
        // Every layer after one sized by the data runs on the host too: those
        // are counted, the others listed (the first few; `trtc inspect` shows
        // every layer).
        const LISTED: usize = 12;
        let (after, others): (Vec<_>, Vec<_>) = k.host_layers.iter().partition(|(_, why)| why.ends_with("is sized by the data"));
        for (layer, why) in others.iter().take(LISTED) {
            eprintln!("  on the host: {layer}: {why}");
        }
        if others.len() > LISTED {
            eprintln!("  on the host: {} more layers (trtc inspect lists them)", others.len() - LISTED);
        }
        if !after.is_empty() {
            eprintln!("  on the host: {} layers whose inputs are sized by the data", after.len());
        }
        if after.len() > k.device_layers {
            eprintln!(
                "warning: most layers run on the host: their sizes depend on the data (a detector's kept boxes), or on sizes \
                 the model computes from input shapes at run time (then an engine per shape, --shape, runs them on the GPU)"
            );
        }
        for (tactic, bytes) in &k.spills {
            eprintln!("  warning: kernel {tactic} spills {bytes} bytes of registers");
        }
        if let Some(t) = k.tuning_time {
            eprint!("{}", k.tuning_summary);
            eprintln!("tactic selection took {:.2} s", t.as_secs_f64());
        }
        for w in &k.warnings {
            eprintln!("{w}");
        }
    }
    if a.verbose {
        eprintln!("imported: {} nodes", built.imported_nodes);
        for s in &built.pass_stats {
            eprintln!(
                "  pass {:<18} {:5} rewrites  {:8.2} ms  -> {} nodes",
                s.name,
                s.rewrites,
                s.time.as_secs_f64() * 1e3,
                s.nodes_after
            );
        }
        eprint!("{}", built.graph.dump());
    }
}

/// Held-out batches for the accuracy report and target: `--accuracy-data`
/// when given, else 4 batches of random inputs; and what they are, for the
/// report.
fn accuracy_batches(
    graph: &trtc::ir::Graph,
    data: Option<&std::path::Path>,
) -> Result<(Vec<trtc::precision::calib::Batch>, String)> {
    let inputs = trtc::precision::calib::graph_inputs(graph);
    Ok(match data {
        Some(dir) => (trtc::precision::calib::load_batches(dir, &inputs, None, false)?, format!("from {}", dir.display())),
        None => {
            let b = (0..4u64)
                .map(|i| {
                    inputs.iter().map(|(n, ty)| Ok((n.clone(), trtc::random::tensor(ty, 1000 + i)?))).collect::<Result<Vec<_>>>()
                })
                .collect::<Result<Vec<_>>>()?;
            (b, "of random inputs (give --accuracy-data DIR for real data)".to_string())
        }
    })
}

fn accuracy_report(
    built: &build::Built,
    data: Option<&std::path::Path>,
    per_layer: bool,
) -> Result<trtc::accuracy::AccuracyReport> {
    let reference = trtc_runtime::Engine::from_bytes(&build::engine_of(&built.reference, Default::default(), vec![])?)?;
    let engine = trtc_runtime::Engine::from_bytes(&built.engine)?;
    let (batches, source) = accuracy_batches(&built.reference, data)?;
    let report = trtc::accuracy::evaluate(&reference, &engine, &batches, per_layer)?;
    println!("accuracy against the FP32 engine, {} batches {source}:", report.batches);
    print!("{}", report.text(if per_layer { usize::MAX } else { 0 }));
    Ok(report)
}

fn cmd_calibrate(a: CalibrateArgs) -> Result<()> {
    let mut import = trtc::frontend::onnx::ImportOptions::default();
    for s in &a.shapes {
        import.shapes.extend(parse_shape(s)?);
    }
    let opts = a.calib.options(false)?;
    if opts.calib.calibrator == trtc::precision::calib::Calibrator::Auto {
        bail!("calibrate --calibrator auto: auto chooses per layer while building; run trtc build --int8 (or --fp8) --calibrator auto --calib DIR --calib-cache FILE");
    }
    let Some(dir) = opts.calib_dir.as_deref() else { bail!("calibrate needs --calib DIR") };
    let mut graph = trtc::frontend::onnx::import_file(&a.model, &import)?;
    trtc::passes::optimize(&mut graph, &Default::default())?;
    let start = std::time::Instant::now();
    let batches =
        trtc::precision::calib::load_batches(dir, &trtc::precision::calib::graph_inputs(&graph), opts.calib.max_batches, false)?;
    let cache = trtc::build::calibrate(&graph, &batches, &opts.calib)?;
    trtc::precision::calib::write_cache(&a.output, &cache)?;
    eprintln!(
        "calibrated {} tensors on {} batches ({}) in {:.2} s; wrote {}",
        cache.scales.len(),
        batches.len(),
        cache.calibrator,
        start.elapsed().as_secs_f64(),
        a.output.display()
    );
    Ok(())
}

/// The `--device` flag of `run` and `bench`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum DeviceFlag {
    Auto,
    Cpu,
    Cuda,
}

/// Where `--device` runs an engine.
enum Device<'e> {
    Cpu,
    Cuda(trtc_runtime::executor::cuda::CudaEngine<'e>),
}

/// Resolves `--device auto|cpu|cuda`. `auto` takes the GPU when the engine
/// carries kernels for it and it is present, and says why not otherwise.
fn device(engine: &trtc_runtime::Engine, wanted: DeviceFlag) -> Result<Device<'_>> {
    match wanted {
        DeviceFlag::Cpu => Ok(Device::Cpu),
        DeviceFlag::Cuda => Ok(Device::Cuda(trtc::cuda::load(engine, 0)?)),
        DeviceFlag::Auto => {
            if engine.kernels().is_none() {
                return Ok(Device::Cpu);
            }
            match trtc::cuda::load(engine, 0) {
                Ok(gpu) => Ok(Device::Cuda(gpu)),
                Err(e) => {
                    eprintln!("running on the cpu: {e}");
                    Ok(Device::Cpu)
                }
            }
        }
    }
}

fn cmd_run(a: RunArgs) -> Result<()> {
    let engine = trtc_runtime::Engine::load(&a.engine)?;
    let device = device(&engine, a.device)?;
    if let Some(p) = &a.save_outputs {
        // Before running: a FIFO or a device there is an error now, not
        // after the work.
        trtc_runtime::file::check_writable(p)?;
        for b in engine.outputs() {
            trtc::npz::check_member_name(&b.name)?;
        }
    }
    let inputs: Vec<(String, trtc_runtime::Tensor)> = match &a.inputs {
        Some(p) => read_inputs(p, &engine)?,
        None => random_inputs(&a.shapes.bindings(&engine)?, a.seed)?,
    };
    let refs: Vec<(&str, &trtc_runtime::Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let start = std::time::Instant::now();
    let (outputs, on) = match &device {
        Device::Cpu => (a.cpu.context(&engine)?.run(&refs)?, "cpu".to_string()),
        Device::Cuda(gpu) => (gpu.create_context()?.run(&refs)?, gpu.gpu_name().to_string()),
    };
    let elapsed = start.elapsed();
    for (name, t) in &outputs {
        let v = t.to_f64_vec();
        let preview: Vec<String> = v.iter().take(6).map(|x| format!("{x:.5}")).collect();
        println!(
            "{}: {} [{}{}]",
            trtc::text::printable(name),
            t.ty(),
            preview.join(", "),
            if v.len() > 6 { ", ..." } else { "" }
        );
    }
    eprintln!("ran on {on} in {:.2} ms (first run, set-up included)", elapsed.as_secs_f64() * 1e3);
    if let Some(p) = &a.save_outputs {
        trtc::npz::write_npz(p, &outputs)?;
    }
    Ok(())
}

/// Reads `--inputs`, refusing an array that is not one of the engine's
/// inputs, or not of its binding's type, before inflating its data.
/// numpy has no bf16, 8-bit floats or 4-bit integers: inputs of those types
/// are given as the words that carry their bits (`npz::as_binding_type`).
/// The engine's input bindings at the shapes random inputs take: the
/// profile's opt shapes (as trtexec does), else the one shape of each.
fn opt_bindings(engine: &trtc_runtime::Engine) -> Vec<trtc_runtime::BindingInfo> {
    let mut bindings = engine.inputs().to_vec();
    if let Some(profile) = engine.profiles().first() {
        for b in &mut bindings {
            if let Some(r) = profile.inputs.iter().find(|r| r.name == b.name) {
                b.ty.shape = r.opt.clone();
            }
        }
    }
    bindings
}

fn read_inputs(path: &std::path::Path, engine: &trtc_runtime::Engine) -> Result<Vec<(String, trtc_runtime::Tensor)>> {
    let bindings = engine.inputs();
    // With profiles, any shape inside one: the executor checks it.
    let shapes_vary = !engine.profiles().is_empty();
    let arrays = trtc::npz::read_npz_with(path, &mut |name: &str, ty: &trtc_runtime::TensorType| -> Result<()> {
        let Some(b) = bindings.iter().find(|b| b.name == name) else {
            let names: Vec<&str> = bindings.iter().map(|b| b.name.as_str()).collect();
            bail!("unknown input '{name}'; the engine's inputs are {names:?}");
        };
        let shape_ok =
            b.ty.shape == ty.shape || (shapes_vary && engine.profiles().iter().any(|p| p.admits(name, &ty.shape).is_ok()));
        let want = engine.profiles().first().and_then(|p| p.describe(name, b.ty.dtype)).unwrap_or_else(|| b.ty.to_string());
        let as_words = shape_ok && b.ty.dtype.numpy_storage() == ty.dtype;
        let same = shape_ok && b.ty.dtype == ty.dtype;
        if !same && !as_words {
            let words = b.ty.dtype.numpy_storage();
            let hint = if words != b.ty.dtype { format!(" (numpy carries {} as {words})", b.ty.dtype) } else { String::new() };
            bail!("input '{name}' must be {want}{hint}, got {ty}");
        }
        Ok(())
    })?;
    arrays
        .into_iter()
        .map(|(name, t)| {
            let want = bindings.iter().find(|b| b.name == name).map_or(t.dtype(), |b| b.ty.dtype);
            let t = trtc::npz::as_binding_type(t, want).with_context(|| format!("input '{name}'"))?;
            Ok((name, t))
        })
        .collect()
}

/// Random inputs for every binding, refused up front when they would not
/// fit in memory (a hostile engine may declare billions of elements).
fn random_inputs(bindings: &[trtc_runtime::BindingInfo], seed: u64) -> Result<Vec<(String, trtc_runtime::Tensor)>> {
    let mut total = 0u64;
    for b in bindings {
        let bytes = b.ty.checked_bytes().ok_or_else(|| anyhow!("input '{}' of shape {} is too large", b.name, b.ty))?;
        total = total.saturating_add(bytes as u64);
    }
    trtc::host::check_allocation(total, "random inputs (give --inputs)")?;
    bindings.iter().map(|b| Ok((b.name.clone(), trtc::random::tensor(&b.ty, seed)?))).collect()
}

/// `trtc serve`: replaces this process by `trtc-serve` from the same
/// folder, so that signals (SIGTERM for a graceful stop) reach the server
/// itself. The compiler does not link the server: it depends on the runtime,
/// never the other way round.
fn cmd_serve(a: ServeArgs) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let me = std::env::current_exe().context("cannot find the trtc executable")?;
    let server = me.with_file_name("trtc-serve");
    if !server.is_file() {
        bail!("trtc serve needs {} (build it with `cargo build -p trtc-server`, or install it beside trtc)", server.display());
    }
    let e = std::process::Command::new(&server).args(&a.args).exec();
    Err(anyhow!("cannot run {}: {e}", server.display()))
}

fn cmd_inspect(a: InspectArgs) -> Result<()> {
    if a.version_only {
        let bytes = trtc_runtime::file::read(&a.engine).context("cannot read the engine")?;
        let (format, trtc_version) = trtc_runtime::engine::peek_version(&bytes)?;
        println!("engine format {format}, built by trtc {trtc_version}");
        return Ok(());
    }
    let engine = trtc_runtime::Engine::load(&a.engine)?;
    if a.json {
        println!("{}", inspect::json(&engine));
    } else {
        print!("{}", inspect::text(&engine));
    }
    Ok(())
}

fn cmd_compare(a: CompareArgs) -> Result<()> {
    let diffs = compare_files(&a.ours, &a.reference)?;
    let mut worst = 0f64;
    for d in &diffs {
        println!(
            "{}: max abs err {:.3e}, max err / max |ref| {:.3e}, cosine {:.6}{}",
            d.name,
            d.max_abs,
            d.max_rel_to_scale,
            d.cosine,
            if d.shape_ok { "" } else { " (SHAPE MISMATCH)" }
        );
        worst = if d.shape_ok { worst.max(d.max_rel_to_scale) } else { f64::INFINITY };
    }
    if worst.is_nan() || worst > a.tolerance {
        bail!("outputs differ by {worst:.3e} relative to their scale, above the tolerance {:.1e}", a.tolerance);
    }
    println!("outputs match (tolerance {:.1e})", a.tolerance);
    Ok(())
}

/// Compares two npz files array by array. Headers are compared first: a
/// pair whose shapes differ is reported without inflating either, and
/// every array read counts against the memory available.
fn compare_files(ours: &std::path::Path, reference: &std::path::Path) -> Result<Vec<trtc::compare::OutputDiff>> {
    let mut ours = trtc::npz::Npz::open(ours)?;
    let mut reference = trtc::npz::Npz::open(reference)?;
    let mut budget = trtc::npz::Budget::available_memory();
    let names: Vec<String> = reference.names().map(str::to_string).collect();
    let mut diffs = Vec::with_capacity(names.len());
    for name in names {
        if !ours.names().any(|n| n == name) {
            bail!("output '{name}' is missing");
        }
        let (o, r) = (ours.peek(&name)?, reference.peek(&name)?);
        if o.shape != r.shape {
            let inf = f64::INFINITY;
            diffs.push(trtc::compare::OutputDiff {
                name,
                max_abs: inf,
                max_rel_to_scale: inf,
                cosine: f64::NAN,
                shape_ok: false,
            });
            continue;
        }
        let (o, r) = (ours.read(&name, &mut budget)?, reference.read(&name, &mut budget)?);
        diffs.push(trtc::compare::diff(&name, &o, &r));
    }
    Ok(diffs)
}

fn cmd_bench(a: BenchArgs) -> Result<()> {
    let deadline = match a.duration {
        None => None,
        Some(d) => {
            if !(d.is_finite() && d >= 0.0) {
                bail!("--duration {d}: expected a number of seconds, at least 0");
            }
            let end = std::time::Duration::try_from_secs_f64(d).ok().and_then(|d| std::time::Instant::now().checked_add(d));
            Some(end.ok_or_else(|| anyhow!("--duration {d:e}: too long"))?)
        }
    };
    let engine = trtc_runtime::Engine::load(&a.engine)?;
    let device = device(&engine, a.device)?;
    if a.profile && !matches!(device, Device::Cpu) {
        bail!("--profile times the CPU executor's layers; add --device cpu");
    }
    let inputs: Vec<(String, trtc_runtime::Tensor)> = match &a.inputs {
        Some(p) => read_inputs(p, &engine)?,
        None => random_inputs(&a.shapes.bindings(&engine)?, 0)?,
    };
    let refs: Vec<(&str, &trtc_runtime::Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let more = |n: usize| {
        (n as u64) < a.iterations || (n < MAX_ITERATIONS as usize && deadline.is_some_and(|d| std::time::Instant::now() < d))
    };
    // End to end (host inputs in, host outputs out), then on the GPU the
    // compute alone (enqueues timed with CUDA events, no copies).
    let mut ms = Vec::with_capacity(a.iterations.min(1 << 16) as usize);
    let mut gpu_ms = Vec::new();
    // Warm-up, then timed runs until --iterations and --duration are met.
    let mut timed = |warmup: u64, run: &mut dyn FnMut() -> Result<()>| -> Result<()> {
        for _ in 0..warmup {
            run()?;
        }
        while more(ms.len()) {
            let t = std::time::Instant::now();
            run()?;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        Ok(())
    };
    let mut profile = None;
    let (name, graph) = match &device {
        Device::Cpu => {
            let mut ctx = a.cpu.context(&engine)?;
            timed(a.warmup, &mut || ctx.run(&refs).map(drop).map_err(Into::into))?;
            if a.profile {
                profile = Some(profile_layers(&mut ctx, &refs, a.iterations)?);
            }
            let threads = ctx.threads();
            let math = if a.cpu.exact { "exact" } else { "fast" };
            (format!("cpu ({math} f32, {threads} thread{})", if threads == 1 { "" } else { "s" }), false)
        }
        Device::Cuda(gpu) => {
            let mut ctx = gpu.create_context()?;
            ctx.set_cuda_graph(!a.no_cuda_graph);
            // At least one warm-up run: the first run captures the graph.
            timed(a.warmup.max(1), &mut || ctx.run(&refs).map(drop).map_err(Into::into))?;
            while gpu_ms.len() < ms.len() {
                gpu_ms.push(ctx.time_enqueues(1)? as f64);
            }
            (format!("{} (sm_{}, driver {})", gpu.gpu_name(), gpu.device().sm, gpu.driver_version()), ctx.cuda_graph())
        }
    };
    let s = trtc::stats::Latency::from_ms(&ms);
    // The batch of the inputs timed (an engine with profiles runs any).
    let first = engine.inputs().first().map(|b| b.name.as_str());
    let batch = inputs.iter().find(|(n, _)| Some(n.as_str()) == first).and_then(|(_, t)| t.shape().first().copied()).unwrap_or(1);
    let compute = (!gpu_ms.is_empty()).then(|| trtc::stats::Latency::from_ms(&gpu_ms));
    if a.json {
        /// `trtc bench --json`: one object, end-to-end latency at the top level.
        #[derive(serde::Serialize)]
        struct BenchReport<'a> {
            device: &'a str,
            cuda_graph: bool,
            batch: usize,
            iterations: usize,
            #[serde(flatten)]
            latency: trtc::stats::Latency,
            throughput_per_s: f64,
            gpu_compute: Option<trtc::stats::Latency>,
            #[serde(skip_serializing_if = "Option::is_none")]
            profile: Option<&'a [LayerTime]>,
        }
        let report = BenchReport {
            device: &name,
            cuda_graph: graph,
            batch,
            iterations: ms.len(),
            latency: s,
            throughput_per_s: batch as f64 * 1e3 / s.median,
            gpu_compute: compute,
            profile: profile.as_deref(),
        };
        println!("{}", serde_json::to_string(&report).expect("the report serializes"));
    } else {
        println!("device: {name}, {} iterations after {} warm-up{}", ms.len(), a.warmup, if graph { ", CUDA graph" } else { "" });
        println!(
            "end-to-end latency ms (host copies included): min {:.3}  median {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}",
            s.min, s.median, s.p90, s.p99, s.max
        );
        if let Some(c) = compute {
            println!(
                "GPU compute ms (CUDA events, no copies):      min {:.3}  median {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}",
                c.min, c.median, c.p90, c.p99, c.max
            );
        }
        println!("throughput: {:.2} inferences/s (batch {batch}, end to end)", batch as f64 * 1e3 / s.median);
        let packed = engine.packed_weights().bytes();
        if packed > 0 {
            println!("weights packed for the fast mode's kernels: {:.1} MiB", packed as f64 / (1u64 << 20) as f64);
        }
        if let Some(layers) = &profile {
            let total: f64 = layers.iter().map(|l| l.mean_ms).sum();
            println!("per-layer mean ms over {} further runs, slowest first (layers total {total:.3}):", a.iterations);
            for l in layers {
                let share = if total > 0.0 { 100.0 * l.mean_ms / total } else { 0.0 };
                println!(
                    "  {:>9.4}  {share:>5.1}%  {:<16} {}",
                    l.mean_ms,
                    trtc::text::printable(&l.op),
                    trtc::text::printable(&l.layer)
                );
            }
        }
    }
    Ok(())
}

/// One layer's mean time in `trtc bench --profile`.
#[derive(serde::Serialize)]
struct LayerTime {
    layer: String,
    op: String,
    mean_ms: f64,
}

/// Runs the engine `runs` times, timing each layer between the executor's
/// per-layer callbacks; slowest first.
fn profile_layers(
    ctx: &mut trtc_runtime::ExecutionContext<'_>,
    inputs: &[(&str, &trtc_runtime::Tensor)],
    runs: u64,
) -> Result<Vec<LayerTime>> {
    let plan = ctx.engine().plan();
    let mut total = vec![0f64; plan.layers.len()];
    for _ in 0..runs {
        let mut i = 0;
        let mut last = std::time::Instant::now();
        ctx.run_observed(inputs, |_, _| {
            let now = std::time::Instant::now();
            total[i] += (now - last).as_secs_f64() * 1e3;
            last = now;
            i += 1;
        })?;
    }
    let mut layers: Vec<LayerTime> = plan
        .layers
        .iter()
        .zip(&total)
        .map(|(l, t)| LayerTime { layer: l.name.clone(), op: l.op.name().to_string(), mean_ms: t / runs as f64 })
        .collect();
    layers.sort_by(|a, b| b.mean_ms.total_cmp(&a.mean_ms));
    Ok(layers)
}

/// Prints an error as one line on stderr (names from models and files
/// escaped, so none can forge a line or drive the terminal) and exits 1:
/// every error, command-line mistakes included, exits 1.
fn fail(msg: &str) -> ! {
    eprintln!("error: {}", trtc::text::printable(msg));
    std::process::exit(1);
}

/// Parses the command line; clap's multi-line usage errors become one line
/// (help and --version print as usual, exit 0).
fn parse_cli() -> Cli {
    match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion) => e.exit(),
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            std::process::exit(1);
        }
        Err(e) => {
            let text = e.render().to_string();
            let lines: Vec<&str> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information"))
                .map(|l| l.strip_prefix("error: ").unwrap_or(l))
                .collect();
            fail(&format!("{} (see trtc --help)", lines.join("; ")));
        }
    }
}

fn main() {
    // Errors are one line on stderr; a panic that escapes (a bug) is caught
    // below and reported the same way, without a trace.
    std::panic::set_hook(Box::new(|_| {}));
    let cli = parse_cli();
    let result = std::panic::catch_unwind(|| match cli.command {
        Command::Build(a) => cmd_build(*a),
        Command::Run(a) => cmd_run(a),
        Command::Inspect(a) => cmd_inspect(a),
        Command::Compare(a) => cmd_compare(a),
        Command::Bench(a) => cmd_bench(a),
        Command::Calibrate(a) => cmd_calibrate(a),
        Command::Serve(a) => cmd_serve(a),
        Command::GpuCheck(a) => std::process::exit(trtc::gpu_check::main(&trtc::gpu_check::GpuCheckOptions {
            filter: a.filter,
            no_models: a.no_models,
            list: a.list,
            conformance: a.conformance,
            json: a.json,
            opt_level: a.opt_level,
            shard: a.shard,
        })),
    })
    .unwrap_or_else(|e| {
        let msg = trtc::panic_message(e.as_ref());
        // Whoever read stdout stopped (`trtc gpu-check --list | head`):
        // exit quietly with the status a shell gives a SIGPIPE'd command.
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        Err(anyhow!("internal error: {msg} (please report it)"))
    });
    if let Err(e) = result {
        // One line: every cause, outermost first.
        let msg: Vec<String> = e.chain().map(|c| c.to_string()).collect();
        fail(&msg.join(": "));
    }
}
