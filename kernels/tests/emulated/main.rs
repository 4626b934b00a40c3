//! The CUDA kernels compute what the CPU reference ops compute: small
//! synthetic layers of every kernel family (elementwise, cast, quantize,
//! fused pointwise; movement; reduce, softmax, normalizations, pools;
//! attention; GEMM and GEMV; convolutions), in f32, f16 (`HalfIo`), int8
//! (`Int8Linear`) and FP8 (`Fp8Linear`, on sm_90 and on sm_80's CUDA
//! cores) storage and integer types where the op takes them, run on
//! the CPU emulator of `kernels/emu/` (every CUDA thread a fiber; inline PTX
//! through the `TRTC_EMULATE` branches, tensor cores included; see its
//! README) and compared with `Op::eval_owned`.
//!
//! For each layer, every candidate runs (or, when there are many, the
//! heuristic choice and an even sample of the rest), twice: threads
//! scheduled in increasing, then decreasing order. The distinct kernel
//! sources are compiled with g++ into a few programs (cached in the target
//! directory by content hash), each candidate's launches run as one process
//! on deterministic random inputs (valid indices where an input is an index,
//! except in the cases that must `__trap()`), and each output is compared:
//! f32 within 1e-4 of max |reference| (3e-3 for TF32 tensor-core tactics),
//! f16 within 1e-2, integers and 8-bit floats exactly (Int8Linear and
//! requantizing Fp8Linear outputs within one quantization step or code,
//! where float rounding order may differ; a note says when that slack was
//! used). Deliberately wrong control kernels must be
//! caught. The test prints how many cases ran, passed, failed and were
//! skipped, with the reason of every skip; it fails on any mismatch, crash,
//! sanitizer report or compile error. `TRTC_EMU_FILTER=text` runs only the
//! layers whose name contains `text`; `TRTC_EMU_KEEP=1` keeps the generated
//! files.
//!
//! Needs g++ (C++20, UBSan) on the PATH; no GPU, no CUDA.
//!
//! This file is the harness; the cases are in `cases/`, one file per kernel
//! family (add a layer there, in its family's `*_cases` function).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use trtc_kernels::{candidates, Candidate, LayerIo, SmLimits, COMMON};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::elementwise::*;
use trtc_runtime::ops::fused::{
    Activation, Attention, Epilogue, Instr, Linear, LinearKind, Pointwise, PointwiseBinary, ScoreScale,
};
use trtc_runtime::ops::linalg::{Conv, ConvTranspose, DeformConv, Gemm, MatMul, NonMaxSuppression, Pool, PoolKind, RoiAlign};
use trtc_runtime::ops::movement::*;
use trtc_runtime::ops::precision::{Fp8Linear, Fp8Output, HalfIo, Int8Linear, Int8Output};
use trtc_runtime::ops::quant::{DequantizeLinear, QuantizeLinear};
use trtc_runtime::ops::reduce::*;
use trtc_runtime::ops::Op;
use trtc_runtime::{DType, Tensor, TensorType};

mod cases;
use cases::*;

// ---------------------------------------------------------------------------
// Cases.

/// How many candidates of a layer run.
#[derive(Clone, Copy, Debug)]
enum Pick {
    /// Every candidate.
    All,
    /// The heuristic choice and up to `n - 1` more, evenly spaced.
    Sample(usize),
}

/// One synthetic layer.
struct Case {
    name: String,
    family: &'static str,
    op: Op,
    inputs: Vec<Option<Tensor>>,
    pick: Pick,
    /// Integer outputs may differ by this much (quantized outputs whose float
    /// computation rounds in another order).
    int_slack: i64,
    /// An invalid index: the CPU reference fails, and the kernel must
    /// execute `__trap()` (the launch fails) rather than return a result.
    expect_trap: bool,
    /// The architecture whose candidates run (sm_80 unless the case needs a
    /// later one: FP8 tensor cores are sm_89 and newer).
    sm: u32,
}

/// Deterministic random numbers (a 64-bit LCG).
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    fn below(&mut self, n: u64) -> u64 {
        ((self.unit() * n as f64) as u64).min(n.saturating_sub(1))
    }
}

/// Builds the cases with one random stream.
struct Builder {
    rng: Rng,
    cases: Vec<Case>,
    /// The architecture of the cases added next.
    sm: u32,
}

fn f16_of(t: &Tensor) -> Tensor {
    let cast: Op = Cast::new(DType::F16).into();
    cast.eval_owned(&[Some(t)]).unwrap().remove(0)
}

fn cast_to(t: &Tensor, to: DType) -> Tensor {
    let cast: Op = Cast::new(to).into();
    cast.eval_owned(&[Some(t)]).unwrap().remove(0)
}

