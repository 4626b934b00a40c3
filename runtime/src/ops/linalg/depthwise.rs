//! The depthwise convolution kernel for one and two spatial axes: every
//! output channel reads one input channel, so each output row is a sum of
//! scaled, shifted input rows.
//!
//! Each input row is first copied into `stride` zero-padded phase rows
//! (phase `p` holds every `stride`-th element from `p`), so that a kernel
//! column reads a contiguous run of a phase row at a fixed shift from the
//! output column, for every output column, without bounds checks. Output
//! columns run in blocks whose accumulators stay in registers across all
//! taps: blocks of 32 and 8 where every kernel column reads inside the
//! input (the interior), masked blocks of 8 at the edges, where a lane
//! keeps its accumulator for a tap that reads padding.
//!
//! Rows of fewer than [`SMALL_ROW`] outputs take [`small_planes`] instead,
//! which vectorizes across channels: the input transposed so that channels
//! are innermost, each output position adds its valid taps for every
//! channel at once.
//!
//! Each output element starts from its bias and adds its taps in tap order
//! with separate multiplies and adds, skipping taps that read padding,
//! exactly as the generic loop in `conv.rs` does, so the result is
//! bit-identical to it whatever the block sizes.

use super::num::Scalar;
use super::window::{plane_axes, valid_range, Window, WindowAxis};

/// Where kernel column `kw` reads in the padded phase rows.
#[derive(Clone, Copy, Debug)]
struct TapColumn {
    /// The output columns `lo..hi` read inside the input row.
    lo: u32,
    hi: u32,
    /// Output column `ox` reads element `ox + start` of the column's phase
    /// row, counted from the start of the row's phases.
    start: usize,
}

/// Output rows narrower than this take [`small_planes`].
pub(crate) const SMALL_ROW: usize = 20;

/// The widest block of output columns.
const WIDE: usize = 32;
/// The block of output columns at the edges and after the wide blocks.
const NARROW: usize = 8;

/// The per-call geometry of a depthwise convolution with at most two
/// spatial axes (a 1-D one is a 2-D one of height 1).
pub(crate) struct DepthwisePlan {
    /// The vertical axis.
    h: WindowAxis,
    kw: usize,
    iw: usize,
    ow: usize,
    stride_w: usize,
    /// Zeros before the data in each phase row.
    left: usize,
    /// Elements of one padded phase row.
    row_len: usize,
    columns: Vec<TapColumn>,
    /// The output columns every kernel column reads inside the input.
    interior: (usize, usize),
}

impl DepthwisePlan {
    /// The plan of a depthwise convolution `win` from input planes of
    /// shape `in_spatial` to output planes of shape `out_spatial`; `None`
    /// for more than two spatial axes, output rows narrower than
    /// [`SMALL_ROW`], or when the padded copy of a plane would be much
    /// larger than its input and output (absurd pads).
    pub fn new(win: &Window, in_spatial: &[usize], out_spatial: &[usize]) -> Option<DepthwisePlan> {
        let (h, w) = plane_axes(win, in_spatial, out_spatial)?;
        let (iw, ow, s) = (w.input, w.output, w.stride);
        // Narrower rows are mostly masked edge blocks; [`small_planes`] is
        // faster there (one thread, full MobileNetV3-small 6.7 -> 5.1 ms
        // with 7- and 14-wide rows moved over; 28-wide rows are about even
        // either way).
        if ow < SMALL_ROW || u32::try_from(ow.checked_add(WIDE)?).is_err() {
            return None;
        }
        // Kernel column k reads input column ox * s + offset, which is
        // element ox + offset.div_euclid(s) of phase offset.rem_euclid(s).
        let offsets: Vec<isize> = (0..w.kernel).map(|k| (k * w.dilation) as isize - w.pad_begin as isize).collect();
        let shifts = offsets.iter().map(|o| o.div_euclid(s as isize));
        let left = shifts.clone().map(|q| -q).max().unwrap_or(0).max(0) as usize;
        let right = shifts.max().unwrap_or(0).max(0) as usize;
        let phase_len = iw.div_ceil(s);
        let blocks = ow.next_multiple_of(NARROW);
        let row_len = left + phase_len.max(blocks + right);
        let columns: Vec<TapColumn> = offsets
            .iter()
            .map(|&o| {
                let (lo, hi) = valid_range(ow, iw, s, o);
                let (phase, shift) = (o.rem_euclid(s as isize) as usize, o.div_euclid(s as isize));
                let start = (phase * row_len + left) as isize + shift;
                TapColumn { lo: lo as u32, hi: hi as u32, start: start as usize }
            })
            .collect();
        let lo = columns.iter().map(|c| c.lo as usize).max().unwrap_or(0);
        let hi = columns.iter().map(|c| c.hi as usize).min().unwrap_or(0).max(lo);
        let plan = DepthwisePlan { h, kw: columns.len(), iw, ow, stride_w: s, left, row_len, columns, interior: (lo, hi) };
        let scratch = h.input.checked_mul(s)?.checked_mul(row_len)?;
        let planes = in_spatial.iter().product::<usize>() + out_spatial.iter().product::<usize>();
        (scratch <= 4 * planes + 4096).then_some(plan)
    }

