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

use super::conv_geometry::{init_with_bias, ConvGeometry, Finish, MAX_IM2COL};
use super::gemm_kernel::{
    gemm_f32_packed, gemm_f32_packed_here, gemm_f32_packed_kernel, gemm_f32_packed_kernel_here, packed_layout, PackedWeightsA,
    Shared,
};
use super::num::with_scratch;
use super::sgemm::{with_packed_buffer, PackedLayout};
use super::window::unflatten;
use super::GemmArgs;

/// Runs the convolution through the packed path and returns true, or
/// returns false, doing nothing, where it does not apply: the exact mode, a
/// CPU without the packed kernel, depthwise and pointwise convolutions, and
/// padded inputs or whole matrices beyond [`MAX_IM2COL`]. (Pointwise ones
/// were measured through this path too: no faster on ResNet-50, slower on
/// EfficientNet-B0, than multiplying the input as it is.)
///
/// The matrix is built and multiplied a block of output positions at a
/// time, each block small enough to stay in the L2 cache from its bias
/// through the product to the fused epilogue; the blocks go to the
/// context's threads whole. A product with too few blocks for the threads
/// is built whole instead and the multiply splits itself. Without padding
/// (a strided 1x1 convolution, say) the input planes are read in place.
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
    let Some(whole) = packed_layout(kdim, g.out_size) else { return false };
    let padded = Padded::new(g);
    // Without padding the input planes already are the padded planes.
    let padded_len = if padded.is_input() { 0 } else { cg * padded.plane };
    if padded_len > MAX_IM2COL {
        return false;
    }
    let threads = crate::parallel::threads();
    let blocks = Blocks::new(kdim, g.out_size, whole.nr, threads);
    let by_blocks = blocks.worth_it(threads);
    if !by_blocks && whole.len() > MAX_IM2COL {
        return false;
    }
    let mut args = GemmArgs::row_major(mg, kdim, g.out_size);
    args.beta = if bias.is_some() { 1.0 } else { 0.0 };
    // Constant weights are read from their packed copy.
    let packed_w = PackedWeightsA::of(w, g.group, mg, kdim);
    with_scratch::<f32, _>(padded_len, |scratch| {
        for n in 0..g.n {
            for grp in 0..g.group {
                let x_g = &x[(n * g.c + grp * cg) * g.in_size..][..cg * g.in_size];
                let planes: &[f32] = if padded.is_input() {
                    x_g
                } else {
                    crate::parallel::par_chunks_mut(
                        scratch,
                        padded.plane,
                        crate::parallel::grain_elements(padded.plane),
                        |c0, chunk| {
                            for (i, plane) in chunk.chunks_exact_mut(padded.plane).enumerate() {
                                padded.fill(&x_g[(c0 + i) * g.in_size..][..g.in_size], plane);
                            }
                        },
                    );
                    scratch
                };
                let offset = (n * g.m + grp * mg) * g.out_size;
                let y_g = &mut y[offset..][..mg * g.out_size];
                let bias_g = bias.map(|b| &b[grp * mg..][..mg]);
                let w_g = &w[grp * mg * kdim..][..mg * kdim];
                let packed_w_g = packed_w.as_ref().map(|p| p.group(grp));
                let out = OutputGroup { y: y_g, offset, plane: g.out_size, bias: bias_g, finish };
                if !by_blocks {
                    out.whole(|y_g| {
                        with_packed_buffer(whole.len(), |packed| {
                            fill_packed(&whole, &padded, 0, planes, packed, true);
                            gemm_f32_packed(&args, w_g, packed_w_g, packed, &whole, y_g);
                        })
                    });
                    continue;
                }
                out.in_blocks(&blocks, |j0, cols, c| {
                    let layout = PackedLayout::new(kdim, cols, whole.nr);
                    with_packed_buffer(layout.len(), |packed| {
                        fill_packed(&layout, &padded, j0, planes, packed, false);
                        let block = GemmArgs { n: cols, ..args };
                        // SAFETY: the block's columns of C (`in_blocks`).
                        unsafe { gemm_f32_packed_here(&block, w_g, packed_w_g, packed, &layout, c) };
                    });
                });
            }
        }
    });
    true
}