fn half(op: impl Into<Op>) -> Op {
    HalfIo::new(op.into()).into()
}

impl Builder {
    /// Uniform values in [lo, hi) of `dtype` (float types rounded from f32,
    /// integer types truncated).
    fn uniform(&mut self, dtype: DType, shape: &[usize], lo: f64, hi: f64) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|_| self.rng.range(lo, hi) as f32).collect();
        let t = Tensor::from_vec(shape.to_vec(), v).unwrap();
        match dtype {
            DType::F32 => t,
            DType::F16 => f16_of(&t),
            d => cast_to(&t, d),
        }
    }

    /// Values in [-2, 2) of `dtype`.
    fn data(&mut self, dtype: DType, shape: &[usize]) -> Tensor {
        self.uniform(dtype, shape, -2.0, 2.0)
    }

    /// Integer indices of `dtype` in [lo, hi).
    fn indices(&mut self, dtype: DType, shape: &[usize], lo: i64, hi: i64) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<i64> = (0..n).map(|_| lo + self.rng.below((hi - lo) as u64) as i64).collect();
        let t = Tensor::from_vec(shape.to_vec(), v).unwrap();
        if dtype == DType::I64 {
            t
        } else {
            cast_to(&t, dtype)
        }
    }

    fn add(&mut self, family: &'static str, name: impl Into<String>, op: impl Into<Op>, inputs: Vec<Option<Tensor>>, pick: Pick) {
        let sm = self.sm;
        self.cases.push(Case { name: name.into(), family, op: op.into(), inputs, pick, int_slack: 0, expect_trap: false, sm });
    }

    fn add_trap(&mut self, family: &'static str, name: impl Into<String>, op: impl Into<Op>, inputs: Vec<Option<Tensor>>) {
        self.cases.push(Case {
            name: name.into(),
            family,
            op: op.into(),
            inputs,
            pick: Pick::Sample(2),
            int_slack: 0,
            expect_trap: true,
            sm: self.sm,
        });
    }

    fn add_slack(
        &mut self,
        family: &'static str,
        name: impl Into<String>,
        op: impl Into<Op>,
        inputs: Vec<Option<Tensor>>,
        pick: Pick,
    ) {
        let sm = self.sm;
        self.cases.push(Case { name: name.into(), family, op: op.into(), inputs, pick, int_slack: 1, expect_trap: false, sm });
    }
}

fn cases() -> Vec<Case> {
    let mut b = Builder { rng: Rng(0x5eed_1234_abcd_0001), cases: Vec::new(), sm: 80 };
    elementwise_cases(&mut b);
    movement_cases(&mut b);
    reduce_cases(&mut b);
    attention_cases(&mut b);
    gemm_cases(&mut b);
    conv_cases(&mut b);
    recurrent_cases(&mut b);
    storage_cases(&mut b);
    edge_cases(&mut b);
    b.cases
}

/// Wraps a float op in HalfIo when `dt` is f16.
fn for_dtype(dt: DType, op: impl Into<Op>) -> Op {
    if dt == DType::F16 {
        half(op)
    } else {
        op.into()
    }
}

fn slice(axes: &[usize], starts: &[i64], ends: &[i64], steps: &[i64]) -> Slice {
    Slice { axes: axes.to_vec(), starts: starts.to_vec(), ends: ends.to_vec(), steps: steps.to_vec() }
}

fn resize(mode: ResizeMode, coord: CoordinateMode, nearest: NearestMode, scales: &[f64], sizes: &[usize]) -> Resize {
    Resize {
        mode,
        coordinate_mode: coord,
        nearest_mode: nearest,
        cubic_coeff_a: -0.75,
        exclude_outside: false,
        extrapolation_value: 0.0,
        antialias: false,
        scales: scales.to_vec(),
        sizes: sizes.to_vec(),
        roi: vec![],
    }
}

fn gemm(alpha: f32, beta: f32, trans_a: bool, trans_b: bool) -> Gemm {
    Gemm { alpha, beta, trans_a, trans_b }
}

fn linear(kind: LinearKind, bias: bool, residual: bool, activation: Option<Activation>) -> Linear {
    Linear { kind, bias, epilogue: Epilogue { residual, activation } }
}

// ---------------------------------------------------------------------------
// The emulator harness.

/// A layer's kernels for one candidate, ready to run.
struct Run {
    case: usize,
    tactic: String,
    /// A control that must fail.
    control: bool,
    /// (module index, launch) per launch.
    launches: Vec<(usize, trtc_kernels::KernelLaunch)>,
}

/// The outcome of one (layer, candidate).
enum Outcome {
    /// With what the emulator noted (on stderr), if anything.
    Pass(String),
    Fail(String),
    Skip(String),
}

