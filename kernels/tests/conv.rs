//! The conv family: candidates for realistic layers (ResNet-50, MobileNetV2,
//! a small CNN, odd sizes; f32, f16 and int8; plain, fused, int8 and
//! transposed), checked in Rust and compiled with NVRTC for every SM trtc
//! targets: a cubin, no register spills.

use std::collections::BTreeMap;
use trtc_kernels::linear::conv::candidates;
use trtc_kernels::{Candidate, LayerIo, SmLimits};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::elementwise::UnaryKind;
use trtc_runtime::ops::fused::{Activation, Epilogue, Linear, LinearKind};
use trtc_runtime::ops::linalg::{Conv, ConvTranspose};
use trtc_runtime::ops::precision::{Fp8Linear, Fp8Output, Int8Linear, Int8Output};
use trtc_runtime::{DType, Op, TensorType};

mod common;
use common::{tensor as t, SMS};

/// A layer: its op and tensor types (inputs in the op's order).
struct Layer {
    name: String,
    op: Op,
    inputs: Vec<Option<TensorType>>,
    output: TensorType,
}

impl Layer {
    fn io(&self) -> LayerIo<'_> {
        LayerIo { op: &self.op, inputs: self.inputs.iter().map(|t| t.as_ref()).collect(), outputs: vec![&self.output] }
    }

    fn candidates(&self, sm: u32) -> Vec<Candidate> {
        candidates(&self.io(), &SmLimits::for_sm(sm)).unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }
}

/// A 2-D conv's attributes: square kernel, stride, symmetric pad, group.
fn conv2d(k: usize, s: usize, p: usize, group: usize) -> Conv {
    Conv::new_2d([k, k], [s, s], [p; 4], [1, 1], group)
}

/// How a conv layer is wrapped.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Plain Conv with a bias, f32 or f16 storage.
    Plain(DType),
    /// FusedConv (bias, residual, activation), f32 or f16 storage.
    Fused(DType, bool, Option<Activation>),
    /// Int8Conv with bias, residual and activation, and this output.
    Int8(Int8Output, bool, Option<Activation>),
    /// Fp8Conv likewise.
    Fp8(Fp8Output, bool, Option<Activation>),
}

/// A 2-D conv layer of batch `n`, `c -> m` channels on an `h x w` input.
#[allow(clippy::too_many_arguments)]
fn layer(name: &str, kind: Kind, n: usize, c: usize, m: usize, h: usize, w: usize, conv: Conv) -> Layer {
    let wshape = [m, c / conv.group, conv.kernel_shape[0], conv.kernel_shape[1]];
    // The reference op's own shape inference gives the output.
    let plain: Op = conv.clone().into();
    let oshape = plain.infer(&[Some(&t(DType::F32, &[n, c, h, w])), Some(&t(DType::F32, &wshape))]).unwrap()[0].shape.clone();
    let name = format!("{name} {kind:?} n{n}");
    match kind {
        Kind::Plain(dt) => Layer {
            name,
            op: conv.into(),
            inputs: vec![Some(t(dt, &[n, c, h, w])), Some(t(dt, &wshape)), Some(t(dt, &[m]))],
            output: t(dt, &oshape),
        },
        Kind::Fused(dt, residual, activation) => Layer {
            name,
            op: Linear { kind: LinearKind::Conv(conv), bias: true, epilogue: Epilogue { residual, activation } }.into(),
            inputs: vec![Some(t(dt, &[n, c, h, w])), Some(t(dt, &wshape)), Some(t(dt, &[m])), residual.then(|| t(dt, &oshape))],
            output: t(dt, &oshape),
        },
        Kind::Int8(output, residual, activation) => {
            let out_dt = match output {
                Int8Output::F32 => DType::F32,
                Int8Output::F16 => DType::F16,
                Int8Output::Int8 { .. } => DType::I8,
            };
            let epilogue = Epilogue { residual, activation };
            let op = Int8Linear { kind: LinearKind::Conv(conv), x_scale: 0.02, bias: true, epilogue, output }.into();
            quantized_layer(name, op, DType::I8, out_dt, [n, c, h, w], &wshape, residual, &oshape)
        }
        Kind::Fp8(output, residual, activation) => {
            let out_dt = match output {
                Fp8Output::F32 => DType::F32,
                Fp8Output::F16 => DType::F16,
                Fp8Output::Fp8 { .. } => DType::F8E4M3FN,
            };
            let epilogue = Epilogue { residual, activation };
            let op = Fp8Linear { kind: LinearKind::Conv(conv), x_scale: 0.02, bias: true, epilogue, output }.into();
            quantized_layer(name, op, DType::F8E4M3FN, out_dt, [n, c, h, w], &wshape, residual, &oshape)
        }
    }
}

