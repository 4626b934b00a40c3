//! The fast f32 mode (`trtc_runtime::math`) stays within its stated bounds
//! of the exact reference, and takes its fast paths (each case checks that
//! some result differs from the reference, so a fast path that silently
//! fell back would fail here).

use trtc_runtime::math::{self, Math};
use trtc_runtime::ops::elementwise::{Unary, UnaryKind};
use trtc_runtime::ops::linalg::{Gemm, MatMul};
use trtc_runtime::parallel::Threads;
use trtc_runtime::{Op, Tensor};

mod common;
use common::values;

/// Distance in units in the last place between two finite f32 of one sign.
fn ulps(a: f32, b: f32) -> u32 {
    (a.to_bits() as i64 - b.to_bits() as i64).unsigned_abs() as u32
}

#[test]
fn exp_is_within_2_ulp_over_the_normal_range() {
    let mut worst = 0;
    let (lo, hi) = (-87.33f32, 88.72f32);
    let steps = 1_000_000;
    for i in 0..=steps {
        let x = lo + (hi - lo) * i as f32 / steps as f32;
        let want = (x as f64).exp() as f32;
        worst = worst.max(ulps(math::exp(x), want));
    }
    assert!(worst <= 2, "worst error {worst} ulp");
    // Beyond the range: infinity, and values that flush toward zero.
    assert_eq!(math::exp(88.73), f32::INFINITY);
    assert!(math::exp(-100.0) < 1e-43);
}

#[test]
fn fast_sigmoid_is_within_4_ulp_of_the_reference() {
    let x = Tensor::from_vec(vec![200_001], (0..=200_000).map(|i| -50.0 + i as f32 * 5e-4).collect()).unwrap();
    let op: Op = Unary::new(UnaryKind::Sigmoid).into();
    let exact = op.eval_owned(&[Some(&x)]).unwrap().remove(0);
    let fast = math::install(Math::Fast, || op.eval_owned(&[Some(&x)])).unwrap().remove(0);
    let (e, f) = (exact.as_slice::<f32>().unwrap(), fast.as_slice::<f32>().unwrap());
    let worst = e.iter().zip(f).map(|(&a, &b)| ulps(a, b)).max().unwrap();
    assert!(worst <= 4, "worst error {worst} ulp");
    assert!(e.iter().zip(f).any(|(a, b)| a != b), "the fast Sigmoid was not used");
}

/// |fast - exact| <= 2·k·ε·Σ|a·b| (+ the same for beta·C), elementwise;
/// some element must differ (the reordered path was taken).
fn check_product(op: Op, inputs: &[Option<&Tensor>], k: usize, bound_scale: &[f32]) {
    check_product_bound(op, inputs, k, bound_scale, true)
}

/// [`check_product`], where the fast path may also give the exact bits
/// (the packed kernel sums in the same order as `matrixmultiply` where
/// their blocks agree); that it runs is checked in `sgemm`'s unit tests.
fn check_product_bound(op: Op, inputs: &[Option<&Tensor>], k: usize, bound_scale: &[f32], must_differ: bool) {
    let exact = op.eval_owned(inputs).unwrap().remove(0);
    let pool = Threads::new(3).unwrap();
    let fast = pool.install(|| math::install(Math::Fast, || op.eval_owned(inputs))).unwrap().remove(0);
    let fast1 = math::install(Math::Fast, || op.eval_owned(inputs)).unwrap().remove(0);
    assert!(fast.bytes() == fast1.bytes(), "fast results depend on the thread count");
    let (e, f) = (exact.as_slice::<f32>().unwrap(), fast.as_slice::<f32>().unwrap());
    for ((&e, &f), &s) in e.iter().zip(f).zip(bound_scale) {
        let bound = 2.0 * k as f32 * f32::EPSILON * s + f32::MIN_POSITIVE;
        assert!((e - f).abs() <= bound, "{}: exact {e}, fast {f}, bound {bound}", op.name());
    }
    assert!(!must_differ || e.iter().zip(f).any(|(a, b)| a != b), "{}: the fast path was not used", op.name());
}

/// Σ_k |a[i,k]·b[k,j]| for row-major a [m,k] and b given by strides.
fn abs_products(a: &[f32], b: &[f32], m: usize, k: usize, n: usize, b_at: impl Fn(usize, usize) -> usize) -> Vec<f32> {
    let mut out = vec![0f32; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k).map(|p| (a[i * k + p] * b[b_at(p, j)]).abs()).sum();
        }
    }
    out
}

