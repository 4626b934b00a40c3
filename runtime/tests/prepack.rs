//! Convolutions whose weights are engine constants read them from a copy
//! packed once (`trtc_runtime::prepack`): the fast mode's outputs are
//! bit-identical to reading the weights in place, on one thread and on
//! several, and the copy is made on the first run only.

use trtc_runtime::math::{self, Math};
use trtc_runtime::ops::linalg::Conv;
use trtc_runtime::parallel::Threads;
use trtc_runtime::prepack::{with_weights, PackedWeights};
use trtc_runtime::tensor::TensorView;
use trtc_runtime::{Op, Tensor};

mod common;
use common::values;

/// The packed kernel runs on this CPU (else nothing is packed and the
/// check is skipped, with a note).
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

/// Runs `conv` on x, w, b in the fast mode with w read in place, then with
/// w a constant of a weights section (on 1 and 2 threads, twice each), and
/// compares the output bits.
fn same_bits_with_packed_weights(conv: Conv, x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> usize {
    let op: Op = conv.into();
    let in_place = math::install(Math::Fast, || op.eval_owned(&[Some(x), Some(w), b])).unwrap();
    // The weights section: some other constant first, then w.
    let mut section = vec![0u8; 256];
    section.extend_from_slice(w.bytes());
    let w_const = TensorView { dtype: w.dtype(), shape: w.shape(), bytes: &section[256..] };
    let cache = PackedWeights::new();
    let mut sizes = Vec::new();
    for threads in [1, 2, 1, 2] {
        let pool = Threads::new(threads).unwrap();
        let got = pool.install(|| {
            with_weights(&cache, &section, || {
                math::install(Math::Fast, || op.eval_views(&[Some(x.view()), Some(w_const), b.map(|b| b.view())]))
            })
        });
        let got = got.unwrap();
        assert!(got[0].bytes() == in_place[0].bytes(), "{op:?} on {threads} threads: packed weights change the output");
        sizes.push(cache.bytes());
    }
    assert!(sizes.iter().all(|&s| s == sizes[0]), "packed more than once: {sizes:?}");
    sizes[0]
}

#[test]
fn convolutions_with_packed_weights_give_the_same_bits() {
    if !has_packed_kernel() {
        eprintln!("skipped: 6 cases (no packed f32 kernel on this CPU)");
        return;
    }
    let cases = [
        // im2col written packed (3x3, padded; rows too short for the
        // direct path), with a bias; several k blocks.
        (vec![1, 40, 7, 9], vec![70, 40, 3, 3], Conv::new_2d([3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1), true),
        // Grouped, strided.
        (vec![2, 32, 13, 11], vec![80, 16, 3, 3], Conv::new_2d([3, 3], [2, 2], [1, 1, 1, 1], [1, 1], 2), false),
        // Pointwise: the input planes are B as they are.
        (vec![2, 300, 9, 9], vec![100, 300, 1, 1], Conv::new_2d([1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1), true),
        // Pointwise on planes that go in blocks of output positions.
        (vec![1, 48, 90, 90], vec![72, 48, 1, 1], Conv::new_2d([1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1), true),
        // Pointwise, grouped.
        (vec![1, 64, 14, 14], vec![96, 32, 1, 1], Conv::new_2d([1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 2), true),
        // Strided 1x1 (the packed path reads the input planes in place).
        (vec![1, 48, 21, 21], vec![64, 48, 1, 1], Conv::new_2d([1, 1], [2, 2], [0, 0, 0, 0], [1, 1], 1), false),
    ];
    for (i, (xs, ws, conv, bias)) in cases.into_iter().enumerate() {
        let (x, w) = (values(&xs, 3 * i as u64 + 1), values(&ws, 3 * i as u64 + 2));
        let b = bias.then(|| values(&ws[..1], 3 * i as u64 + 3));
        let bytes = same_bits_with_packed_weights(conv, &x, &w, b.as_ref());
        assert!(bytes >= w.bytes().len(), "case {i}: the weights were not packed ({bytes} bytes)");
    }
}
