//! Max pooling of f32 planes with AVX-512 (2-D windows, horizontal
//! stride 1 or 2, no indices output), read straight from the input: for a
//! vector of 16 output positions, each tap is one masked load (stride 1)
//! or two and a permute that keeps the even lanes (stride 2), with the
//! lanes in padding loaded as -inf. The first tap is taken as it is and
//! each later one as `v > max ? v : max` per lane, which is what `vmaxps`
//! computes and what the scalar loop in `pool` does (a padded tap never
//! wins, a NaN wins only as the first tap, of equal values the earlier
//! stays): the results are the scalar loop's, bit for bit, in both math
//! modes.

use super::conv_geometry::ConvGeometry;

/// Pools every plane of `x` into `y` and returns true, or returns false,
/// doing nothing, where this path does not apply: other than two spatial
/// axes, a horizontal stride above 2, a CPU without AVX-512.
pub(super) fn max_pool_f32(g: &ConvGeometry, x: &[f32], y: &mut [f32]) -> bool {
    if g.in_spatial.len() != 2 || g.out_size == 0 || g.in_size == 0 || !(1..=2).contains(&g.win.strides[1]) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        let plan = Plan::new(g);
        crate::parallel::par_chunks_mut(y, g.out_size, g.planes_per_piece(), |first, out| {
            for (i, yp) in out.chunks_exact_mut(g.out_size).enumerate() {
                let xp = &x[(first + i) * g.in_size..][..g.in_size];
                // SAFETY: AVX-512F was detected; the plan's loads keep to
                // the plane's valid columns of valid rows.
                unsafe { x86::plane(&plan, xp, yp) };
            }
        });
        return true;
    }
    let _ = (x, y);
    false
}

/// What every plane shares: the window, and for each vector of output
/// columns and each kernel column, where its loads start and which of
/// their lanes read the input.
struct Plan {
    in_h: usize,
    in_w: usize,
    out_h: usize,
    out_w: usize,
    kernel: [usize; 2],
    stride_y: usize,
    dilation_y: usize,
    pad_top: usize,
    /// Whether the horizontal stride is 2.
    stride2: bool,
    /// Per vector of output columns: its first column and its width.
    columns: Vec<(usize, usize)>,
    /// Per (vector, kernel column): the input column of lane 0 and the
    /// masks of the lanes inside the row (two loads' worth for stride 2).
    taps: Vec<(isize, [u16; 2])>,
}

impl Plan {
    fn new(g: &ConvGeometry) -> Plan {
        let win = &g.win;
        let (in_w, out_w) = (g.in_spatial[1], g.out_spatial[1]);
        let (sx, dx, left) = (win.strides[1], win.dilations[1], win.pad_begin(1) as isize);
        let columns: Vec<(usize, usize)> = (0..out_w).step_by(16).map(|c| (c, 16.min(out_w - c))).collect();
        let mut taps = Vec::with_capacity(columns.len() * win.kernel_shape[1]);
        for &(c0, n) in &columns {
            for kx in 0..win.kernel_shape[1] {
                let col0 = (c0 * sx + kx * dx) as isize - left;
                // Raw lanes r (columns col0 + r) that lie in the row and
                // that some output reads (r <= sx·(n - 1)).
                let lo = (-col0).clamp(0, 32) as u32;
                let hi = ((in_w as isize - col0).clamp(0, 32) as u32).min((sx * (n - 1) + 1) as u32);
                let bits: u32 = if hi > lo { (u64::MAX << lo & !(u64::MAX << hi)) as u32 } else { 0 };
                taps.push((col0, [bits as u16, (bits >> 16) as u16]));
            }
        }
        Plan {
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
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Plan;
    use std::arch::x86_64::*;

    /// Pools one plane.
    ///
    /// # Safety
    /// AVX-512F; `x` is one input plane and `y` one output plane of the
    /// plan's geometry.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn plane(p: &Plan, x: &[f32], y: &mut [f32]) {
        let neg = _mm512_set1_ps(f32::NEG_INFINITY);
        let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let [kh, kw] = p.kernel;
        for oy in 0..p.out_h {
            for (ci, &(c0, n)) in p.columns.iter().enumerate() {
                let mut m = neg;
                for ky in 0..kh {
                    let iy = (oy * p.stride_y + ky * p.dilation_y) as isize - p.pad_top as isize;
                    if iy < 0 || iy >= p.in_h as isize {
                        continue;
                    }
                    let row = x[iy as usize * p.in_w..].as_ptr();
                    for kx in 0..kw {
                        let (col0, masks) = p.taps[ci * kw + kx];
                        // SAFETY: only the masks' lanes are read: columns
                        // col0 + r inside this row. The pointers themselves
                        // may lie outside it (wrapping arithmetic).
                        let v = unsafe {
                            let a = _mm512_mask_loadu_ps(neg, masks[0], row.wrapping_offset(col0));
                            if p.stride2 {
                                let b = _mm512_mask_loadu_ps(neg, masks[1], row.wrapping_offset(col0 + 16));
                                _mm512_permutex2var_ps(a, evens, b)
                            } else {
                                a
                            }
                        };
                        m = if ky == 0 && kx == 0 { v } else { _mm512_max_ps(v, m) };
                    }
                }
                let out = &mut y[oy * p.out_w + c0..][..n];
                // SAFETY: the first n lanes, `out`'s elements.
                unsafe { _mm512_mask_storeu_ps(out.as_mut_ptr(), ((1u32 << n) - 1) as __mmask16, m) };
            }
        }
    }
}
