//! The `trtc` command line. See `trtc --help` and design.md §2.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use trtc::build::{self, BuildOptions};
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
    Build(BuildArgs),
    /// Runs an engine on inputs from an .npz file (or random inputs).
    Run(RunArgs),
    /// Prints an engine's header, bindings, layers and memory without running it.
    Inspect(InspectArgs),
    /// Compares two .npz files of outputs (ours, then the reference).
    Compare(CompareArgs),
    /// Measures an engine's latency on random inputs (trtexec-style).
    Bench(BenchArgs),
}

#[derive(clap::Args)]
struct BenchArgs {
    engine: PathBuf,
    /// Timed runs.
    #[arg(long, default_value_t = 20)]
    iterations: usize,
    /// Untimed runs first.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// auto or cpu.
    #[arg(long, default_value = "auto")]
    device: String,
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct CompareArgs {
    ours: PathBuf,
    reference: PathBuf,
    /// Fail when max |ours - ref| / max |ref| exceeds this on any output.
    #[arg(long, default_value_t = 1e-4)]
    tolerance: f64,
}

#[derive(clap::Args)]
struct BuildArgs {
    /// The ONNX model.
    model: PathBuf,
    /// Where to write the engine.
    #[arg(short, long)]
    output: PathBuf,
    /// Input shape, resolving symbolic dimensions: NAME:1x3x224x224 (repeatable).
    #[arg(long = "shape", value_name = "NAME:DIMS")]
    shapes: Vec<String>,
    /// Fix an input's value at build time (a shape tensor): NAME:FILE.npy (repeatable).
    #[arg(long = "input-value", value_name = "NAME:FILE")]
    input_values: Vec<String>,
    /// Target: cpu (default).
    #[arg(long, default_value = "cpu")]
    target: String,
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
}

#[derive(clap::Args)]
struct RunArgs {
    engine: PathBuf,
    /// Inputs, keyed by ONNX input name. Random inputs when absent.
    #[arg(long)]
    inputs: Option<PathBuf>,
    /// Write the outputs, keyed by ONNX output name.
    #[arg(long)]
    save_outputs: Option<PathBuf>,
    /// auto, cpu or cuda.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
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

fn parse_shape(s: &str) -> Result<(String, Vec<usize>)> {
    let (name, dims) = s.rsplit_once(':').ok_or_else(|| anyhow!("--shape {s}: expected NAME:DIMS, e.g. input:1x3x224x224"))?;
    let dims = if dims.is_empty() {
        Vec::new()
    } else {
        dims.split(['x', ','])
            .map(|d| d.trim().parse::<usize>().map_err(|_| anyhow!("--shape {s}: '{d}' is not a dimension")))
            .collect::<Result<Vec<_>>>()?
    };
    Ok((name.to_string(), dims))
}

fn cmd_build(a: BuildArgs) -> Result<()> {
    let mut opts = BuildOptions::default();
    for s in &a.shapes {
        let (name, dims) = parse_shape(s)?;
        opts.import.shapes.insert(name, dims);
    }
    for s in &a.input_values {
        let (name, file) = s.split_once(':').ok_or_else(|| anyhow!("--input-value {s}: expected NAME:FILE.npy"))?;
        let t = trtc::npz::read_npy_file(std::path::Path::new(file))?;
        opts.import.input_values.insert(name.to_string(), t);
    }
    match a.target.as_str() {
        "cpu" => {}
        t => bail!("--target {t}: only 'cpu' is available in this build"),
    }
    opts.lower.reuse_buffers = !a.no_buffer_reuse;
    // Record what changes the engine, not where files live, so that the same
    // model and flags give byte-identical engines wherever they are written.
    opts.flags = a.shapes.iter().map(|s| format!("--shape {s}")).collect();
    opts.flags.extend(a.input_values.iter().map(|s| format!("--input-value {}", s.split(':').next().unwrap_or(""))));
    opts.flags.extend(a.disable_passes.iter().map(|p| format!("--disable-pass {p}")));
    if a.no_buffer_reuse {
        opts.flags.push("--no-buffer-reuse".into());
    }
    opts.passes.disabled = a.disable_passes.clone();
    let start = std::time::Instant::now();
    let graph = trtc::frontend::onnx::import_file(&a.model, &opts.import)?;
    if let Some(dir) = &a.dump_graph {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(dir.join("imported.dot"), graph.to_dot())?;
    }
    let built = build::build_graph(graph, &opts)?;
    if let Some(dir) = &a.dump_graph {
        std::fs::write(dir.join("optimized.dot"), built.graph.to_dot())?;
    }
    if a.verbose {
        eprintln!("imported: {} nodes", built.imported_nodes);
        for s in &built.pass_stats {
            eprintln!("  pass {:<18} {:5} rewrites  {:8.2} ms  -> {} nodes", s.name, s.rewrites, s.time.as_secs_f64() * 1e3, s.nodes_after);
        }
        eprint!("{}", built.graph.dump());
    }
    std::fs::write(&a.output, &built.engine).with_context(|| format!("cannot write {}", a.output.display()))?;
    eprintln!(
        "built {} ({} layers, {} bytes) in {:.2} s",
        a.output.display(),
        built.graph.op_count(),
        built.engine.len(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn cmd_run(a: RunArgs) -> Result<()> {
    let engine = trtc_runtime::Engine::load(&a.engine)?;
    match a.device.as_str() {
        "auto" | "cpu" => {}
        "cuda" => bail!("--device cuda: this build of trtc has no CUDA executor yet; use --device cpu"),
        d => bail!("--device {d}: expected auto, cpu or cuda"),
    }
    let inputs: Vec<(String, trtc_runtime::Tensor)> = match &a.inputs {
        Some(p) => trtc::npz::read_npz(p)?,
        None => engine
            .inputs()
            .iter()
            .map(|b| Ok((b.name.clone(), trtc::random::tensor(&b.ty, a.seed)?)))
            .collect::<Result<_>>()?,
    };
    let refs: Vec<(&str, &trtc_runtime::Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut ctx = engine.create_context()?;
    let start = std::time::Instant::now();
    let outputs = ctx.run(&refs)?;
    let elapsed = start.elapsed();
    for (name, t) in &outputs {
        let v = t.to_f64_vec();
        let preview: Vec<String> = v.iter().take(6).map(|x| format!("{x:.5}")).collect();
        println!("{name}: {} [{}{}]", t.ty(), preview.join(", "), if v.len() > 6 { ", ..." } else { "" });
    }
    eprintln!("ran on cpu in {:.2} ms", elapsed.as_secs_f64() * 1e3);
    if let Some(p) = &a.save_outputs {
        trtc::npz::write_npz(p, &outputs)?;
    }
    Ok(())
}

fn cmd_inspect(a: InspectArgs) -> Result<()> {
    if a.version_only {
        let bytes = std::fs::read(&a.engine).with_context(|| format!("cannot read {}", a.engine.display()))?;
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
    let ours = trtc::npz::read_npz(&a.ours)?;
    let reference = trtc::npz::read_npz(&a.reference)?;
    let diffs = trtc::compare::diff_all(&ours, &reference)?;
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
    if worst > a.tolerance {
        bail!("outputs differ by {worst:.3e} relative to their scale, above the tolerance {:.1e}", a.tolerance);
    }
    println!("outputs match (tolerance {:.1e})", a.tolerance);
    Ok(())
}

fn cmd_bench(a: BenchArgs) -> Result<()> {
    match a.device.as_str() {
        "auto" | "cpu" => {}
        d => bail!("--device {d}: this build of trtc benchmarks the CPU executor only"),
    }
    if a.iterations == 0 {
        bail!("--iterations must be at least 1");
    }
    let engine = trtc_runtime::Engine::load(&a.engine)?;
    let inputs: Vec<(String, trtc_runtime::Tensor)> =
        engine.inputs().iter().map(|b| Ok((b.name.clone(), trtc::random::tensor(&b.ty, 0)?))).collect::<Result<_>>()?;
    let refs: Vec<(&str, &trtc_runtime::Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut ctx = engine.create_context()?;
    for _ in 0..a.warmup {
        ctx.run(&refs)?;
    }
    let mut ms = Vec::with_capacity(a.iterations);
    for _ in 0..a.iterations {
        let t = std::time::Instant::now();
        ctx.run(&refs)?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let s = trtc::stats::Latency::from_ms(&ms);
    let batch = engine.inputs().first().and_then(|b| b.ty.shape.first().copied()).unwrap_or(1);
    if a.json {
        println!(
            "{{\"device\":\"cpu\",\"iterations\":{},\"min_ms\":{:.4},\"median_ms\":{:.4},\"p90_ms\":{:.4},\"p99_ms\":{:.4},\"max_ms\":{:.4},\"throughput_per_s\":{:.2}}}",
            a.iterations, s.min, s.median, s.p90, s.p99, s.max, batch as f64 * 1e3 / s.median
        );
    } else {
        println!("device: cpu (reference executor), {} iterations after {} warm-up", a.iterations, a.warmup);
        println!("latency ms: min {:.3}  median {:.3}  p90 {:.3}  p99 {:.3}  max {:.3}", s.min, s.median, s.p90, s.p99, s.max);
        println!("throughput: {:.2} inferences/s (batch {batch})", batch as f64 * 1e3 / s.median);
    }
    Ok(())
}

fn main() {
    // Errors are one line on stderr; a panic that escapes (a bug) is caught
    // below and reported the same way, without a trace.
    std::panic::set_hook(Box::new(|_| {}));
    let cli = Cli::parse();
    let result = std::panic::catch_unwind(|| match cli.command {
        Command::Build(a) => cmd_build(a),
        Command::Run(a) => cmd_run(a),
        Command::Inspect(a) => cmd_inspect(a),
        Command::Compare(a) => cmd_compare(a),
        Command::Bench(a) => cmd_bench(a),
    })
    .unwrap_or_else(|e| {
        Err(anyhow!("internal error: {} (please report it)", trtc::panic_message(e.as_ref())))
    });
    if let Err(e) = result {
        // One line: every cause, outermost first.
        let msg: Vec<String> = e.chain().map(|c| c.to_string()).collect();
        eprintln!("error: {}", msg.join(": "));
        std::process::exit(1);
    }
}