/// Runs a pointwise convolution (1x1, unit strides, no padding: the input
/// planes are the product's B as they are) through the packed kernel and
/// returns true, or returns false, doing nothing, where that does not
/// apply: the exact mode, a CPU without the kernel, products of at most
/// [`crate::math::FAST_GEMV_ROWS`] rows or columns (the vector-matrix
/// loops of `gemm_f32` do those; squeeze-and-excitation layers on 1x1
/// planes, say).
///
/// Planes larger than the L2 cache (ResNet-50's 64 -> 256 layers on 56x56
/// write 3.2 MB) go a block of output positions at a time, each from its
/// bias through the product to the fused epilogue while it is in cache,
/// instead of three passes over the whole output (bias, product,
/// epilogue) through memory. Constant weights are read from their packed
/// copy (`crate::prepack`).
pub(super) fn conv_pointwise(
    g: &ConvGeometry,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    finish: Finish<'_, f32>,
) -> bool {
    if crate::math::mode() != crate::math::Math::Fast || !g.is_pointwise() || g.is_depthwise() {
        return false;
    }
    let (cg, mg) = (g.c / g.group, g.m / g.group);
    let few = crate::math::FAST_GEMV_ROWS;
    if g.n == 0 || cg == 0 || mg <= few || g.out_size <= few {
        return false;
    }
    let Some(nr) = packed_layout(cg, g.out_size).map(|l| l.nr) else { return false };
    let packed_w = PackedWeightsA::of(w, g.group, mg, cg);
    let threads = crate::parallel::threads();
    let blocks = Blocks::of_positions(g.out_size, nr, POINTWISE_BLOCK / (mg + cg), threads);
    let by_blocks = blocks.worth_it(threads);
    let mut args = GemmArgs::row_major(mg, cg, g.out_size);
    args.beta = if bias.is_some() { 1.0 } else { 0.0 };
    for n in 0..g.n {
        for grp in 0..g.group {
            let x_g = &x[(n * g.c + grp * cg) * g.in_size..][..cg * g.in_size];
            let w_g = &w[grp * mg * cg..][..mg * cg];
            let packed_w_g = packed_w.as_ref().map(|p| p.group(grp));
            let offset = (n * g.m + grp * mg) * g.out_size;
            let y_g = &mut y[offset..][..mg * g.out_size];
            let bias_g = bias.map(|b| &b[grp * mg..][..mg]);
            let out = OutputGroup { y: y_g, offset, plane: g.out_size, bias: bias_g, finish };
            if !by_blocks {
                out.whole(|y_g| gemm_f32_packed_kernel(&args, w_g, packed_w_g, x_g, y_g));
                continue;
            }
            out.in_blocks(&blocks, |j0, cols, c| {
                let block = GemmArgs { n: cols, ..args };
                // SAFETY: the block's columns of C (`in_blocks`).
                unsafe { gemm_f32_packed_kernel_here(&block, w_g, packed_w_g, &x_g[j0..], c) };
            });
        }
    }
    true
}

/// The floats of output and input columns one block of a pointwise
/// convolution keeps in the L2 cache: 512 KiB.
const POINTWISE_BLOCK: usize = 1 << 17;

/// The blocks of output positions [`conv_packed`] builds and multiplies
/// at a time: whole panels each, about 512 KiB of packed matrix (k × width
/// floats) but at least 256 positions, so that the weights read again for
/// every block are amortized over a wide block; as many as a multiple of
/// the threads where there are several, and the panels shared out evenly.
struct Blocks {
    count: usize,
    panels: usize,
    nr: usize,
    n: usize,
}

impl Blocks {
    fn new(k: usize, n: usize, nr: usize, threads: usize) -> Blocks {
        Blocks::of_positions(n, nr, ((1usize << 17) / k.max(1)).max(256), threads)
    }

    /// Blocks of about `width` positions (whole panels, at least one), as
    /// many as a multiple of the threads where there are several.
    fn of_positions(n: usize, nr: usize, width: usize, threads: usize) -> Blocks {
        let panels = n.div_ceil(nr);
        let mut count = panels.div_ceil(width.div_ceil(nr).max(1));
        if count > 1 && threads > 1 {
            count = count.div_ceil(threads) * threads;
        }
        Blocks { count: count.min(panels).max(1), panels, nr, n }
    }

