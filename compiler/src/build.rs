//! The build pipeline: ONNX file → engine bytes.
//!
//! import → optimize (FP32) → calibrate (with `--int8` or `--fp8`) →
//! precision (explicit Q/DQ, INT8 or FP8, FP16) → lower → kernels (GPU targets: tactic
//! choice and NVRTC) → serialize.

use crate::frontend::onnx::{self, ImportOptions};
use crate::ir::Graph;
use crate::lower::{self, LowerOptions};
use crate::precision::calib::{self, Batch, CalibOptions, CalibrationCache};
use crate::precision::{PrecisionConfig, PrecisionReport};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use trtc_runtime::ops::precision::Precision;
use trtc_runtime::{Engine, Target};

/// Where INT8 scales come from.
#[derive(Clone, Debug, Default)]
pub struct Int8Options {
    /// A folder of calibration batches (`--calib DIR`).
    pub calib_dir: Option<PathBuf>,
    pub calib: CalibOptions,
    /// A calibration cache (`--calib-cache FILE`): read when it exists
    /// (no calibration runs), written after calibrating otherwise.
    pub cache: Option<PathBuf>,
    /// Batches given in memory (the Python API's calibrators), used when
    /// there is no `calib_dir`.
    pub batches: Vec<Batch>,
    /// Scales given in memory (a Python calibrator's
    /// `read_calibration_cache`), used as an existing cache file would be.
    pub cache_given: Option<CalibrationCache>,
    /// The shapes of random batches when the engine's shapes vary
    /// (`--calib-shapes`): inside a profile; the first profile's opt shapes
    /// for the inputs not named.
    pub calib_shapes: Vec<(String, Vec<usize>)>,
}

impl Int8Options {
    /// The calibration batches: `calib_dir`'s files, else those given in
    /// memory (maybe none).
    fn load_batches(&self, inputs: &[(String, trtc_runtime::TensorType)], any_shape: bool) -> Result<Vec<Batch>> {
        match &self.calib_dir {
            Some(dir) => calib::load_batches(dir, inputs, self.calib.max_batches, any_shape),
            None => Ok(self.batches.iter().take(self.calib.max_batches.unwrap_or(usize::MAX)).cloned().collect()),
        }
    }
}

/// How [`ShapeProfile::grouped_point`] sizes a group of axes: from the
/// group's index, the range its axes share and the sizes earlier groups
/// took.
type PickSize = dyn Fn(usize, usize, usize, &[usize]) -> Option<usize>;

/// An optimization profile as `--min-shapes`, `--opt-shapes` and
/// `--max-shapes` give it: a range for some inputs (the others keep their
/// one shape).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShapeProfile {
    /// Input name, then min, opt and max dims.
    pub inputs: Vec<(String, [Vec<usize>; 3])>,
}

impl ShapeProfile {
    /// The profile from the three flags' values (`NAME:DIMS` each), checked:
    /// the same inputs in each, of one rank, `min <= opt <= max` per axis.
    pub fn from_flags(
        min: &[(String, Vec<usize>)],
        opt: &[(String, Vec<usize>)],
        max: &[(String, Vec<usize>)],
    ) -> Result<ShapeProfile> {
        fn names(v: &[(String, Vec<usize>)]) -> Vec<&str> {
            let mut n: Vec<&str> = v.iter().map(|(n, _)| n.as_str()).collect();
            n.sort();
            n
        }
        if names(min) != names(opt) || names(min) != names(max) {
            bail!("--min-shapes, --opt-shapes and --max-shapes must name the same inputs");
        }
        let mut inputs = Vec::new();
        for (name, lo) in min {
            if min.iter().filter(|(n, _)| n == name).count() > 1 {
                bail!("--min-shapes names '{name}' twice");
            }
            let find =
                |v: &[(String, Vec<usize>)]| v.iter().find(|(n, _)| n == name).map(|(_, d)| d.clone()).expect("same names");
            let (mid, hi) = (find(opt), find(max));
            if lo.len() != mid.len() || lo.len() != hi.len() {
                bail!("input '{name}': the min, opt and max shapes have different ranks");
            }
            for a in 0..lo.len() {
                if !(lo[a] <= mid[a] && mid[a] <= hi[a]) {
                    bail!("input '{name}' axis {a}: min {} <= opt {} <= max {} does not hold", lo[a], mid[a], hi[a]);
                }
                if lo[a] == 0 {
                    bail!("input '{name}' axis {a}: the min shape may not be 0");
                }
            }
            inputs.push((name.clone(), [lo.clone(), mid, hi]));
        }
        Ok(ShapeProfile { inputs })
    }

    /// Whether any dimension varies.
    pub fn is_dynamic(&self) -> bool {
        self.inputs.iter().any(|(_, [lo, _, hi])| lo != hi)
    }

    /// Every profiled input at its min (0), opt (1) or max (2) shape.
    fn at(&self, which: usize) -> Shapes {
        self.inputs.iter().map(|(n, d)| (n.clone(), d[which].clone())).collect()
    }

    /// A point inside the profile where sizes rounded up and rounded down
    /// disagree: every varying axis at the size in its range, other than
    /// its min, opt and max, that is 1 more than a multiple of the largest
    /// power of two (the middle one on ties), so that halving it rounds
    /// differently at as many levels as possible. Model sizes that the
    /// profile's points cannot tell apart (`ceil(h / 2)` and `floor(h / 2)`
    /// on even `h`) differ there. `None` when no axis has such a size.
    fn probe(&self) -> Option<Shapes> {
        let mut moved = false;
        let shapes = self
            .inputs
            .iter()
            .map(|(n, [lo, mid, hi])| {
                let dims = (0..lo.len())
                    .map(|a| {
                        let taken = [lo[a], mid[a], hi[a]];
                        let centre = (lo[a] + hi[a]) / 2;
                        let best = (lo[a]..=hi[a])
                            .filter(|v| !taken.contains(v))
                            .max_by_key(|&v| ((v - 1).trailing_zeros().min(usize::BITS), std::cmp::Reverse(v.abs_diff(centre))));
                        moved |= best.is_some();
                        best.unwrap_or(mid[a])
                    })
                    .collect();
                (n.clone(), dims)
            })
            .collect();
        moved.then_some(shapes)
    }