/// A distinct kernel source, rewritten for the emulator.
struct Module {
    entry: String,
    /// The rewritten source, or why it cannot run on the emulator.
    code: Result<String, String>,
    /// The program (index into `programs`) and its entry index there.
    program: usize,
    slot: usize,
}

fn work_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("emu")
}

/// FNV-1a, for the program cache (stable across runs and Rust versions).
fn fnv(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for p in parts {
        for &b in *p {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Splits the compilable modules into programs of about `per` modules,
/// the modules one candidate launches always together. The split depends
/// on the modules' contents, not on their order, so that adding or changing
/// a case recompiles only the programs it touches (the cache is by text).
fn program_groups(modules: &[Module], runs: &[Run], per: usize) -> Vec<Vec<usize>> {
    fn find(parent: &mut [usize], x: usize) -> usize {
        let mut r = x;
        while parent[r] != r {
            r = parent[r];
        }
        parent[x] = r;
        r
    }
    let mut parent: Vec<usize> = (0..modules.len()).collect();
    let mut used = vec![false; modules.len()];
    for r in runs {
        let ms: Vec<usize> = r.launches.iter().map(|(m, _)| *m).filter(|&m| modules[m].code.is_ok()).collect();
        for &m in &ms {
            used[m] = true;
        }
        for w in ms.windows(2) {
            let (a, b) = (find(&mut parent, w[0]), find(&mut parent, w[1]));
            parent[a] = b;
        }
    }
    let hash: Vec<u64> = modules.iter().map(|m| fnv(&[m.code.as_deref().unwrap_or("").as_bytes()])).collect();
    let mut units: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for m in (0..modules.len()).filter(|&m| used[m]) {
        let root = find(&mut parent, m);
        units.entry(root).or_default().push(m);
    }
    let mut units: Vec<(u64, Vec<usize>)> = units
        .into_values()
        .map(|mut u| {
            u.sort_by_key(|&m| hash[m]);
            (hash[u[0]], u)
        })
        .collect();
    units.sort();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (key, unit) in units {
        let boundary = key % per.max(1) as u64 == 0;
        match groups.last_mut() {
            Some(g) if !boundary && g.len() + unit.len() <= 2 * per => g.extend(unit),
            _ => groups.push(unit),
        }
    }
    groups
}

/// One generated program: a few modules, compiled into one executable.
struct Program {
    exe: PathBuf,
    /// The compile error, if any.
    error: Option<String>,
}

fn program_text(modules: &[Module], members: &[usize]) -> String {
    let emu = trtc_kernels::emu::emu_dir();
    let mut s = format!("#include \"{}\"\n", emu.join("shim.h").display());
    for &m in members {
        let module = &modules[m];
        let code = module.code.as_ref().unwrap();
        writeln!(s, "namespace trtc_emu_m{m} {{\n#line 1 \"module{m}.cu\"\n{code}}}").unwrap();
        for name in trtc_kernels::emu::defined_macros(code) {
            writeln!(s, "#undef {name}").unwrap();
        }
        writeln!(
            s,
            "static void trtc_emu_run_m{m}(const trtc_emu::Arg* a, int n) {{ trtc_emu::invoke(trtc_emu_m{m}::{}, a, n); }}",
            module.entry
        )
        .unwrap();
    }
    s.push_str("const trtc_emu::Entry trtc_emu_entries[] = {\n");
    for &m in members {
        writeln!(s, "    {{\"module{m} {}\", trtc_emu_run_m{m}}},", modules[m].entry).unwrap();
    }
    writeln!(s, "}};\nconst int trtc_emu_entry_count = {};", members.len()).unwrap();
    writeln!(s, "#include \"{}\"", emu.join("driver.h").display()).unwrap();
    s
}

/// Compiles the program unless the cache has it.
fn compile(text: &str, dir: &Path) -> Result<PathBuf, String> {
    let shim = std::fs::read(trtc_kernels::emu::emu_dir().join("shim.h")).unwrap();
    let driver = std::fs::read(trtc_kernels::emu::emu_dir().join("driver.h")).unwrap();
    let flags = trtc_kernels::emu::CXX_FLAGS.join(" ");
    let hash = fnv(&[text.as_bytes(), &shim, &driver, flags.as_bytes()]);
    let exe = dir.join(format!("prog-{hash:016x}"));
    if exe.exists() {
        // Mark it used (the cache drops programs unused for a day).
        std::fs::File::options().append(true).open(&exe).and_then(|f| f.set_modified(std::time::SystemTime::now())).ok();
        return Ok(exe);
    }
    let src = dir.join(format!("prog-{hash:016x}.cpp"));
    std::fs::write(&src, text).unwrap();
    let tmp = dir.join(format!("prog-{hash:016x}.tmp{}", std::process::id()));
    let out = Command::new("g++")
        .args(trtc_kernels::emu::CXX_FLAGS)
        .arg("-o")
        .arg(&tmp)
        .arg(&src)
        .output()
        .map_err(|e| format!("cannot run g++: {e}"))?;
    if !out.status.success() {
        let log = String::from_utf8_lossy(&out.stderr);
        let head: Vec<&str> = log.lines().filter(|l| l.contains("error")).take(8).collect();
        return Err(format!("g++ failed ({}):\n{}", src.display(), head.join("\n")));
    }
    std::fs::rename(&tmp, &exe).unwrap();
    Ok(exe)
}

/// Removes what earlier runs left in the work directory and nobody used
/// for a day: programs of sources that changed since, the files of failed
/// cases.
fn clean_cache(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|a| a > Duration::from_secs(86400));
        if old {
            let p = e.path();
            if p.is_dir() {
                std::fs::remove_dir_all(&p).ok();
            } else {
                std::fs::remove_file(&p).ok();
            }
        }
    }
}

/// Runs `f` on every index below `n` with `workers` threads.
fn parallel<T: Send>(n: usize, workers: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    break;
                }
                let r = f(i);
                results.lock().unwrap()[i] = Some(r);
            });
        }
    });
    results.into_inner().unwrap().into_iter().map(|r| r.unwrap()).collect()
}