    /// Whether to go block by block: at least two blocks per thread (one
    /// thread: at least two blocks); else the whole product, which the
    /// multiply splits itself.
    fn worth_it(&self, threads: usize) -> bool {
        self.count >= 2 * threads || (threads == 1 && self.count > 1)
    }

    /// The first column and the column count of block `b`.
    fn columns(&self, b: usize) -> (usize, usize) {
        let (p0, p1) = (b * self.panels / self.count, (b + 1) * self.panels / self.count);
        let j0 = p0 * self.nr;
        (j0, (p1 * self.nr).min(self.n) - j0)
    }
}

/// One group's output channels (`y`, rows of `plane` positions, at
/// `offset` in the layer's output), their biases and the fused epilogue:
/// what both ways of computing a product do around it.
struct OutputGroup<'a, 'f> {
    y: &'a mut [f32],
    offset: usize,
    plane: usize,
    bias: Option<&'a [f32]>,
    finish: Finish<'f, f32>,
}

impl OutputGroup<'_, '_> {
    /// The whole product at once: the biases (when there are any; the
    /// product's beta is 0 otherwise and C is not read), `product`, which
    /// splits itself over the threads, then the epilogue.
    fn whole(self, product: impl FnOnce(&mut [f32])) {
        if self.bias.is_some() {
            init_with_bias(self.y, self.bias, self.plane);
        }
        product(&mut *self.y);
        let (offset, finish) = (self.offset, self.finish);
        crate::parallel::par_chunks_mut(self.y, 1, crate::parallel::grain_elements(1), |start, run| finish(offset + start, run));
    }

    /// Block by block over the context's threads, each block of positions
    /// from its biases through `product(j0, cols, c)` (which adds into
    /// columns j0..j0 + cols of every row, `c` pointing at row 0's column
    /// j0) to the epilogue while it is in cache. Each block's columns are
    /// touched by that block alone.
    fn in_blocks(self, blocks: &Blocks, product: impl Fn(usize, usize, *mut f32) + Sync) {
        let rows = self.y.len() / self.plane.max(1);
        let (offset, plane, bias, finish) = (self.offset, self.plane, self.bias, self.finish);
        let c = Shared(self.y.as_mut_ptr());
        crate::parallel::par_ranges(blocks.count, 1, |range| {
            for b in range {
                let (j0, cols) = blocks.columns(b);
                // SAFETY: columns j0..j0 + cols of row i of `y`, which only
                // this block touches.
                let row = |i: usize| unsafe { std::slice::from_raw_parts_mut(c.at((i * plane + j0) as isize), cols) };
                if let Some(b) = bias {
                    (0..rows).for_each(|i| row(i).fill(b[i]));
                }
                product(j0, cols, c.at(j0 as isize));
                (0..rows).for_each(|i| finish(offset + i * plane + j0, row(i)));
            }
        });
    }
}

/// The zero-padded copy of an input plane and the offsets into it.
struct Padded<'g> {
    g: &'g ConvGeometry,
    /// Extent of each padded spatial axis.
    extent: Vec<usize>,
    /// Elements of one padded plane.
    plane: usize,
    /// Offset of each output position's window origin in a padded plane.
    positions: Vec<usize>,
    /// The offset between neighbouring positions of an output row.
    step: usize,
    /// Where row p = (channel, tap) of the im2col matrix starts in the
    /// padded planes of one group.
    rows: Vec<usize>,
    /// The furthest element any row reads: its base plus the last position.
    reach: usize,
}

