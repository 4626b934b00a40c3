//! DFT and STFT. Complex tensors are ONNX's: a last axis of 2 (real,
//! imaginary); a real signal has a last axis of 1.
//!
//! [`Dft`] transforms along one axis: the signal is cut or zero-padded to
//! `length` values, `X[k] = sum_j x[j] e^(-2 pi i jk / length)` (the inverse
//! uses `+` and divides by `length`), and `onesided` keeps the bins
//! `0..=length / 2`, the others being conjugates of those for a real
//! signal. [`Stft`] cuts `[batch, samples, 1|2]` into frames of
//! `frame_length` every `frame_step` samples, multiplies each by the window
//! (input 1, optional) and transforms it: `[batch, frames, bins, 2]`.
//!
//! The transform is an FFT in f64 (radix 2, or Bluestein's algorithm for
//! other lengths: O(n log n) whatever the length); the output is rounded
//! once.

use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, opt_input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};
use std::f64::consts::PI;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dft {
    /// The signal's axis (never the last, complex axis).
    pub axis: usize,
    /// The transform's length: the signal is cut or zero-padded to it.
    pub length: usize,
    pub inverse: bool,
    pub onesided: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stft {
    pub frame_step: usize,
    pub frame_length: usize,
    pub onesided: bool,
}

/// The bins a transform of `length` keeps.
fn bins(length: usize, onesided: bool) -> usize {
    if onesided {
        length / 2 + 1
    } else {
        length
    }
}

type Complex = (f64, f64);

fn mul(a: Complex, b: Complex) -> Complex {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

/// `e^(i angle)`.
fn expi(angle: f64) -> Complex {
    (angle.cos(), angle.sin())
}

/// In-place radix-2 FFT of a power-of-two length, with the sign of the
/// exponent given: `-1` forward, `+1` inverse (unscaled).
fn fft_pow2(a: &mut [Complex], sign: f64) {
    let n = a.len();
    let bits = n.trailing_zeros();
    if n <= 1 {
        return;
    }
    for i in 0..n {
        let j = i.reverse_bits() >> (usize::BITS - bits);
        if i < j {
            a.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let step = expi(sign * 2.0 * PI / len as f64);
        for chunk in a.chunks_exact_mut(len) {
            let (lo, hi) = chunk.split_at_mut(len / 2);
            let mut w = (1.0, 0.0);
            for (u, v) in lo.iter_mut().zip(hi.iter_mut()) {
                let t = mul(*v, w);
                *v = (u.0 - t.0, u.1 - t.1);
                *u = (u.0 + t.0, u.1 + t.1);
                w = mul(w, step);
            }
        }
        len *= 2;
    }
}

/// A transform of one length, planned once per layer: a power-of-two FFT,
/// or for other lengths Bluestein's chirp-z transform, which rewrites the
/// DFT as a convolution done with power-of-two FFTs. Both are
/// O(n log n), so no length makes a layer quadratic.
struct Plan {
    n: usize,
    sign: f64,
    /// Bluestein only: the chirp `e^(sign i pi k^2 / n)` and the FFT of its
    /// conjugate laid out for a circular convolution of `m` points.
    chirp: Vec<Complex>,
    kernel: Vec<Complex>,
    m: usize,
}

impl Plan {
    fn new(n: usize, inverse: bool) -> Plan {
        let sign = if inverse { 1.0 } else { -1.0 };
        if n.is_power_of_two() {
            return Plan { n, sign, chirp: Vec::new(), kernel: Vec::new(), m: n };
        }
        // k^2 mod 2n keeps the angle exact for large k.
        let chirp: Vec<Complex> =
            (0..n).map(|k| expi(sign * PI * ((k as u128 * k as u128) % (2 * n as u128)) as f64 / n as f64)).collect();
        let m = (2 * n - 1).next_power_of_two();
        let mut kernel = vec![(0.0, 0.0); m];
        for k in 0..n {
            let c = (chirp[k].0, -chirp[k].1);
            kernel[k] = c;
            if k > 0 {
                kernel[m - k] = c;
            }
        }
        fft_pow2(&mut kernel, -1.0);
        Plan { n, sign, chirp, kernel, m }
    }

    /// Transforms `signal` (zero-padded to `n`, or cut) into `out`, the
    /// first `out.len()` bins, each multiplied by `scale`.
    fn run(&self, signal: &[Complex], scale: f64, out: &mut [Complex]) {
        let taken = signal.len().min(self.n);
        let mut a = vec![(0.0, 0.0); self.m];
        if self.chirp.is_empty() {
            a[..taken].copy_from_slice(&signal[..taken]);
            fft_pow2(&mut a, self.sign);
            for (o, v) in out.iter_mut().zip(&a) {
                *o = (v.0 * scale, v.1 * scale);
            }
            return;
        }
        for k in 0..taken {
            a[k] = mul(signal[k], self.chirp[k]);
        }
        fft_pow2(&mut a, -1.0);
        for (v, k) in a.iter_mut().zip(&self.kernel) {
            *v = mul(*v, *k);
        }
        fft_pow2(&mut a, 1.0);
        let norm = scale / self.m as f64;
        for (k, o) in out.iter_mut().enumerate() {
            let v = mul(a[k], self.chirp[k]);
            *o = (v.0 * norm, v.1 * norm);
        }
    }
}

fn check_complex(x: &TensorType, what: &str, name: &str) -> Result<()> {
    ensure_op!(
        x.dtype.is_float() && x.shape.len() >= 2 && matches!(x.shape.last(), Some(1 | 2)),
        "{name}: {what} is {x}; expected a float tensor whose last axis is 1 (real) or 2 (complex)"
    );
    Ok(())
}

/// Writes complex results as ONNX's (real, imaginary) pairs.
fn store(out: &mut TensorViewMut<'_>, values: &[Complex], name: &str) -> Result<()> {
    let flat: Vec<f64> = values.iter().flat_map(|&(re, im)| [re, im]).collect();
    crate::ops::util::store_f64(out, &flat, name)
}

/// The values of a real or complex tensor as complex pairs.
fn complex(x: &TensorView<'_>) -> Vec<(f64, f64)> {
    let v = x.to_f64_vec();
    if x.shape.last() == Some(&2) {
        v.chunks_exact(2).map(|c| (c[0], c[1])).collect()
    } else {
        v.into_iter().map(|r| (r, 0.0)).collect()
    }
}

impl OpImpl for Dft {
    fn name(&self) -> &'static str {
        "DFT"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "DFT")?;
        check_complex(x, "input", "DFT")?;
        ensure_op!(self.axis + 1 < x.shape.len(), "DFT: axis {} is not a signal axis of {x}", self.axis);
        ensure_op!(self.length > 0, "DFT: the transform's length must be positive");
        ensure_op!(
            !self.onesided || (x.shape.last() == Some(&1) && !self.inverse),
            "DFT: onesided output needs a real input and a forward transform"
        );
        let mut shape = x.shape.clone();
        shape[self.axis] = bins(self.length, self.onesided);
        *shape.last_mut().expect("rank >= 2") = 2;
        Ok(vec![TensorType::new(x.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let xv = input(inputs, 0, "DFT")?;
        let x = complex(&xv);
        let shape = &xv.shape[..xv.shape.len() - 1];
        let outer: usize = shape[..self.axis].iter().product();
        let len = shape[self.axis];
        let inner: usize = shape[self.axis + 1..].iter().product();
        let n = self.length;
        let out_bins = bins(n, self.onesided);
        let plan = Plan::new(n, self.inverse);
        let scale = if self.inverse { 1.0 / n as f64 } else { 1.0 };
        let taken = len.min(n);
        let mut y = vec![(0.0, 0.0); outer * out_bins * inner];
        let mut signal = vec![(0.0, 0.0); taken];
        let mut spectrum = vec![(0.0, 0.0); out_bins];
        for o in 0..outer {
            for i in 0..inner {
                for (j, s) in signal.iter_mut().enumerate() {
                    *s = x[(o * len + j) * inner + i];
                }
                plan.run(&signal, scale, &mut spectrum);
                for (k, &v) in spectrum.iter().enumerate() {
                    y[(o * out_bins + k) * inner + i] = v;
                }
            }
        }
        store(&mut outputs[0], &y, "DFT")
    }
}

impl OpImpl for Stft {
    fn name(&self) -> &'static str {
        "STFT"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "STFT")?;
        check_complex(x, "signal", "STFT")?;
        ensure_op!(x.shape.len() == 3, "STFT: signal is {x}, expected [batch, samples, 1 or 2]");
        ensure_op!(self.frame_step > 0 && self.frame_length > 0, "STFT: frame_step and frame_length must be positive");
        ensure_op!(
            self.frame_length <= x.shape[1],
            "STFT: frame_length {} is longer than the signal's {} samples",
            self.frame_length,
            x.shape[1]
        );
        if let Some(w) = opt_input(inputs, 1) {
            ensure_op!(
                w.dtype.is_float() && w.shape == [self.frame_length],
                "STFT: window is {w}, expected a float [{}]",
                self.frame_length
            );
        }
        ensure_op!(!self.onesided || x.shape[2] == 1, "STFT: onesided output needs a real signal");
        let frames = (x.shape[1] - self.frame_length) / self.frame_step + 1;
        Ok(vec![TensorType::new(x.dtype, vec![x.shape[0], frames, bins(self.frame_length, self.onesided), 2])])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let xv = input(inputs, 0, "STFT")?;
        let x = complex(&xv);
        let window = opt_input(inputs, 1).map(|w| w.to_f64_vec());
        let (batch, samples) = (xv.shape[0], xv.shape[1]);
        let n = self.frame_length;
        let frames = (samples - n) / self.frame_step + 1;
        let out_bins = bins(n, self.onesided);
        let plan = Plan::new(n, false);
        let mut y = vec![(0.0, 0.0); batch * frames * out_bins];
        let mut frame = vec![(0.0, 0.0); n];
        for b in 0..batch {
            for f in 0..frames {
                let start = b * samples + f * self.frame_step;
                for (j, s) in frame.iter_mut().enumerate() {
                    let (re, im) = x[start + j];
                    let w = window.as_ref().map_or(1.0, |w| w[j]);
                    *s = (re * w, im * w);
                }
                plan.run(&frame, 1.0, &mut y[(b * frames + f) * out_bins..][..out_bins]);
            }
        }
        store(&mut outputs[0], &y, "STFT")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn close(a: &[f32], b: &[f32]) {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() < 1e-5, "{a:?} vs {b:?}");
        }
    }

    fn run(op: impl Into<Op>, inputs: &[Option<&Tensor>]) -> Vec<f32> {
        op.into().eval_owned(inputs).unwrap().remove(0).as_slice::<f32>().unwrap().to_vec()
    }

    #[test]
    fn dft_of_small_signals_by_hand() {
        // [1, 2, 3, 4] real -> [10, -2+2i, -2, -2-2i].
        let x = Tensor::from_vec(vec![1, 4, 1], vec![1f32, 2.0, 3.0, 4.0]).unwrap();
        let dft = |length, inverse, onesided| Dft { axis: 1, length, inverse, onesided };
        close(&run(dft(4, false, false), &[Some(&x)]), &[10.0, 0.0, -2.0, 2.0, -2.0, 0.0, -2.0, -2.0]);
        close(&run(dft(4, false, true), &[Some(&x)]), &[10.0, 0.0, -2.0, 2.0, -2.0, 0.0]);
        // Zero-padded to 6 bins, and cut to 2 values ([1, 2] -> [3, -1]).
        let padded = run(dft(6, false, false), &[Some(&x)]);
        close(&padded[..2], &[10.0, 0.0]);
        close(&run(dft(2, false, false), &[Some(&x)]), &[3.0, 0.0, -1.0, 0.0]);
        // The inverse of the spectrum gives the signal back.
        let spectrum = Tensor::from_vec(vec![1, 4, 2], run(dft(4, false, false), &[Some(&x)])).unwrap();
        close(&run(dft(4, true, false), &[Some(&spectrum)]), &[1.0, 0.0, 2.0, 0.0, 3.0, 0.0, 4.0, 0.0]);
    }

    #[test]
    fn the_fft_matches_the_direct_sum_for_every_length() {
        for n in 1..=40usize {
            let signal: Vec<Complex> = (0..n).map(|j| ((j as f64 * 0.7).sin(), (j as f64 * 1.3).cos())).collect();
            for inverse in [false, true] {
                let sign = if inverse { 1.0 } else { -1.0 };
                let mut got = vec![(0.0, 0.0); n];
                Plan::new(n, inverse).run(&signal, 1.0, &mut got);
                for (k, g) in got.iter().enumerate() {
                    let want = signal.iter().enumerate().fold((0.0, 0.0), |acc, (j, &x)| {
                        let v = mul(x, expi(sign * 2.0 * PI * ((j * k) % n) as f64 / n as f64));
                        (acc.0 + v.0, acc.1 + v.1)
                    });
                    assert!((g.0 - want.0).abs() < 1e-9 && (g.1 - want.1).abs() < 1e-9, "n {n} bin {k}: {g:?} vs {want:?}");
                }
            }
        }
    }

    #[test]
    fn dft_along_an_inner_axis() {
        // [1, 2, 2, 1]: signals along axis 1 are the columns [1, 3] and [2, 4].
        let x = Tensor::from_vec(vec![1, 2, 2, 1], vec![1f32, 2.0, 3.0, 4.0]).unwrap();
        let y = run(Dft { axis: 1, length: 2, inverse: false, onesided: false }, &[Some(&x)]);
        close(&y, &[4.0, 0.0, 6.0, 0.0, -2.0, 0.0, -2.0, 0.0]);
    }

    #[test]
    fn stft_frames_windows_and_transforms() {
        // Samples 0..6, frames of 4 every 2: [0..4], [2..6]; window [0, 1, 1, 0].
        let x = Tensor::from_vec(vec![1, 6, 1], (0..6).map(|v| v as f32).collect()).unwrap();
        let w = Tensor::from_vec(vec![4], vec![0f32, 1.0, 1.0, 0.0]).unwrap();
        let stft = Stft { frame_step: 2, frame_length: 4, onesided: true };
        // Windowed frames [0, 1, 2, 0] and [0, 3, 4, 0]: bins 0..=2.
        let y = run(stft.clone(), &[Some(&x), Some(&w)]);
        close(&y, &[3.0, 0.0, -2.0, -1.0, 1.0, 0.0, 7.0, 0.0, -4.0, -3.0, 1.0, 0.0]);
        let t = |s: &[usize]| TensorType::new(DType::F32, s.to_vec());
        assert_eq!(Op::from(stft.clone()).infer(&[Some(&t(&[2, 10, 1]))]).unwrap(), [t(&[2, 4, 3, 2])]);
        assert!(Op::from(stft.clone()).infer(&[Some(&t(&[2, 3, 1]))]).is_err());
        assert!(Op::from(stft).infer(&[Some(&t(&[2, 10, 1])), Some(&t(&[5]))]).is_err());
    }
}
