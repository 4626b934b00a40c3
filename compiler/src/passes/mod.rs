//! Graph passes and the pass manager.
//!
//! A pass is a small, named rewrite that never changes what the graph
//! computes and never makes it worse (fewer or equal nodes, no extra work).
//! The manager runs the list to a fixed point, checks the IR's invariants
//! after every pass in debug builds and tests, and can disable any pass by
//! name (`trtc build --disable-pass NAME`).

mod cleanup;
mod constant_folding;
mod cse;
mod fusion;
mod layout;
mod patterns;
mod pointwise;
mod sub_plans;

use crate::ir::Graph;
use anyhow::{Context, Result};
use std::time::{Duration, Instant};

pub use cleanup::{DeadNodes, NoOpRemoval};
pub use constant_folding::ConstantFolding;
pub use cse::CommonSubexpressions;
pub(crate) use fusion::as_linear;
pub use fusion::{AffineFolding, BatchNormFolding, LinearEpilogueFusion, SiblingMatMulMerge};
pub use layout::{GemmToMatMul, PadFolding, TransposeCancellation};
pub use patterns::{AttentionPattern, GeluPattern, LayerNormPattern, SoftmaxPattern};
pub use pointwise::PointwiseFusion;

pub trait Pass {
    /// The name users disable it by, e.g. `constant-folding`.
    fn name(&self) -> &'static str;
    /// Rewrites the graph; returns how many rewrites it made (0 = no change).
    fn run(&self, graph: &mut Graph) -> Result<usize>;
}

/// What one pass did over a whole run.
#[derive(Clone, Debug, Default)]
pub struct PassStats {
    pub name: &'static str,
    pub rewrites: usize,
    pub time: Duration,
    /// Op nodes after the pass last ran.
    pub nodes_after: usize,
}

/// Options of the optimizer.
#[derive(Clone, Debug, Default)]
pub struct PassOptions {
    /// Pass names not to run (`all` disables every pass).
    pub disabled: Vec<String>,
    /// Run no pass at all (for differential tests).
    pub disable_all: bool,
}

/// Every pass, in the order they run.
pub fn all() -> Vec<Box<dyn Pass>> {
    vec![
        Box::new(ConstantFolding::default()),
        Box::new(NoOpRemoval),
        Box::new(CommonSubexpressions),
        Box::new(TransposeCancellation),
        Box::new(PadFolding),
        Box::new(GemmToMatMul),
        Box::new(BatchNormFolding),
        Box::new(AffineFolding),
        Box::new(GeluPattern),
        Box::new(LayerNormPattern),
        Box::new(SoftmaxPattern),
        Box::new(AttentionPattern),
        Box::new(DeadNodes),
        Box::new(LinearEpilogueFusion),
        Box::new(SiblingMatMulMerge),
    ]
}

/// Passes run once after the others reach their fixed point.
pub fn late() -> Vec<Box<dyn Pass>> {
    vec![Box::new(PointwiseFusion), Box::new(DeadNodes)]
}

pub fn names() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = all().iter().chain(late().iter()).map(|p| p.name()).collect();
    v.dedup();
    v.sort();
    v.dedup();
    v
}

/// Runs one pass; a bug that panics inside it becomes an error naming the
/// pass and the way around it, instead of a crash.
fn run_guarded(p: &dyn Pass, graph: &mut Graph) -> Result<usize> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p.run(graph))) {
        Ok(r) => r.with_context(|| format!("pass {}", p.name())),
        Err(e) => {
            let msg = crate::panic_message(e.as_ref());
            anyhow::bail!(
                "internal error in pass {} ({msg}); please report it, and build with --disable-pass {} meanwhile",
                p.name(),
                p.name()
            )
        }
    }
}

/// Runs the enabled passes to a fixed point (at most 16 rounds).
pub fn optimize(graph: &mut Graph, opts: &PassOptions) -> Result<Vec<PassStats>> {
    let known = names();
    let disable_all = opts.disable_all || opts.disabled.iter().any(|d| d == "all");
    for d in &opts.disabled {
        if d != "all" && !known.contains(&d.as_str()) {
            anyhow::bail!("--disable-pass {d}: no such pass (passes: {})", known.join(", "));
        }
    }
    let passes: Vec<Box<dyn Pass>> =
        all().into_iter().filter(|p| !disable_all && !opts.disabled.iter().any(|d| d == p.name())).collect();
    let mut stats: Vec<PassStats> = passes.iter().map(|p| PassStats { name: p.name(), ..Default::default() }).collect();
    for _round in 0..16 {
        let mut changed = 0;
        for (p, s) in passes.iter().zip(&mut stats) {
            let start = Instant::now();
            let n = run_guarded(p.as_ref(), graph)?;
            s.time += start.elapsed();
            s.rewrites += n;
            s.nodes_after = graph.op_count();
            changed += n;
            if cfg!(debug_assertions) {
                crate::ir::verify(graph).with_context(|| format!("IR invalid after pass {}", p.name()))?;
            }
        }
        if changed == 0 {
            break;
        }
    }
    for p in late() {
        if disable_all || opts.disabled.iter().any(|d| d == p.name()) {
            continue;
        }
        let start = Instant::now();
        let n = run_guarded(p.as_ref(), graph)?;
        let nodes_after = graph.op_count();
        match stats.iter_mut().find(|s| s.name == p.name()) {
            Some(s) => {
                s.rewrites += n;
                s.time += start.elapsed();
                s.nodes_after = nodes_after;
            }
            None => stats.push(PassStats { name: p.name(), rewrites: n, time: start.elapsed(), nodes_after }),
        }
        if cfg!(debug_assertions) {
            crate::ir::verify(graph).with_context(|| format!("IR invalid after pass {}", p.name()))?;
        }
    }
    if !disable_all {
        sub_plans::optimize_sub_plans(graph, opts)?;
    }
    Ok(stats)
}