impl<'g> Padded<'g> {
    fn new(g: &'g ConvGeometry) -> Padded<'g> {
        let win = &g.win;
        let r = g.in_spatial.len();
        // The last window ends inside the padded input: (o - 1)·s + span <= in + pads.
        let extent: Vec<usize> = (0..r).map(|d| g.in_spatial[d] + win.pad_begin(d) + win.pad_end(d)).collect();
        let strides = crate::ops::util::strides(&extent);
        let mut idx = vec![0; r];
        let taps: Vec<usize> = (0..g.k_size)
            .map(|t| {
                unflatten(t, &win.kernel_shape, &mut idx);
                (0..r).map(|d| idx[d] * win.dilations[d] * strides[d]).sum()
            })
            .collect();
        // An odometer over the output positions, row-major.
        let mut positions = Vec::with_capacity(g.out_size);
        idx.iter_mut().for_each(|i| *i = 0);
        let step: Vec<usize> = (0..r).map(|d| win.strides[d] * strides[d]).collect();
        let mut at = 0;
        for _ in 0..g.out_size {
            positions.push(at);
            for d in (0..r).rev() {
                idx[d] += 1;
                at += step[d];
                if idx[d] < g.out_spatial[d] {
                    break;
                }
                at -= idx[d] * step[d];
                idx[d] = 0;
            }
        }
        let step = win.strides[r - 1];
        let plane: usize = extent.iter().product();
        let rows: Vec<usize> = (0..g.c / g.group * g.k_size).map(|p| (p / g.k_size) * plane + taps[p % g.k_size]).collect();
        let reach = rows.iter().max().unwrap_or(&0) + positions.iter().max().unwrap_or(&0);
        Padded { g, plane, extent, positions, step, rows, reach }
    }

    /// Whether the padded plane is the input plane itself (no padding).
    fn is_input(&self) -> bool {
        self.g.win.pads.iter().all(|&p| p == 0)
    }

    /// Writes input plane `x` into `out` with its padding.
    fn fill(&self, x: &[f32], out: &mut [f32]) {
        let g = self.g;
        let r = g.in_spatial.len();
        if r == 2 {
            // Rows of padding, then each input row between its pads.
            let (top, left, width) = (g.win.pad_begin(0), g.win.pad_begin(1), self.extent[1]);
            let (ih, iw) = (g.in_spatial[0], g.in_spatial[1]);
            out[..top * width].fill(0.0);
            for row in 0..ih {
                let src = &x[row * iw..][..iw];
                let dst = &mut out[(top + row) * width..][..width];
                dst[..left].fill(0.0);
                dst[left..left + iw].copy_from_slice(src);
                dst[left + iw..].fill(0.0);
            }
            out[(top + ih) * width..].fill(0.0);
            return;
        }
        out.fill(0.0);
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
fn fill_packed(layout: &PackedLayout, padded: &Padded<'_>, j_first: usize, planes: &[f32], packed: &mut [f32], parallel: bool) {
    let nr = layout.nr;
    let panels = layout.npad / nr;
    let step = padded.step;
    let positions = &padded.positions[j_first..j_first + layout.n];
    assert!(padded.reach < planes.len(), "im2col: an offset leaves the padded planes");
    let out = Shared(packed.as_mut_ptr());
    let grain = if parallel { crate::parallel::grain_elements(layout.k * nr) } else { usize::MAX };
    crate::parallel::par_ranges(panels, grain, |range| {
        let mut runs: Vec<Run> = Vec::with_capacity(nr);
        for q in range {
            let j0 = q * nr;
            let valid = nr.min(layout.n - j0);
            runs.clear();
            for (l, &at) in positions[j0..j0 + valid].iter().enumerate().filter(|_| step == 1) {
                match runs.last_mut() {
                    Some(r) if r.src + r.len == at => r.len += 1,
                    _ => runs.push(Run { dst: l, src: at, len: 1 }),
                }
            }
            for (p, &base) in padded.rows.iter().enumerate() {
                let at = layout.index(p, j0);
                // SAFETY: line p of panel q lies inside the packed matrix
                // and belongs to this range's panels alone.
                let line = unsafe { std::slice::from_raw_parts_mut(out.at(at as isize), nr) };
                if step == 1 {
                    for r in &runs {
                        copy_short(&mut line[r.dst..r.dst + r.len], &planes[base + r.src..][..r.len]);
                    }
                } else {
                    let src = &planes[base..];
                    for (o, &at) in line.iter_mut().zip(&positions[j0..j0 + valid]) {
                        // SAFETY: base + at <= padded.reach, in bounds (asserted above).
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
