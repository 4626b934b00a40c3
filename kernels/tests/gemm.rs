//! The GEMM family (`linear::gemm`): realistic layers (ResNet-50's
//! classifier, BERT-base, GPT-2, odd sizes; f32, f16 and int8; plain, fused
//! and batched) get the candidates their shapes call for, and the heuristic
//! candidate of each compiles with NVRTC for sm_80, sm_86, sm_89 and sm_90
//! without register spills. Needs libnvrtc (no GPU).

use std::collections::HashSet;
use trtc_kernels::linear::gemm::problem::Problem;
use trtc_kernels::linear::gemm::tc::{self, TcKind, TcTactic};
use trtc_kernels::{candidates, Candidate, KernelSource, LayerIo, SmLimits, Tactic};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::elementwise::Cast;
use trtc_runtime::ops::elementwise::UnaryKind;
use trtc_runtime::ops::fused::{Activation, Epilogue, Linear, LinearKind};
use trtc_runtime::ops::linalg::{Gemm, MatMul};
use trtc_runtime::ops::precision::{Fp8Linear, Fp8Output, HalfIo, Int8Linear, Int8Output};
use trtc_runtime::{DType, Op, Tensor, TensorType};

mod common;
use common::SMS;

/// A layer: its op and input types; the output type is what the op infers.
struct Layer {
    name: &'static str,
    op: Op,
    inputs: Vec<Option<TensorType>>,
    output: TensorType,
}

fn t(dtype: DType, shape: &[usize]) -> Option<TensorType> {
    Some(common::tensor(dtype, shape))
}

fn layer(name: &'static str, op: Op, inputs: Vec<Option<TensorType>>) -> Layer {
    let refs: Vec<Option<&TensorType>> = inputs.iter().map(|t| t.as_ref()).collect();
    let output = op.infer(&refs).unwrap_or_else(|e| panic!("{name}: {e}")).remove(0);
    Layer { name, op, inputs, output }
}

fn io(l: &Layer) -> LayerIo<'_> {
    LayerIo { op: &l.op, inputs: l.inputs.iter().map(|t| t.as_ref()).collect(), outputs: vec![&l.output] }
}

fn half(op: impl Into<Op>) -> Op {
    HalfIo::new(op.into()).into()
}

fn gemm(trans_b: bool) -> Gemm {
    Gemm { trans_b, ..Gemm::default() }
}

fn linear(kind: LinearKind, bias: bool, residual: bool, activation: Option<Activation>) -> Linear {
    Linear { kind, bias, epilogue: Epilogue { residual, activation } }
}

fn int8(kind: LinearKind, bias: bool, residual: bool, output: Int8Output) -> Int8Linear {
    Int8Linear {
        kind,
        x_scale: 0.02,
        bias,
        epilogue: Epilogue { residual, activation: Some(Activation::Unary(UnaryKind::Relu)) },
        output,
    }
}

fn gelu() -> Option<Activation> {
    Some(Activation::Unary(UnaryKind::Gelu))
}