    /// A point inside the profile where varying axes that the model does
    /// not name alike take pairwise different sizes (`name(input, axis)`
    /// gives the model's name of an axis, `dim_param`): where every other
    /// point gives two axes the same size (a square image's height and
    /// width), a size read from one of them would reproduce the other at
    /// every imported shape and be wrong at the others. Alternate groups
    /// sit near the top and near the bottom of their ranges, so that sizes
    /// stay apart after the model divides them (a stride-32 backbone's
    /// feature maps). `None` when fewer than two groups of axes vary, or no
    /// such sizes exist.
    fn distinct(&self, name: &dyn Fn(&str, usize) -> Option<String>) -> Option<Shapes> {
        self.grouped_point(name, 2, &|k, lo, hi, used| {
            // The range's ends are points of their own.
            let near_top = (lo..=hi).rev().skip(1).chain([hi]);
            let near_bottom = (lo..=hi).skip(1).chain([lo]);
            if k % 2 == 0 {
                near_top.into_iter().find(|v| !used.contains(v))
            } else {
                near_bottom.into_iter().find(|v| !used.contains(v))
            }
        })
    }

    /// A point for checking the built engine, not for building it: each
    /// group of axes at its own fraction of its range (0.41, 0.73, 0.29...),
    /// sizes no other point is likely to give.
    fn validation(&self, name: &dyn Fn(&str, usize) -> Option<String>) -> Option<Shapes> {
        const FRACTIONS: [f64; 6] = [0.41, 0.73, 0.29, 0.87, 0.57, 0.13];
        self.grouped_point(name, 1, &|k, lo, hi, used| {
            let f = FRACTIONS[k % FRACTIONS.len()];
            let at = lo + ((hi - lo) as f64 * f).round() as usize;
            (at..=hi).chain(lo..at).find(|v| !used.contains(v))
        })
    }

    /// The profile's opt shapes with each group of varying axes that must
    /// agree (by the model's name, else one axis alone) at the size `pick`
    /// gives it (group index, the range the group's axes share, the sizes
    /// earlier groups took). `None` with fewer than `min_groups` groups or
    /// when `pick` finds no size.
    fn grouped_point(&self, name: &dyn Fn(&str, usize) -> Option<String>, min_groups: usize, pick: &PickSize) -> Option<Shapes> {
        /// Varying axes that must agree: (input, axis) each, and the range
        /// they share.
        struct Group {
            name: Option<String>,
            axes: Vec<(usize, usize)>,
            lo: usize,
            hi: usize,
        }
        let mut groups: Vec<Group> = Vec::new();
        for (i, (input, [lo, _, hi])) in self.inputs.iter().enumerate() {
            for a in (0..lo.len()).filter(|&a| lo[a] < hi[a]) {
                let n = name(input, a);
                match groups.iter_mut().find(|g| n.is_some() && g.name == n) {
                    Some(g) => {
                        g.axes.push((i, a));
                        g.lo = g.lo.max(lo[a]);
                        g.hi = g.hi.min(hi[a]);
                    }
                    None => groups.push(Group { name: n, axes: vec![(i, a)], lo: lo[a], hi: hi[a] }),
                }
            }
        }
        if groups.len() < min_groups.max(1) {
            return None;
        }
        let mut shapes = self.at(1);
        let mut used: Vec<usize> = Vec::new();
        for (k, g) in groups.iter().enumerate() {
            if g.lo > g.hi {
                return None;
            }
            let v = pick(k, g.lo, g.hi, &used)?;
            used.push(v);
            for &(i, a) in &g.axes {
                shapes[i].1[a] = v;
            }
        }
        Some(shapes)
    }
}

/// Checks several profiles against each other: each names the same inputs
/// with the same ranks (as TensorRT requires of every profile).
pub fn check_profiles(profiles: &[ShapeProfile]) -> Result<()> {
    let Some(first) = profiles.first() else { return Ok(()) };
    fn key(p: &ShapeProfile) -> Vec<(&str, usize)> {
        let mut v: Vec<(&str, usize)> = p.inputs.iter().map(|(n, d)| (n.as_str(), d[0].len())).collect();
        v.sort();
        v
    }
    for (k, p) in profiles.iter().enumerate().skip(1) {
        if key(p) != key(first) {
            bail!("profile {k} ranges other inputs (or ranks) than profile 0: every profile must range the same inputs");
        }
    }
    Ok(())
}

/// Input names and shapes.
type Shapes = Vec<(String, Vec<usize>)>;

/// Whether the shapes of the engine vary at run time: inside a profile, or
/// between profiles.
fn shapes_vary(profiles: &[ShapeProfile]) -> bool {
    profiles.iter().any(ShapeProfile::is_dynamic) || profiles.windows(2).any(|w| w[0].at(2) != w[1].at(2))
}

/// Each profiled input's largest shape over all profiles, axis by axis:
/// the shapes an engine with these profiles is planned at.
fn envelope(profiles: &[ShapeProfile]) -> Shapes {
    let mut env = profiles.first().map(|p| p.at(2)).unwrap_or_default();
    for p in profiles.iter().skip(1) {
        for (name, dims) in p.at(2) {
            if let Some((_, e)) = env.iter_mut().find(|(n, _)| *n == name) {
                for (a, b) in e.iter_mut().zip(dims) {
                    *a = (*a).max(b);
                }
            }
        }
    }
    env
}

