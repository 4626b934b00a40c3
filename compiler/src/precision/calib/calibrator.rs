//! INT8 post-training calibration: activation histograms, TensorRT-compatible
//! threshold selection (entropy, min/max, percentile) and the TensorRT text
//! calibration cache.
//!
//! The cache header is `TRT-<version>-<CalibratorName>`, where `<version>` is
//! TensorRT's `NV_TENSORRT_VERSION` integer. TensorRT 7/8 computed it as
//! `major * 1000 + minor * 100 + patch` (sampleINT8 README shows
//! `TRT-7000-EntropyCalibration2`, NVIDIA/TensorRT issue #2036 shows
//! `TRT-8203-...`, ultralytics issue #14121 shows `TRT-8601-EntropyCalibration2`).
//! TensorRT 10's `NvInferRuntimeBase.h` defines `NV_TENSORRT_VERSION_INT` as
//! `major * 10000 + minor * 100 + patch`, so 10.3.0 writes `TRT-100300-...`
//! (seen in NVIDIA's TrafficCamNet INT8 cache). We write the TensorRT 10 style
//! [`CACHE_HEADER_VERSION`] and accept any `TRT-<digits>-<name>` when reading.

use anyhow::{anyhow, bail, Result};
use std::collections::BTreeMap;

/// The default number of histogram bins, as used by TensorRT's entropy calibrator.
pub const HIST_BINS: usize = 2048;
/// The number of positive INT8 quantization levels used by the entropy search.
pub const QUANT_LEVELS: usize = 128;
/// The default percentile for [`Calibrator::Percentile`].
pub const DEFAULT_PERCENTILE: f64 = 99.99;
/// The TensorRT version number we write in cache headers (TensorRT 10.3.0).
pub const CACHE_HEADER_VERSION: &str = "100300";
/// The fewest values a histogram needs before the entropy and percentile
/// calibrators trust it: 16 per bin on average. A tensor seen fewer times
/// over all batches (a squeeze-and-excitation FC's pooled input: a few
/// hundred values a batch) takes its observed max instead, as `minmax`
/// does; a 2048-bin search over a sparse histogram picks unstable
/// thresholds.
pub const MIN_HISTOGRAM_SAMPLES: u128 = 16 * HIST_BINS as u128;
/// The largest value of a symmetric INT8 quantized tensor.
const INT8_MAX: f32 = 127.0;

/// A histogram of absolute values over `[0, range_max]` with equal-width bins.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// The upper end of the histogrammed range; values at or above it land in the last bin.
    pub range_max: f32,
    /// The count of values that fell into each bin.
    pub bins: Vec<u64>,
}

impl Histogram {
    /// Creates an empty histogram; a negative or non-finite range becomes 0 and zero bins become one.
    pub fn new(range_max: f32, bins: usize) -> Self {
        let range_max = Some(range_max).filter(|r| r.is_finite() && *r > 0.0);
        let bins = vec![0; bins.max(1)];
        Histogram { range_max: range_max.unwrap_or(0.0), bins }
    }

    /// Creates an empty histogram with the default [`HIST_BINS`] bins.
    pub fn with_range(range_max: f32) -> Self {
        Self::new(range_max, HIST_BINS)
    }

    /// Returns the width of one bin (zero when the range is zero).
    pub fn bin_width(&self) -> f32 {
        self.range_max / self.bins.len() as f32
    }

    /// Returns the index of the bin that holds `|value|`, or `None` for NaN or no bins.
    fn bin_index(&self, value: f32) -> Option<usize> {
        let last = self.bins.len().checked_sub(1)?;
        let magnitude = value.abs();
        if value.is_nan() {
            None
        } else if self.range_max == 0.0 {
            Some(0)
        } else if magnitude >= self.range_max {
            Some(last)
        } else {
            Some(((magnitude / self.bin_width()) as usize).min(last))
        }
    }

    /// Counts the absolute value of each sample; NaN samples are ignored.
    pub fn add(&mut self, values: &[f32]) {
        for &value in values {
            if let Some(index) = self.bin_index(value) {
                self.bins[index] = self.bins[index].saturating_add(1);
            }
        }
    }