/// The layers of the models the GEMM family targets, in f32, f16 and int8.
fn layers() -> Vec<Layer> {
    use DType::{F16, F32, I8};
    let mm = || LinearKind::MatMul(MatMul {});
    vec![
        // ResNet-50's classifier: Gemm with trans_b, batch 1 and 32.
        layer("resnet50 fc f32 b1", gemm(true).into(), vec![t(F32, &[1, 2048]), t(F32, &[1000, 2048]), t(F32, &[1000])]),
        layer("resnet50 fc f32 b32", gemm(true).into(), vec![t(F32, &[32, 2048]), t(F32, &[1000, 2048]), t(F32, &[1000])]),
        layer("resnet50 fc f16 b32", half(gemm(true)), vec![t(F16, &[32, 2048]), t(F16, &[1000, 2048]), t(F16, &[1000])]),
        layer(
            "resnet50 fc int8",
            int8(LinearKind::Gemm(gemm(true)), true, false, Int8Output::F32).into(),
            vec![t(I8, &[32, 2048]), t(I8, &[1000, 2048]), t(F32, &[1000]), t(F32, &[1000])],
        ),
        // BERT-base, batch 8 x 128 tokens: QKV, FFN up (GELU), FFN down
        // (residual), attention scores and context.
        layer(
            "bert qkv f32",
            linear(mm(), true, false, None).into(),
            vec![t(F32, &[8, 128, 768]), t(F32, &[768, 2304]), t(F32, &[2304])],
        ),
        layer(
            "bert ffn1 f16",
            half(linear(mm(), true, false, gelu())),
            vec![t(F16, &[8, 128, 768]), t(F16, &[768, 3072]), t(F16, &[3072])],
        ),
        layer(
            "bert ffn2 f16",
            half(linear(mm(), true, true, None)),
            vec![t(F16, &[8, 128, 3072]), t(F16, &[3072, 768]), t(F16, &[768]), t(F16, &[8, 128, 768])],
        ),
        layer(
            "bert ffn1 f32",
            linear(mm(), true, false, gelu()).into(),
            vec![t(F32, &[8, 128, 768]), t(F32, &[768, 3072]), t(F32, &[3072])],
        ),
        layer("bert scores f16", half(MatMul {}), vec![t(F16, &[8, 12, 128, 64]), t(F16, &[8, 12, 64, 128])]),
        layer("bert context f32", MatMul {}.into(), vec![t(F32, &[8, 12, 128, 128]), t(F32, &[8, 12, 128, 64])]),
        layer(
            "bert ffn1 int8 requantized",
            int8(mm(), true, false, Int8Output::Int8 { scale: 0.05 }).into(),
            vec![t(I8, &[8, 128, 768]), t(I8, &[768, 3072]), t(F32, &[3072]), t(F32, &[3072])],
        ),
        layer(
            "bert ffn2 int8 f16 out",
            int8(LinearKind::Gemm(gemm(true)), true, true, Int8Output::F16).into(),
            vec![t(I8, &[1024, 3072]), t(I8, &[768, 3072]), t(F32, &[768]), t(F32, &[768]), t(F16, &[1024, 768])],
        ),
        layer(
            "large f16",
            half(linear(LinearKind::Gemm(gemm(true)), true, false, None)),
            vec![t(F16, &[4096, 768]), t(F16, &[3072, 768]), t(F16, &[3072])],
        ),
        // GPT-2: Conv1D exports as a Gemm with a [K, N] weight.
        layer(
            "gpt2 attn f16",
            half(linear(LinearKind::Gemm(gemm(false)), true, false, None)),
            vec![t(F16, &[1024, 768]), t(F16, &[768, 2304]), t(F16, &[2304])],
        ),
        layer(
            "gpt2 mlp f32",
            linear(LinearKind::Gemm(gemm(false)), true, false, Some(Activation::Unary(UnaryKind::GeluTanh))).into(),
            vec![t(F32, &[1024, 768]), t(F32, &[768, 3072]), t(F32, &[3072])],
        ),
        layer(
            "gpt2 decode f16",
            half(linear(LinearKind::MatMul(MatMul {}), true, true, None)),
            vec![t(F16, &[1, 1, 768]), t(F16, &[768, 2304]), t(F16, &[2304]), t(F16, &[1, 1, 2304])],
        ),
        // Odd sizes: edge tiles, and rows too misaligned for cp.async.
        layer("odd f16 edge tiles", half(gemm(true)), vec![t(F16, &[100, 72]), t(F16, &[200, 72])]),
        layer("odd f32 misaligned", gemm(false).into(), vec![t(F32, &[37, 23]), t(F32, &[23, 51]), t(F32, &[37, 1])]),
        layer(
            "odd f16 misaligned",
            half(Gemm { alpha: 0.5, beta: 2.0, trans_a: true, trans_b: false }),
            vec![t(F16, &[23, 37]), t(F16, &[23, 51]), t(F16, &[51])],
        ),
        layer(
            "odd int8 misaligned",
            int8(LinearKind::Gemm(gemm(true)), false, false, Int8Output::Int8 { scale: 0.1 }).into(),
            vec![t(I8, &[5, 30]), t(I8, &[7, 30]), t(F32, &[7])],
        ),
    ]
}

fn limits() -> SmLimits {
    SmLimits::for_sm(90)
}

fn selection(l: &Layer) -> Vec<Candidate> {
    candidates(&io(l), &limits()).unwrap_or_else(|e| panic!("{}: {e}", l.name))
}

fn find<'a>(layers: &'a [Layer], name: &str) -> &'a Layer {
    layers.iter().find(|l| l.name == name).unwrap()
}

