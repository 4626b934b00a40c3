//! The reduce family: candidates for realistic layers (ResNet-50,
//! MobileNet, BERT-base shapes and odd sizes, f32 and f16), their validity,
//! the cases that stay on the host, and NVRTC compiles of the heuristic
//! candidates for every SM trtc targets.

use trtc_kernels::Candidate;
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::linalg::{Pool, PoolKind};
use trtc_runtime::ops::reduce::{
    ArgKind, ArgMinMax, BatchNorm, CumSum, GroupNorm, InstanceNorm, LayerNorm, LpNorm, Lrn, Mvn, Reduce, ReduceKind, Softmax,
    SoftmaxKind, TopK,
};
use trtc_runtime::ops::Op;
use trtc_runtime::{DType, TensorType};

mod common;
use common::{Family, Layer, SMS};

/// What the executor checks of this family's launches.
const FAMILY: Family = Family { threads: 1..=1024, max_shared: 48 * 1024, entry_prefix: "trtc_", param_sizes: false };

impl Layer {
    /// `inputs` as (dtype-less) shapes, all of `dtype`; `None` for an
    /// absent optional input.
    fn new(op: impl Into<Op>, dtype: DType, inputs: &[Option<&[usize]>]) -> Layer {
        let inputs: Vec<Option<TensorType>> = inputs.iter().map(|s| s.map(|s| TensorType::new(dtype, s))).collect();
        Layer::typed(op, dtype == DType::F16, inputs)
    }

    fn candidates(&self) -> Vec<Candidate> {
        self.candidates_of(&FAMILY)
    }
}

/// Compiles every launch of `c` for `sms`: a cubin, no spills.
fn compile(c: &Candidate, sms: &[u32]) {
    common::compile(c, sms, FAMILY.param_sizes);
}

/// Compiles the heuristic candidate of each layer for every SM; returns the
/// heuristic tactics.
fn compile_heuristic(layers: &[Layer]) -> Vec<String> {
    common::compile_heuristic(layers, &FAMILY)
}

fn reduce(kind: ReduceKind, axes: &[usize], keepdims: bool, dtype: DType, shape: &[usize]) -> Layer {
    Layer::new(Reduce::new(kind, axes.to_vec(), keepdims), dtype, &[Some(shape)])
}

fn pool(kind: PoolKind, k: &[usize], s: &[usize], pads: &[usize], dtype: DType, shape: &[usize]) -> Pool {
    let mut p = Pool::new(kind, k.to_vec());
    p.strides = s.to_vec();
    p.pads = pads.to_vec();
    let _ = (dtype, shape);
    p
}

#[test]
fn reductions_compile() {
    let mut layers = Vec::new();
    for dtype in [DType::F32, DType::F16] {
        // MobileNetV3 squeeze-excite: mean over H, W with keepdims.
        layers.push(reduce(ReduceKind::Mean, &[2, 3], true, dtype, &[1, 576, 14, 14]));
        // A middle axis (column teams) and per-channel statistics over N, H, W.
        layers.push(reduce(ReduceKind::Sum, &[1], false, dtype, &[2, 3, 4]));
        layers.push(reduce(ReduceKind::Max, &[0, 2, 3], false, dtype, &[8, 32, 17, 17]));
    }
    let tactics = compile_heuristic(&layers);
    assert!(tactics[0].starts_with("reduce_axis rows"), "{tactics:?}");
    assert!(tactics[1].starts_with("reduce_axis cols"), "{tactics:?}");
    // Every kind, on one SM.
    use ReduceKind::*;
    for kind in [Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare] {
        for keep in [false, true] {
            let c = reduce(kind, &[1], keep, DType::F32, &[3, 1000, 7]).candidates();
            compile(&c[0], &[80]);
        }
    }
}

#[test]
fn every_team_tactic_compiles() {
    // Rows, columns and two reduced runs, all tactics, one SM; and the
    // team reductions of (value, index) pairs and of f64 sums.
    let layers = [
        reduce(ReduceKind::LogSumExp, &[1], false, DType::F16, &[64, 4096]),
        reduce(ReduceKind::LogSumExp, &[0, 2], false, DType::F16, &[5, 6, 7]),
        Layer::new(ArgMinMax::new(ArgKind::Max, 1, false, true), DType::F32, &[Some(&[3, 100, 7])]),
        Layer::new(Mvn::new(vec![0, 2, 3]), DType::F32, &[Some(&[2, 3, 9, 9])]),
    ];
    for layer in &layers {
        let cands = layer.candidates();
        assert_eq!(cands.len(), 14);
        for c in &cands {
            compile(c, &[80]);
        }
    }
}