    /// Adds another histogram's counts; it fails unless both have the same range and bin count.
    pub fn merge(&mut self, other: &Histogram) -> Result<()> {
        if self.range_max.to_bits() != other.range_max.to_bits() || self.bins.len() != other.bins.len() {
            let (a, b) = (self.bins.len(), other.bins.len());
            let (ra, rb) = (self.range_max, other.range_max);
            bail!("cannot merge a {a}-bin histogram over {ra} with a {b}-bin one over {rb}");
        }
        for (mine, theirs) in self.bins.iter_mut().zip(&other.bins) {
            *mine = mine.saturating_add(*theirs);
        }
        Ok(())
    }

    /// Returns the total number of counted values.
    pub fn total(&self) -> u128 {
        self.bins.iter().map(|&b| u128::from(b)).sum()
    }
}

/// The algorithm that turns collected statistics into a tensor's dynamic range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Calibrator {
    /// TensorRT's EntropyCalibration2: the KL-divergence-minimizing threshold.
    Entropy,
    /// The largest absolute value observed.
    MinMax,
    /// The histogram edge below which the given percentage of values lie.
    Percentile(f64),
    /// Per tensor, whichever of [`AUTO_CANDIDATES`] gives the layers that
    /// read the tensor the least error against FP32 on the calibration
    /// batches (chosen while building: `crate::auto_calibration`).
    Auto,
}

/// What the `auto` calibrator chooses from, in order of preference on a tie.
pub const AUTO_CANDIDATES: [Calibrator; 3] =
    [Calibrator::Entropy, Calibrator::Percentile(DEFAULT_PERCENTILE), Calibrator::MinMax];

/// The `--calibrator` spelling: `entropy`, `minmax`, `percentile=P`.
impl std::fmt::Display for Calibrator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Calibrator::Entropy => f.write_str("entropy"),
            Calibrator::MinMax => f.write_str("minmax"),
            Calibrator::Percentile(p) => write!(f, "percentile={p}"),
            Calibrator::Auto => f.write_str("auto"),
        }
    }
}

/// Reads the `--calibrator` spelling (`percentile` alone is 99.99).
impl std::str::FromStr for Calibrator {
    type Err = String;

    fn from_str(s: &str) -> Result<Calibrator, String> {
        let (name, arg) = match s.split_once('=') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        match (name, arg) {
            ("entropy", None) => Ok(Calibrator::Entropy),
            ("minmax", None) => Ok(Calibrator::MinMax),
            ("auto", None) => Ok(Calibrator::Auto),
            ("percentile", None) => Ok(Calibrator::Percentile(99.99)),
            ("percentile", Some(p)) => match p.parse::<f64>() {
                Ok(v) if v > 0.0 && v <= 100.0 => Ok(Calibrator::Percentile(v)),
                _ => Err(format!("the percentile must be in (0, 100], not '{p}'")),
            },
            _ => Err("expected entropy, minmax, percentile[=P] or auto".into()),
        }
    }
}

impl Calibrator {
    /// Returns the name written in the cache header. TensorRT has no percentile
    /// or auto calibrator, so "PercentileCalibration" and "AutoCalibration"
    /// are our own names and TensorRT will not accept them.
    pub fn name(&self) -> &'static str {
        match self {
            Calibrator::Entropy => "EntropyCalibration2",
            Calibrator::MinMax => "MinMaxCalibration",
            Calibrator::Percentile(_) => "PercentileCalibration",
            Calibrator::Auto => "AutoCalibration",
        }
    }

    /// Parses a cache-header name; a percentile calibrator gets [`DEFAULT_PERCENTILE`].
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "EntropyCalibration2" => Some(Calibrator::Entropy),
            "MinMaxCalibration" => Some(Calibrator::MinMax),
            "PercentileCalibration" => Some(Calibrator::Percentile(DEFAULT_PERCENTILE)),
            "AutoCalibration" => Some(Calibrator::Auto),
            _ => None,
        }
    }

    /// Computes the amax from a tensor's histogram and its running maximum
    /// of `|x|` (`Auto`, which chooses among several, gives the entropy
    /// one, its first choice).
    pub fn amax(&self, hist: &Histogram, max_abs: f32) -> f32 {
        if hist.total() < MIN_HISTOGRAM_SAMPLES {
            return minmax_amax(max_abs);
        }
        match self {
            Calibrator::Entropy | Calibrator::Auto => entropy_amax(hist),
            Calibrator::MinMax => minmax_amax(max_abs),
            Calibrator::Percentile(pct) => percentile_amax(hist, *pct),
        }
    }
}