fn workers() -> usize {
    std::env::var("TRTC_EMU_JOBS").ok().and_then(|v| v.parse().ok()).unwrap_or(2)
}

/// Runs a process with a time limit; its stderr (an error on failure).
fn run_with_timeout(cmd: &mut Command, limit: Duration) -> Result<String, String> {
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().map_err(|e| format!("cannot start: {e}"))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut err = String::new();
                use std::io::Read;
                child.stderr.take().unwrap().read_to_string(&mut err).ok();
                return if status.success() { Ok(err.trim().to_string()) } else { Err(format!("{status}: {}", err.trim())) };
            }
            Ok(None) if start.elapsed() > limit => {
                child.kill().ok();
                child.wait().ok();
                return Err(format!("timed out after {limit:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("wait failed: {e}")),
        }
    }
}

/// Picks the candidates a case runs: indices into `cands`.
fn pick(pick: Pick, n: usize) -> Vec<usize> {
    match pick {
        Pick::All => (0..n).collect(),
        Pick::Sample(k) if n <= k => (0..n).collect(),
        Pick::Sample(k) => {
            let mut v: Vec<usize> = (0..k).map(|i| i * (n - 1) / (k - 1).max(1)).collect();
            v.dedup();
            v
        }
    }
}

/// Relative tolerance of float outputs.
fn tolerance(dtype: DType, tactic: &str) -> f64 {
    match dtype {
        DType::F16 | DType::BF16 => 1e-2,
        _ if tactic.contains("tf32") => 3e-3,
        _ => 1e-4,
    }
}

