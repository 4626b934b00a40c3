//! GEMM, GEMV and MatMul layers: plain, fused, int8 and FP8.

use crate::*;

pub(crate) fn gemm_cases(b: &mut Builder) {
    use DType::*;
    let fam = "gemm";
    let mm = || LinearKind::MatMul(MatMul {});
    let relu = Some(Activation::Unary(UnaryKind::Relu));
    let gelu = Some(Activation::Unary(UnaryKind::Gelu));
    for dt in [F32, F16] {
        // Gemm with alpha, beta, a broadcast C, both transposes; sizes that
        // are not multiples of any tile.
        for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
            let (m, n, k) = (37, 40, 24);
            let a = b.data(dt, &if ta { [k, m] } else { [m, k] });
            let w = b.data(dt, &if tb { [n, k] } else { [k, n] });
            let c = b.data(dt, &[n]);
            b.add(
                fam,
                format!("Gemm ta={ta} tb={tb} {dt}"),
                for_dtype(dt, gemm(0.5, 1.5, ta, tb)),
                vec![Some(a), Some(w), Some(c)],
                Pick::Sample(5),
            );
        }
        let a = b.data(dt, &[33, 17]);
        let w = b.data(dt, &[17, 29]);
        let c = b.data(dt, &[33, 1]);
        b.add(
            fam,
            format!("Gemm misaligned, column C {dt}"),
            for_dtype(dt, gemm(1.0, 1.0, false, false)),
            vec![Some(a), Some(w), Some(c)],
            Pick::Sample(3),
        );
        // Batched MatMul with a broadcast operand; fused Linear with bias,
        // residual and activation.
        let a = b.data(dt, &[2, 3, 20, 32]);
        let w = b.data(dt, &[3, 32, 24]);
        b.add(fam, format!("MatMul batched broadcast {dt}"), for_dtype(dt, MatMul {}), vec![Some(a), Some(w)], Pick::Sample(5));
        let x = b.data(dt, &[2, 24, 64]);
        let w = b.uniform(dt, &[64, 48], -0.5, 0.5);
        let bias = b.data(dt, &[48]);
        let r = b.data(dt, &[2, 24, 48]);
        b.add(
            fam,
            format!("Linear bias+residual+gelu {dt}"),
            for_dtype(dt, linear(mm(), true, true, gelu)),
            vec![Some(x), Some(w), Some(bias), Some(r)],
            Pick::Sample(6),
        );
        let x = b.data(dt, &[40, 72]);
        let w = b.uniform(dt, &[72, 72], -0.5, 0.5);
        let bias = b.data(dt, &[72]);
        b.add(
            fam,
            format!("Linear Gemm trans_b relu {dt}"),
            for_dtype(dt, linear(LinearKind::Gemm(gemm(1.0, 1.0, false, true)), true, false, relu)),
            vec![Some(x), Some(w), Some(bias), None],
            Pick::Sample(6),
        );
    }
    // Int8: requantized, f32 and f16 outputs; [N, K] and [K, N] weights.
    let int8 = |kind: LinearKind, bias: bool, residual: bool, output: Int8Output| Int8Linear {
        kind,
        x_scale: 0.02,
        bias,
        epilogue: Epilogue { residual, activation: relu },
        output,
    };
    // Few rows (the GEMV kernels): a classifier, a batched decode step,
    // both B layouts, int8.
    for dt in [F32, F16] {
        let x = b.data(dt, &[1, 300]);
        let w = b.uniform(dt, &[70, 300], -0.5, 0.5);
        let c = b.data(dt, &[70]);
        b.add(
            fam,
            format!("Gemm one row trans_b {dt}"),
            for_dtype(dt, gemm(1.0, 1.0, false, true)),
            vec![Some(x), Some(w), Some(c)],
            Pick::Sample(8),
        );
        let x = b.data(dt, &[2, 3, 130]);
        let w = b.uniform(dt, &[130, 75], -0.5, 0.5);
        let bias = b.data(dt, &[75]);
        let op = linear(mm(), true, false, Some(Activation::Unary(UnaryKind::Tanh)));
        b.add(
            fam,
            format!("Linear three rows batched {dt}"),
            for_dtype(dt, op),
            vec![Some(x), Some(w), Some(bias), None],
            Pick::Sample(8),
        );
    }
    let x = b.indices(I8, &[5, 96], -128, 128);
    let w = b.indices(I8, &[40, 96], -128, 128);
    let ws = b.uniform(F32, &[40], 0.0001, 0.001);
    let bias = b.data(F32, &[40]);
    let op = int8(LinearKind::Gemm(gemm(1.0, 1.0, false, true)), true, false, Int8Output::Int8 { scale: 0.02 });
    b.add_slack(fam, "Int8Linear five rows", op, vec![Some(x), Some(w), Some(ws), Some(bias)], Pick::Sample(8));
    // A deep K: many k-tiles through every pipeline depth.
    for dt in [F32, F16] {
        let a = b.data(dt, &[48, 264]);
        let w = b.uniform(dt, &[264, 40], -0.5, 0.5);
        b.add(fam, format!("MatMul deep K {dt}"), for_dtype(dt, MatMul {}), vec![Some(a), Some(w)], Pick::Sample(8));
    }
    let x = b.indices(I8, &[32, 512], -128, 128);
    let w = b.indices(I8, &[512, 32], -128, 128);
    let ws = b.uniform(F32, &[32], 0.0001, 0.001);
    let op = int8(mm(), false, false, Int8Output::F32);
    b.add(fam, "Int8Linear deep K [K,N]", op, vec![Some(x), Some(w), Some(ws)], Pick::Sample(6));
    for (name, kind, wshape) in
        [("Gemm [N,K]", LinearKind::Gemm(gemm(1.0, 1.0, false, true)), [48usize, 64usize]), ("MatMul [K,N]", mm(), [64, 48])]
    {
        for output in [Int8Output::F32, Int8Output::F16, Int8Output::Int8 { scale: 0.05 }] {
            let x = b.indices(I8, &[40, 64], -128, 128);
            let w = b.indices(I8, &wshape, -128, 128);
            let ws = b.uniform(F32, &[48], 0.001, 0.01);
            let bias = b.data(F32, &[48]);
            let res_dt = match output {
                Int8Output::F16 => F16,
                _ => F32,
            };
            let r = b.data(res_dt, &[40, 48]);
            let op = int8(kind.clone(), true, true, output);
            b.add_slack(
                fam,
                format!("Int8Linear {name} {output:?}"),
                op,
                vec![Some(x), Some(w), Some(ws), Some(bias), Some(r)],
                Pick::Sample(5),
            );
        }
    }
    let x = b.indices(I8, &[5, 30], -128, 128);
    let w = b.indices(I8, &[7, 30], -128, 128);
    let ws = b.uniform(F32, &[7], 0.001, 0.01);
    let op = int8(LinearKind::Gemm(gemm(1.0, 1.0, false, true)), false, false, Int8Output::Int8 { scale: 0.1 });
    b.add_slack(fam, "Int8Linear misaligned", op, vec![Some(x), Some(w), Some(ws)], Pick::Sample(3));
    fp8_gemm_cases(b);
}

