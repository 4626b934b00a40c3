//! GridSample: samples `X [N, C, D1..Dr]` at the normalized coordinates of
//! `grid [N, O1..Or, r]`, giving `Y [N, C, O1..Or]`, for any number `r` of
//! spatial axes (2D and 3D in practice). The grid's last axis holds the
//! coordinates in reverse axis order (x, the last axis, first), each in
//! `[-1, 1]` across the input's extent.
//!
//! As ONNX's reference (and PyTorch) define it: a coordinate is mapped to
//! pixel space (`align_corners` decides whether -1 and 1 are the centres or
//! the outer edges of the border pixels); `nearest` rounds it (half to
//! even); a coordinate outside the border is
//! clamped (`border`) or reflected (`reflection`); then `nearest`, `linear`
//! (2^r taps) or `cubic` (4^r taps, Keys with a = -0.75) reads the pixels,
//! where a pixel outside the input is zero (`zeros`), the nearest border
//! pixel (`border`) or reflected back inside (`reflection`). One exception,
//! as in PyTorch and onnxruntime: `cubic` with `border` clamps each tap but
//! not the coordinate (ONNX's reference clamps the coordinate first, which
//! gives other values near the border; `testdata/ops` pins onnxruntime's).
//!
//! The taps of an output position are worked out once and applied to every
//! channel, in f64; the output is rounded once to X's type.