/// Compares one output; the first mismatch, described, or a note when
/// integers differ within the case's slack.
fn compare(want: &Tensor, got: &Tensor, tactic: &str, int_slack: i64) -> Result<Option<String>, String> {
    let shape = want.shape().to_vec();
    let coords = |mut i: usize| {
        let mut c = vec![0; shape.len()];
        for d in (0..shape.len()).rev() {
            c[d] = i % shape[d].max(1);
            i /= shape[d].max(1);
        }
        c
    };
    if want.dtype().is_float8() {
        // Bits must agree exactly (signed zeros and NaN patterns included);
        // a requantizing FP8 layer, whose f32 accumulation rounds in another
        // order than the CPU's f64 sum, may land on the neighbouring code.
        let (w, g) = (want.bytes(), got.bytes());
        let code = |b: u8| if b & 0x80 != 0 { -i64::from(b & 0x7f) } else { i64::from(b) };
        let near = |i: usize| g.get(i).is_some_and(|&g| (code(w[i]) - code(g)).abs() <= int_slack);
        if int_slack > 0 && (0..w.len()).all(near) {
            let differ = (0..w.len()).filter(|&i| w.get(i) != g.get(i)).count();
            if differ > 0 {
                return Ok(Some(format!("{differ} of {} FP8 outputs one code from the reference (not equal)", w.len())));
            }
        } else if let Some(i) = (0..w.len()).find(|&i| w.get(i) != g.get(i)) {
            let bad = (0..w.len()).filter(|&i| w.get(i) != g.get(i)).count();
            return Err(format!(
                "{bad} of {} elements differ; first at {i} {:?}: expected {:#04x}, got {}",
                w.len(),
                coords(i),
                w[i],
                g.get(i).map_or("nothing".into(), |v| format!("{v:#04x}"))
            ));
        }
    } else if want.dtype().is_float() {
        let (w, g) = (want.to_f64_vec(), got.to_f64_vec());
        let scale = w.iter().filter(|v| v.is_finite()).fold(0.0f64, |m, v| m.max(v.abs()));
        let tol = tolerance(want.dtype(), tactic) * if scale > 0.0 { scale } else { 1.0 };
        let bad: Vec<usize> = (0..w.len())
            .filter(|&i| {
                let (w, g) = (w[i], g[i]);
                !(w.is_nan() && g.is_nan() || w.is_infinite() && w == g || w.is_finite() && g.is_finite() && (w - g).abs() <= tol)
            })
            .collect();
        if let Some(&i) = bad.first() {
            return Err(format!(
                "{} of {} elements differ; first at {i} {:?}: expected {}, got {} (tolerance {tol:.3e})",
                bad.len(),
                w.len(),
                coords(i),
                w[i],
                g[i]
            ));
        }
    } else {
        let ints = |t: &Tensor| -> Vec<i64> {
            if t.dtype() == DType::Bool {
                t.bytes().iter().map(|&b| b as i64).collect()
            } else {
                t.to_i64_vec().unwrap()
            }
        };
        let (w, g) = (ints(want), ints(got));
        let bad: Vec<usize> = (0..w.len()).filter(|&i| (w[i] - g[i]).abs() > int_slack).collect();
        if let Some(&i) = bad.first() {
            return Err(format!(
                "{} of {} elements differ; first at {i} {:?}: expected {}, got {}",
                bad.len(),
                w.len(),
                coords(i),
                w[i],
                g[i]
            ));
        }
        let near = (0..w.len()).filter(|&i| w[i] != g[i]).count();
        if near > 0 {
            return Ok(Some(format!("{near} of {} integer outputs within {int_slack} of the reference (not equal)", w.len())));
        }
    }
    Ok(None)
}

/// A launch argument as the job file spells it.
fn job_arg(a: &KernelArg, inputs: &[Option<Tensor>]) -> String {
    match *a {
        KernelArg::Input(k) => match inputs.get(k as usize) {
            Some(Some(_)) => format!("b{k}"),
            _ => "n".into(),
        },
        KernelArg::Output(k) => format!("b{}", 32 + k),
        KernelArg::I32(v) => format!("i4:{v}"),
        KernelArg::I64(v) => format!("i8:{v}"),
        KernelArg::F32(v) => format!("f:{:08x}", v.to_bits()),
        KernelArg::Counts(_) => format!("b{COUNTERS}"),
    }
}

/// The output types a case's layer is planned with: the reference's, or,
/// for a layer whose output size depends on the data, the room the engine
/// plans for it (`infer`).
fn planned_outputs(case: &Case, reference: &[Tensor]) -> Vec<TensorType> {
    if !case.op.as_impl().data_dependent() {
        return reference.iter().map(|t| t.ty().clone()).collect();
    }
    let types: Vec<Option<&TensorType>> = case.inputs.iter().map(|t| t.as_ref().map(|t| t.ty())).collect();
    case.op.infer(&types).unwrap()
}

/// The job's buffer of a layer's counters (`KernelArg::Counts`).
const COUNTERS: usize = 63;

