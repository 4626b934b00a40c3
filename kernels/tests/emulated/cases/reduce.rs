//! Reductions, softmax, normalizations and pools.

use crate::*;

pub(crate) fn reduce_cases(b: &mut Builder) {
    use DType::*;
    use ReduceKind::*;
    let fam = "reduce";
    let shapes: [(&[usize], &[usize]); 5] =
        [(&[3, 5, 37], &[2]), (&[3, 37, 5], &[1]), (&[4, 3, 5], &[0, 2]), (&[3, 4, 5, 6], &[0, 2, 3]), (&[2, 3, 4, 5], &[1, 3])];
    for (si, (shape, axes)) in shapes.iter().enumerate() {
        for kind in [Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare] {
            let (lo, hi) = match kind {
                Prod => (0.8, 1.25),
                LogSum => (0.1, 2.0),
                _ => (-2.0, 2.0),
            };
            let x = b.uniform(F32, shape, lo, hi);
            let pick =
                if si == 2 && matches!(kind, Sum | LogSumExp) { Pick::All } else { Pick::Sample(if si < 2 { 3 } else { 1 }) };
            b.add(
                fam,
                format!("Reduce{kind:?} {shape:?} axes {axes:?}"),
                Reduce::new(kind, axes.to_vec(), si % 2 == 0),
                vec![Some(x)],
                pick,
            );
        }
    }
    let mut v = b.data(F32, &[3, 37, 5]).to_f64_vec();
    v[7] = f64::NAN;
    let x = Tensor::from_vec(vec![3, 37, 5], v.iter().map(|&v| v as f32).collect::<Vec<_>>()).unwrap();
    b.add(fam, "ReduceMax with NaN", Reduce::new(Max, vec![1], false), vec![Some(x)], Pick::Sample(3));
    let x = b.data(F16, &[6, 50]);
    b.add(fam, "ReduceMean f16", half(Reduce::new(Mean, vec![1], true)), vec![Some(x)], Pick::Sample(3));
    let x = b.data(F16, &[4, 33, 3]);
    b.add(fam, "ReduceSumSquare f16 middle axis", half(Reduce::new(SumSquare, vec![1], false)), vec![Some(x)], Pick::Sample(3));
    let x = b.data(F32, &[3, 3001]);
    b.add(fam, "ReduceSum long rows", Reduce::new(Sum, vec![1], false), vec![Some(x)], Pick::Sample(4));
    let x = b.data(F32, &[1100, 3]);
    b.add(fam, "ReduceMax long columns", Reduce::new(Max, vec![0], false), vec![Some(x)], Pick::Sample(4));
    let x = b.uniform(F32, &[2, 2500], -5.0, 5.0);
    b.add(fam, "Softmax long rows", Softmax::new(1), vec![Some(x)], Pick::Sample(4));
    let x = b.data(F32, &[4, 5]);
    b.add(fam, "ReduceL2 all axes", Reduce::new(L2, vec![], true), vec![Some(x)], Pick::Sample(2));
    // ArgMax/ArgMin with ties and NaN, both index orders.
    for (kind, last) in [(ArgKind::Max, false), (ArgKind::Max, true), (ArgKind::Min, false), (ArgKind::Min, true)] {
        let mut v: Vec<f32> = (0..4 * 33 * 3).map(|_| (b.rng.unit() * 4.0).floor() as f32).collect();
        v[5] = f32::NAN;
        v[100] = f32::NAN;
        v[103] = f32::NAN;
        let x = Tensor::from_vec(vec![4, 33, 3], v.clone()).unwrap();
        b.add(
            fam,
            format!("Arg{kind:?} middle last={last}"),
            ArgMinMax::new(kind, 1, false, last),
            vec![Some(x)],
            Pick::Sample(2),
        );
        let x = Tensor::from_vec(vec![4, 3, 33], v).unwrap();
        b.add(
            fam,
            format!("Arg{kind:?} innermost last={last}"),
            ArgMinMax::new(kind, 2, true, last),
            vec![Some(x)],
            Pick::Sample(2),
        );
    }
    let x = b.data(F16, &[5, 21]);
    b.add(fam, "ArgMax f16", half(ArgMinMax::new(ArgKind::Max, 1, true, false)), vec![Some(x)], Pick::Sample(2));
    // Softmax family.
    let x = b.uniform(F32, &[4, 50], -5.0, 5.0);
    b.add(fam, "Softmax last axis", Softmax::new(1), vec![Some(x)], Pick::All);
    let x = b.uniform(F32, &[3, 37, 5], -5.0, 5.0);
    b.add(fam, "Softmax middle axis", Softmax::new(1), vec![Some(x)], Pick::Sample(4));
    let x = b.uniform(F32, &[3, 37, 5], -5.0, 5.0);
    b.add(fam, "LogSoftmax middle axis", Softmax::with_kind(SoftmaxKind::LogSoftmax, 1, false), vec![Some(x)], Pick::Sample(3));
    let x = b.uniform(F32, &[2, 3, 4, 5], -5.0, 5.0);
    b.add(fam, "Softmax flattened", Softmax::with_kind(SoftmaxKind::Softmax, 1, true), vec![Some(x)], Pick::Sample(3));
    let x = b.uniform(F16, &[5, 40], -5.0, 5.0);
    b.add(fam, "Softmax f16", half(Softmax::new(1)), vec![Some(x)], Pick::Sample(3));
    let v: Vec<f32> = (0..60).map(|_| (b.rng.unit() * 3.0).floor() as f32).collect();
    b.add(
        fam,
        "Hardmax",
        Softmax::with_kind(SoftmaxKind::Hardmax, 1, false),
        vec![Some(Tensor::from_vec(vec![2, 3, 10], v).unwrap())],
        Pick::Sample(3),
    );
    // LpNorm (with an all-zero row), MVN.
    let mut v: Vec<f32> = b.data(F32, &[72]).to_f64_vec().iter().map(|&v| v as f32).collect();
    for k in 0..6 {
        v[(6 + k) * 3 + 2] = 0.0;
    }
    let x = Tensor::from_vec(vec![4, 6, 3], v).unwrap();
    b.add(fam, "LpNorm p=1", LpNorm::new(1, 1), vec![Some(x.clone())], Pick::Sample(2));
    b.add(fam, "LpNorm p=2", LpNorm::new(1, 2), vec![Some(x)], Pick::Sample(2));
    let x = b.data(F32, &[2, 3, 5, 5]);
    b.add(fam, "MeanVarianceNormalization", Mvn::new(vec![0, 2, 3]), vec![Some(x)], Pick::Sample(3));
    // LayerNorm with statistics outputs, broadcast scale and bias, no bias,
    // f16.
    let x = b.data(F32, &[6, 40]);
    let s = b.uniform(F32, &[40], 0.5, 1.5);
    let bb = b.data(F32, &[1, 40]);
    b.add(fam, "LayerNorm with stats", LayerNorm::with_stats(1, 1e-5, F32), vec![Some(x), Some(s), Some(bb)], Pick::All);
    let x = b.data(F32, &[3, 4, 10]);
    let s = b.uniform(F32, &[10], 0.5, 1.5);
    b.add(fam, "LayerNorm trailing, no bias", LayerNorm::new(1, 1e-5), vec![Some(x), Some(s), None], Pick::Sample(3));
    let x = b.data(F16, &[5, 64]);
    let s = b.uniform(F16, &[64], 0.5, 1.5);
    let bb = b.data(F16, &[64]);
    b.add(fam, "LayerNorm f16", half(LayerNorm::with_stats(1, 1e-5, F32)), vec![Some(x), Some(s), Some(bb)], Pick::Sample(3));
    // Group, instance and batch norm, LRN.
    let x = b.data(F32, &[2, 6, 5, 5]);
    let (s, bb) = (b.uniform(F32, &[3], 0.5, 1.5), b.data(F32, &[3]));
    b.add(fam, "GroupNorm per group", GroupNorm::new(3, 1e-5), vec![Some(x), Some(s), Some(bb)], Pick::Sample(4));
    let x = b.data(F32, &[2, 6, 5, 5]);
    let (s, bb) = (b.uniform(F32, &[6], 0.5, 1.5), b.data(F32, &[6]));
    b.add(fam, "GroupNorm per channel", GroupNorm::new(3, 1e-5), vec![Some(x), Some(s), Some(bb)], Pick::Sample(2));
    let x = b.data(F16, &[2, 3, 7]);
    let (s, bb) = (b.uniform(F16, &[3], 0.5, 1.5), b.data(F16, &[3]));
    b.add(fam, "InstanceNorm f16", half(InstanceNorm::new(1e-5)), vec![Some(x), Some(s), Some(bb)], Pick::Sample(2));
    for dt in [F32, F16] {
        let x = b.data(dt, &[2, 3, 4, 4]);
        let (s, bb, m, var) = (b.uniform(dt, &[3], 0.5, 1.5), b.data(dt, &[3]), b.data(dt, &[3]), b.uniform(dt, &[3], 0.1, 2.0));
        b.add(
            fam,
            format!("BatchNorm {dt}"),
            for_dtype(dt, BatchNorm::new(1e-5)),
            vec![Some(x), Some(s), Some(bb), Some(m), Some(var)],
            Pick::Sample(3),
        );
    }
    let x = b.data(F32, &[2, 7, 3, 3]);
    b.add(fam, "LRN size 3", Lrn::new(3, 1e-2, 0.75, 2.0), vec![Some(x)], Pick::Sample(2));
    let x = b.data(F16, &[2, 7, 3, 3]);
    b.add(fam, "LRN size 4 f16", half(Lrn::new(4, 1e-1, 0.6, 1.0)), vec![Some(x)], Pick::Sample(2));
    // Pools: windows with strides, pads, dilations, ceil mode, indices; global
    // pools; i8 max pool; f16.
    let pool = |kind: PoolKind, k: &[usize], s: &[usize], pads: &[usize], dil: &[usize], ceil: bool| {
        let mut p = Pool::new(kind, k.to_vec());
        p.strides = s.to_vec();
        p.pads = pads.to_vec();
        p.dilations = dil.to_vec();
        p.ceil_mode = ceil;
        p
    };
    let x = b.data(F32, &[1, 2, 9, 9]);
    for cm in [false, true] {
        let mut p = pool(PoolKind::Max, &[3, 3], &[2, 2], &[1, 1, 1, 1], &[1, 1], true);
        p.indices = true;
        p.column_major_indices = cm;
        b.add(fam, format!("MaxPool indices column_major={cm}"), p, vec![Some(x.clone())], Pick::Sample(2));
    }
    let x = b.data(F32, &[1, 2, 8, 7]);
    for inc in [false, true] {
        let p = pool(PoolKind::Average { count_include_pad: inc }, &[3, 2], &[2, 2], &[1, 0, 2, 1], &[1, 1], true);
        b.add(fam, format!("AveragePool include_pad={inc}"), p, vec![Some(x.clone())], Pick::Sample(2));
    }
    let p = pool(PoolKind::Lp { p: 2.0 }, &[2, 2], &[1, 2], &[0, 1, 1, 0], &[2, 1], false);
    b.add(fam, "LpPool p=2 dilated", p, vec![Some(x)], Pick::Sample(2));
    let x = b.data(F32, &[2, 3, 11]);
    b.add(fam, "LpPool p=3 1-D", pool(PoolKind::Lp { p: 3.0 }, &[3], &[2], &[1, 1], &[1], false), vec![Some(x)], Pick::Sample(1));
    let x = b.data(F32, &[1, 2, 5, 4, 6]);
    let p = pool(PoolKind::Max, &[2, 2, 3], &[2, 1, 2], &[0, 1, 1, 1, 0, 1], &[1, 1, 1], false);
    b.add(fam, "MaxPool 3-D", p, vec![Some(x)], Pick::Sample(1));
    // RoiAlign: avg and max, both coordinate modes, fixed and adaptive
    // sampling; regions inside, across and outside the image, one of zero
    // size; i32 and i64 batch indices; an out-of-range batch index traps.
    for dt in [F32, F16] {
        let x = b.data(dt, &[2, 3, 10, 12]);
        let rois: Vec<f32> =
            vec![0.5, 1.0, 7.5, 6.0, 2.0, 2.0, 3.0, 3.5, -3.0, -1.0, 4.0, 20.0, 8.0, 0.0, 11.9, 9.9, 5.0, 5.0, 5.0, 5.0];
        let rois = cast_to(&Tensor::from_vec(vec![5, 4], rois).unwrap(), dt);
        for (max, half_pixel, ratio) in [(false, true, 0), (false, false, 2), (true, true, 2), (true, false, 0)] {
            let op = RoiAlign { output_height: 3, output_width: 4, sampling_ratio: ratio, spatial_scale: 0.75, half_pixel, max };
            let idx = if max { b.indices(I32, &[5], 0, 2) } else { b.indices(I64, &[5], 0, 2) };
            let name = format!("RoiAlign max={max} half_pixel={half_pixel} ratio={ratio} {dt}");
            b.add(fam, name, for_dtype(dt, op), vec![Some(x.clone()), Some(rois.clone()), Some(idx)], Pick::Sample(1));
        }
    }
    let op = RoiAlign { output_height: 2, output_width: 2, sampling_ratio: 1, spatial_scale: 1.0, half_pixel: true, max: false };
    let x = b.data(F32, &[2, 1, 4, 4]);
    let rois = Tensor::from_vec(vec![1, 4], vec![0f32, 0., 2., 2.]).unwrap();
    let idx = Tensor::from_vec(vec![1], vec![2i64]).unwrap();
    b.add_trap(fam, "RoiAlign batch index out of range traps", op, vec![Some(x), Some(rois), Some(idx)]);
    let x = b.data(F32, &[2, 3, 5, 5]);
    b.add(
        fam,
        "GlobalAveragePool",
        Pool::new(PoolKind::Average { count_include_pad: false }, vec![5, 5]),
        vec![Some(x.clone())],
        Pick::Sample(3),
    );
    b.add(fam, "GlobalLpPool p=3", Pool::new(PoolKind::Lp { p: 3.0 }, vec![5, 5]), vec![Some(x)], Pick::Sample(2));
    let mut v = b.data(F32, &[150]).to_f64_vec();
    v[25] = f64::NAN;
    v[60] = f64::NAN;
    let x = Tensor::from_vec(vec![2, 3, 5, 5], v.iter().map(|&v| v as f32).collect::<Vec<_>>()).unwrap();
    b.add(fam, "GlobalMaxPool with NaN", Pool::new(PoolKind::Max, vec![5, 5]), vec![Some(x)], Pick::Sample(3));
    let x = b.indices(I8, &[2, 2, 6, 6], -128, 128);
    b.add(
        fam,
        "MaxPool i8",
        pool(PoolKind::Max, &[3, 3], &[2, 2], &[1, 1, 1, 1], &[1, 1], false),
        vec![Some(x)],
        Pick::Sample(1),
    );
    let x = b.data(F16, &[1, 2, 9, 9]);
    let p = pool(PoolKind::Average { count_include_pad: false }, &[3, 3], &[2, 2], &[1, 1, 1, 1], &[1, 1], true);
    b.add(fam, "AveragePool f16", half(p), vec![Some(x.clone())], Pick::Sample(1));
    b.add(fam, "GlobalMaxPool f16", half(Pool::new(PoolKind::Max, vec![9, 9])), vec![Some(x)], Pick::Sample(2));
    nms_cases(b);
}

