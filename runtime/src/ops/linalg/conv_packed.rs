//! The fast mode's f32 convolution (`crate::math`): the im2col matrix is
//! written straight into the packed kernel's layout (`sgemm`), so the
//! multiply reads it without copying it again.
//!
//! Each input channel is first copied into a zero-padded plane, so that
//! every kernel tap reads every output position at a fixed offset: element
//! (channel c, tap t; output position j) of the im2col matrix is
//! `padded[row_base(c, t) + position(j)]`, with no bounds to test. A panel
//! of NR output positions is then filled line by line (one line per row of
//! the matrix), each line as the same few strided runs (the panel's part of
//! each output row), instead of a walk over output rows per kernel tap
//! whose bookkeeping dominated small convolutions.

use super::conv::{init_with_bias, ConvGeometry, Finish, MAX_IM2COL};
use super::gemm_kernel::{gemm_f32_packed, packed_layout, Shared};
use super::num::with_scratch;
use super::sgemm::PackedLayout;
use super::window::unflatten;
use super::GemmArgs;

/// Runs the convolution through the packed path and returns true, or
/// returns false, doing nothing, where it does not apply: the exact mode, a
/// CPU without the packed kernel, depthwise and pointwise convolutions
/// (those need no im2col), and matrices beyond [`MAX_IM2COL`].
pub(super) fn conv_packed(
    g: &ConvGeometry,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    finish: Finish<'_, f32>,
) -> bool {
    if crate::math::mode() != crate::math::Math::Fast || g.is_depthwise() || g.is_pointwise() {
        return false;
    }
    if g.n == 0 || g.m == 0 || g.out_size == 0 {
        return false;
    }
    let (cg, mg) = (g.c / g.group, g.m / g.group);
    let kdim = cg * g.k_size;
    let Some(layout) = packed_layout(kdim, g.out_size) else { return false };
    let padded = Padded::new(g);
    let padded_len = cg * padded.plane;
    if layout.len() > MAX_IM2COL || padded_len > MAX_IM2COL {
        return false;
    }
    let mut args = GemmArgs::row_major(mg, kdim, g.out_size);
    args.beta = if bias.is_some() { 1.0 } else { 0.0 };
    // Where row p = (channel, tap) of the matrix starts in the padded planes.
    let row_base: Vec<usize> = (0..kdim).map(|p| (p / g.k_size) * padded.plane + padded.taps[p % g.k_size]).collect();
    // 64 more floats than the matrix, so that it can start on a 64-byte line.
    with_scratch::<f32, _>(layout.len() + 64 + padded_len, |buf| {
        let start = buf.as_ptr().align_offset(64);
        let (packed, rest) = buf[start..].split_at_mut(layout.len());
        let planes = &mut rest[..padded_len];
        for n in 0..g.n {
            for grp in 0..g.group {
                let x_g = &x[(n * g.c + grp * cg) * g.in_size..][..cg * g.in_size];
                crate::parallel::par_chunks_mut(planes, padded.plane, 16, |c0, chunk| {
                    for (i, plane) in chunk.chunks_exact_mut(padded.plane).enumerate() {
                        padded.fill(&x_g[(c0 + i) * g.in_size..][..g.in_size], plane);
                    }
                });
                fill_packed(&layout, &row_base, &padded, planes, packed);
                let offset = (n * g.m + grp * mg) * g.out_size;
                let y_g = &mut y[offset..][..mg * g.out_size];
                init_with_bias(y_g, bias.map(|b| &b[grp * mg..][..mg]), g.out_size);
                gemm_f32_packed(&args, &w[grp * mg * kdim..][..mg * kdim], packed, &layout, y_g);
                crate::parallel::par_chunks_mut(y_g, 1, 1 << 14, |start, run| finish(offset + start, run));
            }
        }
    });
    true
}

/// The zero-padded copy of an input plane and the offsets into it.
struct Padded<'g> {
    g: &'g ConvGeometry,
    /// Extent of each padded spatial axis.
    extent: Vec<usize>,
    /// Elements of one padded plane.
    plane: usize,
    /// Offset of each kernel tap (its dilated position) in a padded plane.
    taps: Vec<usize>,
    /// Offset of each output position's window origin in a padded plane.
    positions: Vec<usize>,
    /// The offset between neighbouring positions of an output row.
    step: usize,
}

