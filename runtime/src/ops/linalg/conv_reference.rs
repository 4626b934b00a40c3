//! Test support for the convolution kernels: seeded values and a naive
//! f64 convolution to hold them against.

use super::conv_geometry::ConvGeometry;
use super::window::Window;

/// `len` values in [-1, 1] from a xorshift seeded with `seed`.
pub fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

/// One test convolution: input `[n, c, h, w]`, `m` outputs, the window.
pub struct Case {
    pub x: [usize; 4],
    pub m: usize,
    pub kernel: [usize; 2],
    pub strides: [usize; 2],
    /// top, left, bottom, right
    pub pads: [usize; 4],
    pub dilations: [usize; 2],
    pub group: usize,
}

/// A [`Case`] from its fields in order.
pub fn case(
    x: [usize; 4],
    m: usize,
    kernel: [usize; 2],
    strides: [usize; 2],
    pads: [usize; 4],
    dilations: [usize; 2],
    group: usize,
) -> Case {
    Case { x, m, kernel, strides, pads, dilations, group }
}

/// Whether this CPU runs the AVX-512 kernels.
pub fn has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512f");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

impl Case {
    pub fn geometry(&self) -> ConvGeometry {
        let [n, c, h, w] = self.x;
        let window = Window {
            kernel_shape: self.kernel.to_vec(),
            strides: self.strides.to_vec(),
            pads: self.pads.to_vec(),
            dilations: self.dilations.to_vec(),
        };
        let out = window.output_shape(&[h, w], false, "Conv").unwrap();
        ConvGeometry::new(n, c, self.m, self.group, vec![h, w], out, window)
    }
}

/// The convolution summed naively in f64, and the same sums of |terms|.
pub fn reference(g: &ConvGeometry, x: &[f32], w: &[f32], b: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let (cg, mg) = (g.c / g.group, g.m / g.group);
    let (ih, iw, oh, ow) = (g.in_spatial[0], g.in_spatial[1], g.out_spatial[0], g.out_spatial[1]);
    let win = &g.win;
    let (kh, kw) = (win.kernel_shape[0], win.kernel_shape[1]);
    let (mut sums, mut scale) = (Vec::new(), Vec::new());
    for n in 0..g.n {
        for m in 0..g.m {
            let grp = m / mg;
            for oy in 0..oh {
                for ox in 0..ow {
                    let (mut s, mut a) = (b[m] as f64, b[m].abs() as f64);
                    for c in 0..cg {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * win.strides[0] + ky * win.dilations[0]) as isize - win.pad_begin(0) as isize;
                                let ix = (ox * win.strides[1] + kx * win.dilations[1]) as isize - win.pad_begin(1) as isize;
                                if iy < 0 || ix < 0 || iy >= ih as isize || ix >= iw as isize {
                                    continue;
                                }
                                let xv = x[((n * g.c + grp * cg + c) * ih + iy as usize) * iw + ix as usize] as f64;
                                let wv = w[((m * cg + c) * kh + ky) * kw + kx] as f64;
                                s += xv * wv;
                                a += (xv * wv).abs();
                            }
                        }
                    }
                    sums.push(s);
                    scale.push(a);
                }
            }
        }
    }
    (sums, scale)
}

/// Runs `kernel` (the convolution of `g` on seeded inputs, returning
/// whether it ran) on 1 and 3 threads and asserts that it ran, that it
/// finished each output exactly once, and that each output is within the
/// bound of reordered f32 sums of the naive f64 convolution. `label`
/// names the case in failures.
pub fn assert_matches_reference(
    label: &str,
    g: &ConvGeometry,
    seed: u64,
    kernel: impl Fn(&[f32], &[f32], &[f32], &mut [f32], &(dyn Fn(usize, &mut [f32]) + Sync)) -> bool,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let cg = g.c / g.group;
    let x = values(g.n * g.c * g.in_size, 1 + seed);
    let w = values(g.m * cg * g.k_size, 100 + seed);
    let b = values(g.m, 200 + seed);
    let (want, scale) = reference(g, &x, &w, &b);
    let terms = (cg * g.k_size + 1) as f64;
    for threads in [1, 3] {
        let finished: Vec<AtomicUsize> = (0..want.len()).map(|_| AtomicUsize::new(0)).collect();
        let finish = |start: usize, run: &mut [f32]| {
            for (j, v) in run.iter_mut().enumerate() {
                finished[start + j].fetch_add(1, Ordering::Relaxed);
                *v = 2.0 * *v + 3.0;
            }
        };
        let mut y = vec![f32::NAN; want.len()];
        let pool = crate::parallel::Threads::new(threads).unwrap();
        assert!(pool.install(|| kernel(&x, &w, &b, &mut y, &finish)), "{label}: the kernel did not run");
        assert!(finished.iter().all(|f| f.load(Ordering::Relaxed) == 1), "{label}: an output not finished once");
        for (j, ((&got, &want), &s)) in y.iter().zip(&want).zip(&scale).enumerate() {
            // The epilogue's own rounding (2v + 3, then undone here) adds to it.
            let bound = 2.0 * terms * f32::EPSILON as f64 * s + 4.0 * f32::EPSILON as f64 * (want.abs() + 2.0);
            let got = (got as f64 - 3.0) / 2.0;
            assert!((got - want).abs() <= bound, "{label}, output {j}: {got} against {want} (bound {bound})");
        }
    }
}
