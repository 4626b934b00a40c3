//! RoiAlign: pools each region of interest of `X [N, C, H, W]` into a
//! `[output_height, output_width]` grid: `Y [num_rois, C, oh, ow]`. A
//! region is `(x1, y1, x2, y2)` in input coordinates times
//! `spatial_scale`, on the image its `batch_indices` entry names. Each bin
//! averages (or takes the maximum of) `sampling_ratio²` bilinear samples
//! on a regular grid inside it (an adaptive `ceil(roi size / bins)` per
//! axis when `sampling_ratio` is 0), as onnxruntime and Detectron2 compute
//! it: `half_pixel` shifts the region by half a pixel (opset 16's default;
//! `output_half_pixel` is opset 10's behaviour, where a region is at least
//! one pixel), a sample more than one pixel outside the image counts as
//! zero, and one at the border clamps onto it. In `max` mode a sample is
//! the largest of its four weighted neighbours.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoiAlign {
    pub output_height: usize,
    pub output_width: usize,
    /// Samples per bin and axis; 0: adaptive.
    pub sampling_ratio: usize,
    pub spatial_scale: f32,
    /// `half_pixel` (true) or `output_half_pixel`.
    pub half_pixel: bool,
    /// `max` (true) or `avg`.
    pub max: bool,
}

/// The most samples per bin and axis (a fixed `sampling_ratio` or the
/// adaptive one), and per region over all its bins.
const MAX_GRID: usize = 1 << 12;
const MAX_SAMPLES: usize = 1 << 24;

/// One bilinear sample: four pixel offsets inside a channel and their
/// weights (all zero for a sample outside the image).
#[derive(Clone, Copy)]
struct Sample {
    offsets: [usize; 4],
    weights: [f64; 4],
}

fn sample(y: f64, x: f64, height: usize, width: usize) -> Sample {
    if y < -1.0 || y > height as f64 || x < -1.0 || x > width as f64 || height == 0 || width == 0 {
        return Sample { offsets: [0; 4], weights: [0.0; 4] };
    }
    let axis = |v: f64, len: usize| -> (usize, usize, f64) {
        let v = v.max(0.0);
        let low = v as usize;
        if low >= len - 1 {
            (len - 1, len - 1, 0.0)
        } else {
            (low, low + 1, v - low as f64)
        }
    };
    let (y0, y1, ly) = axis(y, height);
    let (x0, x1, lx) = axis(x, width);
    let (hy, hx) = (1.0 - ly, 1.0 - lx);
    Sample {
        offsets: [y0 * width + x0, y0 * width + x1, y1 * width + x0, y1 * width + x1],
        weights: [hy * hx, hy * lx, ly * hx, ly * lx],
    }
}

