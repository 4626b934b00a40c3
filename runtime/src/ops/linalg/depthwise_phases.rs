//! The fast mode's depthwise convolution of f32 planes with AVX-512 (2-D,
//! any stride and dilation).
//!
//! Each input plane is copied, zero-padded, into its stride phases: phase
//! (py, px) holds padded rows py, py + sy, ... and columns px, px + sx, ...
//! There, output position (oy, ox) reads tap (ky, kx) at a fixed offset
//! (the tap's) from its index `oy · pw + ox` in a "virtual" output plane as
//! wide as a phase (`pw`). So each tap reads 16 consecutive virtual
//! positions as one vector, across output rows: small planes (7 x 7,
//! 14 x 14) fill the vectors that row-by-row kernels leave mostly empty.
//! The virtual columns past the output width are computed and dropped.
//!
//! Each output starts from its bias and adds its taps in tap order, one FMA
//! each; a tap on padding adds `w · 0`. The exact mode keeps the kernels of
//! `depthwise_f32.rs` and `depthwise.rs`, which skip padding taps and round
//! each product.

use super::conv_geometry::{ConvGeometry, Finish};

/// The most elements one plane's phases may take (the copy is per plane).
const MAX_PHASES: usize = 1 << 22;

/// The fewest outputs a plane must have for this kernel. Smaller planes
/// (4 x 4, 2 x 2) fill fewer than half its lanes and run faster through
/// `depthwise.rs`'s kernel vectorized across channels (measured on
/// MobileNetV2's 4 x 4 layers: 2.5 against 4.3 us); 7 x 7 planes run
/// faster here (MobileNetV3's 576-channel 5 x 5 layers: 49 against 64 us).
const MIN_OUTPUTS: usize = 36;

/// Runs the depthwise convolution `g` and returns true, or returns false,
/// doing nothing, where this path does not apply: the exact mode, other
/// than two spatial axes, a CPU without AVX-512, planes of fewer than
/// [`MIN_OUTPUTS`] outputs or too large to copy.
pub(super) fn depthwise_phases(
    g: &ConvGeometry,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    finish: Finish<'_, f32>,
) -> bool {
    if crate::math::mode() != crate::math::Math::Fast
        || !g.is_depthwise()
        || g.in_spatial.len() != 2
        || g.out_size < MIN_OUTPUTS
        || g.in_size == 0
    {
        return false;
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f") {
        let Some(layout) = Phases::new(g) else { return false };
        let mg = g.m / g.group;
        crate::parallel::par_chunks_mut(y, g.out_size, g.planes_per_piece(), |first, out| {
            let mut phases = vec![0f32; layout.len];
            let mut virt = vec![0f32; layout.vectors * 16];
            let ow = g.out_spatial[1];
            for (i, yp) in out.chunks_exact_mut(g.out_size).enumerate() {
                let (n, m) = ((first + i) / g.m, (first + i) % g.m);
                let taps = &w[m * g.k_size..][..g.k_size];
                // SAFETY: AVX-512F was detected; `phases` holds every
                // element a tap reads (`Phases::len`), `virt` every vector;
                // each output row is `ow` elements of `yp` and of `virt`.
                unsafe {
                    layout.fill(g, &x[(n * g.c + m / mg) * g.in_size..][..g.in_size], &mut phases);
                    x86::plane(&layout, &phases, taps, bias.map_or(0.0, |b| b[m]), &mut virt);
                    for (oy, row) in yp.chunks_exact_mut(ow).enumerate() {
                        x86::copy(virt[oy * layout.pw..][..ow].as_ptr(), row.as_mut_ptr(), ow);
                    }
                }
                finish((first + i) * g.out_size, yp);
            }
        });
        return true;
    }
    let _ = (x, w, bias, y, finish);
    false
}

/// Where one plane's phases lie in its copy, and where each tap reads.
struct Phases {
    /// Strides (phases per padded column and row).
    sy: usize,
    sx: usize,
    /// Rows and columns of one phase.
    ph: usize,
    pw: usize,
    /// Where tap t reads for virtual position 0.
    offsets: Vec<usize>,
    /// 16-lane vectors covering the virtual output plane (`oh · pw`).
    vectors: usize,
    /// Elements of the copy: every phase, and every element the last
    /// vector of the furthest tap reads (zero past the phases).
    len: usize,
}