#[test]
fn small_batch_products_are_within_the_reordering_bound() {
    for (m, k, n) in [(1, 1029, 1000), (2, 300, 77), (4, 16, 513), (3, 37, 40)] {
        // MatMul: B [k, n] row-major, the row-update path.
        let (a, b) = (values(&[m, k], 1), values(&[k, n], 2));
        let s = abs_products(a.as_slice().unwrap(), b.as_slice().unwrap(), m, k, n, |p, j| p * n + j);
        check_product(MatMul {}.into(), &[Some(&a), Some(&b)], k, &s);
        // Gemm with B [n, k] (trans_b) and a bias: the dot-product path.
        let (bt, c) = (values(&[n, k], 3), values(&[n], 4));
        let mut s = abs_products(a.as_slice().unwrap(), bt.as_slice().unwrap(), m, k, n, |p, j| j * k + p);
        for (i, v) in s.iter_mut().enumerate() {
            *v = 0.5 * *v + 2.0 * c.as_slice::<f32>().unwrap()[i % n].abs();
        }
        let gemm = Gemm { alpha: 0.5, beta: 2.0, trans_a: false, trans_b: true };
        check_product(gemm.into(), &[Some(&a), Some(&bt), Some(&c)], k, &s);
    }
}

#[test]
fn tanh_is_within_4_ulp_of_libm() {
    let mut worst = 0;
    for i in 0..=400_000 {
        let x = -20.0 + i as f32 * 1e-4;
        let want = (x as f64).tanh() as f32;
        worst = worst.max(ulps(math::tanh(x), want));
    }
    // Tiny arguments, where tanh(x) is x.
    for x in [1e-30f32, -3e-8, 1e-4, -0.299_999, 0.3] {
        worst = worst.max(ulps(math::tanh(x), (x as f64).tanh() as f32));
    }
    assert!(worst <= 4, "worst error {worst} ulp");
    assert_eq!(math::tanh(f32::INFINITY), 1.0);
    assert_eq!(math::tanh(f32::NEG_INFINITY), -1.0);
    assert!(math::tanh(f32::NAN).is_nan());
}

/// The fast gate math of LSTM, GRU and RNN stays within 1e-5 of the f64
/// reference over 12 steps, in every cell variant: both directions, clip,
/// peepholes, coupled input and forget gates, linear_before_reset, other
/// activations, sequence lengths, batch 2 (the small-batch product) and 7.
#[test]
fn fast_recurrent_layers_are_within_1e_5_of_the_reference() {
    use trtc_runtime::ops::linalg::{Recurrent, RecurrentActivation as A, RecurrentCell as C, RecurrentDirection as D};
    let (steps, input, hidden) = (12, 5, 19);
    let cells = [
        (C::Lstm { input_forget: false }, vec![A::Sigmoid, A::Tanh, A::Tanh], None, true),
        (C::Lstm { input_forget: true }, vec![A::HardSigmoid { alpha: 0.2, beta: 0.5 }, A::Tanh, A::Softsign], Some(0.7), true),
        (C::Lstm { input_forget: false }, vec![A::Sigmoid, A::Tanh, A::Tanh], Some(2.0), false),
        (C::Gru { linear_before_reset: false }, vec![A::Sigmoid, A::Tanh], None, false),
        (C::Gru { linear_before_reset: true }, vec![A::Sigmoid, A::Tanh], Some(1.5), false),
        (C::Rnn, vec![A::Tanh], None, false),
        (C::Rnn, vec![A::Sigmoid], Some(0.5), false),
    ];
    for (cell, acts, clip, peepholes) in cells {
        for (direction, batch) in [(D::Bidirectional, 2), (D::Reverse, 7), (D::Forward, 1)] {
            let dirs = direction.count();
            let gates = match cell {
                C::Lstm { .. } => 4,
                C::Gru { .. } => 3,
                C::Rnn => 1,
            };
            let activations = acts.iter().copied().cycle().take(acts.len() * dirs).collect();
            let op: Op = Recurrent { cell, direction, hidden_size: hidden, activations, clip, batch_major: false }.into();
            let x = values(&[steps, batch, input], 1);
            let w = values(&[dirs, gates * hidden, input], 2);
            let r = values(&[dirs, gates * hidden, hidden], 3);
            let b = values(&[dirs, 2 * gates * hidden], 4);
            let lens = Tensor::from_vec(vec![batch], (0..batch).map(|i| (steps - i % 3) as i32).collect::<Vec<i32>>()).unwrap();
            let h0 = values(&[dirs, batch, hidden], 5);
            let c0 = values(&[dirs, batch, hidden], 6);
            let p = values(&[dirs, 3 * hidden], 7);
            let mut inputs = vec![Some(&x), Some(&w), Some(&r), Some(&b), Some(&lens), Some(&h0)];
            if let C::Lstm { .. } = cell {
                inputs.push(Some(&c0));
                inputs.push(peepholes.then_some(&p));
            }
            let exact = op.eval_owned(&inputs).unwrap();
            let fast = math::install(Math::Fast, || op.eval_owned(&inputs)).unwrap();
            let mut differs = false;
            for (e, f) in exact.iter().zip(&fast) {
                let (e, f) = (e.as_slice::<f32>().unwrap(), f.as_slice::<f32>().unwrap());
                for (&e, &f) in e.iter().zip(f) {
                    assert!((e - f).abs() <= 1e-5, "{cell:?} {direction:?} batch {batch}: exact {e}, fast {f}");
                    differs |= e != f;
                }
            }
            assert!(differs, "{cell:?} {direction:?}: the fast gate math was not used");
        }
    }
}