/// `input_ids:1x7, attention_mask:1x7`.
fn describe_shapes(shapes: &Shapes) -> String {
    let one = |(n, d): &(String, Vec<usize>)| format!("{n}:{}", describe_dims(d));
    shapes.iter().map(one).collect::<Vec<_>>().join(", ")
}

/// `1x3x224x224`.
fn describe_dims(dims: &[usize]) -> String {
    dims.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("x")
}

/// Import options with the given inputs at the given shapes.
fn with_shapes(import: &ImportOptions, shapes: &Shapes) -> ImportOptions {
    let mut o = import.clone();
    for (name, dims) in shapes {
        o.shapes.insert(name.clone(), dims.clone());
    }
    o
}

/// Where a build reads its model from.
#[derive(Clone, Debug)]
pub enum ModelSource {
    File(PathBuf),
    /// The model's bytes (external data is refused).
    Bytes(Vec<u8>),
}

/// How the sizes of an engine whose profiles' shapes vary are found (see
/// [`import`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VaryingSizes {
    /// Read from tensor shapes by layers generalized from the model
    /// imported at several shapes (every layer keeps its GPU kernels);
    /// computed at run time where no rule generalizes.
    #[default]
    Generalized,
    /// Computed at run time from each run's input shapes everywhere, the
    /// fallback of `Generalized` (tests run every model this way too).
    AtRunTime,
}

/// Everything `trtc build` can be asked.
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    pub import: ImportOptions,
    /// The optimization profiles (`--min/--opt/--max-shapes`, the k-th
    /// occurrence of each flag giving profile k); the engine is planned at
    /// each input's maximum over them.
    pub profiles: Vec<ShapeProfile>,
    /// How the sizes of an engine whose profiles' shapes vary are found.
    pub varying_sizes: VaryingSizes,
    pub lower: LowerOptions,
    pub passes: crate::passes::PassOptions,
    pub precision: PrecisionConfig,
    pub int8: Int8Options,
    /// What the engine runs on: the CPU only, or a GPU of one compute
    /// capability (its kernels compiled in).
    pub target: Target,
    /// How GPU targets choose their tactics.
    pub tuning: crate::cuda::TuningOptions,
}

impl BuildOptions {
    /// The provenance the engine records (`trtc inspect` shows it): what
    /// changes the engine, spelled as the `trtc build` flags that ask for
    /// it, derived from the options so that a library build records the
    /// same as the CLI. Never file paths, so the same model and options give
    /// byte-identical engines wherever the files live; maps in name order.
    pub fn provenance_flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        let mut shapes: Vec<_> = self.import.shapes.iter().collect();
        shapes.sort();
        for (name, dims) in shapes {
            let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            flags.push(format!("--shape {name}:{}", dims.join("x")));
        }
        for p in &self.profiles {
            let spell = |which: usize| {
                p.inputs
                    .iter()
                    .map(|(n, d)| format!("{n}:{}", d[which].iter().map(|x| x.to_string()).collect::<Vec<_>>().join("x")))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            flags.push(format!("--min-shapes {}", spell(0)));
            flags.push(format!("--opt-shapes {}", spell(1)));
            flags.push(format!("--max-shapes {}", spell(2)));
        }
        let mut values: Vec<&String> = self.import.input_values.keys().collect();
        values.sort();
        flags.extend(values.into_iter().map(|name| format!("--input-value {name}")));
        flags.extend(self.passes.disabled.iter().map(|p| format!("--disable-pass {p}")));
        if self.passes.disable_all && !self.passes.disabled.iter().any(|p| p == "all") {
            flags.push("--disable-pass all".into());
        }
        if !self.lower.reuse_buffers {
            flags.push("--no-buffer-reuse".into());
        }
        if let Target::Cuda { sm, .. } = &self.target {
            flags.push(format!("--target sm_{sm}"));
            if let Some(l) = self.tuning.opt_level {
                flags.push(format!("--opt-level {l}"));
            }
            if self.tuning.timing_cache.is_some() {
                flags.push("--timing-cache".into());
            }
        }
        if self.precision.fp16 {
            flags.push("--fp16".into());
        }
        if self.precision.int8 || self.precision.fp8 {
            if self.precision.int8 {
                flags.push("--int8".into());
            }
            if self.precision.fp8 {
                flags.push("--fp8".into());
            }
            // With a cache the scales are the cache's, whether made by this
            // build or reused, so both give the same engine.
            if self.int8.cache.is_some() || self.int8.cache_given.is_some() {
                flags.push("--calib-cache".into());
            } else {
                flags.push(format!("--calibrator {}", self.int8.calib.calibrator));
            }
        }
        for (pattern, p) in &self.precision.layer_precisions {
            flags.push(format!("--layer-precision {pattern}={}", p.name()));
        }
        flags
    }
}

/// The result of a build: the engine bytes and the graph they came from.
pub struct Built {
    /// The graph after optimization and precision.
    pub graph: Graph,
    /// The optimized graph before precision (FP32), the reference for
    /// accuracy reports.
    pub reference: Graph,
    /// Op nodes right after import.
    pub imported_nodes: usize,
    pub pass_stats: Vec<crate::passes::PassStats>,
    pub precision: PrecisionReport,
    /// The calibration used by an INT8 build, and whether it was read from a
    /// cache file rather than computed.
    pub calibration: Option<(CalibrationCache, bool)>,
    /// For GPU targets, what the kernel table holds.
    pub kernels: Option<crate::cuda::kernel_table::KernelReport>,
    /// See [`Imported::sizes_at_run_time`] (set by [`build_file`]).
    pub sizes_at_run_time: Option<String>,
    pub engine: Vec<u8>,
}