/// An Int8Conv or Fp8Conv layer: x and w of `operand`, f32 scales and
/// bias, an f32 residual when it has one.
#[allow(clippy::too_many_arguments)]
fn quantized_layer(
    name: String,
    op: Op,
    operand: DType,
    out: DType,
    x: [usize; 4],
    wshape: &[usize],
    residual: bool,
    oshape: &[usize],
) -> Layer {
    let m = wshape[0];
    Layer {
        name,
        op,
        inputs: vec![
            Some(t(operand, &x)),
            Some(t(operand, wshape)),
            Some(t(DType::F32, &[m])),
            Some(t(DType::F32, &[m])),
            residual.then(|| t(DType::F32, oshape)),
        ],
        output: t(out, oshape),
    }
}

const RELU: Option<Activation> = Some(Activation::Unary(UnaryKind::Relu));
const RELU6: Option<Activation> = Some(Activation::Clip { min: Some(0.0), max: Some(6.0) });

/// ResNet-50's distinct conv shapes: (c, m, h, k, stride, pad).
const RESNET50: [(usize, usize, usize, usize, usize, usize); 12] = [
    (3, 64, 224, 7, 2, 3),
    (64, 64, 56, 1, 1, 0),
    (64, 64, 56, 3, 1, 1),
    (64, 256, 56, 1, 1, 0),
    (256, 128, 56, 1, 1, 0),
    (128, 128, 56, 3, 2, 1),
    (256, 512, 56, 1, 2, 0),
    (512, 256, 28, 1, 1, 0),
    (256, 256, 14, 3, 1, 1),
    (1024, 2048, 14, 1, 2, 0),
    (512, 512, 7, 3, 1, 1),
    (2048, 512, 7, 1, 1, 0),
];

/// MobileNetV2's conv shapes: (c, m, h, k, stride, pad, group).
const MOBILENET_V2: [(usize, usize, usize, usize, usize, usize, usize); 8] = [
    (3, 32, 224, 3, 2, 1, 1),
    (32, 32, 112, 3, 1, 1, 32),
    (32, 16, 112, 1, 1, 0, 1),
    (96, 96, 112, 3, 2, 1, 96),
    (144, 24, 56, 1, 1, 0, 1),
    (576, 576, 14, 3, 1, 1, 576),
    (960, 320, 7, 1, 1, 0, 1),
    (320, 1280, 7, 1, 1, 0, 1),
];