/// Runs one candidate of a case; `expected` are the reference outputs.
fn run_one(case: &Case, run: &Run, expected: &[Tensor], modules: &[Module], programs: &[Program], dir: &Path) -> Outcome {
    for (m, _) in &run.launches {
        if let Err(why) = &modules[*m].code {
            return Outcome::Skip(why.clone());
        }
    }
    let mut exe: Option<&Path> = None;
    for (m, _) in &run.launches {
        let p = &programs[modules[*m].program];
        if let Some(e) = &p.error {
            return Outcome::Fail(format!("compile error: {e}"));
        }
        if exe.is_some_and(|x| x != p.exe) {
            return Outcome::Fail("internal: a candidate's modules are in different programs".into());
        }
        exe = Some(&p.exe);
    }
    if run.launches.is_empty() {
        // Nothing to launch (an empty tensor): the outputs are empty too.
        return if expected.iter().all(|t| t.is_empty()) {
            Outcome::Pass(String::new())
        } else {
            Outcome::Fail("no launches for a non-empty output".into())
        };
    }
    // A layer whose output size depends on the data writes into the room
    // the engine plans (`infer`) and counts its rows in counter 0.
    let counters = run.launches.iter().flat_map(|(_, l)| &l.args).find_map(|a| match a {
        KernelArg::Counts(n) => Some(*n as usize),
        _ => None,
    });
    let rooms = planned_outputs(case, expected);
    std::fs::create_dir_all(dir).unwrap();
    for (k, t) in case.inputs.iter().enumerate() {
        if let Some(t) = t {
            std::fs::write(dir.join(format!("in{k}.bin")), t.bytes()).unwrap();
        }
    }
    // The launches twice: threads scheduled in increasing order on buffers
    // aligned like cudaMalloc's (256 bytes), then in decreasing order on
    // buffers aligned to 16 bytes only and ending less than 16 bytes before
    // an inaccessible page (a missing barrier shows in one order or the
    // other; a read past the end of a buffer crashes).
    let mut job = String::new();
    for (pass, (order, align)) in [("forward", 256), ("reverse", 16)].iter().enumerate() {
        writeln!(job, "order {order}").unwrap();
        for (k, t) in case.inputs.iter().enumerate() {
            if let Some(t) = t {
                writeln!(job, "buf {k} {} in {} {align}", t.bytes().len(), dir.join(format!("in{k}.bin")).display()).unwrap();
            }
        }
        for (k, t) in rooms.iter().enumerate() {
            writeln!(job, "buf {} {} out {align}", 32 + k, t.bytes()).unwrap();
        }
        if let Some(n) = counters {
            writeln!(job, "buf {COUNTERS} {} out {align}", n * 8).unwrap();
        }
        for (m, l) in &run.launches {
            let args: Vec<String> = l.args.iter().map(|a| job_arg(a, &case.inputs)).collect();
            let [gx, gy, gz] = l.grid;
            let [bx, by, bz] = l.block;
            let slot = modules[*m].slot;
            writeln!(job, "launch {slot} {gx} {gy} {gz} {bx} {by} {bz} {} {} {}", l.shared_bytes, args.len(), args.join(" "))
                .unwrap();
        }
        for k in 0..expected.len() {
            writeln!(job, "save {} {}", 32 + k, dir.join(format!("out{k}.{pass}.bin")).display()).unwrap();
        }
        if counters.is_some() {
            writeln!(job, "save {COUNTERS} {}", dir.join(format!("counts.{pass}.bin")).display()).unwrap();
        }
    }
    let job_path = dir.join("job.txt");
    std::fs::write(&job_path, &job).unwrap();
    let result = run_with_timeout(Command::new(exe.unwrap()).arg(&job_path), Duration::from_secs(120));
    if case.expect_trap {
        return match result {
            Err(e) if e.contains("__trap()") => Outcome::Pass(String::new()),
            Err(e) => Outcome::Fail(format!("expected __trap(), got: {e}")),
            Ok(_) => Outcome::Fail("expected __trap() on an invalid index, the launch completed".into()),
        };
    }
    let notes = match result {
        Ok(notes) => notes,
        Err(e) => return Outcome::Fail(format!("emulator: {e}")),
    };
    let mut notes = notes;
    for (pass, order) in ["", " (threads in reverse order)"].iter().enumerate() {
        for (k, want) in expected.iter().enumerate() {
            let mut bytes = std::fs::read(dir.join(format!("out{k}.{pass}.bin"))).unwrap();
            if counters.is_some() && k == 0 {
                // The rows counted, which must be the reference's.
                let counts = std::fs::read(dir.join(format!("counts.{pass}.bin"))).unwrap();
                let rows = u64::from_le_bytes(counts[..8].try_into().unwrap());
                if rows != want.shape()[0] as u64 {
                    return Outcome::Fail(format!(
                        "output {k}{order}: {rows} rows counted, the reference has {}",
                        want.shape()[0]
                    ));
                }
                bytes.truncate(want.bytes().len());
            }
            let got = Tensor::from_bytes(want.ty().clone(), &bytes).unwrap();
            match compare(want, &got, &run.tactic, case.int_slack) {
                Err(e) => return Outcome::Fail(format!("output {k}{order}: {e}")),
                Ok(Some(n)) if pass == 0 => notes.push_str(&n),
                Ok(_) => {}
            }
        }
    }
    Outcome::Pass(notes)
}