fn problem(l: &Layer) -> Problem {
    let op = match &l.op {
        Op::Precision(trtc_runtime::ops::precision::PrecisionOp::HalfIo(h)) => &*h.inner,
        op => op,
    };
    Problem::of(&LayerIo { op, ..io(l) }).unwrap()
}

fn compile_everywhere(k: &KernelSource, what: &str) {
    for sm in SMS {
        common::compile_source(&k.source, what, sm, what);
    }
}

#[test]
fn heuristic_candidates_compile_for_every_sm_without_spills() {
    common::require_nvrtc();
    let mut seen = HashSet::new();
    for l in layers() {
        let c = &selection(&l)[0];
        let k = &c.launches[0].kernel;
        if seen.insert(k.source.clone()) {
            compile_everywhere(k, &format!("{} ({})", l.name, c.tactic));
        }
    }
    assert!(seen.len() >= 10, "{} distinct kernels", seen.len());
}

#[test]
fn tensor_core_extremes_compile() {
    // The corners of the tactic space, for every kind and B layout: the
    // largest tiles, the deepest pipeline, the smallest blocks.
    let layers = layers();
    let cases = [
        ("bert ffn1 f16", "gemm_tc_f16 256x128x32 w4x2 s2"),
        ("resnet50 fc f16 b32", "gemm_tc_f16 64x128x64 w2x2 s2"),
        ("gpt2 mlp f32", "gemm_tc_tf32 128x128x16 w2x4 s3"),
        ("resnet50 fc f32 b32", "gemm_tc_tf32 16x64x32 w1x2 s4"),
        ("resnet50 fc int8", "gemm_tc_s8 128x256x64 w2x4 s2"),
        ("bert ffn2 int8 f16 out", "gemm_tc_s8 32x32x128 w1x1 s4"),
        ("bert ffn1 int8 requantized", "gemm_tc_s8 256x128x64 w4x2 s2"),
        ("bert ffn1 int8 requantized", "gemm_tc_s8 32x32x128 w1x1 s4"),
    ];
    for (name, tactic) in cases {
        let all = selection(find(&layers, name));
        let c = all.iter().find(|c| c.tactic == tactic).unwrap_or_else(|| panic!("{name}: no {tactic}"));
        let k = &c.launches[0].kernel;
        common::compile_source(&k.source, tactic, 80, &format!("{name} {tactic}"));
    }
}

/// FP8 GEMMs: e4m3 tensor cores from sm_89 (the heuristic's first choice,
/// sized to the problem), the exact CUDA-core kernels before; the heuristic
/// kernel and the corners of the e4m3 tactic space compile without spills
/// where they are offered.
#[test]
fn fp8_gemms_take_e4m3_tensor_cores_from_sm_89() {
    common::require_nvrtc();
    use DType::{F32, F8E4M3FN};
    let fp8 = |kind: LinearKind, output: Fp8Output| Fp8Linear {
        kind,
        x_scale: 0.02,
        bias: true,
        epilogue: Epilogue { residual: false, activation: gelu() },
        output,
    };
    let q = Fp8Output::Fp8 { scale: 0.05 };
    let layers = [
        layer(
            "bert ffn1 fp8 requantized",
            fp8(LinearKind::Gemm(gemm(true)), q).into(),
            vec![t(F8E4M3FN, &[1024, 768]), t(F8E4M3FN, &[3072, 768]), t(F32, &[3072]), t(F32, &[3072])],
        ),
        layer(
            "gpt2 mlp fp8 [K,N]",
            fp8(LinearKind::MatMul(MatMul {}), Fp8Output::F32).into(),
            vec![t(F8E4M3FN, &[512, 768]), t(F8E4M3FN, &[768, 3072]), t(F32, &[3072]), t(F32, &[3072])],
        ),
    ];
    for l in &layers {
        let on = |sm: u32| candidates(&io(l), &SmLimits::for_sm(sm)).unwrap_or_else(|e| panic!("{}: {e}", l.name));
        let names = |c: &[Candidate]| c.iter().map(|c| c.tactic.to_string()).collect::<Vec<_>>();
        let hopper = on(90);
        assert!(names(&hopper)[0].starts_with("gemm_tc_e4m3"), "{}: {:?}", l.name, names(&hopper)[0]);
        let ampere = on(86);
        assert!(names(&ampere).iter().all(|n| !n.contains("e4m3")), "{}: e4m3 offered on sm_86", l.name);
        for (sm, c) in [(86, &ampere[0]), (89, &on(89)[0]), (90, &hopper[0])] {
            common::compile_source(&c.launches[0].kernel.source, "fp8", sm, &format!("{} ({}) on sm_{sm}", l.name, c.tactic));
        }
        // On sm_90 ptxas turns each e4m3 mma into conversions and two f16
        // mmas: every tactic offered there must still fit the registers.
        for c in hopper.iter().filter(|c| c.tactic.to_string().starts_with("gemm_tc_e4m3")) {
            common::compile_source(&c.launches[0].kernel.source, "fp8", 90, &format!("{} ({})", l.name, c.tactic));
        }
    }
}