/// Layers whose heuristic candidates are compiled: one of each kind of
/// kernel instantiation the models use.
fn compiled_layers() -> Vec<Layer> {
    let f32 = DType::F32;
    let f16 = DType::F16;
    vec![
        // ResNet-50 3x3 conv + bias + relu, fused, f32 at batch 32 and 256 (TF32).
        layer("resnet 3x3", Kind::Fused(f32, false, RELU), 32, 64, 64, 56, 56, conv2d(3, 1, 1, 1)),
        layer("resnet 3x3", Kind::Fused(f32, false, RELU), 256, 256, 256, 14, 14, conv2d(3, 1, 1, 1)),
        // ResNet-50 1x1 (pointwise) with residual, f32 and f16.
        layer("resnet 1x1 residual", Kind::Fused(f32, true, RELU), 32, 64, 256, 56, 56, conv2d(1, 1, 0, 1)),
        layer("resnet 1x1 residual", Kind::Fused(f16, true, RELU), 256, 64, 256, 56, 56, conv2d(1, 1, 0, 1)),
        // The stem (C = 3) and a strided downsample, f16.
        layer("resnet stem", Kind::Fused(f16, false, RELU), 32, 3, 64, 224, 224, conv2d(7, 2, 3, 1)),
        layer("resnet downsample", Kind::Plain(f16), 1, 1024, 2048, 14, 14, conv2d(1, 2, 0, 1)),
        // A tiny conv: SIMT first.
        layer("small cnn", Kind::Plain(f32), 1, 1, 8, 28, 28, conv2d(5, 1, 2, 1)),
        // MobileNetV2 depthwise + relu6 (f32, f16) and its int8 form.
        layer("mbv2 dw", Kind::Fused(f32, false, RELU6), 32, 144, 144, 56, 56, conv2d(3, 1, 1, 144)),
        layer("mbv2 dw s2", Kind::Fused(f16, false, RELU6), 1, 96, 96, 112, 112, conv2d(3, 2, 1, 96)),
        layer(
            "mbv2 dw int8",
            Kind::Int8(Int8Output::Int8 { scale: 0.05 }, false, RELU6),
            32,
            144,
            144,
            56,
            56,
            conv2d(3, 1, 1, 144),
        ),
        // Int8 implicit GEMM: requantized, f16 and f32 outputs, 3x3 and 1x1.
        layer("int8 3x3", Kind::Int8(Int8Output::Int8 { scale: 0.1 }, false, RELU), 32, 128, 128, 28, 28, conv2d(3, 1, 1, 1)),
        layer("int8 1x1 residual", Kind::Int8(Int8Output::F16, true, RELU), 256, 256, 64, 56, 56, conv2d(1, 1, 0, 1)),
        layer("int8 stem", Kind::Int8(Int8Output::F32, false, None), 1, 3, 64, 224, 224, conv2d(7, 2, 3, 1)),
        // Grouped (ResNeXt-like), odd sizes, dilation.
        layer("grouped", Kind::Fused(f32, false, RELU), 8, 128, 128, 28, 28, conv2d(3, 1, 1, 32)),
        layer("odd", Kind::Plain(f32), 3, 13, 37, 11, 9, Conv::new_2d([3, 2], [2, 1], [1, 0, 2, 1], [2, 1], 1)),
        layer(
            "dilated f16",
            Kind::Fused(f16, true, Some(Activation::Silu)),
            2,
            40,
            24,
            17,
            23,
            Conv::new_2d([3, 3], [1, 1], [2; 4], [2, 2], 1),
        ),
    ]
}

/// Compiles a candidate's sources for every SM and checks the cubins.
fn compile_all(name: &str, c: &Candidate) {
    for launch in &c.launches {
        for sm in SMS {
            common::compile_source(&launch.kernel.source, &launch.kernel.entry, sm, &format!("{name} ({})", c.tactic));
        }
    }
}

/// The parameter kinds of a kernel's entry point, from its source:
/// `P` pointer, `I` int, `L` long long, `F` float.
fn parameter_kinds(source: &str, entry: &str) -> Vec<char> {
    let start = source.find(&format!("{entry}(")).expect("entry point in source") + entry.len() + 1;
    let end = start + source[start..].find(')').expect("end of parameters");
    source[start..end]
        .split(',')
        .map(|p| {
            let p = p.trim();
            if p.contains('*') {
                'P'
            } else if p.starts_with("long long") {
                'L'
            } else if p.starts_with("int ") {
                'I'
            } else if p.starts_with("float ") {
                'F'
            } else {
                panic!("unexpected parameter {p}")
            }
        })
        .collect()
}

