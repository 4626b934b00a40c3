//! Conv: N-dimensional grouped convolution (1-D, 2-D, 3-D, ...), with
//! strides, dilations, explicit padding and an optional bias.
//!
//! Inputs: X `[N, C, D1, ..., Dn]`, W `[M, C/group, k1, ..., kn]`, optional
//! B `[M]`. Output: `[N, M, O1, ..., On]`. ONNX's `auto_pad` is resolved into
//! explicit `pads` by the compiler.
//!
//! Strategy: each group is one matrix multiply `W_g [M/g, C/g·K] ×
//! cols [C/g·K, O]` through `matrixmultiply`. `cols` is the im2col matrix,
//! except for 1×1 stride-1 unpadded kernels where the input already is that
//! matrix. Depthwise convolutions (one input channel per group) run as a
//! direct loop instead.

use super::conv_geometry::{init_with_bias, ConvGeometry, Finish, MAX_IM2COL};
use super::depthwise::{small_planes, DepthwisePlan, SmallPlanes};
use super::num::{narrow_into, widen, with_scratch, GemmFn, Scalar};
use super::window::{unflatten, valid_range, Window};
use super::GemmArgs;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{input, opt_input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// A convolution. All fields are normalized: one entry per spatial axis in
/// `kernel_shape`, `strides` and `dilations`; `pads` holds the begin pads of
/// every spatial axis, then the end pads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Conv {
    pub kernel_shape: Vec<usize>,
    pub strides: Vec<usize>,
    pub pads: Vec<usize>,
    pub dilations: Vec<usize>,
    pub group: usize,
}

impl Conv {
    /// A 2-D convolution; `pads` is `[top, left, bottom, right]`.
    pub fn new_2d(kernel: [usize; 2], strides: [usize; 2], pads: [usize; 4], dilations: [usize; 2], group: usize) -> Conv {
        Conv {
            kernel_shape: kernel.to_vec(),
            strides: strides.to_vec(),
            pads: pads.to_vec(),
            dilations: dilations.to_vec(),
            group,
        }
    }

    /// The sliding window of this convolution.
    pub fn window(&self) -> Window {
        Window {
            kernel_shape: self.kernel_shape.clone(),
            strides: self.strides.clone(),
            pads: self.pads.clone(),
            dilations: self.dilations.clone(),
        }
    }

    /// Checks the input shapes and computes the geometry of one call.
    pub(crate) fn geometry(&self, x: &[usize], w: &[usize], b: Option<&[usize]>, op: &str) -> Result<ConvGeometry> {
        let win = self.window();
        win.validate(op)?;
        let r = win.rank();
        ensure_op!(r >= 1, "{op}: at least one spatial axis is required");
        ensure_op!(x.len() == r + 2, "{op}: input rank {} does not match kernel rank {r}", x.len());
        ensure_op!(w.len() == r + 2, "{op}: weight rank {} does not match kernel rank {r}", w.len());
        ensure_op!(
            w[2..] == self.kernel_shape[..],
            "{op}: weight shape {w:?} does not match kernel_shape {:?}",
            self.kernel_shape
        );
        let g = self.group;
        ensure_op!(g >= 1, "{op}: group must be positive");
        let (n, c, m) = (x[0], x[1], w[0]);
        ensure_op!(c == w[1] * g, "{op}: input has {c} channels, weight expects {} x group {g}", w[1]);
        ensure_op!(m % g == 0, "{op}: {m} output channels are not divisible by group {g}");
        if let Some(b) = b {
            ensure_op!(b == [m], "{op}: bias shape {b:?} must be [{m}]");
        }
        let out_spatial = win.output_shape(&x[2..], false, op)?;
        ConvGeometry::new(n, c, m, g, x[2..].to_vec(), out_spatial, win).checked(op)
    }
}

