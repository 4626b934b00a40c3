//! The CUDA build side: finding NVRTC, choosing each layer's kernels (with
//! the heuristic or the autotuner) and compiling them to cubins
//! (`kernel_table`), timing candidates on the GPU (`measure`), and asking
//! the GPU present for its compute capability (`--target cuda`).

pub mod nvrtc;
pub mod kernel_table;
pub mod measure;

use crate::tuning::Heuristic;
use crate::tuning::{self, Device, Measure, NoGpu, Policy, TimingCache, Tuner};
use anyhow::{Context, Result};
use kernel_table::KernelReport;
use std::path::PathBuf;
use trtc_runtime::executor::cuda::{self as gpu, DeviceInfo};
use trtc_runtime::kernels::KernelTable;
use trtc_runtime::plan::Plan;

/// The first GPU of this machine, as `--target cuda` sees it; the error says
/// what is missing (libcuda, a device).
pub fn present_gpu() -> Result<DeviceInfo> {
    Ok(gpu::device_info(0)?)
}

/// Loads `engine` on GPU `ordinal` with the kernel families computing
/// launches at the shapes bound in each run (an engine whose shapes vary
/// needs them; any engine loads so).
pub fn load(engine: &trtc_runtime::Engine, ordinal: usize) -> Result<gpu::CudaEngine<'_>> {
    Ok(engine.cuda_with_planner(ordinal, std::sync::Arc::new(trtc_kernels::FamilyPlanner))?)
}

/// How tactics are chosen (`--opt-level`, `--timing-cache`,
/// `--error-on-cache-miss`).
#[derive(Clone, Debug, Default)]
pub struct TuningOptions {
    /// 0 to 5. When absent: 3 where the target's GPU is present or a timing
    /// cache is given, else 0 (the heuristic: nothing to time with).
    pub opt_level: Option<u8>,
    pub timing_cache: Option<PathBuf>,
    pub error_on_cache_miss: bool,
}

/// Chooses and compiles the kernels of `plan` for `sm_<sm>`, serving the
/// shapes of `profiles` too (an engine whose shapes vary; see
/// [`kernel_table::profile_points`]). Warnings (a corrupted timing cache,
/// layers left untuned) and the tuning summary go into the report.
pub fn build_kernels(
    plan: &Plan,
    sm: u32,
    profiles: &[trtc_runtime::profile::Profile],
    opts: &TuningOptions,
) -> Result<(KernelTable, KernelReport)> {
    let points = if profiles.iter().any(|p| p.is_dynamic()) || profiles.len() > 1 {
        kernel_table::profile_points(plan, profiles)
    } else {
        Vec::new()
    };
    // The GPU to time on: the first one, when it is of the target's kind.
    let present = present_gpu().ok().filter(|d| d.sm == sm);
    let level =
        opts.opt_level.unwrap_or(if present.is_some() || opts.timing_cache.is_some() { tuning::DEFAULT_OPT_LEVEL } else { 0 });
    if level == 0 && !opts.error_on_cache_miss {
        return kernel_table::build(plan, sm, &points, &mut Heuristic);
    }
    let mut warnings = Vec::new();
    let mut cache = TimingCache::new();
    if let Some(path) = &opts.timing_cache {
        let (c, warning) = TimingCache::load(path).with_context(|| format!("cannot read the timing cache {}", path.display()))?;
        cache = c;
        warnings.extend(warning);
    }
    let nvrtc = nvrtc::version()?;
    let (device, mut measure): (Device, Box<dyn Measure>) = match &present {
        Some(d) => (
            Device { gpu: d.name.clone(), sm, driver: d.driver_version_number, nvrtc },
            Box::new(measure::GpuMeasure::new(d.ordinal, sm)),
        ),
        None => {
            // Without the GPU, the cache's timings for this SM decide (the
            // first device in the file's order, so the choice is stable).
            let device = cache.devices().into_iter().find(|d| d.sm == sm && d.nvrtc == nvrtc).unwrap_or(Device {
                gpu: String::new(),
                sm,
                driver: 0,
                nvrtc,
            });
            (device, Box::new(NoGpu(format!("no sm_{sm} GPU on this machine to time on"))))
        }
    };
    let policy = Policy { opt_level: level, error_on_cache_miss: opts.error_on_cache_miss };
    let mut tuner = Tuner { device, cache, policy, measure: measure.as_mut(), choices: Vec::new() };
    let start = std::time::Instant::now();
    let (table, mut report) = kernel_table::build(plan, sm, &points, &mut tuner)?;
    report.tuning_time = Some(start.elapsed());
    report.tuning_summary = tuner.summary();
    let measured: usize = tuner.choices.iter().map(|(_, c)| c.measured).sum();
    if let (Some(path), true) = (&opts.timing_cache, measured > 0) {
        let warning = tuner.cache.save(path).with_context(|| format!("cannot write the timing cache {}", path.display()))?;
        warnings.extend(warning);
    }
    report.warnings.extend(warnings);
    Ok((table, report))
}