/// Checks what can be checked without a GPU: unique tactics, launch
/// geometry within the hardware's limits, arguments that match the kernel's
/// parameters and name tensors the layer has.
fn check_candidates(l: &Layer, cands: &[Candidate]) {
    common::assert_unique_tactics(&l.name, cands);
    for c in cands {
        for launch in &c.launches {
            let threads: u32 = launch.block.iter().product();
            assert!((32..=1024).contains(&threads), "{} {}: {threads} threads", l.name, c.tactic);
            common::assert_grid(&c.tactic, launch.grid);
            assert!(launch.grid[0] <= i32::MAX as u32);
            assert_eq!(launch.shared_bytes, 0, "{}: static shared memory only", c.tactic);
            let kinds = parameter_kinds(&launch.kernel.source, &launch.kernel.entry);
            assert_eq!(kinds.len(), launch.args.len(), "{} {}: argument count", l.name, c.tactic);
            for (k, a) in kinds.iter().zip(&launch.args) {
                match (k, a) {
                    ('P', KernelArg::Input(i)) => {
                        assert!(matches!(l.inputs.get(*i as usize), Some(Some(_))), "{}: input {i}", l.name)
                    }
                    ('P', KernelArg::Output(0))
                    | ('I', KernelArg::I32(_))
                    | ('L', KernelArg::I64(_))
                    | ('F', KernelArg::F32(_)) => {}
                    _ => panic!("{} {}: parameter {k} gets {a:?}", l.name, c.tactic),
                }
            }
        }
    }
}

#[test]
fn candidates_match_their_kernels_for_the_model_layers() {
    let mut layers = compiled_layers();
    for batch in [1, 32, 256] {
        for (i, &(c, m, h, k, s, p)) in RESNET50.iter().enumerate() {
            layers.push(layer(
                &format!("resnet50 #{i}"),
                Kind::Fused(DType::F32, true, RELU),
                batch,
                c,
                m,
                h,
                h,
                conv2d(k, s, p, 1),
            ));
            layers.push(layer(
                &format!("resnet50 #{i}"),
                Kind::Fused(DType::F16, false, RELU),
                batch,
                c,
                m,
                h,
                h,
                conv2d(k, s, p, 1),
            ));
            let q = Int8Output::Int8 { scale: 0.1 };
            layers.push(layer(&format!("resnet50 #{i}"), Kind::Int8(q, false, RELU), batch, c, m, h, h, conv2d(k, s, p, 1)));
        }
        for (i, &(c, m, h, k, s, p, g)) in MOBILENET_V2.iter().enumerate() {
            layers.push(layer(
                &format!("mobilenetv2 #{i}"),
                Kind::Fused(DType::F32, false, RELU6),
                batch,
                c,
                m,
                h,
                h,
                conv2d(k, s, p, g),
            ));
            layers.push(layer(&format!("mobilenetv2 #{i}"), Kind::Plain(DType::F16), batch, c, m, h, h, conv2d(k, s, p, g)));
        }
    }
    for l in &layers {
        for sm in SMS {
            check_candidates(l, &l.candidates(sm));
        }
    }
}

/// The heuristic's first tactic for a layer on sm_90.
fn first(l: &Layer) -> String {
    l.candidates(90).remove(0).tactic.to_string()
}