/// The in-place loops (fused multiply-adds where the CPU has FMA) keep the
/// scalar functions' bounds and special values.
#[test]
fn in_place_tanh_sigmoid_and_silu_keep_their_bounds() {
    let xs: Vec<f32> = (0..=400_000).map(|i| -20.0 + i as f32 * 1e-4).chain([1e-30, -3e-8, 0.3, -0.3]).collect();
    let (mut t, mut s, mut u) = (xs.clone(), xs.clone(), xs.clone());
    math::tanh_in_place(&mut t);
    math::sigmoid_in_place(&mut s);
    math::silu_in_place(&mut u);
    let (mut wt, mut ws, mut wu) = (0, 0, 0);
    for (i, &x) in xs.iter().enumerate() {
        let x64 = x as f64;
        let sig = 1.0 / (1.0 + (-x64).exp());
        wt = wt.max(ulps(t[i], x64.tanh() as f32));
        ws = ws.max(ulps(s[i], sig as f32));
        wu = wu.max(ulps(u[i], (x64 * sig) as f32));
    }
    assert!(wt <= 4 && ws <= 4 && wu <= 5, "worst ulp: tanh {wt}, sigmoid {ws}, silu {wu}");
    let mut special = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 200.0, -200.0];
    math::tanh_in_place(&mut special);
    assert!(special[0].is_nan() && special[1..] == [1.0, -1.0, 1.0, -1.0]);
    let mut special = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 200.0, -200.0];
    math::sigmoid_in_place(&mut special);
    assert!(special[0].is_nan() && special[1..] == [1.0, 0.0, 1.0, 0.0]);
}

/// Gelu in the fast mode against the exact op (libm's tanh and erf): the
/// tanh form differs by the vector tanh's few ulp, the erf form by its
/// approximation (absolute error below 1.5e-7), each scaled by x/2:
/// |fast - exact| <= |x|/2 · 8 ulp(1) + 2 ulp(exact). Both in the unary op
/// and as the in-place loops the fused epilogues call.
#[test]
fn fast_gelu_is_within_its_bound() {
    let xs: Vec<f32> = (0..=200_000).map(|i| -12.0 + i as f32 * 1.2e-4).chain([1e-30, -3e-8, 40.0, -40.0]).collect();
    let x = Tensor::from_vec(vec![xs.len()], xs.clone()).unwrap();
    type InPlace = fn(&mut [f32]);
    let loops: [(UnaryKind, InPlace); 2] =
        [(UnaryKind::GeluTanh, math::gelu_tanh_in_place), (UnaryKind::Gelu, math::gelu_in_place)];
    for (kind, in_place_loop) in loops {
        let op: Op = Unary { kind }.into();
        let exact = op.eval_owned(&[Some(&x)]).unwrap().remove(0);
        let fast = math::install(Math::Fast, || op.eval_owned(&[Some(&x)]).unwrap().remove(0));
        let mut in_place = xs.clone();
        in_place_loop(&mut in_place);
        let (exact, fast) = (exact.as_slice::<f32>().unwrap(), fast.as_slice::<f32>().unwrap());
        assert_eq!(fast, &in_place[..], "{kind:?}: the op and the loop compute alike");
        for (i, &x) in xs.iter().enumerate() {
            let bound = x.abs() / 2.0 * 8.0 * f32::EPSILON + 2.0 * f32::EPSILON * exact[i].abs() + f32::MIN_POSITIVE;
            assert!(
                (fast[i] - exact[i]).abs() <= bound,
                "{kind:?}, x = {x}: fast {} exact {} (bound {bound})",
                fast[i],
                exact[i]
            );
        }
        let mut special = [f32::NAN, f32::INFINITY, 0.0];
        in_place_loop(&mut special);
        assert!(special[0].is_nan() && special[1..] == [f32::INFINITY, 0.0], "{kind:?}: {special:?}");
    }
}