/// Quantizes `bins` into `levels` groups of `bins.len() / levels` bins (the last
/// group absorbs the remainder, as in MXNet's and TVM's reimplementation of
/// TensorRT) and expands each group's total back uniformly over its non-zero bins;
/// zero bins stay zero. `levels` is clamped to `1..=bins.len()`, so with more
/// levels than bins every bin is its own level and Q equals the input.
pub fn quantize_expand(bins: &[u64], levels: usize) -> Vec<f64> {
    let mut out = vec![0.0; bins.len()];
    let levels = levels.clamp(1, bins.len().max(1));
    let merged = bins.len() / levels;
    for level in 0..levels {
        let start = level * merged;
        let end = if level + 1 == levels { bins.len() } else { start + merged };
        let group = &bins[start..end];
        let total: f64 = group.iter().map(|&b| b as f64).sum();
        let nonzero = group.iter().filter(|&&b| b != 0).count();
        if nonzero == 0 {
            continue;
        }
        let share = total / nonzero as f64;
        for (slot, &count) in out[start..end].iter_mut().zip(group) {
            if count != 0 {
                *slot = share;
            }
        }
    }
    out
}

/// Computes KL(P||Q) = sum over p>0 of p·ln(p/q) after normalizing both weight
/// vectors to sum to one. It is infinite when some p>0 meets q==0, when the
/// lengths differ, or when either vector has no positive mass.
pub fn kl_divergence(p: &[f64], q: &[f64]) -> f64 {
    let (p_sum, q_sum): (f64, f64) = (p.iter().sum(), q.iter().sum());
    if p.len() != q.len() || !(p_sum > 0.0 && q_sum > 0.0) {
        return f64::INFINITY;
    }
    let mut divergence = 0.0;
    for (&pi, &qi) in p.iter().zip(q) {
        if pi > 0.0 {
            if qi <= 0.0 {
                return f64::INFINITY;
            }
            let (pn, qn) = (pi / p_sum, qi / q_sum);
            divergence += pn * (pn / qn).ln();
        }
    }
    divergence
}

/// Returns the divergence of the candidate that clips `bins` at `i` bins.
fn candidate_divergence(bins: &[u64], levels: usize, i: usize) -> f64 {
    let mut reference: Vec<f64> = bins[..i].iter().map(|&b| b as f64).collect();
    let outliers: f64 = bins[i..].iter().map(|&b| b as f64).sum();
    if let Some(last) = reference.last_mut() {
        *last += outliers;
    }
    let candidate = quantize_expand(&bins[..i], levels);
    kl_divergence(&reference, &candidate)
}

/// Runs TensorRT's EntropyCalibration2 search (Migacz, "8-bit Inference with
/// TensorRT", GTC 2017) over candidates `i` in `start..=bins.len()` (at least 1):
/// P is `bins[..i]` with all counts from `i` on added to its last bin, Q is
/// [`quantize_expand`] of `bins[..i]`, and the first `i` with the smallest finite
/// KL(P||Q) wins. It returns `None` when `levels` is zero, the histogram is
/// empty, there are no candidates or every candidate's divergence is infinite.
pub fn entropy_threshold_bin(bins: &[u64], levels: usize, start: usize) -> Option<usize> {
    if levels == 0 || bins.iter().all(|&b| b == 0) {
        return None;
    }
    let mut best: Option<(usize, f64)> = None;
    for i in start.max(1)..=bins.len() {
        let divergence = candidate_divergence(bins, levels, i);
        let better = best.is_none_or(|(_, d)| divergence < d);
        if divergence.is_finite() && better {
            best = Some((i, divergence));
        }
    }
    best.map(|(i, _)| i)
}