#[test]
fn every_candidate_is_launchable_and_unique() {
    for l in layers() {
        let all = selection(&l);
        common::assert_unique_tactics(l.name, &all);
        let p = problem(&l);
        for c in &all {
            assert_eq!(c.launches.len(), 1);
            let la = &c.launches[0];
            let threads: u32 = la.block.iter().product();
            assert!((32..=1024).contains(&threads) && threads.is_multiple_of(32), "{} {}: {threads} threads", l.name, c.tactic);
            common::assert_grid(&c.tactic, la.grid);
            assert_eq!(la.shared_bytes, 0, "static shared memory only");
            // A, B, [w_scale], [E], [R], Y, 4 i32, 4 i64, [4 i64], 4 f32.
            let pointers = 3 + p.w_scale.is_some() as usize + p.addend.is_some() as usize + p.residual.is_some() as usize;
            let expected = pointers + 8 + 4 * p.addend.is_some() as usize + 4;
            assert_eq!(la.args.len(), expected, "{} {}", l.name, c.tactic);
            assert_eq!(la.args[pointers - 1], KernelArg::Output(0));
            let i32s = la.args.iter().filter(|a| matches!(a, KernelArg::I32(_))).count();
            let f32s = la.args.iter().filter(|a| matches!(a, KernelArg::F32(_))).count();
            assert_eq!((i32s, f32s), (4, 4));
            let name = c.tactic.to_string();
            let family = name.split(' ').next().unwrap();
            let family = if family.starts_with("gemm_tc") { "gemm_tc" } else { family };
            assert_eq!(la.kernel.entry, format!("trtc_{family}"));
        }
    }
}

#[test]
fn heuristic_prefers_tensor_cores_with_tiles_sized_to_the_problem() {
    let layers = layers();
    let first = |name: &str| selection(find(&layers, name))[0].tactic.to_string();
    // Large f16 GEMMs: 128x128 tiles or larger; BERT-sized ones 128 rows
    // (128x64 when 128x128 would leave the last wave half empty).
    let t = first("large f16");
    assert!(["128x128x", "128x256x", "256x128x"].iter().any(|s| t.starts_with(&format!("gemm_tc_f16 {s}"))), "large: {t}");
    for name in ["bert ffn1 f16", "bert ffn2 f16", "gpt2 attn f16", "bert scores f16"] {
        let t = first(name);
        assert!(t.starts_with("gemm_tc_f16 128x") || t.starts_with("gemm_tc_f16 256x"), "{name}: {t}");
    }
    // Large f32 GEMMs use tf32; the batched attention products too.
    for name in ["bert ffn1 f32", "bert qkv f32", "gpt2 mlp f32", "bert context f32"] {
        assert!(first(name).starts_with("gemm_tc_tf32 "), "{name}: {}", first(name));
    }
    // Small ones get smaller tiles than 128x128.
    let t = first("resnet50 fc f16 b32");
    assert!(t.starts_with("gemm_tc_f16 32x") || t.starts_with("gemm_tc_f16 16x"), "fc f16: {t}");
    // int8 runs on s8 tensor cores with either weight layout.
    assert!(first("resnet50 fc int8").starts_with("gemm_tc_s8 "));
    assert!(first("bert ffn2 int8 f16 out").starts_with("gemm_tc_s8 128x"));
    assert!(first("bert ffn1 int8 requantized").starts_with("gemm_tc_s8 128x"));
    // A batch-1 classifier is a matrix-vector product.
    assert_eq!(first("resnet50 fc f32 b1"), "gemm_gemv r1");
    assert_eq!(first("gpt2 decode f16"), "gemm_gemv r1");
    // Small f32 GEMMs stay exact.
    assert!(first("odd f32 misaligned").starts_with("gemm_simt "));
    // Misaligned or transposed A: SIMT only.
    for name in ["odd f32 misaligned", "odd f16 misaligned", "odd int8 misaligned"] {
        assert!(selection(find(&layers, name)).iter().all(|c| !matches!(c.tactic, Tactic::GemmTc(_))), "{name}");
    }
    // Edge tiles do not need alignment beyond the rows.
    assert!(first("odd f16 edge tiles").starts_with("gemm_tc_f16 "));
}

