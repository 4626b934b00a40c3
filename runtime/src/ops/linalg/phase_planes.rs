//! Padded 2-D input planes with each row stored as its stride phases
//! (columns p, p + sx, p + 2sx, ... one after the other), so that every
//! window tap reads a run of output positions as one contiguous vector
//! whatever the horizontal stride. The direct convolution reads them.

use super::conv_geometry::ConvGeometry;

/// A run of up to one vector of output positions in one output row:
/// where it reads a padded plane for tap (0, 0), where it lies in an
/// output plane, and how many positions it has.
#[derive(Clone, Copy, Debug)]
pub(super) struct Chunk {
    pub input: usize,
    pub output: usize,
    pub lanes: usize,
}

/// The layout of padded input planes with each row stored as its stride
/// phases.
pub(super) struct PhasePlanes {
    /// Horizontal stride: phases per row.
    sx: usize,
    /// Elements of one phase (the padded width over `sx`, rounded up).
    phase: usize,
    /// Elements of one stored row: `sx · phase`.
    row: usize,
    /// Elements of one stored plane.
    pub plane: usize,
}

impl PhasePlanes {
    /// The layout for a 2-D window: every window of every output position
    /// inside the padded plane.
    pub fn new(g: &ConvGeometry) -> PhasePlanes {
        let sx = g.win.strides[1].max(1);
        let (rows, padded_w) = (g.padded_extent(0), g.padded_extent(1));
        let phase = padded_w.div_ceil(sx);
        PhasePlanes { sx, phase, row: sx * phase, plane: rows * sx * phase }
    }

    /// Where term k = (input channel, tap) reads for output position (0,
    /// 0), from the first plane: padded row `ky·dy`, column `kx·dx`.
    pub fn offsets(&self, g: &ConvGeometry, channels: usize) -> Vec<usize> {
        let win = &g.win;
        let (kh, kw) = (win.kernel_shape[0], win.kernel_shape[1]);
        let (dy, dx) = (win.dilations[0], win.dilations[1]);
        let mut out = Vec::with_capacity(channels * kh * kw);
        for c in 0..channels {
            for ky in 0..kh {
                for kx in 0..kw {
                    let col = kx * dx;
                    out.push(c * self.plane + ky * dy * self.row + (col % self.sx) * self.phase + col / self.sx);
                }
            }
        }
        out
    }

    /// The output positions in vectors of `lanes`, row by row.
    pub fn chunks(&self, g: &ConvGeometry, lanes: usize) -> Vec<Chunk> {
        let (oh, ow, sy) = (g.out_spatial[0], g.out_spatial[1], g.win.strides[0]);
        let mut out = Vec::with_capacity(oh * ow.div_ceil(lanes));
        for oy in 0..oh {
            for ox in (0..ow).step_by(lanes) {
                out.push(Chunk { input: oy * sy * self.row + ox, output: oy * ow + ox, lanes: lanes.min(ow - ox) });
            }
        }
        out
    }

    /// Copies consecutive input planes from `x` into the planes of `out`
    /// (as many as it holds): padding zero, padded column `col` of each row
    /// at `(col % sx) · phase + col / sx`.
    pub fn fill(&self, g: &ConvGeometry, x: &[f32], out: &mut [f32]) {
        // Stride 2: each row padded in `line`, then split into its two
        // phases in one pass the compiler vectorizes (the general loop below
        // copied element by element and dominated small stems).
        let mut line = if self.sx == 2 { vec![0f32; self.row] } else { Vec::new() };
        for (plane, out) in out.chunks_exact_mut(self.plane).enumerate() {
            self.fill_plane(g, &x[plane * g.in_size..][..g.in_size], out, &mut line);
        }
    }

    /// One plane of [`PhasePlanes::fill`]; `line` is the stride-2 row
    /// buffer, whose padding stays zero.
    fn fill_plane(&self, g: &ConvGeometry, x: &[f32], out: &mut [f32], line: &mut [f32]) {
        let (top, left) = (g.win.pad_begin(0), g.win.pad_begin(1));
        let (ih, iw) = (g.in_spatial[0], g.in_spatial[1]);
        out[..top * self.row].fill(0.0);
        out[(top + ih) * self.row..].fill(0.0);
        for (r, dst) in out[top * self.row..(top + ih) * self.row].chunks_exact_mut(self.row).enumerate() {
            let src = &x[r * iw..][..iw];
            if self.sx == 2 {
                line[left..left + iw].copy_from_slice(src);
                let (even, odd) = dst.split_at_mut(self.phase);
                for ((e, o), pair) in even.iter_mut().zip(odd.iter_mut()).zip(line.chunks_exact(2)) {
                    *e = pair[0];
                    *o = pair[1];
                }
                continue;
            }
            if self.sx == 1 {
                dst[..left].fill(0.0);
                dst[left..left + iw].copy_from_slice(src);
                dst[left + iw..].fill(0.0);
                continue;
            }
            // Phase p holds padded columns p, p + sx, ...: input columns
            // p - left, p - left + sx, ... where they exist.
            for (p, dst) in dst.chunks_exact_mut(self.phase).enumerate() {
                // The first index of this phase at or right of the left padding.
                let first = left.saturating_sub(p).div_ceil(self.sx);
                let start = (first * self.sx + p).saturating_sub(left).min(iw);
                let taken = (iw - start).div_ceil(self.sx).min(self.phase - first.min(self.phase));
                dst[..first.min(self.phase)].fill(0.0);
                for (d, &v) in dst[first.min(self.phase)..][..taken].iter_mut().zip(src[start..].iter().step_by(self.sx)) {
                    *d = v;
                }
                dst[first.min(self.phase) + taken..].fill(0.0);
            }
        }
    }
}