/// Calibration scales for an INT8 or FP8 build (`flag`: `--int8` or
/// `--fp8`, whose precision settings `cfg` gives) of the optimized FP32
/// `graph`.
fn calibration(
    graph: &Graph,
    opts: &Int8Options,
    cfg: &PrecisionConfig,
    profiles: &[ShapeProfile],
    flag: &str,
) -> Result<(CalibrationCache, bool)> {
    if let Some(cache) = &opts.cache_given {
        return Ok((cache.clone(), true));
    }
    if let Some(path) = &opts.cache {
        if path.exists() {
            return Ok((calib::read_cache(path)?, true));
        }
    }
    if opts.calib_dir.is_none() && opts.batches.is_empty() {
        match &opts.cache {
            Some(p) => bail!("{flag}: the calibration cache {} does not exist; give --calib DIR to create it", p.display()),
            None => bail!("{flag} needs calibration data: --calib DIR (batches as .npz/.npy), or --calib-cache FILE"),
        }
    }
    let target = CalibrationTarget::of(graph, profiles, opts)?;
    let batches = opts.load_batches(&target.inputs, target.shapes_vary)?;
    let cache = if opts.calib.calibrator == calib::Calibrator::Auto {
        if target.shapes_vary {
            bail!("{flag} --calibrator auto: not with optimization profiles whose shapes vary yet (use entropy, minmax or percentile)");
        }
        let candidates = calib::calibrate_each(&target.engine()?, &batches, &opts.calib, &calib::calibrator::AUTO_CANDIDATES)?;
        crate::auto_calibration::choose(graph, cfg, &candidates, &batches)?
    } else {
        calib::calibrate(&target.engine()?, &batches, &opts.calib)?
    };
    if let Some(path) = &opts.cache {
        calib::write_cache(path, &cache)?;
    }
    Ok((cache, false))
}

/// Calibrates an optimized FP32 graph (see [`calib::calibrate`]): on the GPU
/// of this machine when there is one and NVRTC can build for it, else on
/// the CPU executor.
pub fn calibrate(graph: &Graph, batches: &[Batch], opts: &CalibOptions) -> Result<CalibrationCache> {
    calib::calibrate(&CalibrationTarget::of(graph, &[], &Int8Options::default())?.engine()?, batches, opts)
}

/// Observes every tensor's range for FP16 on the calibration data, or on a
/// few random batches when there is none.
fn observe_ranges(graph: &Graph, data: &Int8Options, profiles: &[ShapeProfile]) -> Result<(BTreeMap<String, f32>, String)> {
    let target = CalibrationTarget::of(graph, profiles, data)?;
    let inputs = &target.inputs;
    if data.calib_dir.is_some() || !data.batches.is_empty() {
        let batches = data.load_batches(inputs, target.shapes_vary)?;
        let ranges = calib::observe_ranges(&target.engine()?, &batches).context("observing tensor ranges for FP16")?;
        let n = batches.len();
        let source = match &data.calib_dir {
            Some(dir) => dir.display().to_string(),
            None => "the calibrator's data".into(),
        };
        return Ok((ranges, format!("tensor ranges observed on {n} batch{} of {source}", if n == 1 { "" } else { "es" })));
    }
    if !inputs.iter().all(|(_, t)| t.dtype.is_float()) {
        return Ok((
            BTreeMap::new(),
            "no tensor ranges observed (the model has non-float inputs: give --calib DIR to observe them on data)".into(),
        ));
    }
    // Random data may make the FP32 engine fail where real data would not
    // (an index computed from the inputs, say): then nothing is observed,
    // and the build says so.
    let observed = calib::synthetic_batches(inputs, &[], 0..RANDOM_RANGE_BATCHES)
        .and_then(|batches| calib::observe_ranges(&target.engine()?, &batches));
    Ok(match observed {
        Ok(ranges) => (
            ranges,
            format!("tensor ranges observed on {RANDOM_RANGE_BATCHES} random batches (uniform in [-1, 1); give --calib DIR to observe real data)"),
        ),
        Err(e) => (BTreeMap::new(), format!("no tensor ranges observed (the FP32 engine failed on random inputs: {e:#})")),
    })
}

/// Random batches FP16 builds observe ranges on without `--calib`.
const RANDOM_RANGE_BATCHES: u64 = 4;

/// What calibration and FP16 range observation run: the FP32 engine, for
/// the GPU of this machine when there is one (heuristic tactics, no
/// tuning), else for the CPU; with shapes that vary, a CPU engine with the
/// build's profiles, whose batches may take any shape inside them (random
/// ones take the first profile's opt shapes, as TensorRT calibrates at the
/// opt shape).
struct CalibrationTarget<'g> {
    graph: &'g Graph,
    profiles: &'g [ShapeProfile],
    /// The input bindings, at the opt shapes when shapes vary.
    inputs: Vec<(String, trtc_runtime::TensorType)>,
    shapes_vary: bool,
}

