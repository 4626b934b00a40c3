//! The elementwise family (elementwise ops, quantization, fused pointwise
//! programs): candidates for realistic layers (ResNet-50, MobileNetV2,
//! BERT-base shapes and odd sizes, f32 and f16), their validity, the cases
//! that stay on the host, and NVRTC compiles of the heuristic candidates for
//! every SM trtc targets, with each launch's arguments checked against the
//! compiled kernel's parameters.

use trtc_kernels::{activation, pointwise, Candidate};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::elementwise::{
    Binary, BinaryKind, BitwiseNot, Cast, CastNoSaturate, Clip, Compare, CompareKind, IsInf, IsNaN, Not, Pow, Unary, UnaryKind,
    Where,
};
use trtc_runtime::ops::fused::{Instr, Pointwise, PointwiseBinary};
use trtc_runtime::ops::quant::{DequantizeLinear, DynamicQuantizeLinear, QuantizeLinear};
use trtc_runtime::ops::Op;
use trtc_runtime::{DType, TensorType};

mod common;
use common::{Family, Layer};

/// What the executor checks of this family's launches.
const FAMILY: Family = Family { threads: 32..=1024, max_shared: 0, entry_prefix: "trtc_", param_sizes: true };

impl Layer {
    /// A float layer: inputs of `dtype` (f16 under HalfIo).
    fn float(op: impl Into<Op>, dtype: DType, shapes: &[&[usize]]) -> Layer {
        let inputs = shapes.iter().map(|s| Some(TensorType::new(dtype, *s))).collect();
        Layer::typed(op, dtype == DType::F16, inputs)
    }

    /// A layer with inputs of the given dtypes, not wrapped.
    fn of(op: impl Into<Op>, inputs: &[(DType, &[usize])]) -> Layer {
        Layer::typed(op, false, inputs.iter().map(|(d, s)| Some(TensorType::new(*d, *s))).collect())
    }

    fn candidates(&self) -> Vec<Candidate> {
        self.candidates_of(&FAMILY)
    }
}

/// Compiles every launch of `c` for `sms`: a cubin, no spills, and
/// arguments of the kernel's parameter sizes.
fn compile(c: &Candidate, sms: &[u32]) {
    common::compile(c, sms, FAMILY.param_sizes);
}

/// Compiles the heuristic candidate of each layer for every SM.
fn compile_heuristic(layers: &[Layer]) {
    common::compile_heuristic(layers, &FAMILY);
}

fn binary(kind: BinaryKind) -> Binary {
    Binary::new(kind)
}

#[test]
fn arithmetic_of_real_models_compiles() {
    let mut layers = Vec::new();
    for dtype in [DType::F32, DType::F16] {
        // ResNet-50 residual add and ReLU; MobileNetV2 ReLU6.
        layers.push(Layer::float(binary(BinaryKind::Add), dtype, &[&[1, 256, 56, 56], &[1, 256, 56, 56]]));
        layers.push(Layer::float(Unary::new(UnaryKind::Relu), dtype, &[&[1, 64, 112, 112]]));
        layers.push(Layer::float(Clip::new(Some(0.0), Some(6.0)), dtype, &[&[1, 32, 112, 112]]));
        // BERT-base: bias add, attention scaling, the mask add, GELU's Erf.
        layers.push(Layer::float(binary(BinaryKind::Add), dtype, &[&[1, 128, 768], &[768]]));
        layers.push(Layer::float(binary(BinaryKind::Div), dtype, &[&[1, 12, 128, 128], &[]]));
        layers.push(Layer::float(binary(BinaryKind::Add), dtype, &[&[1, 12, 128, 128], &[1, 1, 1, 128]]));
        layers.push(Layer::float(Unary::new(UnaryKind::Erf), dtype, &[&[1, 128, 3072]]));
        layers.push(Layer::float(Pow, dtype, &[&[1, 128, 768], &[]]));
        // Per-channel scale of a batch-norm decomposition, an outer product,
        // odd sizes, Mod both ways, PRelu with a channel slope.
        layers.push(Layer::float(binary(BinaryKind::Mul), dtype, &[&[2, 3, 17, 19], &[3, 1, 1]]));
        layers.push(Layer::float(binary(BinaryKind::Sub), dtype, &[&[7, 1], &[1, 5]]));
        layers.push(Layer::float(binary(BinaryKind::Mod { fmod: false }), dtype, &[&[3, 5, 7], &[5, 1]]));
        layers.push(Layer::float(binary(BinaryKind::Mod { fmod: true }), dtype, &[&[13], &[13]]));
        layers.push(Layer::float(binary(BinaryKind::PRelu), dtype, &[&[1, 16, 9, 9], &[16, 1, 1]]));
        layers.push(Layer::float(binary(BinaryKind::Max), dtype, &[&[4, 1, 6], &[5, 1]]));
        layers.push(Layer::float(Compare::new(CompareKind::Less), dtype, &[&[2, 3], &[3]]));
        layers.push(Layer::float(IsNaN, dtype, &[&[11]]));
        layers.push(Layer::float(IsInf { detect_positive: true, detect_negative: false }, dtype, &[&[11]]));
        let (c, x) = (TensorType::new(DType::Bool, [1, 1, 768]), TensorType::new(dtype, [1, 128, 768]));
        layers.push(Layer::typed(Where, dtype == DType::F16, vec![Some(c), Some(x.clone()), Some(x)]));
    }
    compile_heuristic(&layers);
}