/// Whether this CPU runs the packed fast-mode kernel (`ops/linalg/sgemm.rs`).
fn has_packed_kernel() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[test]
fn large_products_are_within_the_reordering_bound() {
    if !has_packed_kernel() {
        eprintln!("skipped: 1 test (this CPU has no AVX2 and FMA, so the fast mode multiplies as the exact one)");
        return;
    }
    // Edge tiles, several k blocks, more columns than one packed block, and
    // few columns (the transposed small-batch path).
    for (m, k, n) in [(13, 300, 33), (40, 700, 70), (7, 5, 4200), (300, 50, 3)] {
        let (a, b) = (values(&[m, k], 11), values(&[k, n], 12));
        let s = abs_products(a.as_slice().unwrap(), b.as_slice().unwrap(), m, k, n, |p, j| p * n + j);
        check_product_bound(MatMul {}.into(), &[Some(&a), Some(&b)], k, &s, false);
        // Gemm with A stored transposed (the packed-A path), B transposed, alpha and beta.
        let (at, bt, c) = (values(&[k, m], 13), values(&[n, k], 14), values(&[n], 15));
        let a_rows: Vec<f32> = (0..m * k).map(|i| at.as_slice::<f32>().unwrap()[(i % k) * m + i / k]).collect();
        let mut s = abs_products(&a_rows, bt.as_slice().unwrap(), m, k, n, |p, j| j * k + p);
        for (i, v) in s.iter_mut().enumerate() {
            *v = 0.5 * *v + 2.0 * c.as_slice::<f32>().unwrap()[i % n].abs();
        }
        let gemm = Gemm { alpha: 0.5, beta: 2.0, trans_a: true, trans_b: true };
        check_product_bound(gemm.into(), &[Some(&at), Some(&bt), Some(&c)], k, &s, false);
    }
}

