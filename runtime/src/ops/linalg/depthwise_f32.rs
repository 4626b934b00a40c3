//! The depthwise convolution of f32 planes with AVX-512 (2-D, horizontal
//! stride 1 or 2), each tap of a vector of 16 output positions read
//! straight from the input (`direct_window`). Each output starts from its
//! bias and adds its taps in tap order, each product rounded before the
//! add, a tap that reads padding leaving the lane as it is (a masked add):
//! the generic loop's arithmetic in `conv.rs`, so the results are its
//! bits, as the blocked kernels of `depthwise.rs` give. The fast mode
//! (`crate::math`) fuses each multiply into its add (a masked FMA, one
//! instruction instead of two), which rounds once per tap instead of twice.

use super::conv_geometry::{ConvGeometry, Finish};
#[cfg(target_arch = "x86_64")]
use super::direct_window::{plane_groups, DirectWindow};

/// Runs the depthwise convolution `g` and returns true, or returns false,
/// doing nothing, where this path does not apply: other than two spatial
/// axes, a horizontal stride above 2, output rows narrower than 8, a CPU
/// without AVX-512. Four planes go through the kernel at a time, so that
/// their sums are independent chains in flight together (one plane at a
/// time, the kernel waited on each add: 38.8 -> 14.3 us on one layer, then
/// 9.5 with four).
pub(super) fn depthwise_f32(
    g: &ConvGeometry,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    finish: Finish<'_, f32>,
) -> bool {
    // Output rows narrower than 8 fill too few lanes: the kernels of
    // `depthwise.rs` vectorized across channels do better there.
    if !g.is_depthwise() || g.out_size == 0 || g.in_size == 0 || g.out_spatial.get(1).is_none_or(|&w| w < 8) {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        let Some(plan) = DirectWindow::new(g) else { return false };
        let mg = g.m / g.group;
        let fused = crate::math::mode() == crate::math::Math::Fast;
        crate::parallel::par_chunks_mut(y, g.out_size, g.planes_per_piece().max(4), |first, out| {
            let plane = |i: usize, y: *mut f32| {
                let (n, m) = ((first + i) / g.m, (first + i) % g.m);
                x86::Plane {
                    x: &x[(n * g.c + m / mg) * g.in_size..][..g.in_size],
                    w: &w[m * g.k_size..][..g.k_size],
                    bias: bias.map_or(0.0, |b| b[m]),
                    y,
                }
            };
            let count = out.len() / g.out_size;
            for (i, group) in plane_groups(count) {
                let run = &mut out[i * g.out_size..(i + group) * g.out_size];
                // SAFETY (both calls): AVX-512F was detected; each plane's
                // input and output have the plan's geometry, its taps are
                // all there, and the planes' outputs are disjoint parts of `run`.
                unsafe {
                    if group == 4 {
                        let planes: [x86::Plane<'_>; 4] =
                            std::array::from_fn(|j| plane(i + j, run.as_mut_ptr().add(j * g.out_size)));
                        if fused {
                            x86::planes::<4, true>(&plan, &planes);
                        } else {
                            x86::planes::<4, false>(&plan, &planes);
                        }
                    } else if fused {
                        x86::planes::<1, true>(&plan, &[plane(i, run.as_mut_ptr())]);
                    } else {
                        x86::planes::<1, false>(&plan, &[plane(i, run.as_mut_ptr())]);
                    }
                }
                finish((first + i) * g.out_size, run);
            }
        });
        return true;
    }
    let _ = (x, w, bias, y, finish);
    false
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::direct_window::{x86::load, DirectWindow};
    use std::arch::x86_64::*;

    /// One channel's plane: its input, taps and bias, and where its output goes.
    pub(super) struct Plane<'a> {
        pub x: &'a [f32],
        pub w: &'a [f32],
        pub bias: f32,
        pub y: *mut f32,
    }

    /// Convolves `P` planes of the same geometry at once, so that their
    /// sums are independent chains in flight together; `FUSED`, with one
    /// rounding per tap.
    ///
    /// # Safety
    /// AVX-512F; each plane's `x` and `y` are planes of the plan's
    /// geometry, its `w` has every tap.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn planes<const P: usize, const FUSED: bool>(p: &DirectWindow, planes: &[Plane<'_>; P]) {
        let zero = _mm512_setzero_ps();
        let [kh, kw] = p.kernel;
        for oy in 0..p.out_h {
            for (ci, &(c0, n)) in p.columns.iter().enumerate() {
                let mut acc: [__m512; P] = std::array::from_fn(|i| _mm512_set1_ps(planes[i].bias));
                for ky in 0..kh {
                    let Some(iy) = p.input_row(oy, ky) else { continue };
                    for kx in 0..kw {
                        let t = &p.taps[ci * kw + kx];
                        for (acc, plane) in acc.iter_mut().zip(planes) {
                            // SAFETY: AVX-512F; an input row of the plane.
                            let v = unsafe { load(plane.x[iy * p.in_w..].as_ptr(), t, p.stride2, zero) };
                            let wv = _mm512_set1_ps(plane.w[ky * kw + kx]);
                            *acc = if FUSED {
                                _mm512_mask3_fmadd_ps(wv, v, *acc, t.lanes)
                            } else {
                                _mm512_mask_add_ps(*acc, t.lanes, *acc, _mm512_mul_ps(wv, v))
                            };
                        }
                    }
                }
                let mask = ((1u32 << n) - 1) as __mmask16;
                for (acc, plane) in acc.iter().zip(planes) {
                    // SAFETY: the first n lanes of output columns c0.. of row oy.
                    unsafe { _mm512_mask_storeu_ps(plane.y.add(oy * p.out_w + c0), mask, *acc) };
                }
            }
        }
    }
}