impl OpImpl for Conv {
    fn name(&self) -> &'static str {
        "Conv"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "Conv")?;
        let w = input(inputs, 1, "Conv")?;
        let b = opt_input(inputs, 2);
        ensure_op!(matches!(x.dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16), "Conv: unsupported dtype {}", x.dtype);
        ensure_op!(w.dtype == x.dtype, "Conv: weight dtype {} differs from input {}", w.dtype, x.dtype);
        if let Some(b) = b {
            ensure_op!(b.dtype == x.dtype, "Conv: bias dtype {} differs from input {}", b.dtype, x.dtype);
        }
        let g = self.geometry(&x.shape, &w.shape, b.map(|b| b.shape.as_slice()), "Conv")?;
        Ok(vec![TensorType::new(x.dtype, g.output_shape())])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        self.eval_then(inputs, outputs, &|_, _| {})
    }
}

impl Conv {
    /// Evaluates the convolution; f32 outputs then go through `finish`
    /// while they are in cache (other types never call it).
    pub(crate) fn eval_then(
        &self,
        inputs: &[Option<TensorView<'_>>],
        outputs: &mut [TensorViewMut<'_>],
        finish: Finish<'_, f32>,
    ) -> Result<()> {
        let x = input(inputs, 0, "Conv")?;
        let w = input(inputs, 1, "Conv")?;
        let b = opt_input(inputs, 2);
        let g = self.geometry(x.shape, w.shape, b.map(|b| b.shape), "Conv")?;
        let out = &mut outputs[0];
        match x.dtype {
            DType::F32 => {
                let b = b.map(|b| b.as_slice()).transpose()?;
                let (x, w, y) = (x.as_slice()?, w.as_slice()?, out.as_mut_slice()?);
                if !super::depthwise_phases::depthwise_phases(&g, x, w, b, y, finish)
                    && !super::depthwise_f32::depthwise_f32(&g, x, w, b, y, finish)
                    && !super::conv_dots::conv_dots(&g, x, w, b, y, finish)
                    && !super::conv_direct::conv_direct(&g, x, w, b, y, finish)
                    && !super::conv_packed::conv_packed(&g, x, w, b, y, finish)
                    && !super::conv_packed::conv_pointwise(&g, x, w, b, y, finish)
                {
                    conv_then::<f32>(&g, x, w, b, y, finish)
                }
            }
            DType::F64 => {
                conv::<f64>(&g, x.as_slice()?, w.as_slice()?, b.map(|b| b.as_slice()).transpose()?, out.as_mut_slice()?)
            }
            DType::F16 | DType::BF16 => {
                let (xf, wf) = (widen(&x)?, widen(&w)?);
                let bf = b.map(|b| widen(&b)).transpose()?;
                let mut yf = vec![0f32; out.len()];
                conv(&g, &xf, &wf, bf.as_deref(), &mut yf);
                narrow_into(out, &yf)?;
            }
            d => bail_op!("Conv: unsupported dtype {d}"),
        }
        Ok(())
    }
}

/// Runs a convolution whose shapes `g` describes on contiguous NC... data.
pub(crate) fn conv<T: Scalar>(g: &ConvGeometry, x: &[T], w: &[T], bias: Option<&[T]>, y: &mut [T]) {
    conv_then(g, x, w, bias, y, &|_, _| {})
}

/// [`conv`], then `finish` on every output element once.
pub(crate) fn conv_then<T: Scalar>(g: &ConvGeometry, x: &[T], w: &[T], bias: Option<&[T]>, y: &mut [T], finish: Finish<'_, T>) {
    if g.n == 0 || g.m == 0 || g.out_size == 0 {
        return;
    }
    if g.is_depthwise() {
        depthwise(g, x, w, bias, y, finish);
    } else {
        conv_gemm(g, x, w, bias, y, Im2colGemm { gemm: T::GEMM, max_im2col: MAX_IM2COL }, finish);
    }
}

/// How [`conv_gemm`] multiplies: the matrix multiply, and the most
/// elements of im2col matrix it builds at once.
#[derive(Clone, Copy)]
struct Im2colGemm<T> {
    gemm: GemmFn<T>,
    max_im2col: usize,
}

/// The im2col + matrix multiply path, one multiply per sample and group.
/// The im2col matrix is written by the context's threads, channel blocks
/// apiece; the multiply splits itself (see `gemm_kernel`).
fn conv_gemm<T: Scalar>(
    g: &ConvGeometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    y: &mut [T],
    how: Im2colGemm<T>,
    finish: Finish<'_, T>,
) {
    let Im2colGemm { gemm, max_im2col } = how;
    let (cg, mg) = (g.c / g.group, g.m / g.group);
    let kdim = cg * g.k_size;
    let mut args = GemmArgs::row_major(mg, kdim, g.out_size);
    args.beta = if bias.is_some() { 1.0 } else { 0.0 };
    let pointwise = g.is_pointwise();
    let taps = (!pointwise).then(|| TapRows::new(g));
    let width = im2col_block_width(kdim, g.out_size, max_im2col);
    let scratch_len = if pointwise { 0 } else { kdim * width };
    with_scratch::<T, _>(scratch_len, |cols| {
        for n in 0..g.n {
            for grp in 0..g.group {
                let x_g = &x[(n * g.c + grp * cg) * g.in_size..][..cg * g.in_size];
                let w_g = &w[grp * mg * kdim..][..mg * kdim];
                let offset = (n * g.m + grp * mg) * g.out_size;
                let y_g = &mut y[offset..][..mg * g.out_size];
                if let Some(b) = bias {
                    init_with_bias(y_g, Some(&b[grp * mg..][..mg]), g.out_size);
                }
                match &taps {
                    None => gemm(&args, w_g, x_g, y_g),
                    Some(taps) => {
                        // Output positions j0..j0 + n at a time; one block
                        // unless the im2col matrix would exceed max_im2col.
                        for j0 in (0..g.out_size).step_by(width) {
                            let n = width.min(g.out_size - j0);
                            let cols = &mut cols[..kdim * n];
                            let columns = j0..j0 + n;
                            crate::parallel::par_chunks_mut(cols, g.k_size * n, g.planes_per_piece(), |c0, chunk| {
                                im2col(g, taps, &x_g[c0 * g.in_size..], columns.clone(), chunk)
                            });
                            let block = GemmArgs { n, rsb: n as isize, ..args };
                            gemm(&block, w_g, cols, &mut y_g[j0..]);
                        }
                    }
                }
                crate::parallel::par_chunks_mut(y_g, 1, crate::parallel::grain_elements(1), |start, run| {
                    finish(offset + start, run)
                });
            }
        }
    });
}

/// Per-call geometry of the taps along the innermost spatial axis, and the
/// odometer over the outer output positions; [`TapRows`] is built with it.
struct Taps<'a> {
    g: &'a ConvGeometry,
    last: usize,
    /// Input strides (in elements) of the spatial axes within one plane.
    in_strides: Vec<usize>,
    /// Output rows: the product of all output axes but the last.
    rows: usize,
    kidx: Vec<usize>,
    oidx: Vec<usize>,
}

impl<'a> Taps<'a> {
    fn new(g: &'a ConvGeometry) -> Taps<'a> {
        let r = g.in_spatial.len();
        let in_strides = crate::ops::util::strides(&g.in_spatial);
        let rows = g.out_spatial[..r - 1].iter().product();
        Taps { g, last: r - 1, in_strides, rows, kidx: vec![0; r], oidx: vec![0; r] }
    }

    /// Selects kernel tap `kf`; returns the innermost-axis input offset of
    /// output position 0 and the range of valid innermost output positions.
    fn select_tap(&mut self, kf: usize) -> (isize, usize, usize) {
        let win = &self.g.win;
        unflatten(kf, &win.kernel_shape, &mut self.kidx);
        let l = self.last;
        let off = (self.kidx[l] * win.dilations[l]) as isize - win.pad_begin(l) as isize;
        let (lo, hi) = valid_range(self.g.out_spatial[l], self.g.in_spatial[l], win.strides[l], off);
        (off, lo, hi)
    }

    /// For output row `row` (all axes but the last) under the selected tap,
    /// the plane offset of the input row, or `None` when it lies in padding.
    fn input_row(&mut self, row: usize) -> Option<usize> {
        let g = self.g;
        let l = self.last;
        unflatten(row, &g.out_spatial[..l], &mut self.oidx[..l]);
        let mut base = 0usize;
        for d in 0..l {
            let i = (self.oidx[d] * g.win.strides[d] + self.kidx[d] * g.win.dilations[d]) as isize - g.win.pad_begin(d) as isize;
            if i < 0 || i as usize >= g.in_spatial[d] {
                return None;
            }
            base += i as usize * self.in_strides[d];
        }
        Some(base)
    }
}

/// What one kernel tap reads for one output row (all spatial axes but the
/// last fixed): output positions `lo..hi` of the row read the input plane
/// at `input + j * stride` for the j-th of them; the other positions of the
/// row see padding. A row whose input lies wholly in padding has
/// `lo == hi`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TapRow {
    pub tap: usize,
    /// Plane offset of the row's first output position.
    pub out_row: usize,
    pub lo: usize,
    pub hi: usize,
    /// Plane offset of the input output position `lo` reads.
    pub input: usize,
}

/// Every (tap, output row) pair of a sliding window, tap-major, computed
/// once per call so that the per-plane loops of convolution and pooling
/// are plain strided runs.
pub(crate) struct TapRows {
    pub rows: Vec<TapRow>,
    /// Input stride along the innermost axis.
    pub stride: usize,
    /// Output positions per row.
    pub width: usize,
}

impl TapRows {
    pub fn new(g: &ConvGeometry) -> TapRows {
        let mut taps = Taps::new(g);
        let stride = g.win.strides[taps.last];
        let width = g.out_spatial[taps.last];
        let mut rows = Vec::with_capacity(g.k_size * taps.rows);
        for tap in 0..g.k_size {
            let (off, lo, hi) = taps.select_tap(tap);
            for row in 0..taps.rows {
                let out_row = row * width;
                match taps.input_row(row) {
                    Some(base) if lo < hi => {
                        let input = (base as isize + lo as isize * stride as isize + off) as usize;
                        rows.push(TapRow { tap, out_row, lo, hi, input });
                    }
                    _ => rows.push(TapRow { tap, out_row, lo: 0, hi: 0, input: 0 }),
                }
            }
        }
        TapRows { rows, stride, width }
    }