    /// Elements of the padded phase rows of one input plane.
    pub fn scratch_len(&self) -> usize {
        self.h.input * self.stride_w * self.row_len
    }

    /// Computes one output plane `y` from input plane `x`, the channel's
    /// taps `w` (row-major, `kh x kw`) and its bias. `scratch` holds
    /// [`Self::scratch_len`] elements.
    pub fn plane<T: Scalar>(&self, x: &[T], w: &[T], bias: T, scratch: &mut [T], y: &mut [T]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { self.plane_avx2(x, w, bias, scratch, y) };
        }
        self.plane_body(x, w, bias, scratch, y)
    }

    /// [`Self::plane_body`] compiled for AVX2: the same multiplies and adds
    /// (no FMA), 8 lanes wide.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn plane_avx2<T: Scalar>(&self, x: &[T], w: &[T], bias: T, scratch: &mut [T], y: &mut [T]) {
        self.plane_body(x, w, bias, scratch, y)
    }

    #[inline(always)]
    fn plane_body<T: Scalar>(&self, x: &[T], w: &[T], bias: T, scratch: &mut [T], y: &mut [T]) {
        let x = self.split_phases(x, scratch);
        let rows_len = self.stride_w * self.row_len;
        let mut rows = Vec::with_capacity(self.h.kernel);
        let (lo, hi) = self.interior;
        for (oy, yr) in y.chunks_exact_mut(self.ow).enumerate().take(self.h.output) {
            // The kernel rows that read inside the input, with the offset
            // of their input row's phases in `x`.
            rows.clear();
            rows.extend((0..self.h.kernel).filter_map(|k| Some((k, self.h.input_of(oy, k)? * rows_len))));
            let row = Row { plan: self, rows: &rows, x, w, bias };
            let mut ox = 0;
            while ox < lo {
                let n = NARROW.min(self.ow - ox);
                yr[ox..ox + n].copy_from_slice(&row.masked(ox)[..n]);
                ox += NARROW;
            }
            while ox + WIDE <= hi {
                yr[ox..ox + WIDE].copy_from_slice(&row.block::<WIDE>(ox));
                ox += WIDE;
            }
            while ox + NARROW <= hi {
                yr[ox..ox + NARROW].copy_from_slice(&row.block::<NARROW>(ox));
                ox += NARROW;
            }
            while ox < self.ow {
                let n = NARROW.min(self.ow - ox);
                yr[ox..ox + n].copy_from_slice(&row.masked(ox)[..n]);
                ox += NARROW;
            }
        }
    }

    /// Writes the padded phase rows of every input row of `x` into
    /// `scratch`: row `iy`, phase `p` holds `x[iy][p], x[iy][p + s], ...`
    /// after `left` zeros, zeros after them.
    #[inline(always)]
    fn split_phases<'a, T: Scalar>(&self, x: &[T], scratch: &'a mut [T]) -> &'a [T] {
        let (s, len) = (self.stride_w, self.row_len);
        for (xr, phases) in x.chunks_exact(self.iw).zip(scratch.chunks_exact_mut(s * len)) {
            for (p, dst) in phases.chunks_exact_mut(len).enumerate() {
                dst[..self.left].fill(T::default());
                let data = &mut dst[self.left..];
                let n = (self.iw + s - 1 - p.min(self.iw)) / s;
                if s == 1 {
                    data[..n].copy_from_slice(xr);
                } else {
                    // Whole strides first (a fixed-distance gather, which
                    // the compiler vectorizes for a constant stride), then
                    // the row's ragged end.
                    let src = &xr[p.min(self.iw)..];
                    let whole = src.len() / s;
                    match s {
                        2 => gather::<T, 2>(src, &mut data[..whole]),
                        _ => {
                            for (d, chunk) in data[..whole].iter_mut().zip(src.chunks_exact(s)) {
                                *d = chunk[0];
                            }
                        }
                    }
                    if whole < n {
                        data[whole] = src[whole * s];
                    }
                }
                data[n..].fill(T::default());
            }
        }
        scratch
    }
}