impl Phases {
    fn new(g: &ConvGeometry) -> Option<Phases> {
        let win = &g.win;
        let (sy, sx) = (win.strides[0].max(1), win.strides[1].max(1));
        let (ph, pw) = (g.padded_extent(0).div_ceil(sy), g.padded_extent(1).div_ceil(sx));
        let (kh, kw) = (win.kernel_shape[0], win.kernel_shape[1]);
        let (dy, dx) = (win.dilations[0], win.dilations[1]);
        let mut offsets = Vec::with_capacity(kh * kw);
        for ky in 0..kh {
            for kx in 0..kw {
                let (ry, rx) = (ky * dy, kx * dx);
                let phase = (ry % sy) * sx + rx % sx;
                offsets.push(phase * ph * pw + (ry / sy) * pw + rx / sx);
            }
        }
        let vectors = (g.out_spatial[0] * pw).div_ceil(16);
        let len = (sy * sx * ph * pw).max(offsets.iter().max().copied().unwrap_or(0) + vectors * 16);
        (len <= MAX_PHASES).then_some(Phases { sy, sx, ph, pw, offsets, vectors, len })
    }

    /// Copies input plane `x` into its phases in `out`, whose other
    /// elements (the padding) are zero and stay so: every plane of a
    /// geometry writes the same elements.
    ///
    /// # Safety
    /// AVX-512F; `x` is a plane of `g`, `out` has the phases' elements.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    unsafe fn fill(&self, g: &ConvGeometry, x: &[f32], out: &mut [f32]) {
        let (top, left) = (g.win.pad_begin(0), g.win.pad_begin(1));
        let iw = g.in_spatial[1];
        let phase_len = self.ph * self.pw;
        assert!(out.len() >= self.sy * self.sx * phase_len && x.len() == g.in_size);
        // Padded row iy + top is row i of row phase py.
        let (mut py, mut i) = (top % self.sy, top / self.sy);
        for src in x.chunks_exact(iw) {
            let row = &mut out[py * self.sx * phase_len + i * self.pw..];
            py += 1;
            if py == self.sy {
                (py, i) = (0, i + 1);
            }
            match self.sx {
                // SAFETY: padded columns left..left + iw of one phase row.
                1 => unsafe { x86::copy(src.as_ptr(), row[left..left + iw].as_mut_ptr(), iw) },
                2 => {
                    // Input column ix is padded column ix + left: phase
                    // (ix + left) % 2, column (ix + left) / 2.
                    let (even, odd) = row.split_at_mut(phase_len);
                    let (a, b) = if left % 2 == 0 { (even, odd) } else { (odd, even) };
                    let (a, b) = (&mut a[left / 2..][..iw.div_ceil(2)], &mut b[left.div_ceil(2)..][..iw / 2]);
                    for ((a, b), pair) in a.iter_mut().zip(b.iter_mut()).zip(src.chunks_exact(2)) {
                        *a = pair[0];
                        *b = pair[1];
                    }
                    if iw % 2 == 1 {
                        a[iw / 2] = src[iw - 1];
                    }
                }
                sx => {
                    for (ix, &v) in src.iter().enumerate() {
                        let c = ix + left;
                        row[(c % sx) * phase_len + c / sx] = v;
                    }
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Phases;
    use std::arch::x86_64::*;

    /// Convolves one plane's phases into the virtual output plane `virt`,
    /// eight vectors at a time.
    ///
    /// # Safety
    /// AVX-512F; `phases` has `layout.len` elements, `virt`
    /// `layout.vectors · 16`, `taps` one weight per offset.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn plane(layout: &Phases, phases: &[f32], taps: &[f32], bias: f32, virt: &mut [f32]) {
        debug_assert!(phases.len() >= layout.len && virt.len() >= layout.vectors * 16);
        debug_assert_eq!(taps.len(), layout.offsets.len());
        let mut first = 0;
        while first < layout.vectors {
            let block = (layout.vectors - first).min(8);
            // SAFETY: vectors first..first + block of the virtual plane.
            unsafe {
                let at = first * 16;
                let (x, y) = (phases.as_ptr().add(at), virt.as_mut_ptr().add(at));
                match block {
                    8 => vectors::<8>(layout, x, taps, bias, y),
                    7 => vectors::<7>(layout, x, taps, bias, y),
                    6 => vectors::<6>(layout, x, taps, bias, y),
                    5 => vectors::<5>(layout, x, taps, bias, y),
                    4 => vectors::<4>(layout, x, taps, bias, y),
                    3 => vectors::<3>(layout, x, taps, bias, y),
                    2 => vectors::<2>(layout, x, taps, bias, y),
                    _ => vectors::<1>(layout, x, taps, bias, y),
                }
            }
            first += block;
        }
    }

    /// Copies `n` floats from `src` to `dst`, 16 at a time (a short run is
    /// one masked load and store, not a call to `memcpy`).
    ///
    /// # Safety
    /// AVX-512F; `n` floats readable at `src`, writable at `dst`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(super) unsafe fn copy(src: *const f32, dst: *mut f32, n: usize) {
        let mut i = 0;
        // SAFETY: the caller's bounds; the tail's lanes past n are masked off.
        unsafe {
            while i + 16 <= n {
                _mm512_storeu_ps(dst.add(i), _mm512_loadu_ps(src.add(i)));
                i += 16;
            }
            if i < n {
                let mask = ((1u32 << (n - i)) - 1) as __mmask16;
                _mm512_mask_storeu_ps(dst.add(i), mask, _mm512_maskz_loadu_ps(mask, src.add(i)));
            }
        }
    }

    /// `V` consecutive vectors of the virtual plane: from `x` (the phases
    /// at the first vector's position) into `y`.
    ///
    /// # Safety
    /// AVX-512F; every `x + offset + 16·V` inside the phases, `y` has `16·V`.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn vectors<const V: usize>(layout: &Phases, x: *const f32, taps: &[f32], bias: f32, y: *mut f32) {
        let mut acc = [_mm512_set1_ps(bias); V];
        for (&offset, &tap) in layout.offsets.iter().zip(taps) {
            let wv = _mm512_set1_ps(tap);
            // SAFETY: the caller's bounds.
            let p = unsafe { x.add(offset) };
            for (v, acc) in acc.iter_mut().enumerate() {
                *acc = _mm512_fmadd_ps(wv, unsafe { _mm512_loadu_ps(p.add(16 * v)) }, *acc);
            }
        }
        for (v, acc) in acc.iter().enumerate() {
            // SAFETY: as above.
            unsafe { _mm512_storeu_ps(y.add(16 * v), *acc) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::conv_reference::{assert_matches_reference, case, has_avx512, values};
    use super::*;

    /// Strides 1 to 3 (each axis its own), dilation, uneven padding, 3 x 3
    /// to 7 x 7 windows, channel multipliers, batches, planes whose virtual
    /// rows end mid-vector, on 1 and 3 threads: the convolution within the
    /// bound of reordered f32 sums, each output finished exactly once.
    #[test]
    fn phase_convolutions_match_the_reference_and_finish_each_output_once() {
        if !has_avx512() {
            eprintln!("skipped: 1 test (this CPU has no AVX-512, so there is no phase kernel)");
            return;
        }
        let cases = [
            case([1, 5, 7, 7], 5, [5, 5], [1, 1], [2, 2, 2, 2], [1, 1], 5),
            case([2, 3, 14, 14], 3, [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 3),
            case([1, 4, 15, 9], 8, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 4),
            case([1, 2, 23, 17], 2, [5, 5], [2, 2], [2, 1, 3, 2], [1, 1], 2),
            case([1, 3, 20, 31], 3, [7, 7], [3, 1], [3, 3, 3, 3], [1, 1], 3),
            case([1, 2, 13, 13], 2, [3, 3], [1, 2], [2, 2, 2, 2], [2, 2], 2),
            case([3, 2, 9, 40], 2, [3, 1], [1, 3], [1, 0, 1, 0], [1, 1], 2),
            case([1, 2, 12, 12], 2, [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], 2),
        ];
        for (i, t) in cases.iter().enumerate() {
            let g = t.geometry();
            assert!(g.is_depthwise() && g.out_size >= MIN_OUTPUTS, "case {i} exercises the kernel");
            assert_matches_reference(&format!("case {i}"), &g, i as u64, |x, w, b, y, finish| {
                crate::math::install(crate::math::Math::Fast, || depthwise_phases(&g, x, w, Some(b), y, finish))
            });
        }
        // The exact mode and tiny planes are left to the other kernels.
        let g = case([1, 2, 7, 7], 2, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 2).geometry();
        let (x, w) = (values(98, 1), values(18, 2));
        let mut y = vec![0f32; 98];
        assert!(!depthwise_phases(&g, &x, &w, None, &mut y, &|_, _| {}));
        let g = case([1, 2, 4, 4], 2, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 2).geometry();
        let ran =
            crate::math::install(crate::math::Math::Fast, || depthwise_phases(&g, &x[..32], &w, None, &mut y[..32], &|_, _| {}));
        assert!(!ran);
    }
}