impl OpImpl for RoiAlign {
    fn name(&self) -> &'static str {
        "RoiAlign"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "RoiAlign")?;
        let rois = input(inputs, 1, "RoiAlign")?;
        let idx = input(inputs, 2, "RoiAlign")?;
        ensure_op!(x.dtype.is_float() && x.shape.len() == 4, "RoiAlign: X is {x}, expected a float [N, C, H, W]");
        ensure_op!(
            rois.dtype.is_float() && rois.shape.len() == 2 && rois.shape[1] == 4,
            "RoiAlign: rois is {rois}, expected a float [num_rois, 4]"
        );
        ensure_op!(
            matches!(idx.dtype, DType::I64 | DType::I32) && idx.shape == [rois.shape[0]],
            "RoiAlign: batch_indices is {idx}, expected an integer [{}]",
            rois.shape[0]
        );
        ensure_op!(self.output_height > 0 && self.output_width > 0, "RoiAlign: the output size must be positive");
        ensure_op!(self.sampling_ratio <= MAX_GRID, "RoiAlign: sampling_ratio {} is above {MAX_GRID}", self.sampling_ratio);
        Ok(vec![TensorType::new(x.dtype, vec![rois.shape[0], x.shape[1], self.output_height, self.output_width])])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let xv = input(inputs, 0, "RoiAlign")?;
        let x = xv.to_f64_vec();
        let rois = input(inputs, 1, "RoiAlign")?.to_f64_vec();
        let idx = input(inputs, 2, "RoiAlign")?.to_i64_vec()?;
        let (n, c, h, w) = (xv.shape[0], xv.shape[1], xv.shape[2], xv.shape[3]);
        let (oh, ow) = (self.output_height, self.output_width);
        let plane = h * w;
        let mut y = vec![0f64; idx.len() * c * oh * ow];
        let offset = if self.half_pixel { 0.5 } else { 0.0 };
        let scale = self.spatial_scale as f64;
        for (r, &b) in idx.iter().enumerate() {
            let b = match usize::try_from(b) {
                Ok(b) if b < n => b,
                _ => bail_op!("RoiAlign: batch index {b} of region {r} is outside 0..{n}"),
            };
            let roi = &rois[r * 4..][..4];
            let (x1, y1) = (roi[0] * scale - offset, roi[1] * scale - offset);
            let (mut rw, mut rh) = (roi[2] * scale - offset - x1, roi[3] * scale - offset - y1);
            if !self.half_pixel {
                rw = rw.max(1.0);
                rh = rh.max(1.0);
            }
            let (bin_h, bin_w) = (rh / oh as f64, rw / ow as f64);
            // A region of NaN or absurd size samples nothing rather than
            // looping for ever.
            let grid = |ratio: f64| -> usize {
                if self.sampling_ratio > 0 {
                    self.sampling_ratio
                } else if ratio.is_finite() && ratio > 0.0 {
                    (ratio.ceil() as usize).min(MAX_GRID)
                } else {
                    0
                }
            };
            let (gh, gw) = (grid(rh / oh as f64), grid(rw / ow as f64));
            let count = (gh * gw).max(1) as f64;
            // The samples of every bin, shared by the channels; regions come
            // from run-time data, so their number is bounded.
            let total = [ow, gh, gw].iter().try_fold(oh, |a, &b| a.checked_mul(b)).filter(|&t| t <= MAX_SAMPLES);
            let Some(total) = total else {
                bail_op!("RoiAlign: region {r} needs more than {MAX_SAMPLES} bilinear samples ({gh}x{gw} per bin)")
            };
            let mut samples: Vec<Sample> = Vec::with_capacity(total);
            for ph in 0..oh {
                for pw in 0..ow {
                    for iy in 0..gh {
                        let sy = y1 + ph as f64 * bin_h + (iy as f64 + 0.5) * bin_h / gh as f64;
                        for ix in 0..gw {
                            let sx = x1 + pw as f64 * bin_w + (ix as f64 + 0.5) * bin_w / gw as f64;
                            samples.push(sample(sy, sx, h, w));
                        }
                    }
                }
            }
            let per_bin = gh * gw;
            for ch in 0..c {
                let src = &x[(b * c + ch) * plane..][..plane];
                let dst = &mut y[(r * c + ch) * oh * ow..][..oh * ow];
                for (bin, out) in dst.iter_mut().enumerate() {
                    let bin_samples = &samples[bin * per_bin..][..per_bin];
                    let value = |s: &Sample, k: usize| if s.weights[k] == 0.0 { 0.0 } else { s.weights[k] * src[s.offsets[k]] };
                    *out = if self.max {
                        bin_samples
                            .iter()
                            .map(|s| (0..4).map(|k| value(s, k)).fold(f64::NEG_INFINITY, f64::max))
                            .fold(f64::NEG_INFINITY, f64::max)
                    } else {
                        bin_samples.iter().map(|s| (0..4).map(|k| value(s, k)).sum::<f64>()).sum::<f64>() / count
                    };
                    if per_bin == 0 {
                        *out = 0.0;
                    }
                }
            }
        }
        crate::ops::util::store_f64(&mut outputs[0], &y, "RoiAlign")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn roi_align(op: RoiAlign, x: Vec<f32>, hw: (usize, usize), rois: Vec<f32>, idx: Vec<i64>) -> Result<Vec<f32>> {
        let x = Tensor::from_vec(vec![1, 1, hw.0, hw.1], x)?;
        let r = Tensor::from_vec(vec![rois.len() / 4, 4], rois)?;
        let i = Tensor::from_vec(vec![idx.len()], idx)?;
        Ok(Op::from(op).eval_owned(&[Some(&x), Some(&r), Some(&i)])?.remove(0).as_slice::<f32>()?.to_vec())
    }

    fn op(max: bool, half_pixel: bool) -> RoiAlign {
        RoiAlign { output_height: 1, output_width: 1, sampling_ratio: 1, spatial_scale: 1.0, half_pixel, max }
    }

    #[test]
    fn one_sample_per_bin_is_bilinear_at_the_bin_centre() {
        // X = [[0, 1], [2, 3]]; the region (0, 0)-(1, 1) without the half
        // pixel shift has its centre at (0.5, 0.5): the mean, 1.5.
        let x = vec![0.0, 1.0, 2.0, 3.0];
        assert_eq!(roi_align(op(false, false), x.clone(), (2, 2), vec![0.0, 0.0, 1.0, 1.0], vec![0]).unwrap(), [1.5]);
        // With the shift, the centre is at (0, 0): pixel 0.
        assert_eq!(roi_align(op(false, true), x.clone(), (2, 2), vec![0.0, 0.0, 1.0, 1.0], vec![0]).unwrap(), [0.0]);
        // Max mode: the largest weighted neighbour, 0.25 * 3.
        assert_eq!(roi_align(op(true, false), x.clone(), (2, 2), vec![0.0, 0.0, 1.0, 1.0], vec![0]).unwrap(), [0.75]);
        // Far outside the image: zero.
        assert_eq!(roi_align(op(false, false), x.clone(), (2, 2), vec![9.0, 9.0, 10.0, 10.0], vec![0]).unwrap(), [0.0]);
        // A sampling ratio past the bound (from a hostile engine) is refused.
        let mut big = op(false, false);
        big.sampling_ratio = usize::MAX;
        assert!(roi_align(big, x.clone(), (2, 2), vec![0.0, 0.0, 1.0, 1.0], vec![0]).is_err());
        // A batch index past the batch is an error.
        assert!(roi_align(op(false, false), x, (2, 2), vec![0.0, 0.0, 1.0, 1.0], vec![1]).is_err());
    }
}