impl<'g> Padded<'g> {
    fn new(g: &'g ConvGeometry) -> Padded<'g> {
        let win = &g.win;
        let r = g.in_spatial.len();
        // The last window ends inside the padded input: (o - 1)·s + span <= in + pads.
        let extent: Vec<usize> = (0..r).map(|d| g.in_spatial[d] + win.pad_begin(d) + win.pad_end(d)).collect();
        let strides = crate::ops::util::strides(&extent);
        let mut idx = vec![0; r];
        let taps = (0..g.k_size)
            .map(|t| {
                unflatten(t, &win.kernel_shape, &mut idx);
                (0..r).map(|d| idx[d] * win.dilations[d] * strides[d]).sum()
            })
            .collect();
        let positions = (0..g.out_size)
            .map(|j| {
                unflatten(j, &g.out_spatial, &mut idx);
                (0..r).map(|d| idx[d] * win.strides[d] * strides[d]).sum()
            })
            .collect();
        let step = win.strides[r - 1];
        Padded { g, plane: extent.iter().product(), extent, taps, positions, step }
    }

    /// Writes input plane `x` into `out` with its padding.
    fn fill(&self, x: &[f32], out: &mut [f32]) {
        out.fill(0.0);
        let g = self.g;
        let r = g.in_spatial.len();
        let width = g.in_spatial[r - 1];
        let rows = g.in_size / width.max(1);
        let strides = crate::ops::util::strides(&self.extent);
        let mut idx = vec![0; r];
        for row in 0..rows {
            unflatten(row * width, &g.in_spatial, &mut idx);
            let at: usize = (0..r).map(|d| (idx[d] + g.win.pad_begin(d)) * strides[d]).sum();
            out[at..at + width].copy_from_slice(&x[row * width..][..width]);
        }
    }
}

/// Fills the packed matrix: line by line, each panel's NR positions read
/// from each row's base: with unit innermost stride as contiguous runs (an
/// output row's part in the panel), else element by element from their
/// offsets. Positions past n stay zero. Panels are split over the
/// context's threads.
fn fill_packed(layout: &PackedLayout, row_base: &[usize], padded: &Padded<'_>, planes: &[f32], packed: &mut [f32]) {
    let nr = layout.nr;
    let panels = layout.npad / nr;
    let step = padded.step;
    let max_base = row_base.iter().copied().max().unwrap_or(0);
    let max_position = padded.positions.iter().copied().max().unwrap_or(0);
    assert!(max_base + max_position < planes.len(), "im2col: an offset leaves the padded planes");
    let out = Shared(packed.as_mut_ptr());
    let grain = (1 << 14) / (layout.k * nr).max(1);
    crate::parallel::par_ranges(panels, grain, |range| {
        let mut runs: Vec<Run> = Vec::with_capacity(nr);
        for q in range {
            let j0 = q * nr;
            let valid = nr.min(layout.n - j0);
            runs.clear();
            for (l, &at) in padded.positions[j0..j0 + valid].iter().enumerate().filter(|_| step == 1) {
                match runs.last_mut() {
                    Some(r) if r.src + r.len == at => r.len += 1,
                    _ => runs.push(Run { dst: l, src: at, len: 1 }),
                }
            }
            for (p, &base) in row_base.iter().enumerate() {
                let (at, _) = layout.index(p, j0);
                // SAFETY: line p of panel q lies inside the packed matrix
                // and belongs to this range's panels alone.
                let line = unsafe { std::slice::from_raw_parts_mut(out.at(at as isize), nr) };
                if step == 1 {
                    for r in &runs {
                        copy_short(&mut line[r.dst..r.dst + r.len], &planes[base + r.src..][..r.len]);
                    }
                } else {
                    let src = &planes[base..];
                    for (o, &at) in line.iter_mut().zip(&padded.positions[j0..j0 + valid]) {
                        // SAFETY: base + at <= max_base + max_position, in bounds (asserted above).
                        *o = unsafe { *src.get_unchecked(at) };
                    }
                }
                line[valid..].fill(0.0);
            }
        }
    });
}

/// Output positions `dst..dst + len` of a panel, which read a padded plane
/// at `src..src + len` from their row's base (unit stride).
struct Run {
    dst: usize,
    src: usize,
    len: usize,
}

/// `dst.copy_from_slice(src)` for short runs, in fixed-size pieces the
/// compiler turns into vector moves instead of a library call.
#[inline(always)]
fn copy_short(dst: &mut [f32], src: &[f32]) {
    debug_assert_eq!(dst.len(), src.len());
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (d, s) in (&mut d).zip(&mut s) {
        d.copy_from_slice(s);
    }
    for (d, &s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = s;
    }
}
