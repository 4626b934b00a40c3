//! The fast mode's convolution of planes with few output positions (the
//! last layers of small-input CNNs: 1 x 1 to 4 x 4 outputs), with AVX-512.
//!
//! Kernels that vectorize along output positions (the direct and packed
//! convolutions) fill one to sixteen lanes of a 16-lane vector there, and
//! pad and copy whole input planes for a handful of outputs. Here each
//! output is the dot product of its channel's weight row (`c/group · kh ·
//! kw` values, contiguous in the ONNX layout) with its window, gathered
//! once per sample into a position-major matrix (one row per output
//! position, zero where the window reads padding): vectors run along the
//! window, so every lane works. Four positions of two channels are summed
//! at a time (eight independent sums in flight, each weight vector loaded
//! once for four positions), then reduced across lanes.

use super::conv_geometry::{ConvGeometry, Finish};
use super::num::with_scratch;

/// Where this path pays: planes of at most 16 outputs, pointwise ones of
/// at most 4. (Rows of up to 8 outputs on larger planes were tried:
/// gathering the windows of 64 positions cost more than the lanes saved,
/// ResNet-18's 4-channel layer on 8 x 8 planes 10.6 -> 29.8 us; pointwise
/// layers on 4 x 4 planes ran twice as fast through the packed product,
/// whose columns are the planes themselves.) Measured, one thread:
/// SqueezeNet's 64-channel 3 x 3 layers on 3 x 3 planes 4.8 -> 2.6 us,
/// ResNet-18's 32-channel 3 x 3 layers on 1 x 1 planes 5.0 -> 1.6 us,
/// MobileNetV2's pointwise layers on 2 x 2 planes 4.1 -> 2.1 us.
fn pays(g: &ConvGeometry) -> bool {
    g.out_size <= if g.is_pointwise() { 4 } else { 16 }
}

/// The most elements of the gathered windows.
const MAX_WINDOWS: usize = 1 << 20;

/// Runs the convolution and returns true, or returns false, doing nothing,
/// where this path does not apply: the exact mode, a CPU without
/// AVX-512, depthwise convolutions, other than two spatial axes, layers
/// where it does not pay ([`pays`]).
pub(super) fn conv_dots(
    g: &ConvGeometry,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    finish: Finish<'_, f32>,
) -> bool {
    if crate::math::mode() != crate::math::Math::Fast
        || g.is_depthwise()
        || g.in_spatial.len() != 2
        || g.out_size == 0
        || g.in_size == 0
        || g.m == 0
        || !pays(g)
        || g.out_size * (g.c / g.group * g.k_size) > MAX_WINDOWS
    {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        let (cg, mg) = (g.c / g.group, g.m / g.group);
        let kdim = cg * g.k_size;
        let positions = g.out_size;
        let out = super::gemm_kernel::Shared(y.as_mut_ptr());
        let taps = WindowTaps::new(g);
        let grain = crate::parallel::grain_macs(positions * kdim);
        with_scratch::<f32, _>(positions * kdim, |windows| {
            // Taps on padding stay zero: every gather writes the same elements.
            windows.fill(0.0);
            for n in 0..g.n {
                for grp in 0..g.group {
                    let x_g = &x[(n * g.c + grp * cg) * g.in_size..][..cg * g.in_size];
                    taps.gather(g, x_g, windows);
                    let windows: &[f32] = windows;
                    let first = n * g.m + grp * mg;
                    crate::parallel::par_ranges(mg, grain, |channels| {
                        let start = (first + channels.start) * positions;
                        // SAFETY: the planes of this piece's output channels
                        // of this sample, which only this piece writes.
                        let planes =
                            unsafe { std::slice::from_raw_parts_mut(out.at(start as isize), channels.len() * positions) };
                        for (i, pair) in planes.chunks_mut(2 * positions).enumerate() {
                            let m = grp * mg + channels.start + 2 * i;
                            let count = pair.len() / positions;
                            let rows: [&[f32]; 2] = std::array::from_fn(|r| &w[(m + r.min(count - 1)) * kdim..][..kdim]);
                            let biases: [f32; 2] = std::array::from_fn(|r| bias.map_or(0.0, |b| b[m + r.min(count - 1)]));
                            // SAFETY: AVX-512F was detected; `windows` holds
                            // `positions` rows of `kdim`, each weight row
                            // `kdim`, `pair` `count` planes of `positions`.
                            unsafe { x86::dots(windows, kdim, positions, &rows, &biases, pair) };
                        }
                        finish(start, planes);
                    });
                }
            }
        });
        return true;
    }
    let _ = (x, w, bias, y, finish);
    false
}