    /// The rows that read any input.
    pub fn valid(&self) -> impl Iterator<Item = &TapRow> {
        self.rows.iter().filter(|r| r.lo < r.hi)
    }

    /// The rows that read any input, output row by output row (taps in
    /// order within each), so that a row's accumulator stays in cache
    /// while every tap adds into it.
    pub fn valid_by_output_row(&self) -> Vec<TapRow> {
        let mut rows: Vec<TapRow> = self.valid().copied().collect();
        rows.sort_by_key(|r| r.out_row);
        rows
    }
}

/// Output positions per im2col block: all of them when `kdim × out_size`
/// fits in `max` elements, else the width of the fewest blocks of nearly
/// equal width that fit (at least one position each).
fn im2col_block_width(kdim: usize, out_size: usize, max: usize) -> usize {
    let fit = (max / kdim.max(1)).max(1);
    if out_size <= fit {
        return out_size.max(1);
    }
    // Balanced blocks, so that no block is a narrow remainder.
    out_size.div_ceil(out_size.div_ceil(fit))
}

/// Writes the im2col rows `[K, columns]` (output positions `columns` of
/// every kernel tap) of each of the input channel planes in `x` into
/// `cols`: one `K·n` block per channel, as many as `cols` holds.
pub(crate) fn im2col<T: Scalar>(g: &ConvGeometry, taps: &TapRows, x: &[T], columns: Range<usize>, cols: &mut [T]) {
    let zero = T::default();
    let s = taps.stride;
    let n = columns.len();
    let whole = n == g.out_size;
    for (ci, block) in cols.chunks_exact_mut(g.k_size * n).enumerate() {
        let xp = &x[ci * g.in_size..][..g.in_size];
        for r in &taps.rows {
            // The part of the row inside `columns`, as positions of the row.
            let (first, last) = if whole {
                (0, taps.width)
            } else {
                let first = columns.start.max(r.out_row) - r.out_row;
                let last = columns.end.min(r.out_row + taps.width).saturating_sub(r.out_row);
                if first >= last {
                    continue;
                }
                (first, last)
            };
            let at = r.tap * n + r.out_row + first - columns.start;
            let seg = &mut block[at..][..last - first];
            let (lo, hi) = (r.lo.clamp(first, last) - first, r.hi.clamp(first, last) - first);
            seg[..lo].fill(zero);
            seg[hi.max(lo)..].fill(zero);
            if lo < hi {
                let dst = &mut seg[lo..hi];
                let start = r.input + (first + lo - r.lo) * s;
                if s == 1 {
                    dst.copy_from_slice(&xp[start..start + dst.len()]);
                } else {
                    for (v, &x) in dst.iter_mut().zip(xp[start..].iter().step_by(s)) {
                        *v = x;
                    }
                }
            }
        }
    }
}

/// Depthwise convolution as a direct loop: every output channel reads one
/// input channel, so each kernel tap is a scaled, shifted add of the input
/// plane into the output plane. Planes are split over the context's
/// threads. One and two spatial axes run the blocked kernel of
/// `depthwise.rs`; more run the generic tap-row walk below.
fn depthwise<T: Scalar>(g: &ConvGeometry, x: &[T], w: &[T], bias: Option<&[T]>, y: &mut [T], finish: Finish<'_, T>) {
    let mg = g.m / g.group;
    let small =
        SmallPlanes { win: &g.win, in_spatial: &g.in_spatial, out_spatial: &g.out_spatial, in_channels: g.c, out_channels: g.m };
    if small.applies() {
        // Sample by sample, vectorized across channels.
        let sample = g.m * g.out_size;
        let grain = crate::parallel::grain_elements(sample * g.k_size);
        crate::parallel::par_chunks_mut(y, sample, grain, |first, samples| {
            for (i, ys) in samples.chunks_exact_mut(sample).enumerate() {
                let n = first + i;
                let xs = &x[n * g.c * g.in_size..][..g.c * g.in_size];
                small_planes(&small, xs, w, bias, ys, &|offset, plane| finish(n * sample + offset, plane));
            }
        });
    } else if let Some(plan) = DepthwisePlan::new(&g.win, &g.in_spatial, &g.out_spatial) {
        crate::parallel::par_chunks_mut(y, g.out_size, g.planes_per_piece(), |first, planes| {
            let mut scratch = vec![T::default(); plan.scratch_len()];
            for (i, yp) in planes.chunks_exact_mut(g.out_size).enumerate() {
                let (n, m) = ((first + i) / g.m, (first + i) % g.m);
                let xp = &x[(n * g.c + m / mg) * g.in_size..][..g.in_size];
                let b = bias.map_or(T::default(), |b| b[m]);
                plan.plane(xp, &w[m * g.k_size..][..g.k_size], b, &mut scratch, yp);
                finish((first + i) * g.out_size, yp);
            }
        });
    } else {
        depthwise_tap_rows(g, x, w, bias, y, finish);
    }
}

/// The generic depthwise loop: output row by output row, each tap a
/// strided run (see [`TapRows::valid_by_output_row`]).
fn depthwise_tap_rows<T: Scalar>(g: &ConvGeometry, x: &[T], w: &[T], bias: Option<&[T]>, y: &mut [T], finish: Finish<'_, T>) {
    let mg = g.m / g.group;
    let taps = TapRows::new(g);
    let s = taps.stride;
    let rows = taps.valid_by_output_row();
    crate::parallel::par_chunks_mut(y, g.out_size, g.planes_per_piece(), |first, planes| {
        for (i, yp) in planes.chunks_exact_mut(g.out_size).enumerate() {
            let (n, m) = ((first + i) / g.m, (first + i) % g.m);
            let xp = &x[(n * g.c + m / mg) * g.in_size..][..g.in_size];
            yp.fill(bias.map_or(T::default(), |b| b[m]));
            depthwise_plane(&rows, s, &w[m * g.k_size..][..g.k_size], xp, yp);
            finish((first + i) * g.out_size, yp);
        }
    });
}

/// Adds every tap of one depthwise plane into `yp`, with the fastest
/// instructions this CPU has for the same operations.
fn depthwise_plane<T: Scalar>(rows: &[TapRow], s: usize, w: &[T], xp: &[T], yp: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        return unsafe { depthwise_plane_avx2(rows, s, w, xp, yp) };
    }
    depthwise_plane_body(rows, s, w, xp, yp)
}