#[test]
fn matmul_batches_fold_into_rows_or_split_over_the_grid() {
    use DType::F32;
    // A shared weight: batch folds into M.
    let l = layer("fold", MatMul {}.into(), vec![t(F32, &[4, 3, 5, 8]), t(F32, &[8, 6])]);
    let p = problem(&l);
    assert_eq!((p.m, p.n, p.k, p.nz), (60, 6, 8, [1, 1]));
    // Both batched: one z group.
    let l = layer("batched", MatMul {}.into(), vec![t(F32, &[4, 3, 5, 8]), t(F32, &[4, 3, 8, 6])]);
    let p = problem(&l);
    assert_eq!((p.m, p.nz, p.sa, p.sb), (5, [1, 12], [0, 40], [0, 48]));
    // A broadcast over the first batch dimension, B over the second: two
    // groups.
    let l = layer("two groups", MatMul {}.into(), vec![t(F32, &[1, 3, 5, 8]), t(F32, &[4, 1, 8, 6])]);
    let p = problem(&l);
    assert_eq!((p.nz, p.sa, p.sb), ([4, 3], [0, 40], [48, 0]));
    // A bias [5, 6] broadcast over the batch keeps the rows apart.
    let op: Op = linear(LinearKind::MatMul(MatMul {}), true, false, None).into();
    let l = layer("bias per row", op, vec![t(F32, &[4, 5, 8]), t(F32, &[8, 6]), t(F32, &[5, 6])]);
    let p = problem(&l);
    assert_eq!((p.m, p.nz), (5, [1, 4]));
    assert_eq!(p.addend.as_ref().unwrap().strides, [0, 0, 6, 1]);
    // A per-column bias folds.
    let op: Op = linear(LinearKind::MatMul(MatMul {}), true, false, None).into();
    let l = layer("bias per column", op, vec![t(F32, &[4, 5, 8]), t(F32, &[8, 6]), t(F32, &[1, 6])]);
    let p = problem(&l);
    assert_eq!((p.m, p.nz), (20, [1, 1]));
    assert_eq!(p.addend.as_ref().unwrap().strides, [0, 0, 0, 1]);
    // 1-D operands.
    let l = layer("vector", MatMul {}.into(), vec![t(F32, &[8]), t(F32, &[3, 8, 6])]);
    let p = problem(&l);
    assert_eq!((p.m, p.n, p.nz, p.sb), (1, 6, [1, 3], [0, 48]));
    // Gemm's C broadcast per row, scaled by beta; ignored when beta is 0.
    let l =
        layer("gemm c", Gemm { beta: 0.5, ..Gemm::default() }.into(), vec![t(F32, &[4, 8]), t(F32, &[8, 6]), t(F32, &[4, 1])]);
    let p = problem(&l);
    assert_eq!((p.beta, p.addend.as_ref().unwrap().strides), (0.5, [0, 0, 1, 0]));
    let l =
        layer("gemm beta 0", Gemm { beta: 0.0, ..Gemm::default() }.into(), vec![t(F32, &[4, 8]), t(F32, &[8, 6]), t(F32, &[6])]);
    assert!(problem(&l).addend.is_none());
}

#[test]
fn unsupported_layers_say_why() {
    use DType::{F32, F64, I32};
    let cases = [
        layer("int gemm", Gemm::default().into(), vec![t(I32, &[4, 8]), t(I32, &[8, 6])]),
        layer("f64 matmul", MatMul {}.into(), vec![t(F64, &[4, 8]), t(F64, &[8, 6])]),
        layer("empty", MatMul {}.into(), vec![t(F32, &[0, 8]), t(F32, &[8, 6])]),
        // Three batch dimensions broadcast alternately: more than two groups.
        layer("three groups", MatMul {}.into(), vec![t(F32, &[2, 1, 2, 5, 8]), t(F32, &[1, 3, 1, 8, 6])]),
    ];
    for l in &cases {
        let e = candidates(&io(l), &limits()).expect_err(l.name);
        assert!(!e.0.is_empty());
    }
}

