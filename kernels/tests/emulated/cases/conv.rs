//! Convolutions: plain, fused, int8, FP8, depthwise and transposed.

use crate::*;

pub(crate) fn conv_cases(b: &mut Builder) {
    use DType::*;
    let fam = "conv";
    // DeformConv: groups, two offset groups, strides, pads, dilations,
    // offsets reaching outside the image; with and without bias and mask.
    for dt in [F32, F16] {
        let conv =
            Conv { kernel_shape: vec![3, 3], strides: vec![2, 1], pads: vec![1, 2, 1, 0], dilations: vec![1, 2], group: 2 };
        let op = DeformConv { conv, offset_group: 2 };
        let (oh, ow) = (4, 4);
        let x = b.data(dt, &[2, 4, 7, 6]);
        let w = b.data(dt, &[6, 2, 3, 3]);
        let offset = b.uniform(dt, &[2, 36, oh, ow], -3.0, 3.0);
        let bias = b.data(dt, &[6]);
        let mask = b.uniform(dt, &[2, 18, oh, ow], 0.0, 1.0);
        let all = vec![Some(x.clone()), Some(w.clone()), Some(offset.clone()), Some(bias), Some(mask.clone())];
        b.add(fam, format!("DeformConv bias mask {dt}"), for_dtype(dt, op.clone()), all, Pick::Sample(1));
        let no_bias = vec![Some(x.clone()), Some(w.clone()), Some(offset.clone()), None, Some(mask)];
        b.add(fam, format!("DeformConv mask {dt}"), for_dtype(dt, op.clone()), no_bias, Pick::Sample(1));
        b.add(fam, format!("DeformConv plain {dt}"), for_dtype(dt, op), vec![Some(x), Some(w), Some(offset)], Pick::Sample(1));
    }
    let relu = Some(Activation::Unary(UnaryKind::Relu));
    let conv2d = |k: usize, s: usize, p: usize, g: usize| Conv::new_2d([k, k], [s, s], [p; 4], [1, 1], g);
    // (name, n, c, m, h, w, conv): odd sizes, strides, padding, dilation,
    // groups, 1x1 (pointwise gather).
    let shapes: Vec<(&str, usize, usize, usize, usize, usize, Conv)> = vec![
        ("3x3 s1 p1", 2, 8, 24, 7, 9, conv2d(3, 1, 1, 1)),
        ("odd asymmetric", 1, 5, 20, 9, 8, Conv::new_2d([3, 2], [2, 1], [1, 0, 2, 1], [2, 1], 1)),
        ("1x1 pointwise", 2, 16, 40, 5, 6, conv2d(1, 1, 0, 1)),
        ("grouped", 1, 32, 32, 6, 6, conv2d(3, 1, 1, 2)),
        ("deep K", 1, 24, 20, 5, 5, conv2d(3, 1, 1, 1)),
    ];
    for dt in [F32, F16] {
        for (name, n, c, m, h, w, conv) in &shapes {
            let wshape = [*m, c / conv.group, conv.kernel_shape[0], conv.kernel_shape[1]];
            let x = b.data(dt, &[*n, *c, *h, *w]);
            let wt = b.uniform(dt, &wshape, -0.5, 0.5);
            let bias = b.data(dt, &[*m]);
            b.add(
                fam,
                format!("Conv {name} {dt}"),
                for_dtype(dt, conv.clone()),
                vec![Some(x), Some(wt), Some(bias)],
                Pick::Sample(6),
            );
        }
        // Fused: bias, residual, activation.
        let conv = conv2d(3, 1, 1, 1);
        let x = b.data(dt, &[2, 16, 6, 5]);
        let wt = b.uniform(dt, &[32, 16, 3, 3], -0.3, 0.3);
        let bias = b.data(dt, &[32]);
        let r = b.data(dt, &[2, 32, 6, 5]);
        let op = linear(LinearKind::Conv(conv), true, true, Some(Activation::Silu));
        b.add(
            fam,
            format!("FusedConv residual silu {dt}"),
            for_dtype(dt, op),
            vec![Some(x), Some(wt), Some(bias), Some(r)],
            Pick::Sample(6),
        );
        // Depthwise with a channel multiplier, fused relu6.
        let dw = Conv::new_2d([3, 3], [2, 2], [1; 4], [1, 1], 6);
        let x = b.data(dt, &[2, 6, 9, 11]);
        let wt = b.uniform(dt, &[12, 1, 3, 3], -0.5, 0.5);
        let bias = b.data(dt, &[12]);
        let op = linear(LinearKind::Conv(dw), true, false, Some(Activation::Clip { min: Some(0.0), max: Some(6.0) }));
        b.add(
            fam,
            format!("Depthwise x2 relu6 {dt}"),
            for_dtype(dt, op),
            vec![Some(x), Some(wt), Some(bias), None],
            Pick::Sample(4),
        );
        // Transposed, grouped, output padding.
        let ct = ConvTranspose {
            kernel_shape: vec![4, 3],
            strides: vec![2, 2],
            pads: vec![1, 0, 1, 1],
            dilations: vec![1, 1],
            group: 2,
            output_padding: vec![0, 1],
        };
        let x = b.data(dt, &[2, 4, 5, 4]);
        let wt = b.uniform(dt, &[4, 3, 4, 3], -0.5, 0.5);
        let bias = b.data(dt, &[6]);
        b.add(
            fam,
            format!("ConvTranspose grouped {dt}"),
            for_dtype(dt, ct),
            vec![Some(x), Some(wt), Some(bias)],
            Pick::Sample(2),
        );
    }
    // 1-D and 3-D convs, 3-D depthwise and transposed.
    let c1 = Conv { kernel_shape: vec![5], strides: vec![2], pads: vec![2, 1], dilations: vec![1], group: 1 };
    let x = b.data(F32, &[2, 12, 21]);
    let wt = b.uniform(F32, &[24, 12, 5], -0.5, 0.5);
    b.add(fam, "Conv 1-D", c1, vec![Some(x), Some(wt)], Pick::Sample(4));
    let c3 = Conv { kernel_shape: vec![3, 3, 3], strides: vec![1, 2, 2], pads: vec![1; 6], dilations: vec![1; 3], group: 1 };
    let x = b.data(F32, &[1, 4, 5, 6, 6]);
    let wt = b.uniform(F32, &[16, 4, 3, 3, 3], -0.5, 0.5);
    let bias = b.data(F32, &[16]);
    b.add(fam, "Conv 3-D", c3.clone(), vec![Some(x.clone()), Some(wt.clone()), Some(bias.clone())], Pick::Sample(4));
    b.add(fam, "Conv 3-D f16", half(c3), vec![Some(f16_of(&x)), Some(f16_of(&wt)), Some(f16_of(&bias))], Pick::Sample(3));
    let dw3 = Conv { kernel_shape: vec![3, 3, 3], strides: vec![1; 3], pads: vec![1; 6], dilations: vec![1; 3], group: 4 };
    let wt = b.uniform(F32, &[8, 1, 3, 3, 3], -0.5, 0.5);
    b.add(fam, "Depthwise 3-D", dw3, vec![Some(x.clone()), Some(wt)], Pick::Sample(2));
    let ct3 = ConvTranspose {
        kernel_shape: vec![2, 2, 2],
        strides: vec![2; 3],
        pads: vec![0; 6],
        dilations: vec![1; 3],
        group: 1,
        output_padding: vec![0; 3],
    };
    let wt = b.uniform(F32, &[4, 3, 2, 2, 2], -0.5, 0.5);
    b.add(fam, "ConvTranspose 3-D", ct3, vec![Some(x), Some(wt)], Pick::Sample(2));
    // Int8 convs: requantized, f16 and f32 outputs, residual, 3x3, 1x1 and
    // depthwise.
    let int8 = |conv: Conv, residual: bool, output: Int8Output| Int8Linear {
        kind: LinearKind::Conv(conv),
        x_scale: 0.02,
        bias: true,
        epilogue: Epilogue { residual, activation: relu },
        output,
    };
    for (name, conv, c, m) in [
        ("3x3", conv2d(3, 1, 1, 1), 16usize, 40usize),
        ("1x1", conv2d(1, 1, 0, 1), 64, 32),
        ("depthwise", conv2d(3, 1, 1, 8), 8, 8),
    ] {
        for output in [Int8Output::F32, Int8Output::F16, Int8Output::Int8 { scale: 0.05 }] {
            let kk = conv.kernel_shape[0];
            let x = b.indices(I8, &[2, c, 5, 7], -128, 128);
            let w = b.indices(I8, &[m, c / conv.group, kk, kk], -128, 128);
            let ws = b.uniform(F32, &[m], 0.0005, 0.002);
            let bias = b.data(F32, &[m]);
            let res_dt = match output {
                Int8Output::F16 => F16,
                _ => F32,
            };
            let r = b.data(res_dt, &[2, m, 5, 7]);
            let op = int8(conv.clone(), true, output);
            b.add_slack(
                fam,
                format!("Int8Conv {name} {output:?}"),
                op,
                vec![Some(x), Some(w), Some(ws), Some(bias), Some(r)],
                Pick::Sample(4),
            );
        }
    }
    // FP8 convs on sm_90 (e4m3 tensor cores, SIMT, depthwise): the same
    // shapes and outputs.
    let fp8 = |conv: Conv, output: Fp8Output| Fp8Linear {
        kind: LinearKind::Conv(conv),
        x_scale: 0.02,
        bias: true,
        epilogue: Epilogue { residual: true, activation: relu },
        output,
    };
    b.sm = 90;
    for (name, conv, c, m) in [
        ("3x3", conv2d(3, 1, 1, 1), 16usize, 40usize),
        ("1x1", conv2d(1, 1, 0, 1), 64, 32),
        ("depthwise", conv2d(3, 1, 1, 8), 8, 8),
    ] {
        for output in [Fp8Output::F32, Fp8Output::F16, Fp8Output::Fp8 { scale: 0.05 }] {
            let kk = conv.kernel_shape[0];
            let x = b.uniform(F8E4M3FN, &[2, c, 5, 7], -8.0, 8.0);
            let w = b.uniform(F8E4M3FN, &[m, c / conv.group, kk, kk], -8.0, 8.0);
            let ws = b.uniform(F32, &[m], 0.01, 0.05);
            let bias = b.data(F32, &[m]);
            let res_dt = if output == Fp8Output::F16 { F16 } else { F32 };
            let r = b.data(res_dt, &[2, m, 5, 7]);
            b.add_slack(
                fam,
                format!("Fp8Conv {name} {output:?}"),
                fp8(conv.clone(), output),
                vec![Some(x), Some(w), Some(ws), Some(bias), Some(r)],
                Pick::Sample(4),
            );
        }
    }
    b.sm = 80;
}