/// [`depthwise_plane_body`] vectorized 8 lanes wide instead of SSE's 4: the
/// same multiplies and adds (no FMA), so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn depthwise_plane_avx2<T: Scalar>(rows: &[TapRow], s: usize, w: &[T], xp: &[T], yp: &mut [T]) {
    depthwise_plane_body(rows, s, w, xp, yp)
}

#[inline(always)]
fn depthwise_plane_body<T: Scalar>(rows: &[TapRow], s: usize, w: &[T], xp: &[T], yp: &mut [T]) {
    // Each output element adds its taps in tap order, as the tap-major walk
    // does.
    for r in rows {
        let wv = w[r.tap];
        let dst = &mut yp[r.out_row + r.lo..r.out_row + r.hi];
        if s == 1 {
            for (o, &v) in dst.iter_mut().zip(&xp[r.input..r.input + (r.hi - r.lo)]) {
                *o = o.sadd(wv.smul(v));
            }
        } else {
            for (o, &v) in dst.iter_mut().zip(xp[r.input..].iter().step_by(s)) {
                *o = o.sadd(wv.smul(v));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    /// A xorshift64 generator: the random geometries and values below.
    fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }

    fn run(op: Conv, x: Tensor, w: Tensor, b: Option<Tensor>) -> Tensor {
        let op: Op = op.into();
        op.eval_owned(&[Some(&x), Some(&w), b.as_ref()]).unwrap().remove(0)
    }

    #[test]
    fn padded_3x3_matches_hand_computation() {
        // ONNX's basic_conv_with_padding: 5x5 ramp, 3x3 ones, pad 1.
        let x = Tensor::from_vec(vec![1, 1, 5, 5], (0..25).map(|v| v as f32).collect()).unwrap();
        let w = Tensor::from_vec(vec![1, 1, 3, 3], vec![1f32; 9]).unwrap();
        let y = run(Conv::new_2d([3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1), x, w, None);
        let v = y.as_slice::<f32>().unwrap();
        assert_eq!(&v[..5], &[12., 21., 27., 33., 24.]);
        assert_eq!(v[12], 108.);
    }

    #[test]
    fn strided_asymmetric_padding_and_bias() {
        let x = Tensor::from_vec(vec![1, 1, 7, 5], (0..35).map(|v| v as f32).collect()).unwrap();
        let w = Tensor::from_vec(vec![1, 1, 3, 3], vec![1f32; 9]).unwrap();
        let b = Tensor::from_vec(vec![1], vec![0.5f32]).unwrap();
        let y = run(Conv::new_2d([3, 3], [2, 2], [1, 0, 1, 0], [1, 1], 1), x, w, Some(b));
        assert_eq!(y.shape(), &[1, 1, 4, 2]);
        assert_eq!(&y.as_slice::<f32>().unwrap()[..2], &[21.5, 33.5]);
    }

    #[test]
    fn depthwise_and_pointwise_agree_with_direct_sums() {
        // Two channels, depthwise 1-D kernel [1, -1] with dilation 2.
        let x = Tensor::from_vec(vec![1, 2, 4], vec![1f32, 2., 4., 8., 1., 3., 9., 27.]).unwrap();
        let w = Tensor::from_vec(vec![2, 1, 2], vec![1f32, -1., 2., 0.]).unwrap();
        let op = Conv { kernel_shape: vec![2], strides: vec![1], pads: vec![0, 0], dilations: vec![2], group: 2 };
        let y = run(op, x.clone(), w, None);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[-3., -6., 2., 6.]);
        // A 1x1 convolution mixing the two channels.
        let w = Tensor::from_vec(vec![1, 2, 1], vec![1f32, 10.]).unwrap();
        let op = Conv { kernel_shape: vec![1], strides: vec![1], pads: vec![0, 0], dilations: vec![1], group: 1 };
        let y = run(op, x, w, None);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[11., 32., 94., 278.]);
    }

    /// The blocked depthwise kernel against the generic tap-row walk, bit
    /// for bit, over strides, dilations, asymmetric pads, widths below,
    /// between and above the block sizes, kernels wider than the input,
    /// one and two spatial axes, channel counts around the narrow-plane
    /// kernel's blocks, and special values (-0, inf, NaN).
    #[test]
    fn blocked_depthwise_matches_the_tap_row_walk_bit_for_bit() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15u64);
        let (mut cases, mut direct_cases) = (0, 0);
        for case in 0..400 {
            let two_d = case % 4 != 0;
            let rank = if two_d { 2 } else { 1 };
            let mut pick = |n: u64| (next() % n) as usize;
            let kernel: Vec<usize> = (0..rank).map(|_| 1 + pick(5)).collect();
            let strides: Vec<usize> = (0..rank).map(|_| 1 + pick(3)).collect();
            let dilations: Vec<usize> = (0..rank).map(|_| 1 + pick(2)).collect();
            let pads: Vec<usize> = (0..2 * rank).map(|_| pick(4)).collect();
            let spatial: Vec<usize> = (0..rank)
                .map(|d| if d + 1 == rank { 1 + pick(if case % 3 == 0 { 12 } else { 80 }) } else { 1 + pick(9) })
                .collect();
            // Channels below, at and above the 32-channel blocks of the
            // narrow-plane kernel.
            let channels = 1 + pick(if case % 2 == 0 { 20 } else { 75 });
            // Output channels per input channel.
            let multiplier = 1 + pick(2);
            let op = Conv { kernel_shape: kernel, strides, pads, dilations, group: channels };
            let mut xs = vec![2, channels];
            xs.extend(&spatial);
            let mut ws = vec![channels * multiplier, 1];
            ws.extend(&op.kernel_shape);
            let Ok(g) = op.geometry(&xs, &ws, Some(&[channels * multiplier]), "Conv") else { continue };
            if g.out_size == 0 {
                continue;
            }
            let mut value = |_| match next() % 400 {
                0 => -0.0,
                1 => f32::INFINITY,
                2 => f32::NAN,
                v => (v as f32 - 200.0) / 7.0,
            };
            let x: Vec<f32> = (0..xs.iter().product::<usize>()).map(&mut value).collect();
            let w: Vec<f32> = (0..ws.iter().product::<usize>()).map(&mut value).collect();
            let b: Vec<f32> = (0..channels * multiplier).map(&mut value).collect();
            let len = g.output_shape().iter().product();
            let (mut blocked, mut walked) = (vec![0f32; len], vec![0f32; len]);
            depthwise(&g, &x, &w, Some(&b), &mut blocked, &|_, _| {});
            depthwise_tap_rows(&g, &x, &w, Some(&b), &mut walked, &|_, _| {});
            // Rust leaves the sign and payload of a NaN result unspecified
            // (the compiler may commute an addition), so NaNs compare as one.
            let bits = |v: &[f32]| v.iter().map(|f| if f.is_nan() { u32::MAX } else { f.to_bits() }).collect::<Vec<_>>();
            assert_eq!(bits(&blocked), bits(&walked), "{op:?} on {xs:?}");
            // The AVX-512 kernel, where it applies, gives the same bits and
            // finishes each output once.
            let mut direct = vec![0f32; len];
            let finished = std::sync::atomic::AtomicUsize::new(0);
            let count = |_: usize, run: &mut [f32]| {
                finished.fetch_add(run.len(), std::sync::atomic::Ordering::Relaxed);
            };
            if super::super::depthwise_f32::depthwise_f32(&g, &x, &w, Some(&b), &mut direct, &count) {
                assert_eq!(bits(&direct), bits(&walked), "{op:?} on {xs:?}: the AVX-512 kernel");
                assert_eq!(finished.into_inner(), len);
                direct_cases += 1;
            }
            // The epilogue sees every output element once, at its offset.
            let seen = std::sync::atomic::AtomicUsize::new(0);
            depthwise(&g, &x, &w, Some(&b), &mut blocked, &|offset, run| {
                seen.fetch_add(run.len(), std::sync::atomic::Ordering::Relaxed);
                run.iter_mut().enumerate().for_each(|(i, v)| *v = (offset + i) as f32);
            });
            assert_eq!(seen.into_inner(), len);
            assert!(blocked.iter().enumerate().all(|(i, &v)| v == i as f32), "{op:?} on {xs:?}: epilogue offsets");
            cases += 1;
        }
        assert!(cases > 300, "only {cases} geometries were valid");
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") {
            assert!(direct_cases > 50, "the AVX-512 kernel took only {direct_cases} cases");
        } else {
            eprintln!("skipped: the AVX-512 depthwise kernel on all {cases} cases (this CPU has no AVX-512)");
        }
    }

    /// The im2col path in column blocks (a tiny `max_im2col`) against one
    /// block, bit for bit: 1-, 2- and 3-axis windows with strides, dilations
    /// and asymmetric pads, groups, block widths that cut output rows
    /// anywhere, down to one output position per block.
    #[test]
    fn im2col_in_column_blocks_matches_one_block_bit_for_bit() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1du64);
        let mut cases = 0;
        for case in 0..150 {
            let rank = 1 + case % 3;
            let mut pick = |n: u64| (next() % n) as usize;
            let kernel: Vec<usize> = (0..rank).map(|_| 1 + pick(3)).collect();
            let strides: Vec<usize> = (0..rank).map(|_| 1 + pick(2)).collect();
            let dilations: Vec<usize> = (0..rank).map(|_| 1 + pick(2)).collect();
            let pads: Vec<usize> = (0..2 * rank).map(|_| pick(3)).collect();
            let spatial: Vec<usize> = (0..rank).map(|_| 1 + pick(if rank == 3 { 5 } else { 12 })).collect();
            let group = 1 + pick(2);
            let (c, m) = (group * (1 + pick(3)), group * (1 + pick(4)));
            let op = Conv { kernel_shape: kernel, strides, pads, dilations, group };
            let mut xs = vec![1 + pick(2), c];
            xs.extend(&spatial);
            let mut ws = vec![m, c / group];
            ws.extend(&op.kernel_shape);
            let Ok(g) = op.geometry(&xs, &ws, Some(&[m]), "Conv") else { continue };
            if g.out_size == 0 || g.is_pointwise() || g.is_depthwise() {
                continue;
            }
            // From one output position per block up to nearly all of them.
            let per_block = 1 + pick(g.out_size as u64);
            let mut value = |_| (next() % 1000) as f32 / 37.0 - 13.0;
            let x: Vec<f32> = (0..xs.iter().product::<usize>()).map(&mut value).collect();
            let w: Vec<f32> = (0..ws.iter().product::<usize>()).map(&mut value).collect();
            let b: Vec<f32> = (0..m).map(&mut value).collect();
            let len = g.output_shape().iter().product();
            let kdim = c / group * g.k_size;
            let mut whole = vec![0f32; len];
            let one_block = Im2colGemm { gemm: f32::GEMM, max_im2col: usize::MAX };
            conv_gemm(&g, &x, &w, Some(&b), &mut whole, one_block, &|_, _| {});
            assert!(im2col_block_width(kdim, g.out_size, kdim * per_block) <= per_block);
            let mut blocked = vec![0f32; len];
            let blocks = Im2colGemm { gemm: f32::GEMM, max_im2col: kdim * per_block };
            conv_gemm(&g, &x, &w, Some(&b), &mut blocked, blocks, &|_, _| {});
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&blocked), bits(&whole), "{op:?} on {xs:?}, {per_block} positions a block");
            cases += 1;
        }
        assert!(cases > 80, "only {cases} geometries were valid");
        // The widths: one block when it fits, else the fewest balanced ones.
        assert_eq!(im2col_block_width(9, 100, 900), 100);
        assert_eq!(im2col_block_width(9, 100, 899), 50);
        assert_eq!(im2col_block_width(9, 100, 9 * 34), 34);
        assert_eq!(im2col_block_width(9, 100, 8), 1);
        assert_eq!(im2col_block_width(9, 0, 8), 1);
    }

    #[test]
    fn grouped_f64_conv() {
        let x = Tensor::from_vec(vec![1, 4, 2], (1..=8).map(|v| v as f64).collect()).unwrap();
        let w = Tensor::from_vec(vec![2, 2, 1], vec![1f64, 1., 1., -1.]).unwrap();
        let op = Conv { kernel_shape: vec![1], strides: vec![1], pads: vec![0, 0], dilations: vec![1], group: 2 };
        let y = run(op, x, w, None);
        // Group 0: ch0 + ch1; group 1: ch2 - ch3.
        assert_eq!(y.as_slice::<f64>().unwrap(), &[4., 6., -2., -2.]);
    }
}