#[test]
fn arg_and_softmax_compile() {
    let mut layers = Vec::new();
    for dtype in [DType::F32, DType::F16] {
        // BERT-base attention probabilities and an ImageNet classifier.
        layers.push(Layer::new(Softmax::new(3), dtype, &[Some(&[1, 12, 128, 128])]));
        layers.push(Layer::new(Softmax::with_kind(SoftmaxKind::LogSoftmax, 1, false), dtype, &[Some(&[1, 1000])]));
        // Softmax over a middle axis of odd size, and pre-opset-13 flatten.
        layers.push(Layer::new(Softmax::new(1), dtype, &[Some(&[3, 37, 7])]));
        layers.push(Layer::new(Softmax::with_kind(SoftmaxKind::Softmax, 1, true), dtype, &[Some(&[2, 3, 5, 5])]));
        layers.push(Layer::new(Softmax::with_kind(SoftmaxKind::Hardmax, 2, false), dtype, &[Some(&[2, 3, 10])]));
        layers.push(Layer::new(ArgMinMax::new(ArgKind::Max, 1, false, false), dtype, &[Some(&[8, 1000])]));
        layers.push(Layer::new(ArgMinMax::new(ArgKind::Min, 0, true, true), dtype, &[Some(&[50, 9])]));
    }
    compile_heuristic(&layers);
}

#[test]
fn normalizations_compile() {
    let mut layers = Vec::new();
    for dtype in [DType::F32, DType::F16] {
        let h = if dtype == DType::F16 { DType::F16 } else { DType::F32 };
        // BERT-base LayerNorm, with the statistics outputs and without bias.
        layers.push(Layer::new(LayerNorm::new(2, 1e-12), dtype, &[Some(&[1, 128, 768]), Some(&[768]), Some(&[768])]));
        layers.push(Layer::new(LayerNorm::with_stats(1, 1e-5, h), dtype, &[Some(&[6, 5, 7]), Some(&[7]), None]));
        // Stable Diffusion's GroupNorm, InstanceNorm, BatchNorm, LRN.
        layers.push(Layer::new(GroupNorm::new(32, 1e-5), dtype, &[Some(&[1, 320, 64, 64]), Some(&[320]), Some(&[320])]));
        layers.push(Layer::new(GroupNorm::new(2, 1e-5), dtype, &[Some(&[3, 4, 5]), Some(&[2]), Some(&[2])]));
        layers.push(Layer::new(InstanceNorm::new(1e-5), dtype, &[Some(&[1, 64, 56, 56]), Some(&[64]), Some(&[64])]));
        let c: &[usize] = &[64];
        layers.push(Layer::new(BatchNorm::new(1e-5), dtype, &[Some(&[2, 64, 56, 56]), Some(c), Some(c), Some(c), Some(c)]));
        layers.push(Layer::new(Lrn::new(5, 1e-4, 0.75, 2.0), dtype, &[Some(&[1, 96, 55, 55])]));
        layers.push(Layer::new(LpNorm::new(1, 2), dtype, &[Some(&[4, 256, 3])]));
        layers.push(Layer::new(Mvn::new(vec![0, 2, 3]), dtype, &[Some(&[2, 3, 9, 9])]));
    }
    compile_heuristic(&layers);
    // f16 activations with f32 BatchNorm parameters (opset 15).
    let c = TensorType::new(DType::F32, vec![8]);
    let layer = Layer::infer(
        BatchNorm::new(1e-3).into(),
        vec![Some(TensorType::new(DType::F16, vec![4, 8])), Some(c.clone()), Some(c.clone()), Some(c.clone()), Some(c)],
    );
    compile(&layer.candidates()[0], &[80]);
}

#[test]
fn roi_aligns_compile() {
    use trtc_runtime::ops::linalg::RoiAlign;
    // Mask R-CNN's box head: 1000 regions of a 256-channel FPN level, 7x7
    // bins, adaptive sampling; and its mask head's 14x14 max variant.
    let mut layers = Vec::new();
    for dtype in [DType::F32, DType::F16] {
        for (max, out, ratio) in [(false, 7, 0), (true, 14, 2)] {
            let op = RoiAlign {
                output_height: out,
                output_width: out,
                sampling_ratio: ratio,
                spatial_scale: 0.25,
                half_pixel: true,
                max,
            };
            let inputs = vec![
                Some(TensorType::new(dtype, [2, 256, 50, 68])),
                Some(TensorType::new(dtype, [1000, 4])),
                Some(TensorType::new(if max { DType::I32 } else { DType::I64 }, [1000])),
            ];
            layers.push(Layer::typed(op, dtype == DType::F16, inputs));
        }
    }
    let tactics = compile_heuristic(&layers);
    assert!(tactics.iter().all(|t| t.starts_with("pool_roi_align")), "{tactics:?}");
}