/// `dst[j] = src[j * S]` for every `j` of `dst`.
#[inline(always)]
fn gather<T: Copy, const S: usize>(src: &[T], dst: &mut [T]) {
    for (d, chunk) in dst.iter_mut().zip(src.chunks_exact(S)) {
        *d = chunk[0];
    }
}

/// One output row's view of the plan: the kernel rows that read inside
/// the input, and the operands.
struct Row<'a, T> {
    plan: &'a DepthwisePlan,
    rows: &'a [(usize, usize)],
    x: &'a [T],
    w: &'a [T],
    bias: T,
}

impl<T: Scalar> Row<'_, T> {
    /// Output columns `ox..ox + L`, all inside the interior.
    #[inline(always)]
    fn block<const L: usize>(&self, ox: usize) -> [T; L] {
        let p = self.plan;
        let mut acc = [self.bias; L];
        for &(k, base) in self.rows {
            for (c, &wv) in p.columns.iter().zip(&self.w[k * p.kw..][..p.kw]) {
                let src = &self.x[base + c.start + ox..][..L];
                for (a, &v) in acc.iter_mut().zip(src) {
                    *a = a.sadd(wv.smul(v));
                }
            }
        }
        acc
    }

    /// Output columns `ox..ox + NARROW` (some may lie past the row's end),
    /// each lane skipping the kernel columns that read padding for it.
    #[inline(always)]
    fn masked(&self, ox: usize) -> [T; NARROW] {
        let p = self.plan;
        let mut acc = [self.bias; NARROW];
        for &(k, base) in self.rows {
            for (c, &wv) in p.columns.iter().zip(&self.w[k * p.kw..][..p.kw]) {
                let src = &self.x[base + c.start + ox..][..NARROW];
                for (i, (a, &v)) in acc.iter_mut().zip(src).enumerate() {
                    let sum = a.sadd(wv.smul(v));
                    // A select without branches, so that it vectorizes.
                    let o = (ox + i) as u32;
                    let inside = (o >= c.lo) & (o < c.hi);
                    *a = if inside { sum } else { *a };
                }
            }
        }
        acc
    }
}

/// The shapes of a depthwise convolution over small planes, for
/// [`small_planes`].
pub(crate) struct SmallPlanes<'a> {
    pub win: &'a Window,
    pub in_spatial: &'a [usize],
    pub out_spatial: &'a [usize],
    /// Input channels; output channel `m` reads input channel
    /// `m / (out_channels / in_channels)`.
    pub in_channels: usize,
    pub out_channels: usize,
}

impl SmallPlanes<'_> {
    /// Whether [`small_planes`] takes these shapes: one or two spatial
    /// axes and output rows of fewer than [`SMALL_ROW`] elements (where the blocked
    /// kernel spends most of its time in masked edge blocks).
    pub fn applies(&self) -> bool {
        matches!(self.win.rank(), 1 | 2) && self.out_spatial.last().is_some_and(|&w| w < SMALL_ROW)
    }
}

