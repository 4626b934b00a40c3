//! Latency statistics for `trtc bench`.

/// Latency quantiles in milliseconds (serialized as `min_ms`, `median_ms`, ...).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Latency {
    #[serde(rename = "min_ms")]
    pub min: f64,
    #[serde(rename = "median_ms")]
    pub median: f64,
    #[serde(rename = "p90_ms")]
    pub p90: f64,
    #[serde(rename = "p99_ms")]
    pub p99: f64,
    #[serde(rename = "max_ms")]
    pub max: f64,
}

/// The value at quantile `q` of sorted samples (nearest rank).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

impl Latency {
    /// Statistics of a non-empty set of samples.
    pub fn from_ms(samples: &[f64]) -> Latency {
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Latency { min: v[0], median, p90: quantile(&v, 0.90), p99: quantile(&v, 0.99), max: v[n - 1] }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_of_one_to_ten() {
        let v: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        let l = Latency::from_ms(&v);
        assert_eq!(l, Latency { min: 1.0, median: 5.5, p90: 9.0, p99: 10.0, max: 10.0 });
    }
}