#[test]
fn nms_compiles() {
    use trtc_runtime::ops::linalg::NonMaxSuppression;
    // A YOLO-style head (8,400 boxes, 80 classes, both box layouts, every
    // optional input) and torchvision's batched NMS (one class, 27,000
    // boxes, no constant maximum): every tactic, every SM, arguments
    // checked against the cubins' parameters.
    let scalar = |d: DType| Some(TensorType::new(d, [1]));
    let mut layers = Vec::new();
    for center in [false, true] {
        let op = NonMaxSuppression { center_point_box: center, max_per_class: Some(100) };
        let inputs = vec![
            Some(TensorType::new(DType::F32, [1, 8400, 4])),
            Some(TensorType::new(DType::F32, [1, 80, 8400])),
            scalar(DType::I64),
            scalar(DType::F32),
            scalar(DType::F32),
        ];
        layers.push(Layer::infer(op.into(), inputs));
    }
    let op = NonMaxSuppression { center_point_box: false, max_per_class: None };
    let inputs = vec![Some(TensorType::new(DType::F32, [1, 27000, 4])), Some(TensorType::new(DType::F32, [1, 1, 27000])), None];
    layers.push(Layer::infer(op.into(), inputs));
    for layer in &layers {
        let candidates = layer.candidates();
        assert_eq!(candidates.len(), 4, "{candidates:?}");
        for c in &candidates {
            assert!(c.tactic.to_string().starts_with("nms b"), "{}", c.tactic);
            let counts: Vec<&KernelArg> =
                c.launches.iter().flat_map(|l| &l.args).filter(|a| matches!(a, KernelArg::Counts(_))).collect();
            assert_eq!(counts.len(), 2, "both launches share the layer's counters");
            common::compile(c, &SMS, true);
        }
    }
    // The heuristic block grows with the candidates' words: 8,400 boxes
    // (263 words) take 256 threads, 27,000 boxes (844 words) 256 too, and
    // 100,000 boxes (3,125 words) 1,024.
    let heuristic = |n: usize| {
        let op = NonMaxSuppression { center_point_box: false, max_per_class: Some(10) };
        let inputs = vec![Some(TensorType::new(DType::F32, [1, n, 4])), Some(TensorType::new(DType::F32, [1, 1, n]))];
        Layer::infer(op.into(), inputs).candidates()[0].tactic.to_string()
    };
    assert_eq!([heuristic(8400), heuristic(27_000), heuristic(100_000)], ["nms b256", "nms b256", "nms b1024"]);
    // More boxes than shared memory holds a bit each: the host runs it.
    let op = NonMaxSuppression { center_point_box: false, max_per_class: Some(10) };
    let big = vec![Some(TensorType::new(DType::F32, [1, 400_000, 4])), Some(TensorType::new(DType::F32, [1, 1, 400_000]))];
    let r = Layer::infer(op.into(), big);
    assert!(r.refused().contains("shared memory"), "{}", r.refused());
}

#[test]
fn pools_compile() {
    let mut layers = Vec::new();
    for dtype in [DType::F32, DType::F16] {
        let x = [1usize, 64, 112, 112];
        // ResNet-50 stem MaxPool and its GlobalAveragePool.
        layers.push(Layer::new(pool(PoolKind::Max, &[3, 3], &[2, 2], &[1, 1, 1, 1], dtype, &x), dtype, &[Some(&x)]));
        let g = [1usize, 2048, 7, 7];
        layers.push(Layer::new(Pool::new(PoolKind::Average { count_include_pad: false }, vec![7, 7]), dtype, &[Some(&g)]));
        layers.push(Layer::new(Pool::new(PoolKind::Max, vec![7, 7]), dtype, &[Some(&g)]));
        layers.push(Layer::new(Pool::new(PoolKind::Lp { p: 3.0 }, vec![7, 7]), dtype, &[Some(&g)]));
        // Inception's padded average pools, ceil mode, 1-D and 3-D pools.
        let mut avg = pool(PoolKind::Average { count_include_pad: true }, &[3, 3], &[2, 2], &[0, 0, 1, 1], dtype, &x);
        avg.ceil_mode = true;
        layers.push(Layer::new(avg, dtype, &[Some(&[1, 64, 35, 35])]));
        let mut lp = pool(PoolKind::Lp { p: 2.0 }, &[3], &[2], &[1, 1], dtype, &x);
        lp.dilations = vec![2];
        layers.push(Layer::new(lp, dtype, &[Some(&[2, 8, 31])]));
        layers.push(Layer::new(
            pool(PoolKind::Max, &[2, 2, 2], &[2, 2, 2], &[0; 6], dtype, &x),
            dtype,
            &[Some(&[1, 4, 8, 9, 10])],
        ));
    }
    let tactics = compile_heuristic(&layers);
    assert!(tactics[0].starts_with("pool_window"), "{tactics:?}");
    assert!(tactics[1].starts_with("pool_global rows"), "{tactics:?}");
    // MaxPool with indices (both layouts) and on int8 tensors.
    for column_major in [false, true] {
        let mut p = pool(PoolKind::Max, &[2, 2], &[2, 2], &[0; 4], DType::F32, &[]);
        p.indices = true;
        p.column_major_indices = column_major;
        let layer = Layer::new(p, DType::F32, &[Some(&[1, 3, 9, 9])]);
        compile(&layer.candidates()[0], &SMS);
    }
    for dtype in [DType::I8, DType::U8] {
        let p = pool(PoolKind::Max, &[3, 3], &[2, 2], &[1; 4], dtype, &[]);
        let layer = Layer::infer(p.into(), vec![Some(TensorType::new(dtype, vec![1, 32, 28, 28]))]);
        compile(&layer.candidates()[0], &[80]);
    }
}

