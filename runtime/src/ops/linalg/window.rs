//! Sliding-window geometry shared by convolutions and pooling: output sizes,
//! padding, and the range of output positions whose window tap lands inside
//! the input.

use crate::error::Result;
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

/// The normalized parameters of a sliding window over `kernel_shape.len()`
/// spatial dimensions. `pads` holds every begin padding, then every end
/// padding (ONNX order: `[x1_begin, x2_begin, ..., x1_end, x2_end, ...]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub kernel_shape: Vec<usize>,
    pub strides: Vec<usize>,
    pub pads: Vec<usize>,
    pub dilations: Vec<usize>,
}

impl Window {
    /// A window with unit strides and dilations and no padding.
    pub fn dense(kernel_shape: Vec<usize>) -> Window {
        let n = kernel_shape.len();
        Window { kernel_shape, strides: vec![1; n], pads: vec![0; 2 * n], dilations: vec![1; n] }
    }

    pub fn rank(&self) -> usize {
        self.kernel_shape.len()
    }

    pub fn pad_begin(&self, d: usize) -> usize {
        self.pads[d]
    }

    pub fn pad_end(&self, d: usize) -> usize {
        self.pads[self.rank() + d]
    }

    /// The extent of the dilated kernel along `d`.
    pub fn span(&self, d: usize) -> usize {
        (self.kernel_shape[d].saturating_sub(1)) * self.dilations[d] + 1
    }

    /// Checks that every list has the right length and no stride or dilation
    /// is zero.
    pub fn validate(&self, op: &str) -> Result<()> {
        let n = self.rank();
        ensure_op!(
            self.strides.len() == n && self.dilations.len() == n && self.pads.len() == 2 * n,
            "{op}: kernel_shape {:?}, strides {:?}, pads {:?} and dilations {:?} disagree in rank",
            self.kernel_shape,
            self.strides,
            self.pads,
            self.dilations
        );
        ensure_op!(self.strides.iter().chain(&self.dilations).all(|&v| v > 0), "{op}: strides and dilations must be positive");
        ensure_op!(self.kernel_shape.iter().all(|&k| k > 0), "{op}: kernel_shape must be positive");
        Ok(())
    }

    /// Output spatial sizes for `input` spatial sizes. With `ceil_mode`, a
    /// partial last window counts, as long as it starts inside the input or
    /// its begin padding (the PyTorch and ONNX rule).
    pub fn output_shape(&self, input: &[usize], ceil_mode: bool, op: &str) -> Result<Vec<usize>> {
        ensure_op!(input.len() == self.rank(), "{op}: input has {} spatial dimensions, the window {}", input.len(), self.rank());
        let mut out = Vec::with_capacity(input.len());
        for (d, &len) in input.iter().enumerate() {
            let padded = len + self.pad_begin(d) + self.pad_end(d);
            let span = self.span(d);
            if padded < span {
                bail_op!("{op}: window {span} is larger than the padded input {padded} along spatial axis {d}");
            }
            let s = self.strides[d];
            let mut o = if ceil_mode { (padded - span).div_ceil(s) + 1 } else { (padded - span) / s + 1 };
            if ceil_mode && (o - 1) * s >= len + self.pad_begin(d) {
                o -= 1;
            }
            out.push(o);
        }
        Ok(out)
    }
}

/// The output positions `o` in `0..out_len` whose input index
/// `o * stride + offset` lies in `0..in_len`, as a half-open range.
pub fn valid_range(out_len: usize, in_len: usize, stride: usize, offset: isize) -> (usize, usize) {
    let s = stride as isize;
    // The first o with o * s + offset >= 0.
    let lo = if offset >= 0 { 0 } else { ((-offset) + s - 1) / s };
    // The first o with o * s + offset >= in_len.
    let room = in_len as isize - offset;
    let hi = if room <= 0 { 0 } else { (room + s - 1) / s };
    let lo = (lo as usize).min(out_len);
    let hi = (hi as usize).min(out_len).max(lo);
    (lo, hi)
}

/// One spatial axis of a window over planes of at most two axes.
#[derive(Clone, Copy, Debug)]
pub struct WindowAxis {
    pub kernel: usize,
    pub stride: usize,
    pub dilation: usize,
    pub pad_begin: usize,
    pub input: usize,
    pub output: usize,
}

impl WindowAxis {
    /// The input position tap `k` of output position `o` reads, or `None`
    /// in padding.
    #[inline]
    pub fn input_of(&self, o: usize, k: usize) -> Option<usize> {
        let i = (o * self.stride + k * self.dilation) as isize - self.pad_begin as isize;
        (0..self.input as isize).contains(&i).then_some(i as usize)
    }
}

/// The (height, width) axes of a window over one- or two-axis planes (a
/// one-axis plane is a two-axis one of height 1); `None` for other ranks.
pub fn plane_axes(win: &Window, in_spatial: &[usize], out_spatial: &[usize]) -> Option<(WindowAxis, WindowAxis)> {
    let axis = |d: usize| WindowAxis {
        kernel: win.kernel_shape[d],
        stride: win.strides[d],
        dilation: win.dilations[d],
        pad_begin: win.pad_begin(d),
        input: in_spatial[d],
        output: out_spatial[d],
    };
    let flat = WindowAxis { kernel: 1, stride: 1, dilation: 1, pad_begin: 0, input: 1, output: 1 };
    match win.rank() {
        1 => Some((flat, axis(0))),
        2 => Some((axis(0), axis(1))),
        _ => None,
    }
}

/// Converts a flat index into per-dimension indices of `shape` (row-major).
pub fn unflatten(mut flat: usize, shape: &[usize], out: &mut [usize]) {
    for d in (0..shape.len()).rev() {
        let n = shape[d].max(1);
        out[d] = flat % n;
        flat /= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_range_handles_padding_and_strides() {
        // in_len 5, stride 2, offset -1: o=0 -> -1 (out), o=1 -> 1, o=2 -> 3, o=3 -> 5 (out).
        assert_eq!(valid_range(4, 5, 2, -1), (1, 3));
        assert_eq!(valid_range(3, 3, 1, 0), (0, 3));
        let (lo, hi) = valid_range(3, 3, 1, 5);
        assert_eq!(lo, hi);
    }

    #[test]
    fn ceil_mode_drops_windows_starting_in_end_padding() {
        let w = Window { kernel_shape: vec![3], strides: vec![2], pads: vec![0, 0], dilations: vec![1] };
        assert_eq!(w.output_shape(&[4], false, "t").unwrap(), vec![1]);
        assert_eq!(w.output_shape(&[4], true, "t").unwrap(), vec![2]);
        let w = Window { kernel_shape: vec![2], strides: vec![2], pads: vec![1, 1], dilations: vec![1] };
        // padded 6, span 2: floor 3, ceil 3.
        assert_eq!(w.output_shape(&[4], true, "t").unwrap(), vec![3]);
    }
}
