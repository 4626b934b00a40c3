//! Choosing a layer's tactic from its candidates, the timing cache and
//! (on a miss) a measurement.

use anyhow::{bail, Result};
use trtc_kernels::{Candidate, LayerIo};
use trtc_runtime::plan::Layer as PlanLayer;

use super::key::{source_hash, Device, TimingKey};
use super::timing_cache::{Entry, TimingCache};

/// Chooses one candidate among a layer's candidates (the heuristic one
/// first). Returns its index.
pub trait TacticChooser {
    fn choose(&mut self, layer: &PlanLayer, io: &LayerIo<'_>, candidates: &[Candidate]) -> Result<usize>;
}

/// The documented heuristic of each family (optimization level 0): the
/// first candidate.
pub struct Heuristic;

impl TacticChooser for Heuristic {
    fn choose(&mut self, _: &PlanLayer, _: &LayerIo<'_>, _: &[Candidate]) -> Result<usize> {
        Ok(0)
    }
}

/// How many candidates each optimization level considers, the heuristic
/// (first) one always among them; index = level. See the module docs.
pub const CANDIDATES_PER_LEVEL: [usize; 6] = [1, 4, 8, 16, 64, usize::MAX];

/// The level used when none is given, like TensorRT's default of 3.
pub const DEFAULT_OPT_LEVEL: u8 = 3;

/// How much to tune, and whether a timing cache miss is an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// 0 to 5; see [`CANDIDATES_PER_LEVEL`].
    pub opt_level: u8,
    /// Fail on any candidate missing from the timing cache instead of
    /// measuring it, so that a CI build is decided by the cache alone.
    pub error_on_cache_miss: bool,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy { opt_level: DEFAULT_OPT_LEVEL, error_on_cache_miss: false }
    }
}

/// A measurement of one candidate: the median of `runs` timed runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub median_us: f64,
    pub runs: u32,
}

/// A layer to tune.
#[derive(Clone, Copy, Debug)]
pub struct Layer<'a> {
    /// The layer's name, for messages.
    pub name: &'a str,
    /// Its [`op_signature`](super::op_signature).
    pub signature: &'a str,
    /// Its candidates, the heuristic choice first, as
    /// `trtc_kernels::candidates` returns them.
    pub candidates: &'a [Candidate],
}

/// The tactic chosen for a layer, and what the per-layer summary shows.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// The index of the chosen candidate.
    pub index: usize,
    pub tactic: trtc_kernels::Tactic,
    /// The chosen candidate's median time, when it was timed.
    pub time_us: Option<f64>,
    /// The second fastest candidate and its time.
    pub runner_up: Option<(trtc_kernels::Tactic, f64)>,
    /// Whether the chosen candidate's time came from the timing cache.
    pub from_cache: bool,
    /// How many candidates were considered, found in the cache, measured.
    pub considered: usize,
    pub cache_hits: usize,
    pub measured: usize,
    /// Why the heuristic candidate was taken although the level asks for
    /// tuning (a candidate could not be timed, or none could run).
    pub fallback: Option<String>,
}