impl<'g> CalibrationTarget<'g> {
    fn of(graph: &'g Graph, profiles: &'g [ShapeProfile], data: &Int8Options) -> Result<CalibrationTarget<'g>> {
        let shapes_vary = shapes_vary(profiles);
        let mut inputs = calib::graph_inputs(graph);
        if let (true, Some(first)) = (shapes_vary, profiles.first()) {
            for (name, ty) in &mut inputs {
                if let Some((_, [_, opt, _])) = first.inputs.iter().find(|(n, _)| n == name) {
                    ty.shape = opt.clone();
                }
            }
        }
        for (name, shape) in &data.calib_shapes {
            let Some((_, ty)) = inputs.iter_mut().find(|(n, _)| n == name) else {
                let names: Vec<&str> = inputs.iter().map(|(n, _)| n.as_str()).collect();
                bail!("--calib-shapes names '{name}', which is not an input of the model (its inputs: {names:?})");
            };
            if !shapes_vary && *shape != ty.shape {
                bail!("--calib-shapes {name}:{}: the engine's shapes are fixed ({})", describe_dims(shape), ty);
            }
            ty.shape = shape.clone();
        }
        if shapes_vary && !data.calib_shapes.is_empty() {
            let inside = profiles.iter().any(|p| {
                p.inputs.iter().all(|(name, [lo, _, hi])| {
                    inputs.iter().find(|(n, _)| n == name).is_some_and(|(_, t)| {
                        t.shape.len() == lo.len() && (0..lo.len()).all(|a| lo[a] <= t.shape[a] && t.shape[a] <= hi[a])
                    })
                })
            });
            if !inside {
                let given: Vec<String> = inputs.iter().map(|(n, t)| format!("{n}:{}", describe_dims(&t.shape))).collect();
                bail!("--calib-shapes: {} lies inside no profile", given.join(","));
            }
        }
        Ok(CalibrationTarget { graph, profiles, inputs, shapes_vary })
    }

    fn engine(&self) -> Result<Engine> {
        let lowered = lower::lower(self.graph, Default::default())?;
        if self.shapes_vary {
            let profiles =
                self.profiles.iter().map(|p| runtime_profile(p, self.graph, &lowered.plan)).collect::<Result<Vec<_>>>()?;
            let bytes = Engine::serialize_with_profiles(Target::Cpu, vec![], &lowered.plan, &lowered.weights, None, &profiles)?;
            return Ok(Engine::from_bytes(&bytes)?);
        }
        if let Ok(gpu) = crate::cuda::present_gpu() {
            let tuning = crate::cuda::TuningOptions { opt_level: Some(0), ..Default::default() };
            if let Ok((table, _)) = crate::cuda::build_kernels(&lowered.plan, gpu.sm, &[], &tuning) {
                let target = Target::Cuda { sm: gpu.sm, gpu_name: Some(gpu.name) };
                return Ok(Engine::from_bytes(&Engine::serialize(
                    target,
                    vec![],
                    &lowered.plan,
                    &lowered.weights,
                    Some(&table),
                )?)?);
            }
        }
        Ok(Engine::from_bytes(&Engine::serialize(Target::Cpu, vec![], &lowered.plan, &lowered.weights, None)?)?)
    }
}

/// The oldest GPUs with FP8 (E4M3) tensor cores: Ada, sm_89.
pub const FP8_MIN_SM: u32 = 89;

/// Optimizes an imported graph and compiles it into engine bytes.
pub fn build_graph(mut graph: Graph, opts: &BuildOptions) -> Result<Built> {
    let flags = opts.provenance_flags();
    let imported_nodes = graph.op_count();
    let pass_stats = crate::passes::optimize(&mut graph, &opts.passes)?;
    let reference = graph.clone();
    if let (true, Target::Cuda { sm, .. }) = (opts.precision.fp8, &opts.target) {
        if *sm < FP8_MIN_SM {
            bail!("--fp8 needs FP8 tensor cores, sm_{FP8_MIN_SM} (Ada) or newer; the target is sm_{sm} (use --int8 or --fp16)");
        }
    }
    let calibration = match (opts.precision.int8, opts.precision.fp8) {
        (true, true) => bail!("--int8 and --fp8 cannot be combined: give one (pin single layers with --layer-precision)"),
        (true, false) => Some(calibration(&graph, &opts.int8, &opts.precision, &opts.profiles, "--int8")?),
        (false, true) => Some(calibration(&graph, &opts.int8, &opts.precision, &opts.profiles, "--fp8")?),
        (false, false) => None,
    };
    let scales: BTreeMap<String, f32> = calibration.as_ref().map(|(c, _)| c.scales.clone()).unwrap_or_default();
    let fp16_wanted = opts.precision.fp16 || opts.precision.layer_precisions.iter().any(|(_, p)| *p == Precision::Fp16);
    let (ranges, range_source) =
        if fp16_wanted { observe_ranges(&graph, &opts.int8, &opts.profiles)? } else { (BTreeMap::new(), String::new()) };
    let mut precision = crate::precision::apply(&mut graph, &opts.precision, &scales, &ranges)?;
    if fp16_wanted {
        precision.fp16_range_source = Some(range_source);
    }
    let lowered = lower::lower(&graph, opts.lower)?;
    let profiles = opts
        .profiles
        .iter()
        .enumerate()
        .map(|(k, p)| runtime_profile(p, &graph, &lowered.plan).with_context(|| format!("profile {k}")))
        .collect::<Result<Vec<_>>>()?;
    let (table, kernels) = match &opts.target {
        Target::Cpu => (None, None),
        Target::Cuda { sm, .. } => {
            let (table, report) = crate::cuda::build_kernels(&lowered.plan, *sm, &profiles, &opts.tuning)?;
            (Some(table), Some(report))
        }
    };
    let engine =
        Engine::serialize_with_profiles(opts.target.clone(), flags, &lowered.plan, &lowered.weights, table.as_ref(), &profiles)?;
    Ok(Built { graph, reference, imported_nodes, pass_stats, precision, calibration, kernels, sizes_at_run_time: None, engine })
}

/// Compiles an ONNX file into engine bytes.
pub fn build_file(model: &Path, opts: &BuildOptions) -> Result<Built> {
    let imported = import_reporting(&ModelSource::File(model.to_path_buf()), opts)?;
    let built = build_graph(imported.graph, opts)?;
    Ok(Built { sizes_at_run_time: imported.sizes_at_run_time, ..built })
}

fn import_at(model: &ModelSource, opts: &ImportOptions) -> Result<Graph> {
    match model {
        ModelSource::File(path) => onnx::import_file(path, opts),
        ModelSource::Bytes(bytes) => onnx::import_bytes(bytes, onnx::ExternalDataRoot { dir: None }, opts),
    }
}