#[test]
fn integer_and_bool_ops_compile() {
    let i = |d: DType, s: &'static [usize]| (d, s);
    let mut layers = Vec::new();
    for d in [DType::I8, DType::I32, DType::I64, DType::U8, DType::U64] {
        for kind in
            [BinaryKind::Add, BinaryKind::Div, BinaryKind::Mod { fmod: false }, BinaryKind::BitShiftRight, BinaryKind::PRelu]
        {
            layers.push(Layer::of(binary(kind), &[i(d, &[2, 3, 5]), i(d, &[5])]));
        }
        layers.push(Layer::of(Unary::new(UnaryKind::Abs), &[i(d, &[9])]));
        layers.push(Layer::of(Clip::new(Some(-3.0), None), &[i(d, &[9])]));
        layers.push(Layer::of(Pow, &[i(d, &[9]), i(DType::I64, &[])]));
        layers.push(Layer::of(BitwiseNot, &[i(d, &[9])]));
    }
    layers.push(Layer::of(binary(BinaryKind::Mul), &[i(DType::I16, &[4, 4]), i(DType::I16, &[4, 1])]));
    layers.push(Layer::of(binary(BinaryKind::BitShiftLeft), &[i(DType::U16, &[8]), i(DType::U16, &[8])]));
    layers.push(Layer::of(binary(BinaryKind::Xor), &[i(DType::Bool, &[2, 8]), i(DType::Bool, &[8])]));
    layers.push(Layer::of(Not, &[i(DType::Bool, &[10])]));
    layers.push(Layer::of(Compare::new(CompareKind::Equal), &[i(DType::I64, &[1, 128]), i(DType::I64, &[])]));
    layers.push(Layer::of(Compare::new(CompareKind::GreaterOrEqual), &[i(DType::Bool, &[3]), i(DType::Bool, &[3])]));
    layers.push(Layer::of(Where, &[i(DType::Bool, &[4, 1]), i(DType::I64, &[4, 6]), i(DType::I64, &[6])]));
    layers.push(Layer::of(Pow, &[i(DType::F32, &[5]), i(DType::I32, &[5])]));
    // BERT's attention mask: an i64 input cast to f32, or to f16 under HalfIo.
    layers.push(Layer::of(Cast::new(DType::F32), &[i(DType::I64, &[1, 128])]));
    let wrapped = Layer::typed(Cast::new(DType::F32), true, vec![Some(TensorType::new(DType::I64, [1, 128]))]);
    assert_eq!(wrapped.outputs[0].dtype, DType::F16);
    layers.push(wrapped);
    for (from, to) in [
        (DType::F32, DType::I32),
        (DType::F16, DType::U8),
        (DType::F32, DType::F16),
        (DType::F16, DType::F32),
        (DType::U8, DType::Bool),
        (DType::F32, DType::Bool),
        (DType::I64, DType::I8),
        (DType::Bool, DType::F32),
        (DType::F32, DType::U64),
    ] {
        layers.push(Layer::of(Cast::new(to), &[i(from, &[3, 7])]));
    }
    compile_heuristic(&layers);
}

