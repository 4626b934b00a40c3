//! Layers split over a context's threads give bit-identical results for any
//! thread count: each case runs one op on one thread, then on 2 and 3, and
//! compares the output bits. Sizes are chosen large enough that every split
//! path runs (GEMM blocks by columns and by rows, im2col by channel blocks,
//! depthwise and pooling by planes), and odd so that blocks are uneven.

use trtc_runtime::ops::elementwise::UnaryKind;
use trtc_runtime::ops::fused::{Instr, Pointwise, PointwiseBinary};
use trtc_runtime::ops::linalg::{Conv, Gemm, MatMul, Pool, PoolKind};
use trtc_runtime::parallel::Threads;
use trtc_runtime::{Op, Tensor};

mod common;
use common::values;

fn same_bits_on_any_thread_count(op: Op, inputs: &[Option<&Tensor>]) {
    let one = op.eval_owned(inputs).unwrap();
    for threads in [2, 3] {
        let pool = Threads::new(threads).unwrap();
        let before = trtc_runtime::parallel::splits();
        let many = pool.install(|| op.eval_owned(inputs)).unwrap();
        assert!(trtc_runtime::parallel::splits() > before, "{}: nothing was split over {threads} threads", op.name());
        assert_eq!(one.len(), many.len());
        for (a, b) in one.iter().zip(&many) {
            assert_eq!(a.ty(), b.ty());
            assert!(a.bytes() == b.bytes(), "{}: {threads} threads differ from one", op.name());
        }
    }
}

#[test]
fn gemm_split_by_columns_and_by_rows() {
    // Wide: split by columns. Tall: split by rows.
    for (m, k, n) in [(37, 301, 1029), (1031, 257, 45)] {
        let (a, b) = (values(&[m, k], 1), values(&[k, n], 2));
        same_bits_on_any_thread_count(MatMul {}.into(), &[Some(&a), Some(&b)]);
    }
    // Transposed operands and a bias, through Gemm.
    let (a, b, c) = (values(&[263, 517], 3), values(&[611, 263], 4), values(&[611], 5));
    let gemm = Gemm { alpha: 0.5, beta: 2.0, trans_a: true, trans_b: true };
    same_bits_on_any_thread_count(gemm.into(), &[Some(&a), Some(&b), Some(&c)]);
}

#[test]
fn convolutions_split_their_im2col_and_planes() {
    // im2col + GEMM, padded and strided.
    let x = values(&[2, 67, 29, 31], 6);
    let w = values(&[45, 67, 3, 3], 7);
    let b = values(&[45], 8);
    let conv = Conv::new_2d([3, 3], [2, 1], [1, 1, 1, 0], [1, 1], 1);
    same_bits_on_any_thread_count(conv.into(), &[Some(&x), Some(&w), Some(&b)]);
    // Pointwise, in blocks of output positions.
    let (xp, wp, bp) = (values(&[1, 48, 90, 90], 11), values(&[72, 48, 1, 1], 12), values(&[72], 13));
    let pointwise = Conv::new_2d([1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1);
    same_bits_on_any_thread_count(pointwise.into(), &[Some(&xp), Some(&wp), Some(&bp)]);
    // Depthwise, dilated.
    let w = values(&[67, 1, 5, 5], 9);
    let conv = Conv::new_2d([5, 5], [1, 1], [4, 4, 4, 4], [2, 2], 67);
    same_bits_on_any_thread_count(conv.into(), &[Some(&x), Some(&w), None]);
}

#[test]
fn pooling_splits_its_planes() {
    let x = values(&[3, 61, 33, 35], 10);
    for kind in [PoolKind::Max, PoolKind::Average { count_include_pad: false }] {
        let mut pool = Pool::new(kind, vec![3, 3]);
        pool.strides = vec![2, 2];
        pool.pads = vec![1, 1, 1, 1];
        same_bits_on_any_thread_count(pool.into(), &[Some(&x)]);
    }
}

#[test]
fn pointwise_programs_split_their_blocks() {
    // y = sigmoid(a * 2 + b) - a, b broadcast along rows; 1000.5 blocks.
    let program = vec![
        Instr::Input(0),
        Instr::Const(2.0),
        Instr::Binary(PointwiseBinary::Mul, 0, 1),
        Instr::Input(1),
        Instr::Binary(PointwiseBinary::Add, 2, 3),
        Instr::Unary(UnaryKind::Sigmoid, 4),
        Instr::Binary(PointwiseBinary::Sub, 5, 0),
    ];
    let (a, b) = (values(&[1025, 1000], 11), values(&[1000], 12));
    same_bits_on_any_thread_count(Pointwise { program }.into(), &[Some(&a), Some(&b)]);
}