#[test]
fn heuristic_picks_the_kernel_for_the_layer() {
    let f32 = DType::F32;
    // Large f32 convs run on TF32 tensor cores; batch 256 gets the largest
    // tile, batch 1 on a 7x7 plane a smaller one (more blocks).
    let big = layer("resnet 3x3", Kind::Fused(f32, false, RELU), 256, 256, 256, 14, 14, conv2d(3, 1, 1, 1));
    assert_eq!(first(&big), "conv_tf32 128x128x16 w2x4");
    let small = layer("resnet 3x3", Kind::Fused(f32, false, RELU), 1, 512, 512, 7, 7, conv2d(3, 1, 1, 1));
    let t = first(&small);
    assert!(t.starts_with("conv_tf32") && !t.contains("128x128"), "{t}");
    // A conv with few output channels stays on exact SIMT FMA.
    let tiny = layer("small cnn", Kind::Plain(f32), 1, 1, 8, 28, 28, conv2d(5, 1, 2, 1));
    assert!(first(&tiny).starts_with("conv_simt"));
    // f16 storage uses the f16 mma, int8 the s8 mma, depthwise the direct kernel.
    let half = layer("f16", Kind::Plain(DType::F16), 32, 64, 64, 56, 56, conv2d(3, 1, 1, 1));
    assert!(first(&half).starts_with("conv_f16"));
    let int8 = layer("i8", Kind::Int8(Int8Output::F32, false, None), 32, 64, 64, 56, 56, conv2d(3, 1, 1, 1));
    assert!(first(&int8).starts_with("conv_i8"));
    let dw = layer("dw", Kind::Fused(f32, false, RELU6), 32, 144, 144, 56, 56, conv2d(3, 1, 1, 144));
    assert_eq!(first(&dw), "conv_dw o4 b256");
    // Every candidate of the f32 layer: both variants, the heuristic's first.
    let all = big.candidates(90);
    assert!(all.iter().any(|c| c.tactic.to_string().starts_with("conv_simt")) && all.len() > 20);
}

/// FP8 convolutions take the e4m3 tensor cores from sm_89 and the exact
/// CUDA-core kernel before; the heuristic kernels compile (no spills) for
/// the SMs they are offered on.
#[test]
fn fp8_convs_take_e4m3_tensor_cores_from_sm_89() {
    common::require_nvrtc();
    let q = Fp8Output::Fp8 { scale: 0.1 };
    let layers = [
        layer("fp8 3x3", Kind::Fp8(q, false, RELU), 32, 128, 128, 28, 28, conv2d(3, 1, 1, 1)),
        layer("fp8 1x1 residual", Kind::Fp8(Fp8Output::F16, true, RELU), 8, 256, 64, 56, 56, conv2d(1, 1, 0, 1)),
        layer("fp8 stem", Kind::Fp8(Fp8Output::F32, false, None), 1, 3, 64, 224, 224, conv2d(7, 2, 3, 1)),
        layer("fp8 depthwise", Kind::Fp8(q, false, RELU6), 8, 144, 144, 56, 56, conv2d(3, 1, 1, 144)),
    ];
    let tactic = |c: &Candidate| c.tactic.to_string();
    assert!(first(&layers[0]).starts_with("conv_e4m3"), "{}", first(&layers[0]));
    assert!(first(&layers[1]).starts_with("conv_e4m3"), "{}", first(&layers[1]));
    assert_eq!(first(&layers[3]), "conv_dw o4 b256");
    for l in &layers {
        let ampere = l.candidates(86);
        assert!(ampere.iter().all(|c| !tactic(c).starts_with("conv_e4m3")), "{}: e4m3 offered on sm_86", l.name);
        assert!(l.candidates(89).iter().any(|c| tactic(c).starts_with("conv_e4m3")) || l.name.contains("depthwise"));
        for (sm, c) in [(80, &ampere[0]), (89, &l.candidates(89)[0]), (90, &l.candidates(90)[0])] {
            let k = &c.launches[0].kernel;
            common::compile_source(&k.source, &k.entry, sm, &format!("{} ({}) on sm_{sm}", l.name, c.tactic));
        }
    }
    // On sm_90 ptxas turns each e4m3 mma into conversions and two f16
    // mmas: every tactic offered there must still fit the registers.
    for c in layers[0].candidates(90).iter().filter(|c| tactic(c).starts_with("conv_e4m3")) {
        let k = &c.launches[0].kernel;
        common::compile_source(&k.source, &k.entry, 90, &format!("{} ({}) on sm_90", layers[0].name, c.tactic));
    }
}