/// Imports the model a build compiles. With profiles whose shapes vary: at
/// each input's maximum over the profiles, after checking that the model
/// gives the same plan at every profile's minimum, optimum and maximum,
/// tensor shapes aside (what the engine's executor relies on when it infers
/// the shapes of a run). What the model computes from its input shapes
/// (exporters' Shape → Gather → Reshape chains, position ids, masks) is
/// generalized into layers that read sizes at run time
/// ([`crate::generalize`]). Where no rule generalizes, the model is
/// imported once more with its varying inputs sized at run time: the
/// shape computations stay layers that run on each run's input shapes
/// (checked against the model imported at fixed shapes, see
/// [`check_sized_at_run_time`]); if that fails too, the build is refused,
/// naming the node.
pub fn import(model: &ModelSource, opts: &BuildOptions) -> Result<Graph> {
    import_reporting(model, opts).map(|i| i.graph)
}

/// What [`import`] gives, and how it found the sizes.
pub struct Imported {
    pub graph: Graph,
    /// Why the sizes are computed at run time (`trtc build` says so), when
    /// they are: what no profile rule generalized, or that
    /// [`VaryingSizes::AtRunTime`] asked for it.
    pub sizes_at_run_time: Option<String>,
}

/// [`import`], reporting how the sizes were found.
pub fn import_reporting(model: &ModelSource, opts: &BuildOptions) -> Result<Imported> {
    check_profiles(&opts.profiles)?;
    let planned = envelope(&opts.profiles);
    let generalized = |graph| Imported { graph, sizes_at_run_time: None };
    if !shapes_vary(&opts.profiles) {
        return import_at(model, &with_shapes(&opts.import, &planned)).map(generalized);
    }
    // Identity reshapes are kept so that each shape gives the same nodes.
    let import = ImportOptions { keep_identity_reshapes: true, ..opts.import.clone() };
    if opts.varying_sizes == VaryingSizes::AtRunTime {
        let kept = ImportOptions { keep_loops: true, ..import };
        let graph = import_sized_at_run_time(model, opts, &planned, &kept)?;
        return Ok(Imported { graph, sizes_at_run_time: Some("asked for".into()) });
    }
    // A model whose loops unroll to other iteration counts at other shapes
    // gives other nodes at each; with its loops kept as layers (which run
    // their bodies at run time) it may give the same.
    let unrolled = match import_generalized(model, opts, &planned, &import) {
        Err(unrolled) => unrolled,
        ok => return ok.map(generalized),
    };
    let kept = ImportOptions { keep_loops: true, ..import };
    if let Ok(g) = import_generalized(model, opts, &planned, &kept) {
        return Ok(generalized(g));
    }
    // What no rule generalizes is computed at run time from the bound
    // input shapes, as the sizes of tensors sized by the data are.
    match import_sized_at_run_time(model, opts, &planned, &kept) {
        Ok(graph) => Ok(Imported { graph, sizes_at_run_time: Some(generalizer_reason(&unrolled)) }),
        Err(e) => Err(anyhow::anyhow!("{unrolled:#}; computing its sizes at run time instead: {e:#}")),
    }
}

/// What the generalizer could not keep symbolic: its refusal without the
/// advice to build one engine per shape (the sizes are computed at run
/// time instead).
fn generalizer_reason(e: &anyhow::Error) -> String {
    let text = format!("{e:#}");
    let advice = [", so its shapes cannot vary in one engine", "; the model's shapes cannot vary in one engine"];
    let end = advice.iter().filter_map(|a| text.find(a)).min().unwrap_or(text.len());
    text[..end].to_string()
}

/// The graph of a model whose profiles' shapes vary, imported once at the
/// planned (largest) shapes with the inputs whose shapes vary sized at run
/// time ([`ImportOptions::sized_at_run_time`]): every layer after them runs
/// at the sizes each run's inputs give it, computed by the layers the
/// model's own shape computations became.
fn import_sized_at_run_time(model: &ModelSource, opts: &BuildOptions, planned: &Shapes, import: &ImportOptions) -> Result<Graph> {
    let varying: Vec<String> = planned
        .iter()
        .filter(|(name, _)| {
            opts.profiles.iter().any(|p| p.inputs.iter().any(|(n, [lo, _, hi])| n == name && lo != hi))
                || opts.profiles.windows(2).any(|w| w[0].at(2) != w[1].at(2))
        })
        .map(|(name, _)| name.clone())
        .collect();
    let sized = ImportOptions { sized_at_run_time: varying, ..import.clone() };
    let graph = import_at(model, &with_shapes(&sized, planned))?;
    check_sized_at_run_time(model, opts, import, &graph)?;
    Ok(graph)
}