/// NonMaxSuppression: clustered boxes in both layouts (corners given in
/// any order), scores with ties, NaN and signed zeros, every combination
/// of the optional inputs, a planned room smaller than the boxes, and more
/// boxes than the block has threads times 32 (each thread several words of
/// candidate bits).
fn nms_cases(b: &mut Builder) {
    let fam = "reduce";
    let scalar_i64 = |v: i64| Tensor::from_vec(vec![1], vec![v]).unwrap();
    let scalar_f32 = |v: f32| Tensor::from_vec(vec![1], vec![v]).unwrap();
    // `n` boxes per batch entry around `clusters` centres, sized 1 to 11.
    let boxes = |b: &mut Builder, batches: usize, n: usize, clusters: usize, center: bool| -> Tensor {
        let centres: Vec<(f64, f64)> = (0..clusters).map(|_| (b.rng.range(0.0, 100.0), b.rng.range(0.0, 100.0))).collect();
        let mut v = Vec::with_capacity(batches * n * 4);
        for i in 0..batches * n {
            let (cx, cy) = centres[i % clusters];
            let (x, y) = (cx + b.rng.range(-3.0, 3.0), cy + b.rng.range(-3.0, 3.0));
            let (w, h) = (b.rng.range(1.0, 11.0), if i % 23 == 5 { 0.0 } else { b.rng.range(1.0, 11.0) });
            let row = if center {
                [x, y, w, h]
            } else if i % 2 == 0 {
                [y - h / 2.0, x - w / 2.0, y + h / 2.0, x + w / 2.0]
            } else {
                [y + h / 2.0, x + w / 2.0, y - h / 2.0, x - w / 2.0]
            };
            v.extend(row.map(|c| c as f32));
        }
        Tensor::from_vec(vec![batches, n, 4], v).unwrap()
    };
    // Scores in tenths (many ties), some NaN and signed zeros.
    let scores = |b: &mut Builder, batches: usize, classes: usize, n: usize| -> Tensor {
        let mut v: Vec<f32> = (0..batches * classes * n).map(|_| (b.rng.unit() * 10.0).floor() as f32 / 10.0).collect();
        for (k, i) in (3..v.len()).step_by(37).enumerate() {
            v[i] = match k % 3 {
                0 => f32::NAN,
                1 => -0.0,
                _ => 0.0,
            };
        }
        Tensor::from_vec(vec![batches, classes, n], v).unwrap()
    };
    for (center, batches, classes, n) in [(false, 2, 3, 150), (true, 1, 2, 70)] {
        let x = boxes(b, batches, n, 6, center);
        let s = scores(b, batches, classes, n);
        let all = vec![Some(x.clone()), Some(s.clone()), Some(scalar_i64(10)), Some(scalar_f32(0.4)), Some(scalar_f32(0.25))];
        let op = NonMaxSuppression { center_point_box: center, max_per_class: Some(10) };
        b.add(fam, format!("NonMaxSuppression center={center} all inputs"), op.clone(), all, Pick::All);
        // No score threshold (NaN scores take part) and a run-time maximum
        // above the room's; an IoU threshold of 0 (any overlap suppresses);
        // no maximum at all (nothing is selected).
        let op = NonMaxSuppression { center_point_box: center, max_per_class: None };
        let inputs = vec![Some(x.clone()), Some(s.clone()), Some(scalar_i64(1000)), Some(scalar_f32(0.6))];
        b.add(fam, format!("NonMaxSuppression center={center} no score threshold"), op.clone(), inputs, Pick::Sample(1));
        let inputs = vec![Some(x.clone()), Some(s.clone()), Some(scalar_i64(7))];
        b.add(fam, format!("NonMaxSuppression center={center} IoU 0"), op.clone(), inputs, Pick::Sample(1));
        let inputs = vec![Some(x), Some(s), None, Some(scalar_f32(0.5)), Some(scalar_f32(0.1))];
        b.add(fam, format!("NonMaxSuppression center={center} no maximum"), op, inputs, Pick::Sample(1));
    }
    // 9,000 boxes of one class in many clusters: 282 words of candidate
    // bits, more than a 256-thread block's threads.
    let x = boxes(b, 1, 9000, 400, false);
    let s = b.uniform(DType::F32, &[1, 1, 9000], 0.0, 1.0);
    let inputs = vec![Some(x), Some(s), Some(scalar_i64(60)), Some(scalar_f32(0.5)), Some(scalar_f32(0.05))];
    let op = NonMaxSuppression { center_point_box: false, max_per_class: Some(100) };
    b.add(fam, "NonMaxSuppression 9000 boxes", op, inputs, Pick::All);
}
