//! Pad: grows (or, with negative pads, crops) every axis. Modes: constant
//! (optional runtime scalar value, default 0), reflect (mirror without
//! repeating the edge), edge (repeat the edge) and wrap (periodic). Negative
//! pads crop first; the other modes then pad relative to the cropped region.

use crate::ensure_op;
use crate::error::Result;
use crate::ops::movement::copy::{istrides, strided_copy, Strided};
use crate::ops::{input, opt_input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PadMode {
    Constant,
    Reflect,
    Edge,
    Wrap,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pad {
    /// `[begin_0, ..., begin_{r-1}, end_0, ..., end_{r-1}]`, like ONNX.
    pub pads: Vec<i64>,
    pub mode: PadMode,
}

impl Pad {
    /// The Pad of a rank-`rank` input by ONNX's `pads` over `axes` (all
    /// begins, then all ends); the other axes are not padded.
    pub fn over_axes(mode: PadMode, rank: usize, axes: &[usize], pads: &[i64]) -> Result<Pad> {
        let n = axes.len();
        ensure_op!(axes.iter().all(|&a| a < rank), "Pad: axes {axes:?} out of range for rank {rank}");
        ensure_op!(pads.len() == 2 * n, "{} pads for {n} axes", pads.len());
        let mut full = vec![0i64; 2 * rank];
        for (i, &a) in axes.iter().enumerate() {
            full[a] = pads[i];
            full[rank + a] = pads[n + i];
        }
        Ok(Pad { pads: full, mode })
    }
}

/// One axis: elements cropped at the start, elements kept, and padding added
/// before and after the kept region.
#[derive(Clone, Copy, Debug)]
struct AxisPad {
    crop: usize,
    kept: usize,
    before: usize,
    after: usize,
}

impl Pad {
    fn axes(&self, shape: &[usize]) -> Result<Vec<AxisPad>> {
        let r = shape.len();
        ensure_op!(self.pads.len() == 2 * r, "Pad: {} pads for rank {r}", self.pads.len());
        let mut out = Vec::with_capacity(r);
        for (i, &d) in shape.iter().enumerate() {
            let (b, e) = (self.pads[i], self.pads[r + i]);
            let crop_b = (-b).max(0) as u64;
            let crop_e = (-e).max(0) as u64;
            ensure_op!(crop_b + crop_e <= d as u64, "Pad: pads {b}, {e} crop more than dimension {i} ({d})");
            let kept = d - (crop_b + crop_e) as usize;
            let (before, after) = (b.max(0) as usize, e.max(0) as usize);
            ensure_op!(
                self.mode == PadMode::Constant || kept > 0 || before + after == 0,
                "Pad: cannot pad an empty dimension {i} in {:?} mode",
                self.mode
            );
            out.push(AxisPad { crop: crop_b as usize, kept, before, after });
        }
        Ok(out)
    }
}

/// Maps a coordinate relative to the start of a region of `m` elements
/// (possibly outside it) to one inside it.
fn map_index(i: i64, m: usize, mode: PadMode) -> usize {
    let m = m as i64;
    let j = match mode {
        PadMode::Edge | PadMode::Constant => i.clamp(0, m - 1),
        PadMode::Wrap => i.rem_euclid(m),
        PadMode::Reflect => {
            if m == 1 {
                0
            } else {
                let period = 2 * (m - 1);
                let j = i.rem_euclid(period);
                if j >= m {
                    period - j
                } else {
                    j
                }
            }
        }
    };
    j as usize
}

/// Fills `dst` with repetitions of the element `value`.
fn fill(dst: &mut [u8], value: &[u8]) {
    let e = value.len();
    if dst.len() < e || e == 0 {
        return;
    }
    dst[..e].copy_from_slice(value);
    let mut filled = e;
    while filled < dst.len() {
        let n = filled.min(dst.len() - filled);
        dst.copy_within(0..n, filled);
        filled += n;
    }
}

impl OpImpl for Pad {
    fn name(&self) -> &'static str {
        "Pad"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "Pad")?;
        if let Some(v) = opt_input(inputs, 1) {
            ensure_op!(v.dtype == x.dtype, "Pad: value is {}, data is {}", v.dtype, x.dtype);
            ensure_op!(v.checked_len() == Some(1), "Pad: value must have one element, got {v}");
        }
        let axes = self.axes(&x.shape)?;
        let shape = axes.iter().map(|a| a.before + a.kept + a.after).collect::<Vec<_>>();
        Ok(vec![TensorType::new(x.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "Pad")?;
        let axes = self.axes(x.shape)?;
        let esize = x.dtype.size();
        let out = &mut outputs[0];
        if self.mode == PadMode::Constant {
            let zero = vec![0u8; esize];
            let value = opt_input(inputs, 1).map(|v| v.bytes).unwrap_or(&zero);
            ensure_op!(value.len() == esize, "Pad: value must have one element");
            fill(out.bytes, value);
            let (xs, os) = (istrides(x.shape), istrides(out.shape));
            let plan = Strided {
                shape: axes.iter().map(|a| a.kept).collect(),
                src_strides: xs.clone(),
                dst_strides: os.clone(),
                src_off: axes.iter().zip(&xs).map(|(a, &s)| a.crop as isize * s).sum(),
                dst_off: axes.iter().zip(&os).map(|(a, &s)| a.before as isize * s).sum(),
            };
            return strided_copy(x.bytes, out.bytes, esize, &plan);
        }
        if out.bytes.is_empty() {
            return Ok(());
        }
        if x.shape.is_empty() {
            // A scalar has no axis to pad.
            out.bytes.copy_from_slice(x.bytes);
            return Ok(());
        }
        // For each axis, the input index of every output coordinate.
        let maps: Vec<Vec<usize>> = axes
            .iter()
            .map(|a| {
                let n = a.before + a.kept + a.after;
                (0..n).map(|o| a.crop + map_index(o as i64 - a.before as i64, a.kept, self.mode)).collect()
            })
            .collect();
        let xs = crate::ops::util::strides(x.shape);
        let rank = x.shape.len();
        let last = rank - 1;
        let out_shape = out.shape.to_vec();
        let rows: usize = out_shape[..last].iter().product();
        let mut idx = vec![0usize; last];
        let mut d = 0;
        for _ in 0..rows {
            let base: usize = (0..last).map(|k| maps[k][idx[k]] * xs[k]).sum();
            for &j in &maps[last] {
                let s = (base + j) * esize;
                out.bytes[d..d + esize].copy_from_slice(&x.bytes[s..s + esize]);
                d += esize;
            }
            for k in (0..last).rev() {
                idx[k] += 1;
                if idx[k] < out_shape[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn pad(mode: PadMode, pads: Vec<i64>, x: &Tensor, v: Option<&Tensor>) -> Tensor {
        let op: Op = Pad { pads, mode }.into();
        op.eval_owned(&[Some(x), v]).unwrap().remove(0)
    }

    #[test]
    fn constant_pad_with_value() {
        let x = Tensor::from_vec(vec![1, 2], vec![1f32, 2.]).unwrap();
        let v = Tensor::scalar(9f32);
        let y = pad(PadMode::Constant, vec![0, 1, 1, 0], &x, Some(&v));
        assert_eq!(y.shape(), &[2, 3]);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[9., 1., 2., 9., 9., 9.]);
    }

    #[test]
    fn negative_pads_crop() {
        let x = Tensor::from_vec(vec![4], vec![1i32, 2, 3, 4]).unwrap();
        let y = pad(PadMode::Constant, vec![-1, -2], &x, None);
        assert_eq!(y.as_slice::<i32>().unwrap(), &[2]);
    }

    #[test]
    fn reflect_edge_and_wrap() {
        let x = Tensor::from_vec(vec![3], vec![1i64, 2, 3]).unwrap();
        let r = pad(PadMode::Reflect, vec![2, 2], &x, None);
        assert_eq!(r.as_slice::<i64>().unwrap(), &[3, 2, 1, 2, 3, 2, 1]);
        let e = pad(PadMode::Edge, vec![1, 2], &x, None);
        assert_eq!(e.as_slice::<i64>().unwrap(), &[1, 1, 2, 3, 3, 3]);
        let w = pad(PadMode::Wrap, vec![2, 1], &x, None);
        assert_eq!(w.as_slice::<i64>().unwrap(), &[2, 3, 1, 2, 3, 1]);
    }
}