#[test]
fn every_unary_kind_compiles() {
    for kind in activation::supported_unary_kinds() {
        for dtype in [DType::F32, DType::F16] {
            let c = Layer::float(Unary::new(kind), dtype, &[&[3, 50]]).candidates();
            compile(&c[0], &[80]);
        }
    }
    for kind in [UnaryKind::Neg, UnaryKind::Sign, UnaryKind::Relu] {
        let c = Layer::of(Unary::new(kind), &[(DType::I16, &[7])]).candidates();
        compile(&c[0], &[80]);
    }
}

#[test]
fn quantization_compiles() {
    let mut layers = Vec::new();
    for dtype in [DType::F32, DType::F16] {
        // Per-tensor activations with a zero point, per-channel weights
        // without, blocked scales.
        let q = |axis, block_size, output_dtype| QuantizeLinear { axis, block_size, output_dtype };
        let x = TensorType::new(dtype, [1, 64, 56, 56]);
        let s = TensorType::new(dtype, []);
        layers.push(Layer::typed(
            q(1, 0, DType::U8),
            false,
            vec![Some(x.clone()), Some(s.clone()), Some(TensorType::new(DType::U8, []))],
        ));
        let w = TensorType::new(dtype, [64, 3, 3, 3]);
        layers.push(Layer::typed(q(0, 0, DType::I8), false, vec![Some(w), Some(TensorType::new(dtype, [64]))]));
        layers.push(Layer::typed(
            q(1, 32, DType::I16),
            false,
            vec![Some(TensorType::new(dtype, [4, 96])), Some(TensorType::new(dtype, [4, 3])), None],
        ));
        let d = DequantizeLinear { axis: 0, block_size: 0 };
        let xi = TensorType::new(DType::I8, [64, 3, 3, 3]);
        layers.push(Layer::typed(
            d.clone(),
            false,
            vec![Some(xi), Some(TensorType::new(dtype, [64])), Some(TensorType::new(DType::I8, [64]))],
        ));
        layers.push(Layer::typed(
            d,
            false,
            vec![Some(TensorType::new(DType::U8, [1, 64, 56, 56])), Some(TensorType::new(dtype, []))],
        ));
    }
    compile_heuristic(&layers);
    let i32_input = Layer::typed(
        QuantizeLinear { axis: 0, block_size: 0, output_dtype: DType::I8 },
        false,
        vec![Some(TensorType::new(DType::I32, [10])), Some(TensorType::new(DType::F32, []))],
    );
    compile(&i32_input.candidates()[0], &[80]);
}

#[test]
fn eight_bit_float_and_four_bit_conversions_compile() {
    // FP8 (ModelOpt-style Q/DQ around a layer, casts with and without
    // saturation) and INT4 weight-only quantization (blocked scales).
    let mut layers = Vec::new();
    let x = TensorType::new(DType::F16, [8, 128, 768]);
    for f in [DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ] {
        let zero = TensorType::new(f, []);
        let q = QuantizeLinear { axis: 0, block_size: 0, output_dtype: f };
        layers.push(Layer::typed(q, false, vec![Some(x.clone()), Some(TensorType::new(DType::F16, [])), Some(zero.clone())]));
        let d = DequantizeLinear { axis: 0, block_size: 0 };
        layers.push(Layer::typed(d, false, vec![Some(TensorType::new(f, [8, 128, 768])), Some(TensorType::new(DType::F32, []))]));
        layers.push(Layer::typed(Cast::new(f), false, vec![Some(TensorType::new(DType::F32, [4096]))]));
        layers.push(Layer::typed(CastNoSaturate { to: f }, false, vec![Some(TensorType::new(DType::F16, [4096]))]));
        layers.push(Layer::typed(Cast::new(DType::F16), false, vec![Some(TensorType::new(f, [4096]))]));
    }
    for four in [DType::I4, DType::U4] {
        let w = TensorType::new(four, [768, 3072]);
        let d = DequantizeLinear { axis: 1, block_size: 128 };
        layers.push(Layer::typed(
            d,
            false,
            vec![Some(w), Some(TensorType::new(DType::F16, [768, 24])), Some(TensorType::new(four, [768, 24]))],
        ));
        let q = QuantizeLinear { axis: 1, block_size: 128, output_dtype: four };
        layers.push(Layer::typed(
            q,
            false,
            vec![Some(TensorType::new(DType::F32, [768, 3072])), Some(TensorType::new(DType::F32, [768, 24]))],
        ));
        layers.push(Layer::typed(Cast::new(DType::F32), false, vec![Some(TensorType::new(four, [4096]))]));
    }
    compile_heuristic(&layers);
}