#[test]
fn launch_geometry() {
    // One team per row, teams past the cap loop inside the kernel.
    let c = Layer::new(Softmax::new(3), DType::F32, &[Some(&[1, 12, 128, 128])]).candidates();
    let l = &c[0].launches[0];
    assert_eq!(c[0].tactic, "softmax_axis rows 64x4");
    assert_eq!((l.grid, l.block), ([384, 1, 1], [64, 4, 1]));
    let big = Layer::new(Softmax::new(1), DType::F32, &[Some(&[1 << 24, 8])]).candidates();
    assert_eq!(big[0].launches[0].grid[0], 65535 * 8);
    // The LayerNorm arguments: x, scale, bias, y, rows, n, ns, nb, eps.
    let ln = Layer::new(LayerNorm::new(2, 1e-12), DType::F32, &[Some(&[2, 128, 768]), Some(&[1, 768]), Some(&[768])]);
    let args = &ln.candidates()[0].launches[0].args;
    assert_eq!(
        args,
        &vec![
            KernelArg::Input(0),
            KernelArg::Input(1),
            KernelArg::Input(2),
            KernelArg::Output(0),
            KernelArg::I64(256),
            KernelArg::I32(768),
            KernelArg::I32(768),
            KernelArg::I32(768),
            KernelArg::F32(1e-12),
        ]
    );
    // Reduce over the middle of [2, 3, 4]: view (q1 2, q0 4, r 3).
    let r = reduce(ReduceKind::Sum, &[1], false, DType::F32, &[2, 3, 4]).candidates();
    assert_eq!(
        r[0].launches[0].args[2..10],
        [
            KernelArg::I64(8),
            KernelArg::I64(4),
            KernelArg::I64(12),
            KernelArg::I64(1),
            KernelArg::I32(3),
            KernelArg::I32(3),
            KernelArg::I64(0),
            KernelArg::I64(4),
        ]
    );
}

#[test]
fn host_fallbacks() {
    let f32s = |s: &[usize]| Some(TensorType::new(DType::F32, s));
    // Integer reductions are exact on the CPU.
    let r =
        Layer::infer(Reduce::new(ReduceKind::Sum, vec![1], false).into(), vec![Some(TensorType::new(DType::I32, vec![4, 5]))]);
    assert!(r.refused().contains("i32"), "{}", r.refused());
    // Three kept runs.
    let r = Layer::infer(Reduce::new(ReduceKind::Sum, vec![1, 3], false).into(), vec![f32s(&[2, 3, 4, 5, 6])]);
    assert!(r.refused().contains("interleave"));
    // Scans, sorts, empty tensors, bf16.
    assert!(Layer::infer(CumSum::new(0, false, false).into(), vec![f32s(&[5])]).refused().contains("scan"));
    let topk = Layer::infer(TopK::new(0, 2, true, true).into(), vec![f32s(&[5])]);
    assert!(topk.refused().contains("sort"));
    let empty = Layer::infer(Softmax::new(1).into(), vec![f32s(&[0, 5])]);
    assert!(empty.refused().contains("empty"));
    let bf = Layer::infer(Softmax::new(1).into(), vec![Some(TensorType::new(DType::BF16, vec![2, 5]))]);
    assert!(bf.refused().contains("bf16"), "{}", bf.refused());
    // A LayerNorm scale that broadcasts along a leading normalized dim.
    let ln = Layer::infer(LayerNorm::new(1, 1e-5).into(), vec![f32s(&[2, 3, 4]), f32s(&[3, 1])]);
    assert!(ln.refused().contains("trailing"));
    // 4-D pooling.
    let p = Layer::infer(Pool::new(PoolKind::Max, vec![2, 2, 2, 2]).into(), vec![f32s(&[1, 1, 4, 4, 4, 4])]);
    assert!(p.refused().contains("4-D"));
}
