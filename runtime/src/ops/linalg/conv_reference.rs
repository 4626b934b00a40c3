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