/// The taps of each output position's window that read inside the input,
/// the same for every input plane: where each goes in the position-major
/// windows matrix (`out_size` rows of `c/group · kh · kw`, in the weights'
/// order; the other elements, taps on padding, are zero), and where it
/// reads in a plane.
struct WindowTaps(Vec<(usize, usize)>);

impl WindowTaps {
    fn new(g: &ConvGeometry) -> WindowTaps {
        let win = &g.win;
        let (ih, iw, ow) = (g.in_spatial[0], g.in_spatial[1], g.out_spatial[1]);
        let (kh, kw) = (win.kernel_shape[0], win.kernel_shape[1]);
        let kdim = g.c / g.group * g.k_size;
        let mut inside = Vec::with_capacity(g.out_size * g.k_size);
        for p in 0..g.out_size {
            let (oy, ox) = (p / ow, p % ow);
            for ky in 0..kh {
                let Some(iy) = (oy * win.strides[0] + ky * win.dilations[0]).checked_sub(win.pad_begin(0)) else { continue };
                for kx in 0..kw {
                    let Some(ix) = (ox * win.strides[1] + kx * win.dilations[1]).checked_sub(win.pad_begin(1)) else { continue };
                    if iy < ih && ix < iw {
                        inside.push((p * kdim + ky * kw + kx, iy * iw + ix));
                    }
                }
            }
        }
        WindowTaps(inside)
    }