/// Depthwise convolution of one sample's small planes, vectorized across
/// channels instead of along rows: the input is transposed to
/// position-major order (channels innermost), each output position adds
/// its valid taps for all channels at once, and the sums are written back
/// plane by plane. Each output element starts from its bias and adds its
/// taps in tap order, as the tap-row walk does, so the bits are the same.
/// `finish` runs on each output plane once it is complete.
pub(crate) fn small_planes<T: Scalar>(
    s: &SmallPlanes<'_>,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    y: &mut [T],
    finish: &(dyn Fn(usize, &mut [T]) + Sync),
) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() {
            // T is f32: the casts are identities.
            let f32_finish = |offset: usize, plane: &mut [f32]| finish(offset, bytemuck::cast_slice_mut(plane));
            let (x, w, bias, y) =
                (bytemuck::cast_slice(x), bytemuck::cast_slice(w), bias.map(bytemuck::cast_slice), bytemuck::cast_slice_mut(y));
            // SAFETY: the CPU has AVX2.
            return unsafe { small_planes_f32_avx2(s, x, w, bias, y, &f32_finish) };
        }
        // SAFETY: the CPU has AVX2.
        return unsafe { small_planes_avx2(s, x, w, bias, y, finish) };
    }
    small_planes_body(s, x, w, bias, y, finish)
}

/// [`small_planes_body`] for f32 with AVX2 intrinsics: the sums of 32
/// channels (then 8, then one) stay in registers over every tap instead of
/// going through memory at each; the same multiplies and adds in the same
/// order (no FMA), so the same bits.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn small_planes_f32_avx2(
    s: &SmallPlanes<'_>,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    finish: &(dyn Fn(usize, &mut [f32]) + Sync),
) {
    use std::arch::x86_64::*;
    const BLOCK: usize = 32;
    let Some((h, w_axis)) = plane_axes(s.win, s.in_spatial, s.out_spatial) else { return };
    let (iw, oh, ow, kh, kw) = (w_axis.input, h.output, w_axis.output, h.kernel, w_axis.kernel);
    let channels = s.out_channels;
    let out_size = oh * ow;
    let (xt, wt) = channels_last(s, x, w, h.input * iw, kh * kw);
    if let Some(b) = bias {
        assert!(b.len() >= channels);
    }
    // The taps inside the input at one output position: offsets of their
    // input position in xt and of their weights in wt, in tap order.
    let mut valid: Vec<(usize, usize)> = Vec::with_capacity(kh * kw);
    let mut lanes = [0f32; BLOCK];
    for oy in 0..oh {
        for ox in 0..ow {
            valid.clear();
            for ky in 0..kh {
                let Some(iy) = h.input_of(oy, ky) else { continue };
                for kx in 0..kw {
                    let Some(ix) = w_axis.input_of(ox, kx) else { continue };
                    valid.push(((iy * iw + ix) * channels, (ky * kw + kx) * channels));
                }
            }
            let pos = oy * ow + ox;
            let mut c0 = 0;
            while c0 + BLOCK <= channels {
                // SAFETY: offsets + c0 + 32 <= the end of one position's (or
                // tap's) channels, inside xt and wt; the bias has `channels`.
                unsafe {
                    let mut acc = [_mm256_setzero_ps(); BLOCK / 8];
                    if let Some(b) = bias {
                        for (i, a) in acc.iter_mut().enumerate() {
                            *a = _mm256_loadu_ps(b.as_ptr().add(c0 + 8 * i));
                        }
                    }
                    for &(xo, wo) in &valid {
                        let (xp, wp) = (xt.as_ptr().add(xo + c0), wt.as_ptr().add(wo + c0));
                        for (i, a) in acc.iter_mut().enumerate() {
                            *a = _mm256_add_ps(*a, _mm256_mul_ps(_mm256_loadu_ps(wp.add(8 * i)), _mm256_loadu_ps(xp.add(8 * i))));
                        }
                    }
                    for (i, a) in acc.iter().enumerate() {
                        _mm256_storeu_ps(lanes.as_mut_ptr().add(8 * i), *a);
                    }
                }
                for (l, &v) in lanes.iter().enumerate() {
                    y[(c0 + l) * out_size + pos] = v;
                }
                c0 += BLOCK;
            }
            while c0 + 8 <= channels {
                // SAFETY: as above, for 8 channels.
                unsafe {
                    let mut acc = match bias {
                        Some(b) => _mm256_loadu_ps(b.as_ptr().add(c0)),
                        None => _mm256_setzero_ps(),
                    };
                    for &(xo, wo) in &valid {
                        let (xp, wp) = (xt.as_ptr().add(xo + c0), wt.as_ptr().add(wo + c0));
                        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(wp), _mm256_loadu_ps(xp)));
                    }
                    _mm256_storeu_ps(lanes.as_mut_ptr(), acc);
                }
                for (l, &v) in lanes[..8].iter().enumerate() {
                    y[(c0 + l) * out_size + pos] = v;
                }
                c0 += 8;
            }
            for m in c0..channels {
                let mut a = bias.map_or(0.0, |b| b[m]);
                for &(xo, wo) in &valid {
                    a += wt[wo + m] * xt[xo + m];
                }
                y[m * out_size + pos] = a;
            }
        }
    }
    for (m, plane) in y.chunks_exact_mut(out_size.max(1)).take(channels).enumerate() {
        finish(m * out_size, plane);
    }
}

