//! Less common attributes and degenerate sizes of every family.

use crate::*;

/// Less common attributes and degenerate sizes of every family.
pub(crate) fn edge_cases(b: &mut Builder) {
    use DType::*;
    // Elementwise: many merged broadcast dimensions, bool and u8 operands,
    // casts between unusual types, quantization ties and saturation.
    let fam = "elementwise";
    let x = b.data(F32, &[2, 1, 3, 1, 2, 1, 3]);
    let y = b.data(F32, &[1, 2, 1, 3, 1, 2, 1]);
    b.add(fam, "Add alternating broadcast rank 7", Binary::new(BinaryKind::Add), vec![Some(x), Some(y)], Pick::Sample(2));
    let c = b.indices(Bool, &[4, 5], 0, 2);
    let x = b.indices(Bool, &[5], 0, 2);
    let y = b.indices(Bool, &[4, 1], 0, 2);
    b.add(fam, "Where bool", Where, vec![Some(c), Some(x), Some(y)], Pick::Sample(1));
    let x = b.indices(U8, &[3, 7], 0, 256);
    let y = b.indices(U8, &[7], 0, 256);
    b.add(fam, "Less u8", Compare::new(CompareKind::Less), vec![Some(x.clone()), Some(y.clone())], Pick::Sample(1));
    b.add(fam, "Sub u8 wrapping", Binary::new(BinaryKind::Sub), vec![Some(x), Some(y)], Pick::Sample(1));
    let h = b.uniform(F16, &[17], -70000.0, 70000.0);
    for to in [I16, U16, U64, Bool, I8] {
        b.add(fam, format!("Cast f16 to {to}"), Cast::new(to), vec![Some(h.clone())], Pick::Sample(1));
    }
    let u = b.indices(U64, &[9], 0, 1 << 40);
    b.add(fam, "Cast u64 to f32", Cast::new(F32), vec![Some(u.clone())], Pick::Sample(1));
    b.add(fam, "Cast u64 to i16", Cast::new(I16), vec![Some(u)], Pick::Sample(1));
    let ties: Vec<f32> = (-12..12).map(|i| i as f32 * 0.5 * 0.1).chain([100.0, -100.0, f32::NAN]).collect();
    let ties = Tensor::from_vec(vec![ties.len()], ties).unwrap();
    let s = Tensor::from_vec(vec![], vec![0.1f32]).unwrap();
    b.add(
        fam,
        "QuantizeLinear ties and saturation i8",
        QuantizeLinear { axis: 0, block_size: 0, output_dtype: I8 },
        vec![Some(ties.clone()), Some(s.clone())],
        Pick::Sample(1),
    );
    let z = Tensor::from_vec(vec![], vec![250u8]).unwrap();
    b.add(
        fam,
        "QuantizeLinear ties and saturation u8",
        QuantizeLinear { axis: 0, block_size: 0, output_dtype: U8 },
        vec![Some(ties), Some(s), Some(z)],
        Pick::Sample(1),
    );

    // Movement: negative steps on several axes, rank-5 resize, rank
    // increasing expand, GatherND with two batch dims, reflect pads on 4-D.
    let fam = "movement";
    let x = b.data(F32, &[5, 6, 7]);
    b.add(
        fam,
        "Slice negative steps two axes",
        slice(&[0, 2], &[-1, 5], &[i64::MIN, 0], &[-2, -3]),
        vec![Some(x)],
        Pick::Sample(2),
    );
    let x = b.data(F16, &[2, 3, 4, 5]);
    b.add(fam, "Slice empty f16", half(slice(&[1], &[2], &[2], &[1])), vec![Some(x)], Pick::Sample(1));
    let x = b.data(F32, &[3, 1]);
    b.add(fam, "Expand rank 4", Expand { shape: vec![2, 1, 3, 4] }, vec![Some(x)], Pick::Sample(2));
    let x = b.data(F32, &[2, 3, 4, 5]);
    let i = b.indices(I64, &[2, 3, 2, 1], 0, 4);
    b.add(fam, "GatherND batch_dims 2", GatherND { batch_dims: 2 }, vec![Some(x), Some(i)], Pick::Sample(2));
    let x = b.data(F32, &[3, 9]);
    let i = b.indices(I32, &[2, 2], -9, 9);
    b.add(fam, "Gather last axis 2-D index", Gather { axis: 1 }, vec![Some(x), Some(i)], Pick::Sample(2));
    let x = b.data(F16, &[1, 2, 4, 5]);
    b.add(
        fam,
        "Pad reflect 4-D f16",
        half(Pad { pads: vec![0, 0, 3, 1, 0, 1, 2, 4], mode: PadMode::Reflect }),
        vec![Some(x)],
        Pick::Sample(2),
    );
    let x = b.data(I32, &[3, 4]);
    b.add(fam, "Pad wrap negative i32", Pad { pads: vec![2, -1, 1, 3], mode: PadMode::Wrap }, vec![Some(x)], Pick::Sample(2));
    let x = b.data(F32, &[1, 2, 3, 4, 3]);
    let r =
        resize(ResizeMode::Linear, CoordinateMode::HalfPixel, NearestMode::Floor, &[1.0, 1.0, 2.0, 0.75, 1.5], &[1, 2, 6, 3, 4]);
    b.add(fam, "Resize linear 5-D", r, vec![Some(x.clone())], Pick::Sample(2));
    let r = resize(
        ResizeMode::Nearest,
        CoordinateMode::Asymmetric,
        NearestMode::Floor,
        &[1.0, 1.0, 2.0, 0.75, 1.5],
        &[1, 2, 6, 3, 4],
    );
    b.add(fam, "Resize nearest 5-D", r, vec![Some(x)], Pick::Sample(2));
    let x = b.data(F32, &[7]);
    let r = resize(ResizeMode::Linear, CoordinateMode::AlignCorners, NearestMode::Floor, &[1.6], &[11]);
    b.add(fam, "Resize linear 1-D align corners", r, vec![Some(x)], Pick::Sample(2));
    let idx = Tensor::from_vec(vec![3], vec![2i32, -1, 9]).unwrap();
    let values = b.data(F16, &[2]);
    b.add(fam, "OneHot last axis f16", half(OneHot { depth: 5, axis: 1 }), vec![Some(idx), Some(values)], Pick::Sample(2));

    // Reduce: first axis, rows shorter than a warp, a 2-D BatchNorm, groups
    // of one, LRN of size 1, pools with ceil mode reaching into padding,
    // dilated max pool with indices, 1-D and 3-D average pools.
    let fam = "reduce";
    let x = b.uniform(F32, &[7, 3, 2], -3.0, 3.0);
    b.add(fam, "Softmax first axis", Softmax::new(0), vec![Some(x)], Pick::Sample(4));
    let x = b.data(F32, &[40, 3]);
    b.add(fam, "ReduceMean short rows", Reduce::new(ReduceKind::Mean, vec![1], true), vec![Some(x)], Pick::Sample(4));
    let x = b.data(F32, &[5, 4]);
    let (sc, bb, m, v) = (b.uniform(F32, &[4], 0.5, 1.5), b.data(F32, &[4]), b.data(F32, &[4]), b.uniform(F32, &[4], 0.1, 2.0));
    b.add(fam, "BatchNorm 2-D", BatchNorm::new(1e-3), vec![Some(x), Some(sc), Some(bb), Some(m), Some(v)], Pick::Sample(2));
    let x = b.data(F32, &[2, 4, 3, 3]);
    let (sc, bb) = (b.uniform(F32, &[1], 0.5, 1.5), b.data(F32, &[1]));
    b.add(fam, "GroupNorm one group", GroupNorm::new(1, 1e-5), vec![Some(x), Some(sc), Some(bb)], Pick::Sample(2));
    let x = b.data(F32, &[1, 5, 2, 2]);
    b.add(fam, "LRN size 1", Lrn::new(1, 1e-1, 0.75, 1.0), vec![Some(x)], Pick::Sample(1));
    let x = b.data(F32, &[1, 1, 6, 6]);
    let mut p = Pool::new(PoolKind::Average { count_include_pad: true }, vec![3, 3]);
    p.strides = vec![2, 2];
    p.pads = vec![1, 1, 1, 1];
    p.ceil_mode = true;
    b.add(fam, "AveragePool ceil into padding", p, vec![Some(x.clone())], Pick::Sample(2));
    let mut p = Pool::new(PoolKind::Max, vec![2, 2]);
    p.dilations = vec![2, 2];
    p.strides = vec![1, 2];
    p.indices = true;
    b.add(fam, "MaxPool dilated indices", p, vec![Some(x)], Pick::Sample(2));
    let x = b.data(F16, &[2, 3, 10]);
    let mut p = Pool::new(PoolKind::Average { count_include_pad: false }, vec![4]);
    p.strides = vec![3];
    p.pads = vec![2, 1];
    b.add(fam, "AveragePool 1-D f16", half(p), vec![Some(x)], Pick::Sample(2));
    let x = b.data(F32, &[1, 2, 3, 4, 5]);
    b.add(
        fam,
        "GlobalAveragePool 3-D",
        Pool::new(PoolKind::Average { count_include_pad: false }, vec![3, 4, 5]),
        vec![Some(x)],
        Pick::Sample(3),
    );

    // Attention: one head, one query (a decode step), a per-head mask.
    let fam = "attention";
    let q = b.data(F32, &[2, 1, 16]);
    let k = b.data(F32, &[2, 9, 16]);
    let v = b.data(F32, &[2, 9, 24]);
    let m: Vec<f32> = (0..2 * 9).map(|i| if i % 7 == 3 { f32::NEG_INFINITY } else { 0.0 }).collect();
    let mask = Tensor::from_vec(vec![2, 1, 1, 9], m).unwrap();
    let op = Attention {
        num_heads: 1,
        q_scale: None,
        k_scale: None,
        score_scale: Some(ScoreScale::Div(4.0)),
        mask: true,
        nan_to_zero: false,
    };
    b.add(fam, "Attention decode step, one head", op, vec![Some(q), Some(k), Some(v), Some(mask)], Pick::Sample(3));
    let q = b.data(F32, &[1, 6, 8]);
    let k = b.data(F32, &[1, 6, 8]);
    let v = b.data(F32, &[1, 6, 8]);
    let mask = b.data(F32, &[1, 4, 1, 6]);
    let op = Attention { num_heads: 4, q_scale: None, k_scale: None, score_scale: None, mask: true, nan_to_zero: true };
    b.add(fam, "Attention per-head mask, head dim 2", op, vec![Some(q), Some(k), Some(v), Some(mask)], Pick::Sample(3));

    // GEMM: vector operands, K = 1, beta = 0 with a C, a broadcast A batch.
    let fam = "gemm";
    let a = b.data(F32, &[19]);
    let w = b.data(F32, &[19, 33]);
    b.add(fam, "MatMul vector x matrix", MatMul {}, vec![Some(a), Some(w)], Pick::Sample(4));
    let a = b.data(F16, &[2, 21, 19]);
    let w = b.data(F16, &[19]);
    b.add(fam, "MatMul matrix x vector f16", half(MatMul {}), vec![Some(a), Some(w)], Pick::Sample(4));
    let a = b.data(F32, &[9, 1]);
    let w = b.data(F32, &[1, 14]);
    let c = b.data(F32, &[9, 14]);
    b.add(fam, "Gemm K=1 beta=0", gemm(2.0, 0.0, false, false), vec![Some(a), Some(w), Some(c)], Pick::Sample(4));
    let a = b.data(F16, &[24, 32]);
    let w = b.data(F16, &[2, 3, 32, 16]);
    b.add(fam, "MatMul broadcast A f16", half(MatMul {}), vec![Some(a), Some(w)], Pick::Sample(6));

    // Conv: stride larger than the kernel, a window larger than the input
    // (padding), a strided 1x1 (not the pointwise gather), channels not a
    // multiple of any tile, a dilated 1-D transposed conv.
    let fam = "conv";
    let x = b.data(F32, &[2, 3, 9, 9]);
    let w = b.uniform(F32, &[17, 3, 2, 2], -0.5, 0.5);
    b.add(
        fam,
        "Conv stride 3 > kernel",
        Conv::new_2d([2, 2], [3, 3], [0; 4], [1, 1], 1),
        vec![Some(x), Some(w)],
        Pick::Sample(4),
    );
    let x = b.data(F16, &[1, 4, 3, 2]);
    let w = b.uniform(F16, &[20, 4, 5, 5], -0.5, 0.5);
    b.add(
        fam,
        "Conv window larger than input f16",
        half(Conv::new_2d([5, 5], [1, 1], [2, 2, 2, 2], [1, 1], 1)),
        vec![Some(x), Some(w)],
        Pick::Sample(4),
    );
    let x = b.data(F32, &[2, 20, 7, 7]);
    let w = b.uniform(F32, &[36, 20, 1, 1], -0.5, 0.5);
    let bias = b.data(F32, &[36]);
    b.add(
        fam,
        "Conv 1x1 stride 2",
        Conv::new_2d([1, 1], [2, 2], [0; 4], [1, 1], 1),
        vec![Some(x), Some(w), Some(bias)],
        Pick::Sample(4),
    );
    let x = b.data(F32, &[1, 6, 11]);
    let w = b.uniform(F32, &[6, 5, 3], -0.5, 0.5);
    let ct = ConvTranspose {
        kernel_shape: vec![3],
        strides: vec![3],
        pads: vec![1, 2],
        dilations: vec![2],
        group: 1,
        output_padding: vec![1],
    };
    b.add(fam, "ConvTranspose 1-D dilated", ct, vec![Some(x), Some(w)], Pick::Sample(2));
}