    /// Writes the windows of the `c/group` input planes `x` into
    /// `windows`, whose taps on padding are already zero.
    fn gather(&self, g: &ConvGeometry, x: &[f32], windows: &mut [f32]) {
        for (c, plane) in x.chunks_exact(g.in_size).enumerate() {
            let windows = &mut windows[c * g.k_size..];
            for &(at, offset) in &self.0 {
                windows[at] = plane[offset];
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// `planes[r · positions + p] = biases[r] + rows[r] · windows[p]` for
    /// every position of the one or two planes in `planes`.
    ///
    /// # Safety
    /// AVX-512F; `windows` has `positions` rows of `kdim`, each of `rows`
    /// has `kdim` values.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn dots(
        windows: &[f32],
        kdim: usize,
        positions: usize,
        rows: &[&[f32]; 2],
        biases: &[f32; 2],
        planes: &mut [f32],
    ) {
        debug_assert!(windows.len() >= positions * kdim && rows.iter().all(|r| r.len() >= kdim));
        let whole = kdim / 16 * 16;
        let tail = ((1u32 << (kdim - whole)) - 1) as __mmask16;
        for p0 in (0..positions).step_by(4) {
            let count = (positions - p0).min(4);
            // A short block repeats its last position (its sums are dropped).
            let win: [*const f32; 4] = std::array::from_fn(|i| windows[(p0 + i.min(count - 1)) * kdim..].as_ptr());
            let mut acc = [[_mm512_setzero_ps(); 4]; 2];
            let mut k = 0;
            // SAFETY (the loads): k + 16 <= whole <= kdim for whole vectors,
            // the tail's lanes past kdim masked off.
            while k < whole {
                for (acc, row) in acc.iter_mut().zip(rows) {
                    let wv = unsafe { _mm512_loadu_ps(row.as_ptr().add(k)) };
                    for (a, x) in acc.iter_mut().zip(&win) {
                        *a = _mm512_fmadd_ps(wv, unsafe { _mm512_loadu_ps(x.add(k)) }, *a);
                    }
                }
                k += 16;
            }
            if whole < kdim {
                for (acc, row) in acc.iter_mut().zip(rows) {
                    let wv = unsafe { _mm512_maskz_loadu_ps(tail, row.as_ptr().add(k)) };
                    for (a, x) in acc.iter_mut().zip(&win) {
                        *a = _mm512_fmadd_ps(wv, unsafe { _mm512_maskz_loadu_ps(tail, x.add(k)) }, *a);
                    }
                }
            }
            let mut lanes = [0f32; 8];
            // SAFETY: AVX-512F; `lanes` holds the 8 sums.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), reduce8(&acc)) };
            for (r, plane) in planes.chunks_exact_mut(positions).enumerate() {
                for (i, sum) in plane[p0..p0 + count].iter_mut().enumerate() {
                    *sum = biases[r] + lanes[4 * r + i];
                }
            }
        }
    }

    /// The sums of the lanes of eight vectors, in their order (`acc[r][i]`
    /// at `4r + i`): halves added, then pairs added by `hadd`, so the eight
    /// reductions share their shuffles (about 3 instructions a sum, against
    /// 12 for eight `_mm512_reduce_add_ps`).
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn reduce8(acc: &[[__m512; 4]; 2]) -> __m256 {
        let half = |v: __m512| {
            let high = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
            _mm256_add_ps(_mm512_castps512_ps256(v), high)
        };
        let h: [__m256; 8] = std::array::from_fn(|i| half(acc[i / 4][i % 4]));
        // Each 128-bit lane of hadd(a, b) holds pair sums of a's then b's.
        let q0 = _mm256_hadd_ps(_mm256_hadd_ps(h[0], h[1]), _mm256_hadd_ps(h[2], h[3]));
        let q1 = _mm256_hadd_ps(_mm256_hadd_ps(h[4], h[5]), _mm256_hadd_ps(h[6], h[7]));
        // q0's low 128-bit lane holds partial sums of h0..h3, its high lane
        // the rest of them; the same for q1 and h4..h7.
        let lo = _mm256_permute2f128_ps::<0x20>(q0, q1);
        let hi = _mm256_permute2f128_ps::<0x31>(q0, q1);
        _mm256_add_ps(lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::super::conv_reference::{assert_matches_reference, case, has_avx512};
    use super::*;

    /// 1 x 1 to 4 x 4 outputs from strided, dilated and padded windows,
    /// groups, odd channel counts (a pair cut short), window lengths with
    /// and without a partial vector, batches, on 1 and 3 threads: within
    /// the bound of reordered f32 sums, each output finished exactly once.
    #[test]
    fn dot_convolutions_match_the_reference_and_finish_each_output_once() {
        if !has_avx512() {
            eprintln!("skipped: 1 test (this CPU has no AVX-512, so there is no dot kernel)");
            return;
        }
        let cases = [
            case([2, 32, 2, 2], 32, [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 1),
            case([1, 16, 3, 3], 64, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),
            case([2, 8, 4, 4], 9, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),
            case([1, 16, 2, 2], 32, [1, 1], [2, 2], [0, 0, 0, 0], [1, 1], 1),
            case([1, 6, 5, 7], 9, [3, 2], [2, 3], [1, 0, 2, 1], [1, 1], 3),
            case([1, 3, 6, 6], 5, [3, 3], [2, 2], [2, 2, 2, 2], [2, 2], 1),
            case([3, 1, 1, 1], 3, [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1),
            case([1, 8, 4, 3], 5, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),
        ];
        for (i, t) in cases.iter().enumerate() {
            let g = t.geometry();
            assert!(pays(&g) && !g.is_depthwise(), "case {i} exercises the kernel");
            assert_matches_reference(&format!("case {i}"), &g, i as u64, |x, w, b, y, finish| {
                crate::math::install(crate::math::Math::Fast, || conv_dots(&g, x, w, Some(b), y, finish))
            });
        }
    }
}