#[test]
fn fused_pointwise_programs_compile() {
    use PointwiseBinary::*;
    // relu(a * 2 + b) - a with b a channel vector; x * sigmoid(x); GELU.
    let programs = [
        vec![
            Instr::Input(0),
            Instr::Const(2.0),
            Instr::Binary(Mul, 0, 1),
            Instr::Input(1),
            Instr::Binary(Add, 2, 3),
            Instr::Unary(UnaryKind::Relu, 4),
            Instr::Binary(Sub, 5, 0),
        ],
        vec![Instr::Input(0), Instr::Unary(UnaryKind::Sigmoid, 0), Instr::Binary(Mul, 0, 1)],
        vec![
            Instr::Input(0),
            Instr::Input(1),
            Instr::Binary(Add, 0, 1),
            Instr::Unary(UnaryKind::Gelu, 2),
            Instr::Const(f32::INFINITY),
            Instr::Binary(Div, 3, 4),
        ],
    ];
    let mut layers = Vec::new();
    for dtype in [DType::F32, DType::F16] {
        layers.push(Layer::float(Pointwise { program: programs[0].clone() }, dtype, &[&[1, 64, 56, 56], &[64, 1, 1]]));
        layers.push(Layer::float(Pointwise { program: programs[1].clone() }, dtype, &[&[1, 32, 112, 112]]));
        layers.push(Layer::float(Pointwise { program: programs[2].clone() }, dtype, &[&[1, 128, 3072], &[3072]]));
    }
    compile_heuristic(&layers);
    // The compiler's entry point bakes no size: the same structure at
    // another size is the same source.
    let a = pointwise::source(&programs[0], &[2, 64, 56, 56], &[vec![2, 64, 56, 56], vec![64, 1, 1]]).unwrap();
    let b = pointwise::source(&programs[0], &[8, 256, 14, 14], &[vec![8, 256, 14, 14], vec![256, 1, 1]]).unwrap();
    assert!(a == b, "the sources differ");
}

#[test]
fn sources_depend_on_structure_not_sizes() {
    let a = Layer::float(binary(BinaryKind::Add), DType::F32, &[&[1, 128, 768], &[768]]).candidates();
    let b = Layer::float(binary(BinaryKind::Add), DType::F32, &[&[4, 384, 1024], &[1024]]).candidates();
    assert!(a[0].launches[0].kernel == b[0].launches[0].kernel, "the sources differ");
    assert_ne!(a[0].launches[0].args, b[0].launches[0].args);
    // Every launch tactic shares the source.
    assert!(a.iter().all(|c| c.launches[0].kernel == a[0].launches[0].kernel));
    assert_eq!(a[0].tactic, "elementwise b256x1");
    assert_eq!(a.len(), 5);
}