#[test]
fn tactic_validity() {
    let l = limits();
    let all = TcTactic::all(TcKind::F16, &l, true);
    assert!(all.len() > 20 && all.iter().all(|t| t.is_valid(&l, true)));
    assert!(all.iter().all(|t| t.shared_bytes() <= 48 * 1024 && t.threads() <= 1024));
    let big = TcTactic { kind: TcKind::F16, bm: 128, bn: 128, bk: 32, wm: 2, wn: 2, stages: 3 };
    assert!(big.is_valid(&l, true) && big.is_valid(&l, false));
    // 4 stages of 128x128x32 f16 need 64 KiB.
    assert!(!TcTactic { stages: 4, ..big }.is_valid(&l, true));
    // Warp tiles must be whole 16x16 mma pairs; 128x128 per warp exceeds
    // the registers.
    assert!(!TcTactic { wm: 3, ..big }.is_valid(&l, true));
    assert!(!TcTactic { wm: 1, wn: 1, stages: 2, ..big }.is_valid(&l, true));
    // int8 stages a [K, N] B through registers: more registers.
    let s8 = TcTactic { kind: TcKind::S8, bk: 64, ..big };
    assert!(s8.is_valid(&l, true) && s8.is_valid(&l, false));
    assert!(s8.registers(false) > s8.registers(true));
    // tf32 [K, N] tiles need 32-column multiples.
    let tf = TcTactic { kind: TcKind::Tf32, bm: 32, bn: 16, bk: 16, wm: 1, wn: 1, stages: 2 };
    assert!(tf.is_valid(&l, true) && !tf.is_valid(&l, false));
    // The cost model prefers full waves of big tiles on big problems.
    let layers = layers();
    let p = problem(find(&layers, "bert ffn1 f16"));
    let small = TcTactic { bm: 32, bn: 32, wm: 1, wn: 1, ..big };
    assert!(tc::cost(&big, &p, 90) < tc::cost(&small, &p, 90));
}