/// Checks a graph whose sizes are computed at run time against the model
/// imported at fixed shapes, at points of each profile other than the one
/// it was imported at (the validation point, the minimum and the optimum,
/// where the model imports): on the same random inputs, on the CPU with the
/// reference arithmetic, every output must have the shape the model gives
/// it there and, within 1e-4 of its largest magnitude, the same values. A
/// converter that read a size at the imported shapes where it should have
/// read it at run time is refused here instead of giving wrong outputs.
fn check_sized_at_run_time(model: &ModelSource, opts: &BuildOptions, import: &ImportOptions, graph: &Graph) -> Result<()> {
    let lowered = {
        let mut g = graph.clone();
        crate::passes::optimize(&mut g, &opts.passes)?;
        lower::lower(&g, LowerOptions::default())?
    };
    let profiles = opts.profiles.iter().map(|p| runtime_profile(p, graph, &lowered.plan)).collect::<Result<Vec<_>>>()?;
    let engine = Engine::from_bytes(&Engine::serialize_with_profiles(
        Target::Cpu,
        vec![],
        &lowered.plan,
        &lowered.weights,
        None,
        &profiles,
    )?)?;
    let name = |input: &str, axis: usize| graph.dim_names(input).and_then(|d| d.get(axis).cloned().flatten());
    let planned = envelope(&opts.profiles);
    let mut points: Vec<Shapes> = Vec::new();
    for p in &opts.profiles {
        for shapes in [p.validation(&name), Some(p.at(0)), Some(p.at(1))].into_iter().flatten() {
            if shapes != planned && !points.contains(&shapes) {
                points.push(shapes);
            }
        }
    }
    for (k, shapes) in points.iter().enumerate() {
        let Ok(fixed) = import_at(model, &with_shapes(import, shapes)) else { continue };
        let fixed = {
            let mut g = fixed;
            crate::passes::optimize(&mut g, &opts.passes)?;
            Engine::from_bytes(&engine_of(&g, LowerOptions::default(), vec![])?)?
        };
        let inputs = fixed
            .plan()
            .inputs
            .iter()
            .enumerate()
            .map(|(i, &id)| {
                let t = &fixed.plan().tensors[id];
                Ok((t.name.clone(), crate::random::tensor(&t.ty, 0x5eed + (k * 64 + i) as u64)?))
            })
            .collect::<Result<Vec<(String, trtc_runtime::Tensor)>>>()?;
        let refs: Vec<(&str, &trtc_runtime::Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
        // Outputs are bit-identical whatever the thread count.
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        fn context(e: &Engine, threads: usize) -> Result<trtc_runtime::ExecutionContext<'_>> {
            let mut c = e.create_context()?;
            c.set_threads(threads)?;
            Ok(c)
        }
        // A model that does not run on random inputs there is not checked there.
        let Ok(want) = context(&fixed, threads)?.run(&refs) else { continue };
        let at = describe_shapes(shapes);
        let refuse = |why: String| {
            anyhow::anyhow!("at {at}, inside the profile, computing its sizes at run time {why}; its shapes cannot vary in one engine (build one engine per shape with --shape)")
        };
        let got = context(&engine, threads)?.run(&refs).map_err(|e| refuse(format!("fails: {e}")))?;
        for (name, theirs) in &want {
            let Some((_, ours)) = got.iter().find(|(n, _)| n == name) else {
                return Err(refuse(format!("gives no output '{name}'")));
            };
            if ours.shape() != theirs.shape() {
                return Err(refuse(format!(
                    "gives output '{name}' the shape {:?} where the model gives it {:?}",
                    ours.shape(),
                    theirs.shape()
                )));
            }
            let d = crate::compare::diff(name, ours, theirs);
            if d.max_rel_to_scale > 1e-4 {
                return Err(refuse(format!(
                    "gives output '{name}' values {:.1e} of its scale away from the model's",
                    d.max_rel_to_scale
                )));
            }
        }
    }
    Ok(())
}

/// The graph of a model whose profiles' shapes vary: imported at each
/// profile point with `import`, generalized and checked.
fn import_generalized(model: &ModelSource, opts: &BuildOptions, planned: &Shapes, import: &ImportOptions) -> Result<Graph> {
    // The model at every profile's min, opt and max shapes, then at the
    // planned ones: the same nodes, with the Reshapes whose targets follow
    // the input shapes made dynamic.
    let mut points: Vec<(String, Shapes)> = Vec::new();
    for (k, p) in opts.profiles.iter().enumerate() {
        for (which, flag) in [(0, "--min-shapes"), (1, "--opt-shapes"), (2, "--max-shapes")] {
            let shapes = p.at(which);
            if shapes != *planned && !points.iter().any(|(_, s)| *s == shapes) {
                let label = if opts.profiles.len() > 1 { format!("{flag} of profile {k}") } else { flag.to_string() };
                points.push((label, shapes));
            }
        }
    }
    // Compacted, so that the same node has the same index at every shape.
    let mut graphs = points
        .iter()
        .map(|(_, s)| import_at(model, &with_shapes(import, s)).map(|g| g.compacted()))
        .collect::<Result<Vec<Graph>>>()?;
    let largest = import_at(model, &with_shapes(import, planned))?;
    let name = |input: &str, axis: usize| largest.dim_names(input).and_then(|d| d.get(axis).cloned().flatten());
    // Two more points inside each profile, each where the model imports: a
    // probe point tells apart sizes that agree at the profile's own points
    // (a U-Net whose skip connections need even sizes does not import
    // there), and distinct sizes tell apart axes the model names
    // differently (a model that does not import there needs them equal).
    for (k, p) in opts.profiles.iter().enumerate() {
        for (what, shapes) in [("a probe shape", p.probe()), ("distinct sizes", p.distinct(&name))] {
            let Some(shapes) = shapes else { continue };
            if shapes == *planned || points.iter().any(|(_, s)| *s == shapes) {
                continue;
            }
            if let Ok(g) = import_at(model, &with_shapes(import, &shapes)) {
                let label = if opts.profiles.len() > 1 { format!("{what} of profile {k}") } else { what.to_string() };
                points.push((format!("{label} ({})", describe_shapes(&shapes)), shapes));
                graphs.push(g.compacted());
            }
        }
    }
    graphs.push(largest.compacted());
    crate::generalize::generalize(&mut graphs)?;
    let fp32_plan = |g: &Graph| -> Result<lower::Lowered> {
        let mut g = g.clone();
        crate::passes::optimize(&mut g, &opts.passes)?;
        lower::lower(&g, LowerOptions::default())
    };
    let at_max = fp32_plan(graphs.last().expect("the planned shapes' graph"))?;
    for ((label, _), g) in points.iter().zip(&graphs) {
        let other = fp32_plan(g).with_context(|| format!("at {label}"))?;
        crate::generalize::same_plan_but_shapes(&at_max, &other).with_context(|| {
            format!("{label}: the model's layers differ between this shape and the largest, so its shapes cannot vary in one engine (build one engine per shape with --shape)")
        })?;
    }
    let generalized = graphs.pop().expect("the planned shapes' graph");
    check_at_validation_points(model, opts, import, &generalized, &at_max.plan, &points)?;
    Ok(generalized)
}

