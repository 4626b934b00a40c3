//! Comparing two sets of named outputs (ours against a reference).

use trtc_runtime::Tensor;

/// How far one output is from its reference.
#[derive(Clone, Debug)]
pub struct OutputDiff {
    pub name: String,
    pub max_abs: f64,
    /// `max |ours - ref| / max |ref|`: the error relative to the output's scale.
    pub max_rel_to_scale: f64,
    pub cosine: f64,
    pub shape_ok: bool,
}

pub fn diff(name: &str, ours: &Tensor, reference: &Tensor) -> OutputDiff {
    let shape_ok = ours.shape() == reference.shape();
    let (a, b) = (ours.to_f64_vec(), reference.to_f64_vec());
    let mut max_abs = 0f64;
    let mut scale = 0f64;
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (&x, &y) in a.iter().zip(&b) {
        // NaN in both (or the same infinity) is agreement; anything else
        // against a NaN or an infinity is an infinite error.
        let d = if x == y || (x.is_nan() && y.is_nan()) { 0.0 } else { (x - y).abs() };
        max_abs = max_abs.max(if d.is_nan() { f64::INFINITY } else { d });
        if y.is_finite() {
            scale = scale.max(y.abs());
        }
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    let cosine = if na == 0.0 && nb == 0.0 { 1.0 } else { dot / (na.sqrt() * nb.sqrt()) };
    let max_rel_to_scale = if scale == 0.0 { max_abs } else { max_abs / scale };
    OutputDiff { name: name.to_string(), max_abs, max_rel_to_scale, cosine, shape_ok: shape_ok && a.len() == b.len() }
}

/// Compares every reference output (matched by name) with ours.
pub fn diff_all(ours: &[(String, Tensor)], reference: &[(String, Tensor)]) -> anyhow::Result<Vec<OutputDiff>> {
    let mut out = Vec::new();
    for (name, r) in reference {
        let Some((_, o)) = ours.iter().find(|(n, _)| n == name) else {
            anyhow::bail!("output '{name}' is missing");
        };
        out.push(diff(name, o, r));
    }
    Ok(out)
}