/// What a GEMM launch computes, read from its source's `#define`s and its
/// arguments the way `gemm_common.cuh` and the kernels use them: the
/// contract the CUDA code implements, evaluated on the host (sums in f64,
/// the epilogue in f32 operation by operation).
fn interpret(source: &str, args: &[KernelArg], grid: [u32; 3], inputs: &[Option<Tensor>], out: &TensorType) -> Tensor {
    let define = |name: &str| -> String {
        let key = format!("#define {name} ");
        let line = source.lines().find(|l| l.starts_with(&key)).unwrap_or_else(|| panic!("no {name}"));
        line[key.len()..].trim().to_string()
    };
    let flag = |name: &str| define(name) == "1";
    let (int8, has_e, has_r, trans_a, trans_b) =
        (flag("GEMM_INT8"), flag("HAS_E"), flag("HAS_R"), flag("TRANS_A"), flag("TRANS_B"));
    if source.contains("trtc_gemm_tc(") {
        assert!(!trans_a && flag("B_KMAJOR") == trans_b, "tensor-core layouts");
    }
    let act = define("ACT(v)");
    let relu = match act.as_str() {
        "(v)" => false,
        "(trtc_relu(v))" => true,
        a => panic!("activation {a} not interpreted"),
    };
    let mut it = args.iter();
    let mut ptr = || match it.next() {
        Some(KernelArg::Input(k)) => inputs[*k as usize].as_ref().unwrap().to_f64_vec(),
        a => panic!("expected a pointer, got {a:?}"),
    };
    let (a, b) = (ptr(), ptr());
    let ws = if int8 { ptr() } else { vec![] };
    let e = if has_e { ptr() } else { vec![] };
    let r = if has_r { ptr() } else { vec![] };
    assert_eq!(it.next(), Some(&KernelArg::Output(0)));
    let mut i32s = || match it.next() {
        Some(KernelArg::I32(v)) => *v as usize,
        a => panic!("expected an i32, got {a:?}"),
    };
    let (m, n, k, nz1) = (i32s(), i32s(), i32s(), i32s());
    let mut i64s = || match it.next() {
        Some(KernelArg::I64(v)) => *v,
        a => panic!("expected an i64, got {a:?}"),
    };
    let (sa0, sa1, sb0, sb1) = (i64s(), i64s(), i64s(), i64s());
    let se = if has_e { [i64s(), i64s(), i64s(), i64s()] } else { [0; 4] };
    let mut f32s = || match it.next() {
        Some(KernelArg::F32(v)) => *v,
        a => panic!("expected an f32, got {a:?}"),
    };
    let (alpha, beta, x_scale, y_scale) = (f32s(), f32s(), f32s(), f32s());
    assert!(it.next().is_none());
    let batch = grid[2] as usize;
    let mut y = vec![0f32; batch * m * n];
    for z in 0..batch {
        let (z0, z1) = ((z / nz1) as i64, (z % nz1) as i64);
        let (oa, ob) = (z0 * sa0 + z1 * sa1, z0 * sb0 + z1 * sb1);
        for row in 0..m {
            for col in 0..n {
                let mut acc = 0f64;
                for kk in 0..k {
                    let ia = oa + if trans_a { kk * m + row } else { row * k + kk } as i64;
                    let ib = ob + if trans_b { col * k + kk } else { kk * n + col } as i64;
                    acc += a[ia as usize] * b[ib as usize];
                }
                let mut v = if int8 { ((alpha as f64 * acc) as f32) * (x_scale * ws[col] as f32) } else { alpha * acc as f32 };
                if has_e {
                    v += beta * e[(z0 * se[0] + z1 * se[1] + row as i64 * se[2] + col as i64 * se[3]) as usize] as f32;
                }
                let o = z * m * n + row * n + col;
                if has_r {
                    v += r[o] as f32;
                }
                if relu {
                    v = if v > 0.0 { v } else { 0.0 };
                }
                y[o] = v;
            }
        }
    }
    assert_eq!(y.len(), out.len());
    let y32 = Tensor::from_vec(out.shape.clone(), y).unwrap();
    match out.dtype {
        DType::F32 => y32,
        DType::F16 => Op::from(Cast::new(DType::F16)).eval_owned(&[Some(&y32)]).unwrap().remove(0),
        DType::I8 => {
            let q: Vec<i8> = y32
                .as_slice::<f32>()
                .unwrap()
                .iter()
                .map(|&v| {
                    let q = (v / y_scale).round_ties_even();
                    if q.is_nan() {
                        0
                    } else {
                        q.clamp(-128.0, 127.0) as i8
                    }
                })
                .collect();
            Tensor::from_vec(out.shape.clone(), q).unwrap()
        }
        d => panic!("output {d}"),
    }
}

/// Deterministic pseudo-random values of a type: floats in [-1, 1] (f16
/// rounded from f32), int8 in [-127, 127].
fn random(t: &TensorType, seed: u64) -> Tensor {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut next = move || {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (s >> 33) as u32
    };
    match t.dtype {
        DType::I8 => {
            Tensor::from_vec(t.shape.clone(), (0..t.len()).map(|_| ((next() % 255) as i32 - 127) as i8).collect::<Vec<i8>>())
                .unwrap()
        }
        DType::F32 | DType::F16 => {
            let v: Vec<f32> = (0..t.len()).map(|_| (next() % 2001) as f32 / 1000.0 - 1.0).collect();
            let f = Tensor::from_vec(t.shape.clone(), v).unwrap();
            if t.dtype == DType::F32 {
                f
            } else {
                Op::from(Cast::new(DType::F16)).eval_owned(&[Some(&f)]).unwrap().remove(0)
            }
        }
        d => panic!("random {d}"),
    }
}