/// Checks the generalized plan at a point of each profile that building
/// did not import ([`ShapeProfile::validation`]): the output shapes it
/// infers there must be those of the model imported there. A size read
/// from a tensor that only agreed with the right one at the imported
/// shapes is refused here instead of giving wrong outputs at run time. A
/// model that does not import at the point is not checked there.
fn check_at_validation_points(
    model: &ModelSource,
    opts: &BuildOptions,
    import: &ImportOptions,
    generalized: &Graph,
    plan: &trtc_runtime::plan::Plan,
    points: &[(String, Shapes)],
) -> Result<()> {
    let name = |input: &str, axis: usize| generalized.dim_names(input).and_then(|d| d.get(axis).cloned().flatten());
    for p in &opts.profiles {
        let Some(shapes) = p.validation(&name) else { continue };
        if points.iter().any(|(_, s)| *s == shapes) {
            continue;
        }
        let Ok(expected) = import_at(model, &with_shapes(import, &shapes)) else { continue };
        let at = describe_shapes(&shapes);
        let inputs: Vec<trtc_runtime::TensorType> = plan
            .inputs
            .iter()
            .map(|&id| {
                let t = &plan.tensors[id];
                let shape = shapes.iter().find(|(n, _)| *n == t.name).map_or_else(|| t.ty.shape.clone(), |(_, s)| s.clone());
                trtc_runtime::TensorType::new(t.ty.dtype, shape)
            })
            .collect();
        let refuse = |why: String| {
            anyhow::anyhow!("at {at}, inside the profile: {why}; the model's shapes cannot vary in one engine this way (build one engine per shape with --shape)")
        };
        let types = trtc_runtime::profile::bind(plan, &inputs)
            .map_err(|e| refuse(format!("the engine does not take these shapes ({e})")))?;
        for out in expected.outputs() {
            let want = &expected.ty(out.port).shape;
            let Some((_, id)) = plan.outputs.iter().find(|(n, _)| *n == out.name) else { continue };
            if types[*id].shape != *want {
                return Err(refuse(format!(
                    "the engine would give output '{}' the shape {:?}, the model gives it {want:?}",
                    out.name, types[*id].shape
                )));
            }
        }
    }
    Ok(())
}

/// The engine's profile: the ranges given, and every other input binding
/// at its one shape.
fn runtime_profile(p: &ShapeProfile, graph: &Graph, plan: &trtc_runtime::plan::Plan) -> Result<trtc_runtime::profile::Profile> {
    let mut inputs = Vec::new();
    for &id in &plan.inputs {
        let t = &plan.tensors[id];
        let range = match p.inputs.iter().find(|(n, _)| *n == t.name) {
            Some((_, [lo, mid, hi])) => (lo.clone(), mid.clone(), hi.clone()),
            None => (t.ty.shape.clone(), t.ty.shape.clone(), t.ty.shape.clone()),
        };
        inputs.push(trtc_runtime::profile::ProfileInput { name: t.name.clone(), min: range.0, opt: range.1, max: range.2 });
    }
    if let Some((name, _)) = p.inputs.iter().find(|(n, _)| !plan.inputs.iter().any(|&i| plan.tensors[i].name == *n)) {
        bail!("the profile names '{name}', which is not an input binding of the engine");
    }
    // Input axes the model names alike must agree.
    let mut shared: Vec<trtc_runtime::profile::SharedDim> = Vec::new();
    for (i, range) in inputs.iter().enumerate() {
        let names = graph.dim_names(&range.name).unwrap_or_default();
        for (axis, name) in names.iter().enumerate() {
            let Some(name) = name else { continue };
            match shared.iter_mut().find(|d| d.name == *name) {
                Some(d) => d.axes.push((i, axis)),
                None => shared.push(trtc_runtime::profile::SharedDim { name: name.clone(), axes: vec![(i, axis)] }),
            }
        }
    }
    shared.retain(|d| d.axes.len() >= 2);
    let profile = trtc_runtime::profile::Profile { inputs, shared };
    for at in [trtc_runtime::profile::ProfilePoint::Min, trtc_runtime::profile::ProfilePoint::Opt] {
        profile.bind_at(plan, at).map_err(|e| anyhow::anyhow!("the engine does not run at the {} shapes: {e}", at.name()))?;
    }
    Ok(profile)
}

/// Engine bytes of a graph as it is (no passes), e.g. the FP32 reference.
pub fn engine_of(graph: &Graph, opts: LowerOptions, flags: Vec<String>) -> Result<Vec<u8>> {
    let lowered = lower::lower(graph, opts)?;
    Ok(Engine::serialize(Target::Cpu, flags, &lowered.plan, &lowered.weights, None)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::precision::calib::Calibrator;
    use trtc_runtime::ops::precision::Precision;

    #[test]
    fn provenance_flags_spell_the_options_in_a_fixed_order() {
        assert!(BuildOptions::default().provenance_flags().is_empty());
        let mut opts = BuildOptions::default();
        opts.import.shapes.insert("y".into(), vec![4]);
        opts.import.shapes.insert("x".into(), vec![1, 3, 224, 224]);
        opts.import.input_values.insert("shape".into(), trtc_runtime::Tensor::scalar(1i64));
        opts.passes.disabled = vec!["cse".into()];
        opts.lower.reuse_buffers = false;
        opts.target = Target::Cuda { sm: 90, gpu_name: None };
        opts.tuning.opt_level = Some(2);
        opts.tuning.timing_cache = Some("/somewhere/t.cache".into());
        opts.precision.fp16 = true;
        opts.precision.int8 = true;
        opts.int8.calib.calibrator = Calibrator::Percentile(99.9);
        opts.precision.layer_precisions.push(("/fc/*".into(), Precision::Fp32));
        assert_eq!(
            opts.provenance_flags(),
            [
                "--shape x:1x3x224x224",
                "--shape y:4",
                "--input-value shape",
                "--disable-pass cse",
                "--no-buffer-reuse",
                "--target sm_90",
                "--opt-level 2",
                "--timing-cache",
                "--fp16",
                "--int8",
                "--calibrator percentile=99.9",
                "--layer-precision /fc/*=fp32",
            ]
        );
    }
}