#[test]
fn unsupported_cases_stay_on_the_host() {
    let refused = [
        Layer::float(binary(BinaryKind::Add), DType::BF16, &[&[4], &[4]]).refused(),
        Layer::float(Unary::new(UnaryKind::Exp), DType::F64, &[&[4]]).refused(),
        Layer::of(Pow, &[(DType::I32, &[4]), (DType::F32, &[4])]).refused(),
        Layer::of(Cast::new(DType::F64), &[(DType::F32, &[4])]).refused(),
        Layer::of(DynamicQuantizeLinear {}, &[(DType::F32, &[4])]).refused(),
        // Nine alternating broadcast dimensions exceed the merged rank.
        Layer::float(binary(BinaryKind::Add), DType::F32, &[&[2, 1, 2, 1, 2, 1, 2, 1, 2], &[1, 2, 1, 2, 1, 2, 1, 2, 1]])
            .refused(),
    ];
    for r in &refused {
        assert!(!r.is_empty());
    }
}

/// The element offsets a map kernel reads for output element `i`, per
/// input, from its signature and arguments as the generated code uses them
/// (`pK = inK + i`, `+ 0` or `+ oK`, with `oK` summed over the coordinates).
fn map_offsets(launch: &trtc_kernels::KernelLaunch, inputs: usize) -> Vec<Vec<u64>> {
    let src = &launch.kernel.source;
    let sig = src.lines().find(|l| l.starts_with("extern \"C\"")).unwrap();
    let params: Vec<&str> = sig[sig.find('(').unwrap() + 1..sig.rfind(')').unwrap()].split(", ").collect();
    let arg = |name: &str| match launch.args[params.iter().position(|p| p.ends_with(&format!(" {name}"))).unwrap()] {
        KernelArg::I64(v) => v as u64,
        a => panic!("{name}: {a:?}"),
    };
    let n = arg("n_");
    let rank = params.iter().filter(|p| p.contains(" dim")).count() + 1;
    (0..inputs)
        .map(|k| {
            let line =
                src.lines().find(|l| l.trim_start().starts_with("const ") && l.contains(&format!("* p{k} = in{k} + "))).unwrap();
            let access = line.rsplit("+ ").next().unwrap().trim_end_matches(';');
            (0..n)
                .map(|i| match access {
                    "i" => i,
                    "0" => 0,
                    _ => {
                        let (mut r, mut off) = (i, 0);
                        for d in (0..rank).rev() {
                            let c = if d == 0 { r } else { r % arg(&format!("dim{d}_")) };
                            if d > 0 {
                                r /= arg(&format!("dim{d}_"));
                            }
                            off += c * arg(&format!("st{k}_{d}"));
                        }
                        off
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn broadcast_offsets_match_the_cpu() {
    use trtc_runtime::Tensor;
    let shapes: [(&[usize], &[usize]); 7] = [
        (&[2, 3, 4, 5], &[1, 3, 1, 1]),
        (&[2, 3, 4, 5], &[5]),
        (&[7, 1], &[1, 5]),
        (&[3, 1, 4, 1], &[1, 2, 1, 6]),
        (&[1, 1, 1, 9], &[4, 1, 9]),
        (&[2, 3], &[]),
        (&[4, 1, 6], &[5, 1]),
    ];
    for (a, b) in shapes {
        for (x, y) in [(a, b), (b, a)] {
            let layer = Layer::of(binary(BinaryKind::Add), &[(DType::I32, x), (DType::I32, y)]);
            let ta = Tensor::from_vec(x.to_vec(), (0..x.iter().product::<usize>() as i32).map(|v| v * 1000).collect()).unwrap();
            let tb = Tensor::from_vec(y.to_vec(), (0..y.iter().product::<usize>() as i32).collect()).unwrap();
            let want = layer.op.eval_owned(&[Some(&ta), Some(&tb)]).unwrap().remove(0);
            let c = layer.candidates();
            let offsets = map_offsets(&c[0].launches[0], 2);
            let (va, vb) = (ta.as_slice::<i32>().unwrap(), tb.as_slice::<i32>().unwrap());
            let got: Vec<i32> = offsets[0].iter().zip(&offsets[1]).map(|(&p, &q)| va[p as usize] + vb[q as usize]).collect();
            assert_eq!(got, want.as_slice::<i32>().unwrap(), "{x:?} + {y:?}");
        }
    }
}