#[test]
fn pointwise_layers_compile_the_pointwise_gather() {
    let pw = layer("1x1", Kind::Plain(DType::F32), 8, 64, 256, 56, 56, conv2d(1, 1, 0, 1));
    assert!(pw.candidates(80)[0].launches[0].kernel.source.contains("#define POINTWISE 1"));
    // Strided or padded 1x1 convs are not the plain product.
    let strided = layer("1x1 s2", Kind::Plain(DType::F32), 8, 64, 256, 56, 56, conv2d(1, 2, 0, 1));
    assert!(strided.candidates(80)[0].launches[0].kernel.source.contains("#define POINTWISE 0"));
    let padded = layer("1x1 p1", Kind::Plain(DType::F32), 8, 64, 256, 56, 56, conv2d(1, 1, 1, 1));
    assert!(padded.candidates(80)[0].launches[0].kernel.source.contains("#define POINTWISE 0"));
}

/// A 1-D or 3-D f32 conv with bias.
fn conv_nd(x: &[usize], w: &[usize], conv: Conv) -> Layer {
    let op: Op = conv.into();
    let inputs = vec![Some(t(DType::F32, x)), Some(t(DType::F32, w)), Some(t(DType::F32, &[w[0]]))];
    let refs: Vec<Option<&TensorType>> = inputs.iter().map(|t| t.as_ref()).collect();
    let output = op.infer(&refs).unwrap().remove(0);
    Layer { name: format!("conv {x:?} * {w:?}"), op, inputs, output }
}

/// A transposed conv (2-D unless the kernel says otherwise).
fn conv_transpose(dtype: DType, x: &[usize], w: &[usize], op: ConvTranspose) -> Layer {
    let m = w[1] * op.group;
    let op: Op = op.into();
    let inputs = vec![Some(t(dtype, x)), Some(t(dtype, w)), Some(t(dtype, &[m]))];
    let refs: Vec<Option<&TensorType>> = inputs.iter().map(|t| t.as_ref()).collect();
    let output = op.infer(&refs).unwrap().remove(0);
    Layer { name: format!("conv_transpose {x:?} * {w:?}"), op, inputs, output }
}

fn other_layers() -> Vec<Layer> {
    let c1 = Conv { kernel_shape: vec![5], strides: vec![2], pads: vec![2, 1], dilations: vec![1], group: 1 };
    let c3 = Conv { kernel_shape: vec![3, 3, 3], strides: vec![1, 2, 2], pads: vec![1; 6], dilations: vec![1; 3], group: 1 };
    let dw3 = Conv { kernel_shape: vec![3, 3, 3], strides: vec![1; 3], pads: vec![1; 6], dilations: vec![1; 3], group: 16 };
    let ct = ConvTranspose {
        kernel_shape: vec![4, 4],
        strides: vec![2, 2],
        pads: vec![1; 4],
        dilations: vec![1, 1],
        group: 2,
        output_padding: vec![0, 1],
    };
    let ct3 = ConvTranspose {
        kernel_shape: vec![2, 2, 2],
        strides: vec![2; 3],
        pads: vec![0; 6],
        dilations: vec![1; 3],
        group: 1,
        output_padding: vec![0; 3],
    };
    vec![
        conv_nd(&[4, 12, 1001], &[24, 12, 5], c1),
        conv_nd(&[2, 8, 9, 20, 20], &[16, 8, 3, 3, 3], c3),
        conv_nd(&[2, 16, 9, 20, 20], &[32, 1, 3, 3, 3], dw3),
        conv_transpose(DType::F32, &[2, 64, 17, 17], &[64, 16, 4, 4], ct.clone()),
        conv_transpose(DType::F16, &[2, 64, 17, 17], &[64, 16, 4, 4], ct),
        conv_transpose(DType::F32, &[1, 8, 5, 6, 7], &[8, 4, 2, 2, 2], ct3),
    ]
}

#[test]
fn one_d_three_d_and_transposed_convs_compile() {
    common::require_nvrtc();
    for l in other_layers() {
        let cands = l.candidates(86);
        check_candidates(&l, &cands);
        compile_all(&l.name, &cands[0]);
    }
}

