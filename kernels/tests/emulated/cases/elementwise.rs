//! Elementwise, casts, quantization and fused pointwise layers.

use crate::*;

pub(crate) fn elementwise_cases(b: &mut Builder) {
    use DType::*;
    let fam = "elementwise";
    // Float binaries with every broadcast structure: same shape, scalar,
    // channel, two-sided, NaN operands for Max/Min.
    for dt in [F32, F16] {
        let x = b.data(dt, &[3, 1, 5, 7]);
        let y = b.data(dt, &[4, 1, 7]);
        b.add(
            fam,
            format!("Add two-sided broadcast {dt}"),
            for_dtype(dt, Binary::new(BinaryKind::Add)),
            vec![Some(x), Some(y)],
            Pick::All,
        );
        let x = b.data(dt, &[5, 6]);
        let y = b.data(dt, &[]);
        b.add(
            fam,
            format!("Sub scalar {dt}"),
            for_dtype(dt, Binary::new(BinaryKind::Sub)),
            vec![Some(x), Some(y)],
            Pick::Sample(2),
        );
        let x = b.data(dt, &[2, 3, 4, 5]);
        let y = b.uniform(dt, &[3, 1, 1], 0.5, 2.0);
        b.add(
            fam,
            format!("Div channel {dt}"),
            for_dtype(dt, Binary::new(BinaryKind::Div)),
            vec![Some(x), Some(y)],
            Pick::Sample(2),
        );
        let x = b.data(dt, &[2, 3, 4, 5]);
        let y = b.data(dt, &[2, 3, 4, 5]);
        b.add(
            fam,
            format!("Mul same shape {dt}"),
            for_dtype(dt, Binary::new(BinaryKind::Mul)),
            vec![Some(x), Some(y)],
            Pick::Sample(2),
        );
        let slope = b.data(dt, &[3, 1, 1]);
        let x = b.data(dt, &[2, 3, 2, 5]);
        b.add(
            fam,
            format!("PRelu {dt}"),
            for_dtype(dt, Binary::new(BinaryKind::PRelu)),
            vec![Some(x), Some(slope)],
            Pick::Sample(1),
        );
    }
    // Enough elements for several blocks and grid-stride iterations.
    let x = b.data(F32, &[5, 21, 24]);
    let y = b.data(F32, &[21, 1]);
    b.add(fam, "Mul large broadcast f32", Binary::new(BinaryKind::Mul), vec![Some(x), Some(y)], Pick::All);
    let mut xv = b.data(F32, &[37]).to_f64_vec();
    xv[3] = f64::NAN;
    let x = Tensor::from_vec(vec![37], xv.iter().map(|&v| v as f32).collect::<Vec<_>>()).unwrap();
    let mut yv = b.data(F32, &[37]).to_f64_vec();
    yv[5] = f64::NAN;
    let y = Tensor::from_vec(vec![37], yv.iter().map(|&v| v as f32).collect::<Vec<_>>()).unwrap();
    for k in [BinaryKind::Max, BinaryKind::Min, BinaryKind::Mod { fmod: true }, BinaryKind::Mod { fmod: false }] {
        b.add(fam, format!("{k:?} with NaN f32"), Binary::new(k), vec![Some(x.clone()), Some(y.clone())], Pick::Sample(1));
    }
    // Integer binaries: wrapping, division and remainder by zero, shifts past
    // the width, bitwise ops, booleans.
    let xi = b.indices(I32, &[4, 9], -2_000_000_000, 2_000_000_000);
    let yi = b.indices(I32, &[9], -1_500_000_000, 1_500_000_000);
    b.add(fam, "Add i32 wrapping", Binary::new(BinaryKind::Add), vec![Some(xi.clone()), Some(yi.clone())], Pick::Sample(1));
    b.add(fam, "Mul i32 wrapping", Binary::new(BinaryKind::Mul), vec![Some(xi.clone()), Some(yi)], Pick::Sample(1));
    let xs = b.indices(I64, &[3, 11], -50, 50);
    let ys = b.indices(I64, &[3, 11], -4, 5);
    b.add(fam, "Div i64 incl. by zero", Binary::new(BinaryKind::Div), vec![Some(xs.clone()), Some(ys.clone())], Pick::Sample(1));
    b.add(
        fam,
        "Mod i64 python",
        Binary::new(BinaryKind::Mod { fmod: false }),
        vec![Some(xs.clone()), Some(ys.clone())],
        Pick::Sample(1),
    );
    b.add(fam, "Mod i64 fmod", Binary::new(BinaryKind::Mod { fmod: true }), vec![Some(xs), Some(ys)], Pick::Sample(1));
    let xu = b.indices(U8, &[2, 13], 0, 256);
    let yu = b.indices(U8, &[13], 0, 10);
    b.add(
        fam,
        "BitShiftLeft u8",
        Binary::new(BinaryKind::BitShiftLeft),
        vec![Some(xu.clone()), Some(yu.clone())],
        Pick::Sample(1),
    );
    b.add(fam, "BitShiftRight u8", Binary::new(BinaryKind::BitShiftRight), vec![Some(xu), Some(yu)], Pick::Sample(1));
    let a16 = b.indices(I16, &[21], -30000, 30000);
    let b16 = b.indices(I16, &[21], -30000, 30000);
    b.add(fam, "BitwiseXor i16", Binary::new(BinaryKind::BitwiseXor), vec![Some(a16), Some(b16)], Pick::Sample(1));
    let p = b.indices(Bool, &[5, 4], 0, 2);
    let q = b.indices(Bool, &[4], 0, 2);
    b.add(fam, "And bool", Binary::new(BinaryKind::And), vec![Some(p.clone()), Some(q.clone())], Pick::Sample(1));
    b.add(fam, "Xor bool", Binary::new(BinaryKind::Xor), vec![Some(p.clone()), Some(q)], Pick::Sample(1));
    b.add(fam, "Not bool", Not, vec![Some(p)], Pick::Sample(1));
    let n = b.indices(I32, &[17], -1000, 1000);
    b.add(fam, "BitwiseNot i32", BitwiseNot, vec![Some(n)], Pick::Sample(1));
    // Every unary kind on f32 (positive inputs where the domain needs it),
    // a few on f16 and integers.
    use UnaryKind::*;
    let kinds = [
        (Abs, -3.0, 3.0),
        (Neg, -3.0, 3.0),
        (Sign, -3.0, 3.0),
        (Relu, -3.0, 3.0),
        (Acos, -0.99, 0.99),
        (Acosh, 1.01, 4.0),
        (Asin, -0.99, 0.99),
        (Asinh, -3.0, 3.0),
        (Atan, -3.0, 3.0),
        (Atanh, -0.95, 0.95),
        (Ceil, -3.0, 3.0),
        (Cos, -3.0, 3.0),
        (Cosh, -3.0, 3.0),
        (Erf, -3.0, 3.0),
        (Exp, -3.0, 3.0),
        (Floor, -3.0, 3.0),
        (Log, 0.05, 4.0),
        (Reciprocal, 0.2, 3.0),
        (Round, -3.0, 3.0),
        (Sin, -3.0, 3.0),
        (Sinh, -3.0, 3.0),
        (Sqrt, 0.0, 4.0),
        (Tan, -1.2, 1.2),
        (Tanh, -3.0, 3.0),
        (Sigmoid, -6.0, 6.0),
        (Elu { alpha: 0.7 }, -3.0, 3.0),
        (Selu { alpha: 1.67, gamma: 1.05 }, -3.0, 3.0),
        (Celu { alpha: 1.3 }, -3.0, 3.0),
        (LeakyRelu { alpha: 0.02 }, -3.0, 3.0),
        (ThresholdedRelu { alpha: 0.5 }, -3.0, 3.0),
        (HardSigmoid { alpha: 0.2, beta: 0.5 }, -4.0, 4.0),
        (HardSwish, -4.0, 4.0),
        (Softplus, -4.0, 4.0),
        (Softsign, -4.0, 4.0),
        (Mish, -4.0, 4.0),
        (Gelu, -4.0, 4.0),
        (GeluTanh, -4.0, 4.0),
        (Shrink { bias: 0.3, lambd: 0.5 }, -2.0, 2.0),
    ];
    for (k, lo, hi) in kinds {
        let x = b.uniform(F32, &[3, 43], lo, hi);
        b.add(fam, format!("{k:?} f32"), Unary::new(k), vec![Some(x)], Pick::Sample(1));
    }
    for k in [Exp, Tanh, Gelu, Round, Sigmoid] {
        let x = b.uniform(F16, &[2, 3, 11], -3.0, 3.0);
        b.add(fam, format!("{k:?} f16"), half(Unary::new(k)), vec![Some(x)], Pick::Sample(1));
    }
    let x = b.uniform(F16, &[20], 6.0, 12.0);
    b.add(fam, "Exp f16 overflowing to inf", half(Unary::new(Exp)), vec![Some(x)], Pick::Sample(1));
    let x = b.uniform(F16, &[20], -20.0, -12.0);
    b.add(fam, "Exp f16 into subnormals", half(Unary::new(Exp)), vec![Some(x)], Pick::Sample(1));
    let x = b.indices(I32, &[19], -100, 100);
    b.add(fam, "Abs i32", Unary::new(Abs), vec![Some(x.clone())], Pick::Sample(1));
    b.add(fam, "Sign i32", Unary::new(Sign), vec![Some(x)], Pick::Sample(1));
    // Compare, Where, Clip, Pow, classification.
    for k in [CompareKind::Less, CompareKind::Equal, CompareKind::GreaterOrEqual] {
        let x = b.indices(I64, &[4, 6], -3, 3);
        let y = b.indices(I64, &[6], -3, 3);
        b.add(fam, format!("{k:?} i64"), Compare::new(k), vec![Some(x), Some(y)], Pick::Sample(1));
    }
    let x = b.data(F16, &[4, 6]);
    let y = b.data(F16, &[4, 1]);
    b.add(fam, "Greater f16", half(Compare::new(CompareKind::Greater)), vec![Some(x), Some(y)], Pick::Sample(1));
    for dt in [F32, F16, I64] {
        let c = b.indices(Bool, &[3, 1, 5], 0, 2);
        let x = b.data(dt, &[2, 1, 1, 5]);
        let y = b.data(dt, &[1]);
        b.add(fam, format!("Where {dt}"), for_dtype(dt, Where), vec![Some(c), Some(x), Some(y)], Pick::Sample(2));
    }
    for dt in [F32, F16] {
        let x = b.uniform(dt, &[7, 9], -3.0, 3.0);
        b.add(fam, format!("Clip {dt}"), for_dtype(dt, Clip::new(Some(-1.0), Some(0.5))), vec![Some(x)], Pick::Sample(1));
    }
    let x = b.indices(I32, &[23], -100, 100);
    b.add(fam, "Clip i32", Clip::new(Some(-10.0), Some(20.0)), vec![Some(x)], Pick::Sample(1));
    let x = b.uniform(F32, &[3, 10], 0.1, 3.0);
    let y = b.uniform(F32, &[10], -2.0, 2.0);
    b.add(fam, "Pow f32", Pow, vec![Some(x.clone()), Some(y)], Pick::Sample(1));
    let e = b.indices(I32, &[10], -2, 4);
    b.add(fam, "Pow f32 ^ i32", Pow, vec![Some(x), Some(e)], Pick::Sample(1));
    let bi = b.indices(I64, &[12], -5, 6);
    let ei = b.indices(I64, &[12], 0, 5);
    b.add(fam, "Pow i64", Pow, vec![Some(bi), Some(ei)], Pick::Sample(1));
    let mut v: Vec<f32> = b.data(F32, &[16]).to_f64_vec().iter().map(|&v| v as f32).collect();
    v[1] = f32::NAN;
    v[4] = f32::INFINITY;
    v[9] = f32::NEG_INFINITY;
    let special = Tensor::from_vec(vec![16], v).unwrap();
    b.add(fam, "IsNaN f32", IsNaN, vec![Some(special.clone())], Pick::Sample(1));
    b.add(
        fam,
        "IsInf negative f32",
        IsInf { detect_positive: false, detect_negative: true },
        vec![Some(special.clone())],
        Pick::Sample(1),
    );
    // Casts: truncation, saturation and NaN rules, f16 rounding.
    let wide: Vec<f32> =
        (0..40).map(|i| (i as f32 - 20.0) * 13.7 + 0.5).chain([f32::NAN, f32::INFINITY, -f32::INFINITY, 1e10, -1e10]).collect();
    let wide = Tensor::from_vec(vec![wide.len()], wide).unwrap();
    for to in [I8, U8, I32, I64, F16, Bool, U16] {
        b.add(fam, format!("Cast f32 to {to}"), Cast::new(to), vec![Some(wide.clone())], Pick::Sample(1));
    }
    let h = b.uniform(F16, &[3, 7], -100.0, 100.0);
    b.add(fam, "Cast f16 to f32", Cast::new(F32), vec![Some(h.clone())], Pick::Sample(1));
    b.add(fam, "Cast f16 to i32", Cast::new(I32), vec![Some(h)], Pick::Sample(1));
    let l = b.indices(I64, &[15], -300, 300);
    b.add(fam, "Cast i64 to i8", Cast::new(I8), vec![Some(l.clone())], Pick::Sample(1));
    b.add(fam, "Cast i64 to f16", Cast::new(F16), vec![Some(l)], Pick::Sample(1));
    let bo = b.indices(Bool, &[9], 0, 2);
    b.add(fam, "Cast bool to f32", Cast::new(F32), vec![Some(bo)], Pick::Sample(1));
    // Quantization: per tensor, per axis, blocked; zero points; f16 input.
    let x = b.uniform(F32, &[2, 3, 5], -3.0, 3.0);
    let s = Tensor::from_vec(vec![], vec![0.03f32]).unwrap();
    let z = Tensor::from_vec(vec![], vec![7i8]).unwrap();
    b.add(
        fam,
        "QuantizeLinear per tensor i8",
        QuantizeLinear { axis: 0, block_size: 0, output_dtype: I8 },
        vec![Some(x.clone()), Some(s.clone()), Some(z)],
        Pick::Sample(2),
    );
    let sa = b.uniform(F32, &[3], 0.01, 0.05);
    let za = b.indices(U8, &[3], 100, 150);
    b.add(
        fam,
        "QuantizeLinear per axis u8",
        QuantizeLinear { axis: 1, block_size: 0, output_dtype: U8 },
        vec![Some(x.clone()), Some(sa.clone()), Some(za.clone())],
        Pick::Sample(1),
    );
    let sb = b.uniform(F32, &[2, 3, 3], 0.01, 0.05);
    b.add(
        fam,
        "QuantizeLinear blocked i8",
        QuantizeLinear { axis: 2, block_size: 2, output_dtype: I8 },
        vec![Some(x.clone()), Some(sb.clone())],
        Pick::Sample(1),
    );
    let xh = f16_of(&x);
    let sh = f16_of(&s);
    b.add(
        fam,
        "QuantizeLinear f16 to i16",
        QuantizeLinear { axis: 0, block_size: 0, output_dtype: I16 },
        vec![Some(xh), Some(sh)],
        Pick::Sample(1),
    );
    let q = b.indices(I8, &[2, 3, 5], -128, 128);
    let zq = Tensor::from_vec(vec![], vec![-3i8]).unwrap();
    b.add(
        fam,
        "DequantizeLinear per tensor i8",
        DequantizeLinear { axis: 0, block_size: 0 },
        vec![Some(q.clone()), Some(s.clone()), Some(zq)],
        Pick::Sample(2),
    );
    let qu = b.indices(U8, &[2, 3, 5], 0, 256);
    b.add(
        fam,
        "DequantizeLinear per axis u8",
        DequantizeLinear { axis: 1, block_size: 0 },
        vec![Some(qu), Some(sa), Some(za)],
        Pick::Sample(1),
    );
    b.add(
        fam,
        "DequantizeLinear blocked i8",
        DequantizeLinear { axis: 2, block_size: 2 },
        vec![Some(q), Some(sb)],
        Pick::Sample(1),
    );
    let qi = b.indices(I32, &[2, 7], -100000, 100000);
    b.add(fam, "DequantizeLinear i32", DequantizeLinear { axis: 0, block_size: 0 }, vec![Some(qi), Some(s)], Pick::Sample(1));
    // Fused pointwise programs: inputs of the output's shape, broadcast
    // inputs, constants, unary steps.
    let program = vec![
        Instr::Input(0),
        Instr::Input(1),
        Instr::Binary(PointwiseBinary::Mul, 0, 1),
        Instr::Const(0.5),
        Instr::Binary(PointwiseBinary::Add, 2, 3),
        Instr::Unary(Sigmoid, 4),
        Instr::Input(2),
        Instr::Binary(PointwiseBinary::Sub, 5, 6),
        Instr::Unary(Tanh, 7),
        Instr::Binary(PointwiseBinary::Div, 8, 1),
    ];
    for dt in [F32, F16] {
        let x = b.data(dt, &[2, 3, 4, 5]);
        let y = b.uniform(dt, &[3, 1, 1], 0.5, 2.0);
        let z = b.data(dt, &[5]);
        b.add(
            fam,
            format!("Pointwise program {dt}"),
            for_dtype(dt, Pointwise { program: program.clone() }),
            vec![Some(x), Some(y), Some(z)],
            Pick::All,
        );
    }
    let gelu_bias = vec![Instr::Input(0), Instr::Input(1), Instr::Binary(PointwiseBinary::Add, 0, 1), Instr::Unary(Gelu, 2)];
    let x = b.data(F32, &[3, 50]);
    let y = b.data(F32, &[50]);
    b.add(fam, "Pointwise bias+gelu f32", Pointwise { program: gelu_bias }, vec![Some(x), Some(y)], Pick::Sample(1));
}