/// FP8 (E4M3) layers: on sm_90 the e4m3 tensor-core tactics, the GEMV and
/// the SIMT ones; on sm_80 only the CUDA-core kernels exist.
fn fp8_gemm_cases(b: &mut Builder) {
    use DType::*;
    let fam = "gemm";
    let relu = Some(Activation::Unary(UnaryKind::Relu));
    let mm = || LinearKind::MatMul(MatMul {});
    let fp8 = |kind: LinearKind, bias: bool, residual: bool, output: Fp8Output| Fp8Linear {
        kind,
        x_scale: 0.02,
        bias,
        epilogue: Epilogue { residual, activation: relu },
        output,
    };
    b.sm = 90;
    for (name, kind, wshape) in
        [("Gemm [N,K]", LinearKind::Gemm(gemm(1.0, 1.0, false, true)), [48usize, 64usize]), ("MatMul [K,N]", mm(), [64, 48])]
    {
        for output in [Fp8Output::F32, Fp8Output::F16, Fp8Output::Fp8 { scale: 0.05 }] {
            let x = b.uniform(F8E4M3FN, &[40, 64], -300.0, 300.0);
            let w = b.uniform(F8E4M3FN, &wshape, -300.0, 300.0);
            let ws = b.uniform(F32, &[48], 0.00001, 0.0001);
            let bias = b.data(F32, &[48]);
            let res_dt = if output == Fp8Output::F16 { F16 } else { F32 };
            let r = b.data(res_dt, &[40, 48]);
            b.add_slack(
                fam,
                format!("Fp8Linear {name} {output:?}"),
                fp8(kind.clone(), true, true, output),
                vec![Some(x), Some(w), Some(ws), Some(bias), Some(r)],
                Pick::Sample(5),
            );
        }
    }
    let x = b.uniform(F8E4M3FN, &[32, 512], -8.0, 8.0);
    let w = b.uniform(F8E4M3FN, &[512, 32], -8.0, 8.0);
    let ws = b.uniform(F32, &[32], 0.001, 0.01);
    b.add(
        fam,
        "Fp8Linear deep K [K,N]",
        fp8(mm(), false, false, Fp8Output::F32),
        vec![Some(x), Some(w), Some(ws)],
        Pick::Sample(6),
    );
    let x = b.uniform(F8E4M3FN, &[5, 96], -8.0, 8.0);
    let w = b.uniform(F8E4M3FN, &[40, 96], -8.0, 8.0);
    let ws = b.uniform(F32, &[40], 0.001, 0.01);
    let bias = b.data(F32, &[40]);
    let op = fp8(LinearKind::Gemm(gemm(1.0, 1.0, false, true)), true, false, Fp8Output::Fp8 { scale: 0.02 });
    b.add_slack(fam, "Fp8Linear five rows", op, vec![Some(x), Some(w), Some(ws), Some(bias)], Pick::Sample(8));
    let x = b.uniform(F8E4M3FN, &[5, 30], -8.0, 8.0);
    let w = b.uniform(F8E4M3FN, &[7, 30], -8.0, 8.0);
    let ws = b.uniform(F32, &[7], 0.001, 0.01);
    let op = fp8(LinearKind::Gemm(gemm(1.0, 1.0, false, true)), false, false, Fp8Output::Fp8 { scale: 0.1 });
    b.add_slack(fam, "Fp8Linear misaligned", op, vec![Some(x), Some(w), Some(ws)], Pick::Sample(3));
    b.sm = 80;
    let x = b.uniform(F8E4M3FN, &[40, 64], -8.0, 8.0);
    let w = b.uniform(F8E4M3FN, &[48, 64], -8.0, 8.0);
    let ws = b.uniform(F32, &[48], 0.001, 0.01);
    let op = fp8(LinearKind::Gemm(gemm(1.0, 1.0, false, true)), false, false, Fp8Output::F32);
    b.add(fam, "Fp8Linear on sm_80 CUDA cores", op, vec![Some(x), Some(w), Some(ws)], Pick::Sample(4));
}