use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GridSampleMode {
    Nearest,
    /// Opset 16's `bilinear`, opset 20's `linear`.
    Linear,
    /// Opset 16's `bicubic`, opset 20's `cubic`.
    Cubic,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum GridPadding {
    Zeros,
    Border,
    Reflection,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GridSample {
    pub mode: GridSampleMode,
    pub padding: GridPadding,
    pub align_corners: bool,
}

/// One pixel read: its flat offset inside a channel (None: a zero from
/// `zeros` padding) and its weight.
type Tap = (Option<usize>, f64);

impl GridSample {
    /// Maps a normalized coordinate onto pixel space of an axis of `len`.
    fn denormalize(&self, n: f64, len: usize) -> f64 {
        let len = len as f64;
        if self.align_corners {
            (n + 1.0) / 2.0 * (len - 1.0)
        } else {
            ((n + 1.0) * len - 1.0) / 2.0
        }
    }

    /// The pixel-space range a coordinate is folded into.
    fn bounds(&self, len: usize) -> (f64, f64) {
        if self.align_corners {
            (0.0, len as f64 - 1.0)
        } else {
            (-0.5, len as f64 - 0.5)
        }
    }

    /// An integer pixel index under the padding mode (None: zero).
    fn pixel(&self, i: i64, len: usize) -> Option<usize> {
        let last = len as i64 - 1;
        match self.padding {
            GridPadding::Zeros => (0..=last).contains(&i).then_some(i as usize),
            GridPadding::Border => Some(i.clamp(0, last) as usize),
            GridPadding::Reflection => {
                let (lo, hi) = self.bounds(len);
                // Truncation toward zero, as the reference converts; clamped
                // since a one-pixel axis reflects onto itself.
                Some((reflect(i as f64, lo, hi) as i64).clamp(0, last) as usize)
            }
        }
    }

    /// The taps along one axis of `len` for pixel-space coordinate `x`.
    fn axis_taps(&self, x: f64, len: usize) -> Vec<(Option<usize>, f64)> {
        if len == 0 {
            // An empty axis has no pixel to read.
            return vec![(None, 0.0)];
        }
        let x = if self.mode == GridSampleMode::Nearest { round_nearest(x) } else { x };
        let (lo, hi) = self.bounds(len);
        let x = if x < lo || x > hi {
            match self.padding {
                // Cubic clamps its taps only (see the module's notes).
                GridPadding::Border if self.mode != GridSampleMode::Cubic => x.clamp(0.0, len as f64 - 1.0),
                GridPadding::Border => x,
                GridPadding::Reflection => reflect(x, lo, hi),
                GridPadding::Zeros => x,
            }
        } else {
            x
        };
        if !x.is_finite() {
            // A NaN or infinite coordinate reads nothing.
            return vec![(None, 0.0)];
        }
        match self.mode {
            GridSampleMode::Nearest => vec![(self.pixel(x as i64, len), 1.0)],
            GridSampleMode::Linear => {
                let x0 = x.floor();
                let t = x - x0;
                let x0 = x0 as i64;
                vec![(self.pixel(x0, len), 1.0 - t), (self.pixel(x0.saturating_add(1), len), t)]
            }
            GridSampleMode::Cubic => {
                let x0 = x.floor();
                let w = cubic_weights(x - x0);
                let x0 = x0 as i64;
                (0..4).map(|k| (self.pixel(x0.saturating_add(k as i64 - 1), len), w[k])).collect()
            }
        }
    }
}

/// Folds `x` back into `[lo, hi]` by reflecting at the nearer border
/// until it is inside.
fn reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let range = hi - lo;
    if range <= 0.0 {
        return lo;
    }
    let fold = |d: f64, from: f64, to: f64, sign: f64| {
        let n = (d / range).trunc();
        let r = d - n * range;
        if n % 2.0 == 0.0 {
            from + sign * r
        } else {
            to - sign * r
        }
    };
    if x < lo {
        fold(lo - x, lo, hi, 1.0)
    } else if x > hi {
        fold(x - hi, hi, lo, -1.0)
    } else {
        x
    }
}

/// `nearest` rounding: half to even, in any number of axes (as onnxruntime
/// and ONNX 1.16's conformance data have it; newer ONNX references round 3D
/// grids half away from zero, like PyTorch's 3D kernel).
fn round_nearest(x: f64) -> f64 {
    x.round_ties_even()
}

/// Keys' cubic convolution weights (a = -0.75) of the four pixels around
/// a point `t` in `[0, 1)` past the second one.
fn cubic_weights(t: f64) -> [f64; 4] {
    const A: f64 = -0.75;
    let near = |x: f64| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let far = |x: f64| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

impl OpImpl for GridSample {
    fn name(&self) -> &'static str {
        "GridSample"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "GridSample")?;
        let grid = input(inputs, 1, "GridSample")?;
        ensure_op!(x.dtype.is_float(), "GridSample: X is {x}; only float inputs are supported");
        ensure_op!(grid.dtype.is_float(), "GridSample: grid is {grid}, expected a float tensor");
        let r = x.shape.len().saturating_sub(2);
        ensure_op!(r >= 1, "GridSample: X is {x}, expected [N, C, spatial...] with at least one spatial axis");
        ensure_op!(
            grid.shape.len() == r + 2 && grid.shape[0] == x.shape[0] && grid.shape[r + 1] == r,
            "GridSample: grid is {grid}, expected [{}, out spatial ({r} axes), {r}] for X {x}",
            x.shape[0]
        );
        let mut shape = vec![x.shape[0], x.shape[1]];
        shape.extend_from_slice(&grid.shape[1..=r]);
        Ok(vec![TensorType::new(x.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "GridSample")?;
        let grid = input(inputs, 1, "GridSample")?;
        let (n, c) = (x.shape[0], x.shape[1]);
        let dims = &x.shape[2..];
        let r = dims.len();
        let positions: usize = grid.shape[1..=r].iter().product();
        let plane: usize = dims.iter().product();
        let xs = x.to_f64_vec();
        let gs = grid.to_f64_vec();
        let mut y = vec![0f64; n * c * positions];
        // Row-major strides of a channel's pixels.
        let strides = crate::ops::util::strides(dims);
        let mut taps: Vec<Tap> = Vec::new();
        for b in 0..n {
            for p in 0..positions {
                let coords = &gs[(b * positions + p) * r..][..r];
                // The grid lists x (the last axis) first.
                let per_axis: Vec<Vec<Tap>> =
                    (0..r).map(|a| self.axis_taps(self.denormalize(coords[r - 1 - a], dims[a]), dims[a])).collect();
                taps.clear();
                taps.push((Some(0), 1.0));
                for (a, axis) in per_axis.iter().enumerate() {
                    let mut next = Vec::with_capacity(taps.len() * axis.len());
                    for &(off, w) in &taps {
                        for &(i, wa) in axis {
                            next.push((off.zip(i).map(|(o, i)| o + i * strides[a]), w * wa));
                        }
                    }
                    taps = next;
                }
                for ch in 0..c {
                    let src = &xs[(b * c + ch) * plane..][..plane];
                    let v: f64 = taps.iter().map(|&(off, w)| off.map_or(0.0, |o| w * src[o])).sum();
                    y[(b * c + ch) * positions + p] = v;
                }
            }
        }
        crate::ops::util::store_f64(&mut outputs[0], &y, "GridSample")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn sample(op: GridSample, x: (&[usize], Vec<f32>), grid: (&[usize], Vec<f32>)) -> Vec<f32> {
        let x = Tensor::from_vec(x.0.to_vec(), x.1).unwrap();
        let g = Tensor::from_vec(grid.0.to_vec(), grid.1).unwrap();
        Op::from(op).eval_owned(&[Some(&x), Some(&g)]).unwrap().remove(0).as_slice::<f32>().unwrap().to_vec()
    }

    fn op(mode: GridSampleMode, padding: GridPadding, align_corners: bool) -> GridSample {
        GridSample { mode, padding, align_corners }
    }

    #[test]
    fn corners_and_centre_of_a_2x2_image() {
        // X = [[1, 2], [3, 4]]; grid points (x, y).
        let x = (&[1, 1, 2, 2][..], vec![1.0, 2.0, 3.0, 4.0]);
        let pts = vec![-1.0, -1.0, 1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 0.0, 0.0];
        let grid = (&[1, 1, 5, 2][..], pts);
        // align_corners: -1 and 1 are the corner pixels' centres.
        let y = sample(op(GridSampleMode::Linear, GridPadding::Zeros, true), x.clone(), grid.clone());
        assert_eq!(y, [1.0, 2.0, 3.0, 4.0, 2.5]);
        // Without: -1 and 1 are the outer edges, half a pixel outside, so
        // zeros padding gives a quarter of the corner pixel there.
        let y = sample(op(GridSampleMode::Linear, GridPadding::Zeros, false), x.clone(), grid.clone());
        assert_eq!(y, [0.25, 0.5, 0.75, 1.0, 2.5]);
        // Border padding clamps the coordinate onto the corner pixel.
        let y = sample(op(GridSampleMode::Linear, GridPadding::Border, false), x.clone(), grid.clone());
        assert_eq!(y, [1.0, 2.0, 3.0, 4.0, 2.5]);
        // Nearest: the centre (0.5, 0.5) rounds half to even, to pixel (0, 0).
        let y = sample(op(GridSampleMode::Nearest, GridPadding::Zeros, false), x, grid);
        assert_eq!(y[4], 1.0);
    }

    #[test]
    fn reflection_folds_coordinates_back_inside() {
        assert_eq!(reflect(-0.75, -0.5, 2.5), -0.25);
        assert_eq!(reflect(3.0, -0.5, 2.5), 2.0);
        // Two ranges out reflects twice.
        assert_eq!(reflect(-4.0, 0.0, 3.0), 2.0);
        assert_eq!(reflect(7.0, 0.0, 3.0), 1.0);
        assert_eq!(reflect(5.0, 0.0, 0.0), 0.0);
        // 1D, 3 pixels [10, 20, 30]; x = 1.5 (normalized) is pixel 2.5 with
        // corners aligned, reflected to 1.5: halfway between 20 and 30.
        let y = sample(
            op(GridSampleMode::Linear, GridPadding::Reflection, true),
            (&[1, 1, 3], vec![10.0, 20.0, 30.0]),
            (&[1, 1, 1], vec![1.5]),
        );
        assert_eq!(y, [25.0]);
    }

    #[test]
    fn cubic_weights_sum_to_one_and_interpolate() {
        for t in [0.0, 0.25, 0.5, 0.9] {
            let w = cubic_weights(t);
            assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12, "{t}: {w:?}");
        }
        assert_eq!(cubic_weights(0.0), [0.0, 1.0, 0.0, 0.0]);
        // Worked out by hand for t = 0.25 (exact in binary).
        assert_eq!(cubic_weights(0.25), [-0.10546875, 0.87890625, 0.26171875, -0.03515625]);
        // On a ramp, 6 pixels, corners aligned: x = -0.1 is pixel 2.25, so
        // pixels 1..=4 with those weights give 2.296875 (a = -0.75 does not
        // reproduce a ramp exactly; a = -0.5 would give 2.25).
        let y = sample(
            op(GridSampleMode::Cubic, GridPadding::Border, true),
            (&[1, 1, 6], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
            (&[1, 1, 1], vec![-0.1]),
        );
        assert_eq!(y, [2.296875]);
    }

    #[test]
    fn a_3d_volume_and_several_channels() {
        // X [1, 2, 2, 2, 2]: channel 1 is channel 0 times 10. The centre
        // is the mean of the eight voxels.
        let c0: Vec<f32> = (0..8).map(|v| v as f32).collect();
        let mut x = c0.clone();
        x.extend(c0.iter().map(|v| v * 10.0));
        let y = sample(
            op(GridSampleMode::Linear, GridPadding::Zeros, true),
            (&[1, 2, 2, 2, 2], x),
            (&[1, 1, 1, 2, 3], vec![0.0, 0.0, 0.0, 1.0, -1.0, -1.0]),
        );
        // Second point (x=1, y=-1, z=-1): voxel (d0, h0, w1) = 1.
        assert_eq!(y, [3.5, 1.0, 35.0, 10.0]);
    }

    #[test]
    fn inference_checks_the_grid_against_x() {
        let g = Op::from(op(GridSampleMode::Linear, GridPadding::Zeros, false));
        let t = |s: &[usize]| TensorType::new(DType::F32, s.to_vec());
        assert_eq!(g.infer(&[Some(&t(&[2, 3, 8, 8])), Some(&t(&[2, 5, 6, 2]))]).unwrap(), [t(&[2, 3, 5, 6])]);
        assert!(g.infer(&[Some(&t(&[2, 3, 8, 8])), Some(&t(&[1, 5, 6, 2]))]).is_err());
        assert!(g.infer(&[Some(&t(&[2, 3, 8, 8])), Some(&t(&[2, 5, 6, 3]))]).is_err());
        assert!(g.infer(&[Some(&t(&[2, 3])), Some(&t(&[2, 2]))]).is_err());
        // An empty spatial axis reads zeros in every padding mode.
        for padding in [GridPadding::Zeros, GridPadding::Border, GridPadding::Reflection] {
            let y = sample(op(GridSampleMode::Linear, padding, false), (&[1, 1, 0, 2], vec![]), (&[1, 1, 1, 2], vec![0.0, 0.0]));
            assert_eq!(y, [0.0]);
        }
        let xi = TensorType::new(DType::I64, vec![2, 3, 8, 8]);
        assert!(g.infer(&[Some(&xi), Some(&t(&[2, 5, 6, 2]))]).is_err());
    }
}