#[test]
fn launches_compute_what_the_cpu_reference_computes() {
    use DType::{F16, F32, I8};
    let relu = Some(Activation::Unary(UnaryKind::Relu));
    let layers = vec![
        layer(
            "gemm f32 transposed, C per row",
            Gemm { alpha: 0.5, beta: 2.0, trans_a: true, trans_b: true }.into(),
            vec![t(F32, &[12, 9]), t(F32, &[7, 12]), t(F32, &[9, 1])],
        ),
        layer("gemm f16, C per column", half(gemm(false)), vec![t(F16, &[20, 24]), t(F16, &[24, 40]), t(F16, &[40])]),
        layer(
            "gemm f32 scalar C",
            Gemm { beta: 0.25, ..gemm(true) }.into(),
            vec![t(F32, &[70, 64]), t(F32, &[36, 64]), t(F32, &[])],
        ),
        layer("matmul two batch groups", MatMul {}.into(), vec![t(F32, &[1, 3, 5, 8]), t(F32, &[4, 1, 8, 6])]),
        layer("matmul f16 vector", half(MatMul {}), vec![t(F16, &[16]), t(F16, &[3, 16, 8])]),
        layer(
            "gemv f32 transposed",
            Gemm { beta: 1.0, trans_a: true, ..gemm(true) }.into(),
            vec![t(F32, &[40, 3]), t(F32, &[50, 40]), t(F32, &[50])],
        ),
        layer(
            "gemv int8 [K, N]",
            int8(LinearKind::MatMul(MatMul {}), true, false, Int8Output::F32).into(),
            vec![t(I8, &[2, 40]), t(I8, &[40, 33]), t(F32, &[33]), t(F32, &[33])],
        ),
        layer("matmul f16 folded", half(MatMul {}), vec![t(F16, &[3, 17, 32]), t(F16, &[32, 24])]),
        layer(
            "fused matmul bias per row, residual, relu",
            linear(LinearKind::MatMul(MatMul {}), true, true, relu).into(),
            vec![t(F32, &[4, 5, 8]), t(F32, &[8, 6]), t(F32, &[5, 6]), t(F32, &[4, 5, 6])],
        ),
        layer(
            "fused gemm f16 bias, residual, relu",
            half(linear(LinearKind::Gemm(Gemm { beta: 0.5, ..gemm(true) }), true, true, relu)),
            vec![t(F16, &[33, 40]), t(F16, &[24, 40]), t(F16, &[24]), t(F16, &[33, 24])],
        ),
        layer(
            "int8 gemm alpha, f16 residual",
            int8(LinearKind::Gemm(Gemm { alpha: 1.5, ..gemm(true) }), true, true, Int8Output::F32).into(),
            vec![t(I8, &[9, 48]), t(I8, &[20, 48]), t(F32, &[20]), t(F32, &[20]), t(F16, &[9, 20])],
        ),
        layer(
            "int8 matmul requantized",
            int8(LinearKind::MatMul(MatMul {}), true, false, Int8Output::Int8 { scale: 0.05 }).into(),
            vec![t(I8, &[2, 5, 32]), t(I8, &[32, 6]), t(F32, &[6]), t(F32, &[6])],
        ),
        layer(
            "int8 gemm f16 out",
            int8(LinearKind::Gemm(gemm(true)), false, false, Int8Output::F16).into(),
            vec![t(I8, &[40, 64]), t(I8, &[24, 64]), t(F32, &[24])],
        ),
    ];
    for (i, l) in layers.iter().enumerate() {
        let mut inputs: Vec<Option<Tensor>> =
            l.inputs.iter().enumerate().map(|(j, t)| t.as_ref().map(|t| random(t, (i * 10 + j) as u64))).collect();
        // Weight scales must be positive.
        if let Op::Precision(trtc_runtime::ops::precision::PrecisionOp::Int8Linear(_)) = l.op {
            let ws = inputs[2]
                .as_ref()
                .unwrap()
                .as_slice::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.abs() * 0.01 + 0.001)
                .collect::<Vec<f32>>();
            inputs[2] = Some(Tensor::from_vec(vec![ws.len()], ws).unwrap());
        }
        let refs: Vec<Option<&Tensor>> = inputs.iter().map(|t| t.as_ref()).collect();
        let expected = l.op.eval_owned(&refs).unwrap().remove(0).to_f64_vec();
        let all = selection(l);
        let simt = all.iter().find(|c| matches!(c.tactic, Tactic::GemmSimt(_))).unwrap();
        let tc = all.iter().find(|c| matches!(c.tactic, Tactic::GemmTc(_)));
        let gemv = all.iter().find(|c| matches!(c.tactic, Tactic::Gemv(_)));
        for c in [Some(&all[0]), Some(simt), tc, gemv].into_iter().flatten() {
            let la = &c.launches[0];
            let got = interpret(&la.kernel.source, &la.args, la.grid, &inputs, &l.output).to_f64_vec();
            let tol = match l.output.dtype {
                DType::F32 if !matches!(l.op, Op::Precision(_)) => 1e-5,
                DType::F16 => 1e-3,
                _ => 0.0,
            };
            for (j, (g, e)) in got.iter().zip(&expected).enumerate() {
                assert!((g - e).abs() <= tol * (1.0 + e.abs()), "{} {}: element {j}: {g} vs {e}", l.name, c.tactic);
            }
        }
    }
}
