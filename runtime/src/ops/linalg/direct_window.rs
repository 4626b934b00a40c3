//! The taps of a 2-D window read straight from an input plane with
//! AVX-512, for a vector of 16 output positions of one output row: one
//! masked load per tap with horizontal stride 1, two and a permute that
//! keeps the even lanes with stride 2, the lanes in padding filled with a
//! value the caller chooses. No padded copy of the input is made, which on
//! small planes costs more than the window itself. Max pooling and the
//! depthwise convolution read their windows so.

use super::conv_geometry::ConvGeometry;

/// What every plane of one call shares: the window, and for each vector of
/// output columns and each kernel column, where its loads start and which
/// lanes read the input.
pub(super) struct DirectWindow {
    pub in_h: usize,
    pub in_w: usize,
    pub out_h: usize,
    pub out_w: usize,
    pub kernel: [usize; 2],
    stride_y: usize,
    dilation_y: usize,
    pad_top: usize,
    /// Whether the horizontal stride is 2.
    pub stride2: bool,
    /// Per vector of output columns: its first column and its width.
    pub columns: Vec<(usize, usize)>,
    /// Per (vector, kernel column), vector-major.
    pub taps: Vec<TapLoad>,
}

/// The loads of one kernel column for one vector of output columns.
#[derive(Clone, Copy, Debug)]
pub(super) struct TapLoad {
    /// The input column that raw lane 0 reads (may lie in padding).
    pub col0: isize,
    /// The raw lanes (columns `col0 + r`, two loads' worth with stride 2)
    /// that lie in the row and that some output reads.
    pub raw: [u16; 2],
    /// The output lanes whose tap reads the input, not padding.
    pub lanes: u16,
}

impl DirectWindow {
    /// The plan for `g`, or `None` unless it has two spatial axes and a
    /// horizontal stride of 1 or 2.
    pub fn new(g: &ConvGeometry) -> Option<DirectWindow> {
        let win = &g.win;
        if g.in_spatial.len() != 2 || !(1..=2).contains(&win.strides[1]) {
            return None;
        }
        let (in_w, out_w) = (g.in_spatial[1], g.out_spatial[1]);
        let (sx, dx, left) = (win.strides[1], win.dilations[1], win.pad_begin(1) as isize);
        let columns: Vec<(usize, usize)> = (0..out_w).step_by(16).map(|c| (c, 16.min(out_w - c))).collect();
        let mut taps = Vec::with_capacity(columns.len() * win.kernel_shape[1]);
        for &(c0, n) in &columns {
            for kx in 0..win.kernel_shape[1] {
                let col0 = (c0 * sx + kx * dx) as isize - left;
                let lo = (-col0).clamp(0, 32) as u32;
                let hi = ((in_w as isize - col0).clamp(0, 32) as u32).min((sx * (n - 1) + 1) as u32);
                let raw: u32 = if hi > lo { (u64::MAX << lo & !(u64::MAX << hi)) as u32 } else { 0 };
                let lanes = (0..n).filter(|j| raw >> (j * sx) & 1 == 1).fold(0u16, |m, j| m | 1 << j);
                taps.push(TapLoad { col0, raw: [raw as u16, (raw >> 16) as u16], lanes });
            }
        }
        Some(DirectWindow {
            in_h: g.in_spatial[0],
            in_w,
            out_h: g.out_spatial[0],
            out_w,
            kernel: [win.kernel_shape[0], win.kernel_shape[1]],
            stride_y: win.strides[0],
            dilation_y: win.dilations[0],
            pad_top: win.pad_begin(0),
            stride2: sx == 2,
            columns,
            taps,
        })
    }

    /// The input row that kernel row `ky` of output row `oy` reads, or
    /// `None` in padding.
    #[inline]
    pub fn input_row(&self, oy: usize, ky: usize) -> Option<usize> {
        let iy = (oy * self.stride_y + ky * self.dilation_y) as isize - self.pad_top as isize;
        (0..self.in_h as isize).contains(&iy).then_some(iy as usize)
    }
}

/// Planes `0..count` in the groups the kernels take them, as (first
/// plane, planes): four at a time, so that their sums or maxima are
/// independent chains in flight together, then one by one.
pub(super) fn plane_groups(count: usize) -> impl Iterator<Item = (usize, usize)> {
    let fours = count / 4 * 4;
    (0..fours).step_by(4).map(|i| (i, 4)).chain((fours..count).map(|i| (i, 1)))
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    use super::TapLoad;
    use std::arch::x86_64::*;

    /// The 16 output lanes' inputs of one tap: `row` is the input row, its
    /// lanes in padding `fill`.
    ///
    /// # Safety
    /// AVX-512F; `row` points at an input row of the plan's width.
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(in super::super) unsafe fn load(row: *const f32, t: &TapLoad, stride2: bool, fill: __m512) -> __m512 {
        // SAFETY: only the raw masks' lanes are read, columns inside the
        // row; the pointers themselves may lie outside it (wrapping).
        unsafe {
            let a = _mm512_mask_loadu_ps(fill, t.raw[0], row.wrapping_offset(t.col0));
            if !stride2 {
                return a;
            }
            let b = _mm512_mask_loadu_ps(fill, t.raw[1], row.wrapping_offset(t.col0 + 16));
            let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
            _mm512_permutex2var_ps(a, evens, b)
        }
    }
}