/// Computes the entropy-calibrated amax `(i + 0.5) · bin_width` with 128 levels
/// and candidates from 128 bins on. It falls back to `range_max` (the min/max
/// answer) when the histogram has fewer than 128 bins, is empty, or every
/// candidate's divergence is infinite. The talk's pseudo-code loops over
/// `range(128, 2048)`, but caches written by TensorRT store `3c010a14` (amax
/// 1.000244 = 2048.5/2048) for softmax outputs, which only `i = 2048` (no
/// clipping) gives; so the search includes `i = 2048`, as NVIDIA's
/// pytorch-quantization does (`range(start, stop + 1)`).
pub fn entropy_amax(hist: &Histogram) -> f32 {
    if hist.bins.len() < QUANT_LEVELS {
        return hist.range_max;
    }
    // Bin 0 holds every exact zero (half of a ReLU output); left as it is,
    // that spike dominates P and drives the search to clip far too much.
    // NVIDIA's pytorch-quantization replaces it by bin 1 before the search,
    // and so do we.
    let mut bins = hist.bins.clone();
    if bins.len() > 1 {
        bins[0] = bins[1];
    }
    match entropy_threshold_bin(&bins, QUANT_LEVELS, QUANT_LEVELS) {
        Some(i) => (i as f32 + 0.5) * hist.bin_width(),
        None => hist.range_max,
    }
}

/// Returns the upper edge of the first bin at which the cumulative count reaches
/// `pct` percent of the total (with a 1e-12 relative tolerance for rounding).
/// `pct` is clamped to [0, 100] and NaN means 100; an empty histogram gives `range_max`.
pub fn percentile_amax(hist: &Histogram, pct: f64) -> f32 {
    let pct = if pct.is_nan() { 100.0 } else { pct.clamp(0.0, 100.0) };
    let total = hist.total();
    if total == 0 {
        return hist.range_max;
    }
    let target = total as f64 * pct * (1.0 - 1e-12);
    let mut cumulative: u128 = 0;
    for (index, &count) in hist.bins.iter().enumerate() {
        cumulative += u128::from(count);
        if cumulative as f64 * 100.0 >= target {
            return (index + 1) as f32 * hist.bin_width();
        }
    }
    hist.range_max
}

/// Returns the running maximum of `|x|` as the amax; NaN gives 0 and infinity gives `f32::MAX`.
pub fn minmax_amax(max_abs: f32) -> f32 {
    if max_abs.is_nan() {
        0.0
    } else {
        max_abs.abs().min(f32::MAX)
    }
}

/// Converts an amax into a symmetric INT8 scale `amax / 127`. When that is not a
/// positive finite number (amax zero, negative, NaN or infinite) it returns
/// `1 / 127`, i.e. a dynamic range of 1.0 (bits `3c010204`); an all-zero tensor
/// quantizes exactly under any scale, and 1.0 keeps small unseen values representable.
pub fn scale_from_amax(amax: f32) -> f32 {
    let scale = Some(amax / INT8_MAX).filter(|s| s.is_finite() && *s > 0.0);
    scale.unwrap_or(1.0 / INT8_MAX)
}

/// A TensorRT text calibration cache: a `TRT-<version>-<calibrator>` header and
/// one `name: xxxxxxxx` line per tensor holding the f32 scale's bits in hex.
#[derive(Debug, Clone, PartialEq)]
pub struct CalibrationCache {
    /// The TensorRT version number from the header, as decimal digits.
    pub version: String,
    /// The calibrator name from the header, e.g. "EntropyCalibration2".
    pub calibrator: String,
    /// The per-tensor scales (dynamic range = scale × 127), keyed by tensor name.
    pub scales: BTreeMap<String, f32>,
}

impl CalibrationCache {
    /// Creates an empty cache with our header version and the calibrator's name.
    pub fn new(calibrator: &Calibrator) -> Self {
        CalibrationCache {
            version: CACHE_HEADER_VERSION.to_string(),
            calibrator: calibrator.name().to_string(),
            scales: BTreeMap::new(),
        }
    }

    /// Records a tensor's scale computed from its amax with [`scale_from_amax`].
    pub fn insert_amax(&mut self, name: &str, amax: f32) {
        self.scales.insert(name.to_string(), scale_from_amax(amax));
    }