#[test]
fn kernels_compute_what_the_cpu_reference_computes() {
    let start = Instant::now();
    let gxx = Command::new("g++").arg("--version").output();
    assert!(gxx.is_ok_and(|o| o.status.success()), "the emulated kernel test needs g++ (C++20) on the PATH");
    clean_cache(&work_dir());
    let filter = std::env::var("TRTC_EMU_FILTER").ok();
    let all = cases();
    let mut cases: Vec<Case> = all.into_iter().filter(|c| filter.as_ref().is_none_or(|f| c.name.contains(f.as_str()))).collect();
    let control = cases.len();
    cases.push(control_case(&mut Builder { rng: Rng(7), cases: Vec::new(), sm: 80 }));

    // Reference outputs, candidates, distinct sources.
    let mut modules: Vec<Module> = Vec::new();
    let mut by_source: HashMap<(String, String), usize> = HashMap::new();
    let mut runs: Vec<Run> = Vec::new();
    let mut expected: Vec<Vec<Tensor>> = Vec::new();
    let mut layer_skips: Vec<(usize, String)> = Vec::new();
    let mut unsampled = 0usize;
    let mut bad_cases: Vec<String> = Vec::new();
    for (ci, case) in cases.iter().enumerate() {
        if ci == control {
            expected.push(case.op.eval_owned(&[case.inputs[0].as_ref()]).unwrap());
            for (what, body) in CONTROLS {
                let l = control_launch(body, case.inputs[0].as_ref().unwrap().len());
                let m = modules.len();
                modules.push(Module {
                    entry: l.kernel.entry.clone(),
                    code: trtc_kernels::emu::rewrite(&l.kernel.source),
                    program: usize::MAX,
                    slot: 0,
                });
                runs.push(Run { case: ci, tactic: what.into(), control: true, launches: vec![(m, l)] });
            }
            continue;
        }
        let refs: Vec<Option<&Tensor>> = case.inputs.iter().map(|t| t.as_ref()).collect();
        let reference = if case.expect_trap {
            match case.op.eval_owned(&refs) {
                Ok(_) => Err("the CPU reference accepts the invalid indices".to_string()),
                Err(_) => {
                    let types: Vec<Option<&TensorType>> = case.inputs.iter().map(|t| t.as_ref().map(|t| t.ty())).collect();
                    Ok(case.op.infer(&types).unwrap().into_iter().map(|t| Tensor::zeros(t).unwrap()).collect())
                }
            }
        } else {
            case.op.eval_owned(&refs).map_err(|e| e.to_string())
        };
        let want = match reference {
            Ok(w) => w,
            Err(e) => {
                bad_cases.push(format!("FAIL {}: the CPU reference rejects the case: {e}", case.name));
                expected.push(Vec::new());
                continue;
            }
        };
        let in_types: Vec<Option<TensorType>> = case.inputs.iter().map(|t| t.as_ref().map(|t| t.ty().clone())).collect();
        let out_types = planned_outputs(case, &want);
        let io =
            LayerIo { op: &case.op, inputs: in_types.iter().map(|t| t.as_ref()).collect(), outputs: out_types.iter().collect() };
        expected.push(want);
        let cands: Vec<Candidate> = match candidates(&io, &SmLimits::for_sm(case.sm)) {
            Ok(c) => c,
            Err(e) => {
                layer_skips.push((ci, format!("no kernel: {e}")));
                continue;
            }
        };
        let picked = pick(case.pick, cands.len());
        unsampled += cands.len() - picked.len();
        for i in picked {
            let c = &cands[i];
            let mut launches = Vec::new();
            for l in &c.launches {
                let m = *by_source.entry((l.kernel.entry.clone(), l.kernel.source.clone())).or_insert_with(|| {
                    modules.push(Module {
                        entry: l.kernel.entry.clone(),
                        code: trtc_kernels::emu::rewrite(&l.kernel.source),
                        program: usize::MAX,
                        slot: 0,
                    });
                    modules.len() - 1
                });
                launches.push((m, l.clone()));
            }
            // The name is the tactic's identity (the timing cache keys by it).
            let name = c.tactic.to_string();
            if name.parse::<trtc_kernels::Tactic>().as_ref() != Ok(&c.tactic) {
                bad_cases.push(format!("FAIL {}: tactic {name} does not read back as itself", case.name));
            }
            runs.push(Run { case: ci, tactic: name, control: false, launches });
        }
    }

    // Programs: a few compilable modules each; a candidate's modules always
    // share a program.
    let dir = work_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let per_program: usize = std::env::var("TRTC_EMU_MODULES_PER_PROGRAM").ok().and_then(|v| v.parse().ok()).unwrap_or(6);
    let groups = program_groups(&modules, &runs, per_program);
    let texts: Vec<String> = groups.iter().map(|g| program_text(&modules, g)).collect();
    let compile_start = Instant::now();
    let compiled = parallel(texts.len(), workers(), |i| compile(&texts[i], &dir));
    let compile_time = compile_start.elapsed();
    let mut programs = Vec::new();
    for (pi, (g, r)) in groups.iter().zip(compiled).enumerate() {
        for (slot, &m) in g.iter().enumerate() {
            modules[m].program = pi;
            modules[m].slot = slot;
        }
        let (exe, error) = match r {
            Ok(e) => (e, None),
            Err(e) => (PathBuf::new(), Some(e)),
        };
        programs.push(Program { exe, error });
    }

    // Run everything.
    let run_start = Instant::now();
    let run_dir = dir.join(format!("run-{}", std::process::id()));
    let keep = std::env::var("TRTC_EMU_KEEP").is_ok();
    let outcomes = parallel(runs.len(), workers(), |i| {
        let r = &runs[i];
        let dir = run_dir.join(format!("{i}"));
        let o = run_one(&cases[r.case], r, &expected[r.case], &modules, &programs, &dir);
        // The files of a failed case stay for inspection.
        if r.control || (matches!(o, Outcome::Pass(_)) && !keep) {
            std::fs::remove_dir_all(&dir).ok();
        }
        o
    });
    let run_time = run_start.elapsed();
    let kept = std::fs::read_dir(&run_dir).map_or(0, |d| d.count());
    if kept == 0 {
        std::fs::remove_dir_all(&run_dir).ok();
    }

    // Report.
    #[derive(Default)]
    struct Tally {
        layers: usize,
        run: usize,
        pass: usize,
        fail: usize,
        skip: usize,
    }
    let mut tally: BTreeMap<&str, Tally> = BTreeMap::new();
    for c in cases.iter().filter(|c| c.family != "control") {
        tally.entry(c.family).or_default().layers += 1;
    }
    let mut failures = bad_cases;
    let mut skips: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut controls = Vec::new();
    let mut notes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (r, o) in runs.iter().zip(&outcomes) {
        let case = &cases[r.case];
        if r.control {
            match o {
                Outcome::Fail(why) => controls.push(format!("control kernel that {}: reported ({why})", r.tactic)),
                _ => failures.push(format!("FAIL the harness missed a control kernel that {}", r.tactic)),
            }
            continue;
        }
        let t = tally.get_mut(case.family).unwrap();
        match o {
            Outcome::Pass(n) => {
                t.run += 1;
                t.pass += 1;
                if !n.is_empty() {
                    notes.entry(n.clone()).or_default().push(format!("{} ({})", case.name, r.tactic));
                }
            }
            Outcome::Fail(why) => {
                t.run += 1;
                t.fail += 1;
                failures.push(format!("FAIL {} [{}] ({}): {why}", case.name, case.family, r.tactic));
            }
            Outcome::Skip(why) => {
                t.skip += 1;
                skips.entry(why.clone()).or_default().push(format!("{} ({})", case.name, r.tactic));
            }
        }
    }
    for (ci, why) in &layer_skips {
        let case = &cases[*ci];
        tally.get_mut(case.family).unwrap().skip += 1;
        skips.entry(why.clone()).or_default().push(case.name.clone());
    }
    println!("\nemulated kernels: {} layers, {} modules in {} programs", cases.len() - 1, modules.len(), programs.len());
    println!("{:<14} {:>6} {:>6} {:>6} {:>6} {:>6}", "family", "layers", "run", "passed", "failed", "skipped");
    let mut total = Tally::default();
    for (f, t) in &tally {
        println!("{f:<14} {:>6} {:>6} {:>6} {:>6} {:>6}", t.layers, t.run, t.pass, t.fail, t.skip);
        total.layers += t.layers;
        total.run += t.run;
        total.pass += t.pass;
        total.fail += t.fail;
        total.skip += t.skip;
    }
    println!("{:<14} {:>6} {:>6} {:>6} {:>6} {:>6}", "total", total.layers, total.run, total.pass, total.fail, total.skip);
    println!("({unsampled} further candidates not sampled)");
    let mut entries: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (r, o) in runs.iter().zip(&outcomes) {
        for (m, _) in &r.launches {
            let e = entries.entry(modules[*m].entry.as_str()).or_default();
            e.0 += 1;
            e.1 += matches!(o, Outcome::Pass(_)) as usize;
        }
    }
    let list: Vec<String> = entries.iter().map(|(e, (n, p))| format!("{e} {p}/{n}")).collect();
    println!("entry points (launches passed/run): {}", list.join(", "));
    for (why, what) in &skips {
        println!("SKIP {} case(s): {why}\n     {}", what.len(), what.join(", "));
    }
    for (note, what) in &notes {
        println!("NOTE {} case(s): {note}\n     {}", what.len(), what.join(", "));
    }
    for c in &controls {
        println!("{c}");
    }
    for f in &failures {
        println!("{f}");
    }
    println!(
        "time: {:.1}s (compile {:.1}s, run {:.1}s)",
        start.elapsed().as_secs_f64(),
        compile_time.as_secs_f64(),
        run_time.as_secs_f64()
    );
    assert!(failures.is_empty(), "{} of {} emulated cases failed (see above)", failures.len(), total.run);
    let idle: Vec<&str> = tally.iter().filter(|(_, t)| t.pass == 0).map(|(f, _)| *f).collect();
    assert!(idle.is_empty(), "no case of {idle:?} ran on the emulator (see the skips above)");
}