/// Chooses the tactic of `layer` on `device`.
///
/// Level 0, or a single candidate, takes the first candidate without
/// looking at the cache. Otherwise the first `CANDIDATES_PER_LEVEL[level]`
/// candidates are considered: those in `cache` with a matching source hash
/// use the cached time; the others are missing. With
/// `policy.error_on_cache_miss`, a missing one is an error naming the layer
/// and the tactic; otherwise each is measured with `measure` (`Ok(None)`:
/// it could not run; `Err`: it cannot be timed, e.g. there is no GPU) and
/// its result goes into the cache. The first `Err` stops measuring and the
/// heuristic candidate is taken, with [`Choice::fallback`] saying why. The
/// fastest candidate wins; equal times (compared exactly, as stored) go to
/// the earlier candidate. Since a warm cache decides everything, the same
/// candidates and cache give the same choice.
pub fn choose(
    layer: &Layer<'_>,
    device: &Device,
    cache: &mut TimingCache,
    policy: Policy,
    mut measure: impl FnMut(&Candidate) -> Result<Option<Timing>>,
) -> Result<Choice> {
    let Some(&limit) = CANDIDATES_PER_LEVEL.get(policy.opt_level as usize) else {
        bail!("optimization level {} is out of range 0-5", policy.opt_level)
    };
    if layer.candidates.is_empty() {
        bail!("layer {}: no candidates", layer.name);
    }
    let considered = &layer.candidates[..limit.min(layer.candidates.len())];
    if considered.len() == 1 {
        let tactic = considered[0].tactic.clone();
        let (time_us, runner_up, from_cache, fallback) = (None, None, false, None);
        return Ok(Choice {
            index: 0,
            tactic,
            time_us,
            runner_up,
            from_cache,
            considered: 1,
            cache_hits: 0,
            measured: 0,
            fallback,
        });
    }
    for (i, c) in considered.iter().enumerate() {
        if considered[..i].iter().any(|d| d.tactic == c.tactic) {
            bail!("layer {}: tactic {} appears twice among the candidates", layer.name, c.tactic);
        }
    }

    // Look every candidate up; `times[i]` is `None` until known to have run.
    let key = |c: &Candidate| TimingKey { device: device.clone(), op: layer.signature.to_string(), tactic: c.tactic.to_string() };
    let cached: Vec<Option<&Entry>> = considered.iter().map(|c| cache.get(&key(c), source_hash(c))).collect();
    let mut times: Vec<Option<f64>> = cached.iter().map(|e| e.and_then(|e| e.median_us)).collect();
    let hit: Vec<bool> = cached.iter().map(Option::is_some).collect();
    let cache_hits = hit.iter().filter(|&&h| h).count();
    if let (true, Some(i)) = (policy.error_on_cache_miss, hit.iter().position(|&h| !h)) {
        bail!(
            "layer {}: tactic {} is not in the timing cache for {} (sm_{}) and --error-on-cache-miss is set ({} of {} candidates missing)",
            layer.name,
            considered[i].tactic,
            device.gpu,
            device.sm,
            considered.len() - cache_hits,
            considered.len()
        );
    }

    // Measure the missing ones, until one cannot be timed.
    let (mut measured, mut fallback) = (0, None);
    for (i, c) in considered.iter().enumerate().filter(|&(i, _)| !hit[i]) {
        let timing = match measure(c) {
            Ok(timing) => timing,
            Err(e) => {
                fallback = Some(format!("could not time tactic {} ({e:#}); using the heuristic tactic", c.tactic));
                break;
            }
        };
        if let Some(t) = timing.filter(|t| !(t.median_us.is_finite() && t.median_us >= 0.0)) {
            bail!("layer {}: tactic {} measured an invalid time of {} us", layer.name, c.tactic, t.median_us);
        }
        let median_us = timing.map(|t| t.median_us.abs()); // abs: -0.0 is stored as 0
        cache.insert(key(c), Entry { source_hash: source_hash(c), median_us, runs: timing.map_or(0, |t| t.runs) });
        times[i] = median_us;
        measured += 1;
    }

    // The fastest wins; equal times go to the earlier candidate.
    let mut ranked: Vec<usize> = (0..considered.len()).filter(|&i| times[i].is_some()).collect();
    ranked.sort_by(|&a, &b| times[a].unwrap().total_cmp(&times[b].unwrap()).then(a.cmp(&b)));
    if fallback.is_none() && ranked.is_empty() {
        fallback = Some("no candidate could run; using the heuristic tactic".to_string());
    }
    let (index, runner_up) = match fallback {
        Some(_) => (0, None),
        None => (ranked[0], ranked.get(1).map(|&i| (considered[i].tactic.clone(), times[i].unwrap()))),
    };
    Ok(Choice {
        index,
        tactic: considered[index].tactic.clone(),
        time_us: times[index],
        runner_up,
        from_cache: hit[index],
        considered: considered.len(),
        cache_hits,
        measured,
        fallback,
    })
}