    /// Returns a tensor's dynamic range (scale × 127), if the cache has it.
    pub fn amax(&self, name: &str) -> Option<f32> {
        self.scales.get(name).map(|scale| scale * INT8_MAX)
    }

    /// Parses cache text; blank lines are skipped and every error names its 1-based line.
    pub fn parse(text: &str) -> Result<Self> {
        let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty());
        let (header_no, header) = lines.next().ok_or_else(|| anyhow!("line 1: missing calibration cache header"))?;
        let (version, calibrator) = parse_header(header).map_err(|e| anyhow!("line {header_no}: {e}"))?;
        let mut scales = BTreeMap::new();
        for (line_no, line) in lines {
            let (name, scale) = parse_entry(line).map_err(|e| anyhow!("line {line_no}: {e}"))?;
            if scales.insert(name.to_string(), scale).is_some() {
                bail!("line {line_no}: duplicate tensor name `{name}`");
            }
        }
        Ok(CalibrationCache { version, calibrator, scales })
    }

    /// Renders the cache in TensorRT's format, tensors sorted by name, ending in a newline.
    /// Names containing newlines or surrounding whitespace do not survive a round trip.
    pub fn to_text(&self) -> String {
        let mut text = format!("TRT-{}-{}\n", self.version, self.calibrator);
        for (name, scale) in &self.scales {
            text.push_str(&format!("{name}: {:08x}\n", scale.to_bits()));
        }
        text
    }
}

/// Splits a `TRT-<digits>-<name>` header into its version and calibrator name.
fn parse_header(header: &str) -> Result<(String, String)> {
    let rest = header.strip_prefix("TRT-").ok_or_else(|| anyhow!("header `{header}` does not start with `TRT-`"))?;
    let (version, name) = rest.split_once('-').ok_or_else(|| anyhow!("header `{header}` lacks `-<calibrator>`"))?;
    if version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit()) {
        bail!("header `{header}` has a non-numeric version `{version}`");
    }
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        bail!("header `{header}` has an invalid calibrator name `{name}`");
    }
    Ok((version.to_string(), name.to_string()))
}

