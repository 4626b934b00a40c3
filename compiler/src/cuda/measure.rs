//! Timing one candidate of one layer on the GPU, for the autotuner.
//!
//! The candidate runs as a one-layer engine on the CUDA executor: every
//! input of the layer (weights included) lives in the activation arena,
//! float inputs hold uniform noise and integer inputs zeros (always valid
//! indices), and the layer's launches are timed with CUDA events after a
//! warm-up; the median of the timed runs is the candidate's time.
//!
//! Limitation: the same buffers are reused between runs, so a layer whose
//! tensors fit in L2 (50 MiB on an H200) is timed with warm caches, as it
//! also runs inside a CUDA graph when its producer just wrote its input.

use super::nvrtc;
use crate::tuning::{Measure, Timing};
use anyhow::{anyhow, Result};
use trtc_kernels::{Candidate, LayerIo};
use trtc_runtime::kernels::{KernelModule, KernelTable, Launch, LayerKernels};
use trtc_runtime::plan::{Layer, Plan, Storage, TensorDesc};
use trtc_runtime::tensor::ALIGN;
use trtc_runtime::{Engine, Target, Tensor};

/// Measures candidates on GPU `ordinal`, of compute capability `sm`.
pub struct GpuMeasure {
    pub ordinal: usize,
    pub sm: u32,
    /// Untimed runs, then timed runs (the median is kept).
    pub warmup: usize,
    pub runs: usize,
    /// Taken at the first measurement: without it, every candidate's engine
    /// would create and destroy the GPU's CUDA context.
    keep_alive: Option<trtc_runtime::ContextKeepAlive>,
}

impl GpuMeasure {
    pub fn new(ordinal: usize, sm: u32) -> GpuMeasure {
        GpuMeasure { ordinal, sm, warmup: 3, runs: 10, keep_alive: None }
    }
}

/// The one-layer plan of `io`: inputs then outputs in the arena.
fn one_layer_plan(io: &LayerIo<'_>) -> Result<Plan> {
    let mut plan = Plan::default();
    let mut offset = 0u64;
    let mut add = |plan: &mut Plan, name: String, ty: &trtc_runtime::TensorType| -> Result<usize> {
        let bytes = ty.checked_bytes().ok_or_else(|| anyhow!("tensor {name} is too large"))? as u64;
        plan.tensors.push(TensorDesc { name, ty: ty.clone(), storage: Storage::Arena { offset } });
        offset += bytes.div_ceil(ALIGN as u64) * ALIGN as u64;
        Ok(plan.tensors.len() - 1)
    };
    let mut inputs = Vec::new();
    for (k, ty) in io.inputs.iter().enumerate() {
        inputs.push(match ty {
            Some(ty) => {
                let id = add(&mut plan, format!("in{k}"), ty)?;
                plan.inputs.push(id);
                Some(id)
            }
            None => None,
        });
    }
    let mut outputs = Vec::new();
    for (k, ty) in io.outputs.iter().enumerate() {
        let id = add(&mut plan, format!("out{k}"), ty)?;
        plan.outputs.push((format!("out{k}"), id));
        outputs.push(id);
    }
    plan.layers.push(Layer { name: "timed".into(), op: io.op.clone(), inputs, outputs });
    plan.arena_bytes = offset;
    plan.arena_bytes_without_reuse = offset;
    Ok(plan)
}

impl Measure for GpuMeasure {
    fn prepare(&mut self, candidates: &[&Candidate]) {
        // Compiled into NVRTC's in-process cache on every CPU thread; a
        // failure shows again (and is handled) when the candidate is measured.
        let sources: Vec<(trtc_kernels::KernelSource, String, String)> = candidates
            .iter()
            .flat_map(|c| c.launches.iter().map(|l| (l.kernel.clone(), c.tactic.to_string(), String::new())))
            .collect();
        let _ = super::kernel_table::compile_all(&sources, self.sm);
    }

    fn measure(&mut self, io: &LayerIo<'_>, candidate: &Candidate) -> Result<Option<Timing>> {
        // A candidate that does not compile or spills registers is not run.
        let mut modules: Vec<KernelModule> = Vec::new();
        let mut sources: Vec<&str> = Vec::new();
        let mut launches = Vec::new();
        for l in &candidate.launches {
            let module = match sources.iter().position(|s| *s == l.kernel.source) {
                Some(m) => m,
                None => {
                    let c = match nvrtc::compile(&l.kernel.source, &l.kernel.entry, self.sm) {
                        Ok(c) if c.spill_store_bytes() == 0 => c,
                        _ => return Ok(None),
                    };
                    sources.push(&l.kernel.source);
                    modules.push(KernelModule {
                        entry: l.kernel.entry.clone(),
                        tactic: candidate.tactic.to_string(),
                        cubin: c.cubin,
                        digest: trtc_runtime::kernels::source_digest(&l.kernel.entry, &l.kernel.source),
                    });
                    modules.len() - 1
                }
            };
            launches.push(Launch {
                module: module as u32,
                grid: l.grid,
                block: l.block,
                shared_bytes: l.shared_bytes,
                args: l.args.clone(),
            });
        }
        let plan = one_layer_plan(io)?;
        let table = KernelTable {
            sm: self.sm,
            nvrtc_version: String::new(),
            modules,
            layers: vec![LayerKernels::Device(launches)],
            tactics: vec![candidate.tactic.to_string()],
        };
        let bytes = Engine::serialize(Target::Cuda { sm: self.sm, gpu_name: None }, vec![], &plan, &[], Some(&table))?;
        let engine = Engine::from_bytes(&bytes)?;
        // No GPU (or another one) means nothing can be timed: an error, so
        // that the tuner falls back instead of recording a failed run.
        if self.keep_alive.is_none() {
            self.keep_alive = Some(trtc_runtime::ContextKeepAlive::new(self.ordinal)?);
        }
        let gpu = engine.cuda(self.ordinal)?;
        let mut ctx = gpu.create_context()?;
        ctx.set_cuda_graph(false);
        let inputs: Vec<(String, Tensor)> = engine
            .inputs()
            .iter()
            .enumerate()
            .map(|(k, b)| {
                let t =
                    if b.ty.dtype.is_float() { crate::random::tensor(&b.ty, k as u64)? } else { Tensor::zeros(b.ty.clone())? };
                Ok((b.name.clone(), t))
            })
            .collect::<Result<_>>()?;
        let refs: Vec<(&str, &Tensor)> = inputs.iter().map(|(n, t)| (n.as_str(), t)).collect();
        if ctx.run(&refs).is_err() {
            return Ok(None);
        }
        ctx.time_enqueues(self.warmup.max(1))?;
        let mut times = Vec::with_capacity(self.runs);
        for _ in 0..self.runs.max(1) {
            times.push(ctx.time_enqueues(1)? as f64 * 1e3);
        }
        times.sort_by(f64::total_cmp);
        Ok(Some(Timing { median_us: times[times.len() / 2], runs: times.len() as u32 }))
    }
}
