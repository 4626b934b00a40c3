//! Max pooling of f32 planes with AVX-512 (2-D windows, horizontal
//! stride 1 or 2, no indices output), each tap of a vector of 16 output
//! positions read straight from the input (`direct_window`), the lanes in
//! padding loaded as -inf. The first tap is taken as it is and
//! each later one as `v > max ? v : max` per lane, which is what `vmaxps`
//! computes and what the scalar loop in `pool` does (a padded tap never
//! wins, a NaN wins only as the first tap, of equal values the earlier
//! stays): the results are the scalar loop's, bit for bit, in both math
//! modes.

use super::conv_geometry::ConvGeometry;
#[cfg(target_arch = "x86_64")]
use super::direct_window::{plane_groups, DirectWindow};

/// Pools every plane of `x` into `y` and returns true, or returns false,
/// doing nothing, where this path does not apply: other than two spatial
/// axes, a horizontal stride above 2, a CPU without AVX-512.
pub(super) fn max_pool_f32(g: &ConvGeometry, x: &[f32], y: &mut [f32]) -> bool {
    if g.out_size == 0 || g.in_size == 0 {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        let Some(plan) = DirectWindow::new(g) else { return false };
        crate::parallel::par_chunks_mut(y, g.out_size, g.planes_per_piece().max(4), |first, out| {
            let count = out.len() / g.out_size;
            let input = |i: usize| &x[(first + i) * g.in_size..][..g.in_size];
            for (i, planes) in plane_groups(count) {
                let y = out[i * g.out_size..].as_mut_ptr();
                // SAFETY (both calls): AVX-512F was detected; the planes'
                // inputs and outputs have the plan's geometry, and the
                // outputs are disjoint planes of `out`.
                unsafe {
                    if planes == 4 {
                        x86::planes::<4>(
                            &plan,
                            std::array::from_fn(|j| input(i + j)),
                            std::array::from_fn(|j| y.add(j * g.out_size)),
                        );
                    } else {
                        x86::planes(&plan, [input(i)], [y]);
                    }
                }
            }
        });
        return true;
    }
    let _ = (x, y);
    false
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::direct_window::{x86::load, DirectWindow};
    use std::arch::x86_64::*;

    /// Pools `P` planes of the same geometry at once (independent chains
    /// in flight together).
    ///
    /// # Safety
    /// AVX-512F; each `x` is an input plane and each `y` an output plane of
    /// the plan's geometry.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn planes<const P: usize>(p: &DirectWindow, x: [&[f32]; P], y: [*mut f32; P]) {
        let neg = _mm512_set1_ps(f32::NEG_INFINITY);
        let [kh, kw] = p.kernel;
        for oy in 0..p.out_h {
            for (ci, &(c0, n)) in p.columns.iter().enumerate() {
                let mut m = [neg; P];
                for ky in 0..kh {
                    let Some(iy) = p.input_row(oy, ky) else { continue };
                    for kx in 0..kw {
                        let t = &p.taps[ci * kw + kx];
                        for (m, x) in m.iter_mut().zip(x) {
                            // SAFETY: AVX-512F; an input row of the plane.
                            let v = unsafe { load(x[iy * p.in_w..].as_ptr(), t, p.stride2, neg) };
                            *m = if ky == 0 && kx == 0 { v } else { _mm512_max_ps(v, *m) };
                        }
                    }
                }
                let mask = ((1u32 << n) - 1) as __mmask16;
                for (m, y) in m.iter().zip(y) {
                    // SAFETY: the first n lanes of output columns c0.. of row oy.
                    unsafe { _mm512_mask_storeu_ps(y.add(oy * p.out_w + c0), mask, *m) };
                }
            }
        }
    }
}