/// Splits a `name: xxxxxxxx` line at its last `": "` and decodes the scale.
fn parse_entry(line: &str) -> Result<(&str, f32)> {
    let (name, hex) = line.rsplit_once(": ").ok_or_else(|| anyhow!("expected `name: xxxxxxxx`, got `{line}`"))?;
    if name.is_empty() {
        bail!("empty tensor name");
    }
    if hex.len() != 8 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        bail!("scale `{hex}` of `{name}` is not 8 hex digits");
    }
    let bits = u32::from_str_radix(hex, 16).map_err(|e| anyhow!("scale `{hex}` of `{name}`: {e}"))?;
    let scale = f32::from_bits(bits);
    if !scale.is_finite() || scale.is_sign_negative() {
        bail!("scale `{hex}` of `{name}` is {scale}, not a finite non-negative number");
    }
    Ok((name, scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Returns a deterministic uniform sample in (0, 1) from a xorshift64 state.
    fn unit(state: &mut u64) -> f64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        ((*state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Builds a default-size histogram whose range is the sample's largest magnitude.
    fn hist_of(values: &[f32]) -> Histogram {
        let mut hist = Histogram::with_range(values.iter().fold(0.0f32, |m, v| m.max(v.abs())));
        hist.add(values);
        hist
    }

    #[test]
    fn histogram_bins_magnitudes_and_edge_cases() {
        let mut hist = Histogram::new(4.0, 4);
        hist.add(&[0.5, -1.5, 2.0, 3.99, 4.0, -7.0, f32::NAN, f32::INFINITY]);
        assert_eq!(hist.bins, vec![1, 1, 1, 4]);
        assert_eq!(hist.bin_width(), 1.0);
        let mut zero = Histogram::new(0.0, 4);
        zero.add(&[0.0, 5.0, -1.0, f32::NAN]);
        assert_eq!(zero.bins, vec![3, 0, 0, 0]);
        assert_eq!(Histogram::new(f32::NAN, 0), Histogram::new(0.0, 1));
        let mut hand_built = Histogram { range_max: 1.0, bins: Vec::new() };
        hand_built.add(&[0.5]); // no bins: ignored rather than panicking
        assert_eq!(entropy_amax(&hand_built), 1.0);
    }

    #[test]
    fn histogram_merge_requires_equal_shape() {
        let mut a = Histogram::new(2.0, 2);
        a.add(&[0.5, 1.5]);
        a.merge(&a.clone()).unwrap();
        assert_eq!(a.bins, vec![2, 2]);
        assert!(a.merge(&Histogram::new(3.0, 2)).is_err());
        assert!(a.merge(&Histogram::new(2.0, 3)).is_err());
    }

    #[test]
    fn quantize_expand_matches_talk_example_and_remainder_rule() {
        let talk = quantize_expand(&[1, 0, 2, 3, 5, 3, 1, 7], 2);
        assert_eq!(talk, [2.0, 0.0, 2.0, 2.0, 4.0, 4.0, 4.0, 4.0]);
        // Five bins in two levels: [1, 2] and the last level absorbs [3, 0, 6].
        let uneven = quantize_expand(&[1, 2, 3, 0, 6], 2);
        assert_eq!(uneven, [1.5, 1.5, 4.5, 0.0, 4.5]);
        assert_eq!(quantize_expand(&[1, 0, 3], 128), [1.0, 0.0, 3.0]);
    }

    #[test]
    fn kl_divergence_hand_computed() {
        // P = [1/2, 1/4, 1/4], Q = [1/4, 1/4, 1/2]: 1/2 ln 2 + 0 + 1/4 ln(1/2) = 1/4 ln 2.
        let d = kl_divergence(&[2.0, 1.0, 1.0], &[1.0, 1.0, 2.0]);
        assert!((d - 0.25 * 2f64.ln()).abs() < 1e-12, "{d}");
        // P = [1/2, 0, 1/2], Q = [1/3; 3]: the p = 0 term is skipped, giving ln 1.5.
        let d = kl_divergence(&[1.0, 0.0, 1.0], &[1.0, 1.0, 1.0]);
        assert!((d - 1.5f64.ln()).abs() < 1e-12, "{d}");
        assert_eq!(kl_divergence(&[1.0, 1.0, 0.0], &[1.0, 0.0, 1.0]), f64::INFINITY);
        assert_eq!(kl_divergence(&[1.0], &[1.0, 1.0]), f64::INFINITY);
    }

    #[test]
    fn entropy_threshold_bin_tiny_hand_worked() {
        // bins = [8,4,2,1,0,1,0,0], levels 2, candidates i = 2..=8 (P, Q unnormalized):
        // i=2: P=[8,8]          Q=[8,4]            KL = 1/2 ln(9/8)                ~ 0.0589
        // i=3: P=[8,4,4]        Q=[8,3,3]          KL = 1/2 ln(49/48)              ~ 0.0103
        // i=4: P=[8,4,2,2]      Q=[6,6,1.5,1.5]    KL = 3/4 ln(5/4) + 1/4 ln(5/8)  ~ 0.0499
        // i=5: P=[8,4,2,1,1]    Q=[6,6,1.5,1.5,0]  p>0 where q=0                   = inf
        // i=6: P=[8,4,2,1,0,1]  Q=[14/3 x3,1,0,1]
        //      KL = 1/2 ln(12/7) + 1/4 ln(6/7) + 1/8 ln(3/7)                       ~ 0.1250
        // i=7: same as i=6 plus a trailing zero in both                            ~ 0.1250
        // i=8: P=bins           Q=[15/4 x4,0,1,0,0]
        //      KL = 1/2 ln(32/15) + 1/4 ln(16/15) + 1/8 ln(8/15) + 1/16 ln(4/15)   ~ 0.2338
        let bins = [8, 4, 2, 1, 0, 1, 0, 0];
        assert_eq!(entropy_threshold_bin(&bins, 2, 2), Some(3));
    }

    #[test]
    fn entropy_threshold_bin_ties_and_degenerate_inputs() {
        assert_eq!(entropy_threshold_bin(&[1, 1, 0, 0], 1, 1), Some(1)); // every KL is 0
        assert_eq!(entropy_threshold_bin(&[0; 8], 2, 2), None);
        assert_eq!(entropy_threshold_bin(&[1, 2, 3], 0, 1), None);
        // Clipping at i = 2 or 3 leaves an outlier in an empty bin (infinite);
        // i = 4 keeps the whole range and is finite.
        assert_eq!(entropy_threshold_bin(&[5, 0, 0, 1], 1, 2), Some(4));
        assert_eq!(entropy_amax(&Histogram::new(3.0, 64)), 3.0);
        assert_eq!(entropy_amax(&Histogram::with_range(3.0)), 3.0);
    }

    #[test]
    fn entropy_uniform_keeps_nearly_full_range() {
        let mut state = 0x9E37_79B9_7F4A_7C15;
        let values: Vec<f32> = (0..200_000).map(|_| unit(&mut state) as f32).collect();
        let hist = hist_of(&values);
        let amax = entropy_amax(&hist);
        assert!(amax > 0.95 * hist.range_max, "amax {amax}"); // 0.99975 of 1.0
    }

    #[test]
    fn entropy_laplacian_with_outliers_clips_them() {
        let mut state = 0x2545_F491_4F6C_DD1D;
        let mut values: Vec<f32> = (0..200_000)
            .map(|_| {
                let u = unit(&mut state) - 0.5;
                (-u.signum() * (1.0 - 2.0 * u.abs()).ln()) as f32
            })
            .collect();
        values.extend_from_slice(&[60.0, -75.0, 90.0, 100.0]);
        let hist = hist_of(&values);
        let amax = entropy_amax(&hist);
        let sigma = 2f32.sqrt(); // Laplace(b = 1)
                                 // Observed: amax 9.01 of range 100 (the bulk ends near ln(200k) = 12).
        assert!(amax > 3.0 * sigma && amax < 0.25 * hist.range_max, "amax {amax}");
    }

    #[test]
    fn sparse_histograms_fall_back_to_the_observed_max() {
        // 4,000 values and an outlier (a pooled 500-channel vector over 8
        // batches): too few for 2048 bins, so entropy and percentile take
        // the max, as minmax does.
        let mut state = 0x2545_F491_4F6C_DD1D;
        let mut values: Vec<f32> = (0..4_000).map(|_| (unit(&mut state) as f32 - 0.5) * 4.0).collect();
        values.push(50.0);
        let hist = hist_of(&values);
        assert!(hist.total() < MIN_HISTOGRAM_SAMPLES);
        for c in [Calibrator::Entropy, Calibrator::Percentile(99.99), Calibrator::MinMax] {
            assert_eq!(c.amax(&hist, 50.0), 50.0, "{c}");
        }
        // With enough values the entropy search runs and clips the outlier.
        let mut many: Vec<f32> = (0..200_000)
            .map(|_| {
                let u = unit(&mut state) - 0.5;
                (-u.signum() * (1.0 - 2.0 * u.abs()).ln()) as f32
            })
            .collect();
        many.push(100.0);
        let hist = hist_of(&many);
        let amax = Calibrator::Entropy.amax(&hist, 100.0);
        assert!(amax < 25.0, "amax {amax}");
    }

    #[test]
    fn percentile_and_minmax() {
        let bins = vec![10, 20, 30, 40, 0, 0, 0, 0, 0, 0];
        let hist = Histogram { range_max: 10.0, bins };
        assert_eq!(percentile_amax(&hist, 50.0), 3.0);
        assert_eq!(percentile_amax(&hist, 60.0), 3.0);
        assert_eq!(percentile_amax(&hist, 100.0), 4.0);
        let bins = vec![9999, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let tail = Histogram { range_max: 10.0, bins };
        assert_eq!(percentile_amax(&tail, DEFAULT_PERCENTILE), 1.0);
        assert_eq!(percentile_amax(&tail, 100.0), 10.0);
        assert_eq!(percentile_amax(&Histogram::new(5.0, 4), 99.0), 5.0);
        assert_eq!(minmax_amax(-2.5), 2.5);
        assert_eq!(minmax_amax(f32::NAN), 0.0);
        assert_eq!(minmax_amax(f32::INFINITY), f32::MAX);
        assert_eq!(Calibrator::MinMax.amax(&hist, 7.0), 7.0);
    }

    #[test]
    fn scales_and_calibrator_names() {
        assert_eq!(scale_from_amax(127.0), 1.0);
        for bad in [0.0, -1.0, f32::NAN, f32::INFINITY] {
            assert_eq!(scale_from_amax(bad).to_bits(), 0x3c01_0204);
        }
        let all = [Calibrator::Entropy, Calibrator::MinMax];
        for c in all.into_iter().chain([Calibrator::Percentile(DEFAULT_PERCENTILE)]) {
            assert_eq!(Calibrator::from_name(c.name()), Some(c));
        }
        assert_eq!(Calibrator::Percentile(99.9).name(), "PercentileCalibration");
        assert_eq!(Calibrator::from_name("EntropyCalibration"), None);
    }

    #[test]
    fn cache_round_trip_is_sorted_and_deterministic() {
        let mut cache = CalibrationCache::new(&Calibrator::Entropy);
        cache.insert_amax("b", 2.54);
        cache.insert_amax("a:0", 1.27);
        let text = cache.to_text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "TRT-100300-EntropyCalibration2");
        assert!(lines[1].starts_with("a:0: ") && lines[2].starts_with("b: "));
        assert_eq!(CalibrationCache::parse(&text).unwrap(), cache);
        assert!((cache.amax("b").unwrap() - 2.54).abs() < 1e-6);
    }

    #[test]
    fn parses_tensorrt_written_sample() {
        let text = "TRT-8601-EntropyCalibration2\ninput: 3c010a14\r\n\n\
                    /backbone/Conv_output_0: 3d5b6bcf\nonnx::Concat_301:0: 3c9bd61a\n";
        let cache = CalibrationCache::parse(text).unwrap();
        assert_eq!(cache.version, "8601");
        assert_eq!(cache.calibrator, "EntropyCalibration2");
        assert_eq!(cache.scales["input"], f32::from_bits(0x3c01_0a14));
        let concat = cache.scales["onnx::Concat_301:0"];
        assert_eq!(concat, f32::from_bits(0x3c9b_d61a));
        assert_eq!(cache.scales.len(), 3);
        assert!((cache.amax("input").unwrap() - 1.000_244).abs() < 1e-6);
    }

    #[test]
    fn malformed_caches_name_the_line() {
        let header = "TRT-100300-EntropyCalibration2\n";
        let cases = [
            (String::new(), 1),
            ("\n\n".to_string(), 1),
            ("TRT8601-EntropyCalibration2\n".to_string(), 1),
            ("\nTRT-86a1-EntropyCalibration2\n".to_string(), 2),
            ("TRT-8601-\n".to_string(), 1),
            (format!("{header}x: 3c01\n"), 2),
            (format!("{header}x: 3c01zz14\n"), 2),
            (format!("{header}x: +3c010a1\n"), 2),
            (format!("{header}x 3c010a14\n"), 2),
            (format!("{header}: 3c010a14\n"), 2),
            (format!("{header}\nx: 7f800000\n"), 3),
            (format!("{header}x: 7fc00000\n"), 2),
            (format!("{header}x: bc010a14\n"), 2),
            (format!("{header}a: 3c010a14\na: 3c010a14\n"), 3),
        ];
        for (text, line) in cases {
            let err = CalibrationCache::parse(&text).expect_err(&text).to_string();
            assert!(err.starts_with(&format!("line {line}:")), "{text:?}: {err}");
        }
    }
}

#[cfg(test)]
mod flag_tests {
    use super::Calibrator;

    #[test]
    fn the_flag_spelling_round_trips() {
        for c in [Calibrator::Entropy, Calibrator::MinMax, Calibrator::Percentile(99.99), Calibrator::Percentile(1.5)] {
            assert_eq!(c.to_string().parse::<Calibrator>(), Ok(c));
        }
        assert_eq!("percentile".parse::<Calibrator>(), Ok(Calibrator::Percentile(99.99)));
        assert!("percentile=0".parse::<Calibrator>().is_err());
        assert!("percentile=nan".parse::<Calibrator>().is_err());
        assert!("entropy=1".parse::<Calibrator>().is_err());
    }
}