#[test]
fn empty_layers_launch_nothing() {
    let l = layer("empty batch", Kind::Plain(DType::F32), 0, 16, 16, 8, 8, conv2d(3, 1, 1, 1));
    let c = l.candidates(80);
    assert_eq!(c.len(), 1);
    assert!(c[0].launches.is_empty());
}

#[test]
fn unsupported_layers_say_why() {
    let refuse = |l: &Layer| candidates(&l.io(), &SmLimits::for_sm(80)).expect_err(&l.name).0;
    // f64 and bf16 storage.
    for dt in [DType::F64, DType::BF16] {
        let l = layer("wide", Kind::Plain(dt), 1, 8, 8, 8, 8, conv2d(3, 1, 1, 1));
        assert!(refuse(&l).contains("storage"));
    }
    // Four spatial axes.
    let c4 = Conv { kernel_shape: vec![1; 4], strides: vec![1; 4], pads: vec![0; 8], dilations: vec![1; 4], group: 1 };
    let l = Layer {
        name: "4-d".into(),
        op: c4.into(),
        inputs: vec![Some(t(DType::F32, &[1, 2, 3, 3, 3, 3])), Some(t(DType::F32, &[2, 2, 1, 1, 1, 1]))],
        output: t(DType::F32, &[1, 2, 3, 3, 3, 3]),
    };
    assert!(refuse(&l).contains("spatial axes"));
    // An output that does not match the op's shape rules.
    let mut l = layer("bad output", Kind::Plain(DType::F32), 1, 8, 8, 8, 8, conv2d(3, 1, 1, 1));
    l.output = t(DType::F32, &[1, 8, 7, 8]);
    assert!(refuse(&l).contains("does not match"));
    // More groups than the grid's z extent (not depthwise: 2 channels each).
    let g = 70_000;
    let l = layer("many groups", Kind::Plain(DType::F32), 1, 2 * g, 2 * g, 1, 1, conv2d(1, 1, 0, g));
    assert!(refuse(&l).contains("groups"));
    // Not a convolution.
    let mm: Op = trtc_runtime::ops::linalg::MatMul {}.into();
    let l =
        Layer { name: "matmul".into(), op: mm, inputs: vec![Some(t(DType::F32, &[2, 2])); 2], output: t(DType::F32, &[2, 2]) };
    assert!(refuse(&l).contains("not a convolution"));
}

#[test]
fn heuristic_candidates_compile_for_every_sm() {
    common::require_nvrtc();
    // Identical sources compile once.
    let mut sources = BTreeMap::new();
    for l in compiled_layers() {
        let first = l.candidates(90).remove(0);
        sources.entry(first.launches[0].kernel.source.clone()).or_insert((l.name.clone(), first));
    }
    for (name, c) in sources.values() {
        compile_all(name, c);
    }
}

#[test]
fn deform_conv_kernels_compile_for_every_sm() {
    use trtc_runtime::ops::linalg::DeformConv;
    common::require_nvrtc();
    // A DCNv2 layer of a detection backbone: 3x3, 256 channels, mask and
    // bias; and one without either.
    let op = DeformConv { conv: conv2d(3, 1, 1, 1), offset_group: 1 };
    for (dtype, inputs) in [(DType::F32, 5), (DType::F16, 3)] {
        let mut types =
            vec![Some(t(dtype, &[1, 256, 38, 50])), Some(t(dtype, &[256, 256, 3, 3])), Some(t(dtype, &[1, 18, 38, 50]))];
        if inputs == 5 {
            types.extend([Some(t(dtype, &[256])), Some(t(dtype, &[1, 9, 38, 50]))]);
        }
        let half = dtype == DType::F16;
        let l = common::Layer::typed(op.clone(), half, types);
        let io = l.io();
        let cands = trtc_kernels::candidates(&io, &SmLimits::for_sm(90)).unwrap();
        assert!(cands[0].tactic.to_string().starts_with("conv_deform"), "{}", cands[0].tactic);
        assert_eq!(cands[0].launches[0].args.len(), 1 + inputs + 17);
        compile_all("DeformConv", &cands[0]);
    }
}