/// Channels-last copies of the input planes and the taps: `xt[pos][m]`
/// (output channel m's input channel) and `wt[tap][m]`.
#[inline(always)]
fn channels_last<T: Scalar>(s: &SmallPlanes<'_>, x: &[T], w: &[T], in_size: usize, taps: usize) -> (Vec<T>, Vec<T>) {
    let (channels, per_input) = (s.out_channels, s.out_channels / s.in_channels.max(1));
    let mut xt = vec![T::default(); in_size * channels];
    for (m, col) in (0..channels).map(|m| (m, &x[(m / per_input) * in_size..][..in_size])) {
        for (pos, &v) in col.iter().enumerate() {
            xt[pos * channels + m] = v;
        }
    }
    let mut wt = vec![T::default(); taps * channels];
    for (m, row) in w.chunks_exact(taps).take(channels).enumerate() {
        for (tap, &v) in row.iter().enumerate() {
            wt[tap * channels + m] = v;
        }
    }
    (xt, wt)
}

/// [`small_planes_body`] compiled for AVX2: the same multiplies and adds
/// (no FMA), 8 lanes wide.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn small_planes_avx2<T: Scalar>(
    s: &SmallPlanes<'_>,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    y: &mut [T],
    finish: &(dyn Fn(usize, &mut [T]) + Sync),
) {
    small_planes_body(s, x, w, bias, y, finish)
}

#[inline(always)]
fn small_planes_body<T: Scalar>(
    s: &SmallPlanes<'_>,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    y: &mut [T],
    finish: &(dyn Fn(usize, &mut [T]) + Sync),
) {
    let Some((h, w_axis)) = plane_axes(s.win, s.in_spatial, s.out_spatial) else { return };
    let (ih, iw, oh, ow, kh, kw) = (h.input, w_axis.input, h.output, w_axis.output, h.kernel, w_axis.kernel);
    let channels = s.out_channels;
    let (in_size, out_size, taps) = (ih * iw, oh * ow, kh * kw);
    let (xt, wt) = channels_last(s, x, w, in_size, taps);
    let mut acc = vec![T::default(); channels];
    for oy in 0..oh {
        for ox in 0..ow {
            match bias {
                Some(b) => acc.copy_from_slice(&b[..channels]),
                None => acc.fill(T::default()),
            }
            for ky in 0..kh {
                let Some(iy) = h.input_of(oy, ky) else { continue };
                for kx in 0..kw {
                    let Some(ix) = w_axis.input_of(ox, kx) else { continue };
                    let src = &xt[(iy * iw + ix) * channels..][..channels];
                    let wv = &wt[(ky * kw + kx) * channels..][..channels];
                    for ((a, &wv), &v) in acc.iter_mut().zip(wv).zip(src) {
                        *a = a.sadd(wv.smul(v));
                    }
                }
            }
            let pos = oy * ow + ox;
            for (m, &v) in acc.iter().enumerate() {
                y[m * out_size + pos] = v;
            }
        }
    }
    for (m, plane) in y.chunks_exact_mut(out_size.max(1)).take(channels).enumerate() {
        finish(m * out_size, plane);
    }
}
