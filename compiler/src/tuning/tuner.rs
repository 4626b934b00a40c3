//! The autotuner as the kernel table builder sees it: a
//! [`TacticChooser`] that asks [`choose`] for each layer, with the timing
//! cache and a way to measure candidates on the GPU (or none).

use super::{choose, op_signature, source_hash, Choice, Device, Layer, Policy, TacticChooser, Timing, TimingCache, TimingKey};
use anyhow::{bail, Result};
use trtc_kernels::{Candidate, LayerIo};

/// Times one candidate of one layer: `Ok(None)` when it cannot run (it does
/// not compile, spills, or fails to launch), `Err` when nothing can be timed
/// (no GPU).
pub trait Measure {
    fn measure(&mut self, io: &LayerIo<'_>, candidate: &Candidate) -> Result<Option<Timing>>;

    /// Called with the candidates about to be measured, before the first
    /// one is: a measurer compiles them all at once here, in parallel.
    fn prepare(&mut self, _candidates: &[&Candidate]) {}
}

/// The measurer of a machine without a GPU of the target's kind: every
/// cache miss falls back to the heuristic tactic (or is an error with
/// `--error-on-cache-miss`).
pub struct NoGpu(pub String);

impl Measure for NoGpu {
    fn measure(&mut self, _: &LayerIo<'_>, _: &Candidate) -> Result<Option<Timing>> {
        bail!("{}", self.0)
    }
}

/// Chooses tactics with [`choose`] and keeps each layer's [`Choice`] for the
/// build's summary.
pub struct Tuner<'m> {
    pub device: Device,
    pub cache: TimingCache,
    pub policy: Policy,
    pub measure: &'m mut dyn Measure,
    /// `(layer name, choice)` for every layer that had candidates.
    pub choices: Vec<(String, Choice)>,
}

impl TacticChooser for Tuner<'_> {
    fn choose(&mut self, layer: &trtc_runtime::plan::Layer, io: &LayerIo<'_>, candidates: &[Candidate]) -> Result<usize> {
        let signature = op_signature(io);
        let l = Layer { name: &layer.name, signature: &signature, candidates };
        if !self.policy.error_on_cache_miss {
            let considered = super::CANDIDATES_PER_LEVEL.get(self.policy.opt_level as usize).copied().unwrap_or(1);
            let missing: Vec<&Candidate> = candidates
                .iter()
                .take(considered)
                .filter(|c| {
                    let key = TimingKey { device: self.device.clone(), op: signature.clone(), tactic: c.tactic.to_string() };
                    self.cache.get(&key, source_hash(c)).is_none()
                })
                .collect();
            if missing.len() > 1 || (missing.len() == 1 && considered > 1) {
                self.measure.prepare(&missing);
            }
        }
        let measure = &mut *self.measure;
        let choice = choose(&l, &self.device, &mut self.cache, self.policy, |c| measure.measure(io, c))?;
        let index = choice.index;
        self.choices.push((layer.name.clone(), choice));
        Ok(index)
    }
}

impl Tuner<'_> {
    /// The per-layer summary printed at the end of a tuned build: tactic,
    /// time and runner-up of each layer that had a choice, then totals.
    pub fn summary(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let (mut hits, mut measured, mut fallbacks) = (0, 0, 0);
        for (layer, c) in &self.choices {
            hits += c.cache_hits;
            measured += c.measured;
            if c.considered < 2 {
                continue;
            }
            let time = c.time_us.map_or("-".to_string(), |t| format!("{t:.2} us"));
            let runner = c.runner_up.as_ref().map_or(String::new(), |(t, us)| format!(", runner-up {t} {us:.2} us"));
            let from = if c.from_cache { " (cached)" } else { "" };
            let _ = writeln!(s, "  {layer}: {} {time}{from}{runner}", c.tactic);
            if let Some(f) = &c.fallback {
                fallbacks += 1;
                let _ = writeln!(s, "    {f}");
            }
        }
        let _ = writeln!(
            s,
            "tuning: {} layers, {hits} timings from the cache, {measured} measured, {fallbacks} on the heuristic tactic for lack of a timing",
            self.choices.len()
        );
        s
    }
}