/// Convolutions through the packed im2col path: the bound of a product of
/// K = C/group · taps terms, Σ|w·x| being the same convolution of |w| and
/// |x| (plus |bias|, which the sums start from).
#[test]
fn fast_convolutions_are_within_the_reordering_bound() {
    use trtc_runtime::ops::linalg::Conv;
    if !has_packed_kernel() {
        eprintln!("skipped: 1 test (this CPU has no AVX2 and FMA, so the fast mode convolves as the exact one)");
        return;
    }
    let abs = |t: &Tensor| {
        Tensor::from_vec(t.shape().to_vec(), t.as_slice::<f32>().unwrap().iter().map(|v| v.abs()).collect()).unwrap()
    };
    let cases = [
        // (x shape, w shape, conv): a strided 7x7 stem, dilated grouped 3x3, 1-D, 3-D, ...
        (vec![2, 3, 20, 24], vec![16, 3, 7, 7], Conv::new_2d([7, 7], [2, 2], [3, 3, 3, 3], [1, 1], 1)),
        (vec![1, 8, 9, 11], vec![12, 4, 3, 3], Conv::new_2d([3, 3], [1, 1], [2, 1, 2, 0], [2, 2], 2)),
        (vec![1, 40, 30, 30], vec![70, 40, 3, 3], Conv::new_2d([3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1)),
        // Enough output positions for blocks of them on each of 3 threads.
        (vec![1, 4, 150, 150], vec![8, 4, 3, 3], Conv::new_2d([3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1)),
        // An empty input row whose padding still gives outputs (bias only).
        (vec![1, 3, 4, 0], vec![5, 3, 3, 3], Conv::new_2d([3, 3], [1, 1], [1, 2, 1, 2], [1, 1], 1)),
        // Depthwise (the fast mode fuses each tap's multiply and add), 5x5
        // and strided 3x3 with a channel multiplier of 2.
        (vec![2, 24, 20, 20], vec![24, 1, 5, 5], Conv::new_2d([5, 5], [1, 1], [2, 2, 2, 2], [1, 1], 24)),
        (vec![1, 6, 33, 33], vec![12, 1, 3, 3], Conv::new_2d([3, 3], [2, 2], [1, 0, 1, 1], [1, 1], 6)),
        // Pointwise, and 1x1 with stride 2.
        (vec![2, 24, 9, 9], vec![20, 24, 1, 1], Conv::new_2d([1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1)),
        (vec![1, 24, 9, 9], vec![20, 24, 1, 1], Conv::new_2d([1, 1], [2, 2], [0, 0, 0, 0], [1, 1], 1)),
        // Pointwise on planes large enough to go in blocks of positions.
        (vec![1, 48, 90, 90], vec![72, 48, 1, 1], Conv::new_2d([1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1)),
        (
            vec![2, 5, 37],
            vec![9, 5, 4],
            Conv { kernel_shape: vec![4], strides: vec![3], pads: vec![1, 2], dilations: vec![1], group: 1 },
        ),
        (
            vec![1, 3, 5, 6, 7],
            vec![4, 3, 2, 3, 3],
            Conv {
                kernel_shape: vec![2, 3, 3],
                strides: vec![1, 2, 1],
                pads: vec![0, 1, 1, 1, 0, 1],
                dilations: vec![1, 1, 1],
                group: 1,
            },
        ),
    ];
    for (i, (xs, ws, conv)) in cases.into_iter().enumerate() {
        let (x, w, b) = (values(&xs, 20 + i as u64), values(&ws, 30 + i as u64), values(&ws[..1], 40 + i as u64));
        let k = ws[1..].iter().product::<usize>() + 1;
        let op: Op = conv.into();
        let scale = op.eval_owned(&[Some(&abs(&x)), Some(&abs(&w)), Some(&abs(&b))]).unwrap().remove(0);
        check_product_bound(op, &[Some(&x), Some(&w), Some(&b)], k, scale.as_slice().unwrap(), false);
    }
}

/// Softmax in the fast mode: outputs the exact mode gives as subnormal
/// numbers (masked scores, as GPT-2's causal mask makes them) are 0, no
/// output is subnormal, and every other output is bit-identical (the same
/// exponential, the same f64 sum up to the dropped terms, which are below
/// its last bit). Rows along the last axis and along a middle axis.
#[test]
fn fast_softmax_flushes_only_what_would_be_subnormal() {
    use trtc_runtime::ops::reduce::Softmax;
    let n = 16;
    let mut xs = values(&[4 * n * 3], 7).as_slice::<f32>().unwrap().to_vec();
    // Masked entries as exporters write them (the most negative f32 or
    // -1e9 added), and one entry just above the cut-off.
    for (i, x) in xs.iter_mut().enumerate() {
        match i % 5 {
            0 => *x = f32::MIN,
            1 => *x -= 1e9,
            2 if i % 3 == 0 => *x -= 80.0,
            _ => {}
        }
    }
    for (shape, axis) in [(vec![4, 3, n], 2), (vec![4, n, 3], 1)] {
        let x = Tensor::from_vec(shape.clone(), xs.clone()).unwrap();
        let op: Op = Softmax::new(axis).into();
        let exact = op.eval_owned(&[Some(&x)]).unwrap().remove(0);
        let fast = math::install(Math::Fast, || op.eval_owned(&[Some(&x)])).unwrap().remove(0);
        let (e, f) = (exact.as_slice::<f32>().unwrap(), fast.as_slice::<f32>().unwrap());
        assert!(e.iter().any(|v| v.is_subnormal()), "{shape:?}: the case has no subnormal output to flush");
        for (i, (&e, &f)) in e.iter().zip(f).enumerate() {
            assert!(!f.is_subnormal(), "{shape:?} [{i}]: fast output {f:e} is subnormal");
            if f == 0.0 {
                assert!(e < 2e-38 * n as f32, "{shape:?} [{i}]: dropped {e:e}");
            } else {
                assert_eq!(e.to_bits(), f.to_bits(), "{shape:?} [{i}]: exact {e:e}, fast {f:e}");
            }
        }
        assert!(f.iter().any(|&v| v > 0.0 && v < 1e-30), "{shape:?}: the entry above the cut-off was dropped");
    }
}
