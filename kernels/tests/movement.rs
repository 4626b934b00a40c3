//! The movement family: candidates for realistic layers (ResNet-50,
//! MobileNetV2, BERT-base, YOLO-style upsampling, odd sizes, f32, f16 and
//! integer tensors), their validity, the cases that stay on the host, and
//! NVRTC compiles of the heuristic candidates for every SM trtc targets,
//! with each launch's arguments checked against the compiled kernel's
//! parameters.

use trtc_kernels::Candidate;
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::movement::{
    Concat, CoordinateMode, Expand, Gather, GatherElements, GatherND, NearestMode, OneHot, Pad, PadMode, Reshape, Resize,
    ResizeMode, ReverseSequence, ScatterElements, ScatterReduction, Slice, Split, Tile, Transpose, Trilu,
};
use trtc_runtime::ops::Op;
use trtc_runtime::{DType, TensorType};

mod common;
use common::{Family, Layer};

/// What the executor checks of this family's launches.
const FAMILY: Family = Family { threads: 32..=1024, max_shared: 0, entry_prefix: "trtc_movement_", param_sizes: true };

impl Layer {
    /// Data inputs of `dtype` (f16 ones under HalfIo).
    fn new(op: impl Into<Op>, dtype: DType, shapes: &[&[usize]]) -> Layer {
        let inputs = shapes.iter().map(|s| Some(TensorType::new(dtype, *s))).collect();
        Layer::typed(op, dtype == DType::F16, inputs)
    }

    /// Data of `dtype` and `shape`, then an index input of `idx`.
    fn indexed(op: impl Into<Op>, dtype: DType, shape: &[usize], idx: (DType, &[usize])) -> Layer {
        let inputs = vec![Some(TensorType::new(dtype, shape)), Some(TensorType::new(idx.0, idx.1))];
        Layer::typed(op, dtype == DType::F16, inputs)
    }

    fn candidates(&self) -> Vec<Candidate> {
        self.candidates_of(&FAMILY)
    }
}

/// Compiles the heuristic candidate of each layer for every SM; returns the
/// heuristic tactics.
fn compile_heuristic(layers: &[Layer]) -> Vec<String> {
    common::compile_heuristic(layers, &FAMILY)
}

fn slice(axes: &[usize], starts: &[i64], ends: &[i64], steps: &[i64]) -> Slice {
    Slice { axes: axes.to_vec(), starts: starts.to_vec(), ends: ends.to_vec(), steps: steps.to_vec() }
}

#[test]
fn copies_compile() {
    let mut layers = Vec::new();
    for dtype in [DType::F32, DType::F16, DType::I64, DType::U8] {
        // ResNet-50's flatten, BERT's head split and merge, NCHW -> NHWC.
        layers.push(Layer::new(Reshape { shape: vec![1, 2048] }, dtype, &[&[1, 2048, 1, 1]]));
        layers.push(Layer::new(Transpose { perm: vec![0, 2, 1, 3] }, dtype, &[&[1, 128, 12, 64]]));
        layers.push(Layer::new(Transpose { perm: vec![0, 2, 3, 1] }, dtype, &[&[2, 32, 17, 17]]));
        // A channel slice, a reversal, strided odd slices.
        layers.push(Layer::new(slice(&[1], &[16], &[48], &[1]), dtype, &[&[1, 64, 28, 28]]));
        layers.push(Layer::new(slice(&[2], &[-1], &[i64::MIN], &[-1]), dtype, &[&[3, 5, 7]]));
        layers.push(Layer::new(slice(&[0, 2], &[1, 0], &[100, 7], &[2, 3]), dtype, &[&[9, 4, 7]]));
        // YOLO's channel split and route concat; concat on the last axis.
        layers.push(Layer::new(Split { axis: 1, sizes: vec![64, 64] }, dtype, &[&[1, 128, 52, 52]]));
        layers.push(Layer::new(Concat { axis: 1 }, dtype, &[&[1, 256, 26, 26], &[1, 128, 26, 26]]));
        layers.push(Layer::new(Concat { axis: 2 }, dtype, &[&[2, 3, 5], &[2, 3, 1], &[2, 3, 0]]));
        layers.push(Layer::new(Concat { axis: 0 }, dtype, &[&[2, 3], &[5, 3]]));
        // BERT's attention-mask expand, a tile.
        layers.push(Layer::new(Expand { shape: vec![1, 12, 128, 128] }, dtype, &[&[1, 1, 1, 128]]));
        layers.push(Layer::new(Tile { repeats: vec![2, 1, 3] }, dtype, &[&[3, 4, 5]]));
    }
    let tactics = compile_heuristic(&layers);
    assert!(tactics.iter().all(|t| t.starts_with("movement_copy")), "{tactics:?}");
}

#[test]
fn copy_plans_pick_flat_and_grouped_kernels() {
    let reshape = Layer::new(Reshape { shape: vec![1, 2048] }, DType::F32, &[&[1, 2048, 1, 1]]).candidates();
    assert_eq!(reshape[0].launches[0].kernel.entry, "trtc_movement_flat");
    assert_eq!(reshape[0].launches[0].args[2], KernelArg::I64(2048 * 4));
    // A channel slice is one contiguous run: a flat copy from an offset.
    let s = Layer::new(slice(&[1], &[16], &[48], &[1]), DType::F16, &[&[1, 64, 28, 28]]).candidates();
    assert_eq!(s[0].launches[0].kernel.entry, "trtc_movement_flat");
    assert_eq!(s[0].launches[0].args[4], KernelArg::I64(16 * 28 * 28 * 2));
    // Concat along channels: one strided copy per input, 16-byte groups,
    // and a single-element alternative.
    let c = Layer::new(Concat { axis: 1 }, DType::F32, &[&[2, 256, 26, 26], &[2, 128, 26, 26]]).candidates();
    assert_eq!(c[0].launches.len(), 2);
    assert!(c[0].launches[0].kernel.source.contains("#define VEC 4\n"));
    assert!(c.iter().any(|c| c.tactic == "movement_copy_v1 b256x1"));
    // Split: one launch per output, each writing its own output.
    let sp = Layer::new(Split { axis: 2, sizes: vec![1, 2] }, DType::I32, &[&[4, 5, 3]]).candidates();
    assert_eq!(sp[0].launches.len(), 2);
    assert_eq!(sp[0].launches[1].args[0], KernelArg::Output(1));
    // The same structure at another size shares the source.
    let a = Layer::new(Transpose { perm: vec![0, 2, 1, 3] }, DType::F32, &[&[2, 128, 12, 64]]).candidates();
    let b = Layer::new(Transpose { perm: vec![0, 2, 1, 3] }, DType::F32, &[&[4, 384, 16, 64]]).candidates();
    assert!(a[0].launches[0].kernel == b[0].launches[0].kernel, "the sources differ");
}

#[test]
fn index_gathers_compile() {
    let mut layers = Vec::new();
    for dtype in [DType::F32, DType::F16] {
        // BERT's word embedding and a last-axis gather with a scalar index.
        layers.push(Layer::indexed(Gather { axis: 0 }, dtype, &[30522, 768], (DType::I64, &[1, 128])));
        layers.push(Layer::indexed(Gather { axis: 2 }, dtype, &[2, 3, 5], (DType::I32, &[])));
        layers.push(Layer::indexed(GatherElements { axis: 1 }, dtype, &[3, 7, 2], (DType::I64, &[3, 4, 2])));
        layers.push(Layer::indexed(GatherND { batch_dims: 0 }, dtype, &[5, 6, 8], (DType::I64, &[4, 2])));
        layers.push(Layer::indexed(GatherND { batch_dims: 1 }, dtype, &[2, 6, 7], (DType::I32, &[2, 3, 1])));
        layers.push(Layer::indexed(ReverseSequence { batch_axis: 1, time_axis: 0 }, dtype, &[10, 4, 32], (DType::I64, &[4])));
        layers.push(Layer::indexed(ReverseSequence { batch_axis: 0, time_axis: 1 }, dtype, &[4, 10, 3], (DType::I32, &[4])));
    }
    compile_heuristic(&layers);
    let emb = &layers[0].candidates();
    assert!(emb[0].launches[0].kernel.source.contains("#define VEC 4\n"), "768 f32 rows move in 16-byte groups");
}

#[test]
fn fills_compile() {
    let mut layers = Vec::new();
    for dtype in [DType::F32, DType::F16, DType::I8] {
        // A conv's zero padding, constant padding with a value, reflect,
        // edge and wrap, negative pads, a scalar.
        layers.push(Layer::new(Pad { pads: vec![0, 0, 3, 3, 0, 0, 3, 3], mode: PadMode::Constant }, dtype, &[&[1, 3, 224, 224]]));
        layers.push(Layer::new(Pad { pads: vec![1, 0, -1, 2], mode: PadMode::Constant }, dtype, &[&[4, 5], &[]]));
        for mode in [PadMode::Reflect, PadMode::Edge, PadMode::Wrap] {
            layers.push(Layer::new(Pad { pads: vec![0, 2, 1, 0, 2, 1], mode }, dtype, &[&[2, 5, 3]]));
        }
        layers.push(Layer::new(Pad { pads: vec![], mode: PadMode::Edge }, dtype, &[&[]]));
        // GPT-style causal mask and its complement.
        layers.push(Layer::new(Trilu { upper: false, k: 0 }, dtype, &[&[1, 128, 128]]));
        layers.push(Layer::new(Trilu { upper: true, k: 1 }, dtype, &[&[3, 4, 5]]));
        // OneHot of int and float indices.
        let values = Some(TensorType::new(dtype, [2]));
        for idx in [DType::I64, DType::I32, DType::U64, DType::F32] {
            let op = OneHot { depth: 10, axis: 1 };
            layers.push(Layer::typed(op, false, vec![Some(TensorType::new(idx, [4, 3])), values.clone()]));
        }
    }
    compile_heuristic(&layers);
}

fn resize(mode: ResizeMode, coord: CoordinateMode, nearest: NearestMode, scales: &[f64], sizes: &[usize]) -> Resize {
    Resize {
        mode,
        coordinate_mode: coord,
        nearest_mode: nearest,
        cubic_coeff_a: -0.75,
        exclude_outside: false,
        extrapolation_value: 0.0,
        antialias: false,
        scales: scales.to_vec(),
        sizes: sizes.to_vec(),
        roi: vec![],
    }
}

#[test]
fn resizes_compile() {
    use CoordinateMode::*;
    let mut layers = Vec::new();
    let up = [1.0, 1.0, 2.0, 2.0];
    for dtype in [DType::F32, DType::F16] {
        // YOLO's and FPN's nearest x2 upsampling, bilinear upsampling and
        // downsampling with every coordinate mode.
        for nearest in [NearestMode::RoundPreferFloor, NearestMode::RoundPreferCeil, NearestMode::Floor, NearestMode::Ceil] {
            let r = resize(ResizeMode::Nearest, Asymmetric, nearest, &up, &[1, 256, 26, 26]);
            layers.push(Layer::new(r, dtype, &[&[1, 256, 13, 13]]));
        }
        for coord in [HalfPixel, HalfPixelSymmetric, PytorchHalfPixel, AlignCorners, Asymmetric] {
            let r = resize(ResizeMode::Linear, coord, NearestMode::Floor, &up, &[2, 3, 14, 14]);
            layers.push(Layer::new(r, dtype, &[&[2, 3, 7, 7]]));
            let mut d = resize(ResizeMode::Linear, coord, NearestMode::Floor, &[1.0, 0.5, 0.75], &[3, 5, 9]);
            d.exclude_outside = true;
            layers.push(Layer::new(d, dtype, &[&[3, 10, 12]]));
        }
        let mut crop = resize(ResizeMode::Linear, TfCropAndResize, NearestMode::Floor, &[1.0, 1.0, 1.5, 1.5], &[1, 2, 6, 6]);
        crop.roi = vec![0.0, 0.0, 0.1, 0.2, 1.0, 1.0, 0.9, 1.2];
        crop.extrapolation_value = -1.0;
        layers.push(Layer::new(crop.clone(), dtype, &[&[1, 2, 4, 4]]));
        crop.mode = ResizeMode::Nearest;
        layers.push(Layer::new(crop, dtype, &[&[1, 2, 4, 4]]));
    }
    let r = resize(ResizeMode::Linear, HalfPixel, NearestMode::Floor, &[2.0, 2.0], &[8, 8]);
    layers.push(Layer::new(r, DType::U8, &[&[4, 4]]));
    compile_heuristic(&layers);
}

#[test]
fn grid_samples_compile() {
    use trtc_runtime::ops::movement::{GridPadding, GridSample, GridSampleMode};
    // A spatial-transformer / OCR rectification layer: [N, C, H, W] sampled
    // on an [N, HO, WO, 2] grid, every 2-D mode and padding.
    let mut layers = Vec::new();
    for dtype in [DType::F32, DType::F16] {
        for mode in [GridSampleMode::Nearest, GridSampleMode::Linear] {
            for padding in [GridPadding::Zeros, GridPadding::Border, GridPadding::Reflection] {
                let op = GridSample { mode, padding, align_corners: padding == GridPadding::Border };
                let inputs = vec![Some(TensorType::new(dtype, [2, 32, 40, 100])), Some(TensorType::new(dtype, [2, 32, 100, 2]))];
                layers.push(Layer::typed(op, dtype == DType::F16, inputs));
            }
        }
    }
    compile_heuristic(&layers);
    // Cubic mode and 3-D volumes stay on the host.
    let cubic = GridSample { mode: GridSampleMode::Cubic, padding: GridPadding::Zeros, align_corners: false };
    let inputs = vec![Some(TensorType::new(DType::F32, [1, 2, 4, 4])), Some(TensorType::new(DType::F32, [1, 3, 3, 2]))];
    assert!(!Layer::typed(cubic, false, inputs).refused().is_empty());
    let linear = GridSample { mode: GridSampleMode::Linear, padding: GridPadding::Zeros, align_corners: false };
    let inputs = vec![Some(TensorType::new(DType::F32, [1, 2, 4, 4, 4])), Some(TensorType::new(DType::F32, [1, 3, 3, 3, 3]))];
    assert!(!Layer::typed(linear, false, inputs).refused().is_empty());
}

#[test]
fn unsupported_cases_stay_on_the_host() {
    let cubic = resize(ResizeMode::Cubic, CoordinateMode::HalfPixel, NearestMode::Floor, &[1.0, 2.0], &[2, 8]);
    let mut antialias = resize(ResizeMode::Linear, CoordinateMode::HalfPixel, NearestMode::Floor, &[1.0, 0.5], &[2, 4]);
    antialias.antialias = true;
    let scatter = ScatterElements { axis: 0, reduction: ScatterReduction::None };
    let refused = [
        Layer::new(cubic, DType::F32, &[&[2, 4]]).refused(),
        Layer::new(antialias, DType::F32, &[&[2, 8]]).refused(),
        Layer::typed(
            scatter,
            false,
            vec![
                Some(TensorType::new(DType::F32, [4])),
                Some(TensorType::new(DType::I64, [2])),
                Some(TensorType::new(DType::F32, [2])),
            ],
        )
        .refused(),
        // Ten alternating repeat and data dimensions exceed the merged rank.
        Layer::new(Tile { repeats: vec![2, 2, 2, 2, 2] }, DType::F32, &[&[3, 3, 3, 3, 3]]).refused(),
    ];
    for r in &refused {
        assert!(!r.is_empty());
    }
}

/// The value of `#define name` in a source.
fn define(source: &str, name: &str) -> String {
    let key = format!("#define {name} ");
    let line = source.lines().find(|l| l.starts_with(&key)).unwrap_or_else(|| panic!("no {name}"));
    line[key.len()..].trim().to_string()
}

fn type_bytes(c: &str) -> usize {
    match c {
        "unsigned char" => 1,
        "unsigned short" => 2,
        "unsigned int" => 4,
        "unsigned long long" => 8,
        "trtc_v16" => 16,
        t => panic!("element type {t}"),
    }
}

/// Runs a launch on the host the way its CUDA code uses its defines and
/// arguments (the grid-stride loop visits every element once): the
/// contract the kernel implements. `tensors` holds the layer's inputs, then
/// its outputs.
fn interpret(launch: &trtc_kernels::KernelLaunch, inputs: &[Vec<u8>], outputs: &mut [Vec<u8>]) {
    let src = &launch.kernel.source;
    let mut args = launch.args.iter();
    let mut ptr = |want_output: bool| match args.next() {
        Some(KernelArg::Output(k)) if want_output => *k as usize,
        Some(KernelArg::Input(k)) if !want_output => *k as usize,
        a => panic!("expected a pointer, got {a:?}"),
    };
    let (out, inp) = (ptr(true), ptr(false));
    let entry = launch.kernel.entry.as_str();
    let idx_input = matches!(
        entry,
        "trtc_movement_gather"
            | "trtc_movement_gather_elements"
            | "trtc_movement_gather_nd"
            | "trtc_movement_reverse_sequence"
            | "trtc_movement_one_hot"
    );
    let idx = if idx_input { Some(ptr(false)) } else { None };
    let pad_value =
        if launch.kernel.entry == "trtc_movement_pad" && define(src, "HAS_VALUE") == "1" { Some(ptr(false)) } else { None };
    let rest: Vec<i64> = args
        .map(|a| match a {
            KernelArg::I64(v) => *v,
            KernelArg::I32(v) => *v as i64,
            a => panic!("{a:?}"),
        })
        .collect();
    let index = |t: &[u8], j: usize| -> i64 {
        if define(src, "INDEX_T") == "long long" {
            i64::from_le_bytes(t[8 * j..8 * j + 8].try_into().unwrap())
        } else {
            i32::from_le_bytes(t[4 * j..4 * j + 4].try_into().unwrap()) as i64
        }
    };
    let resolve = |v: i64, dim: i64| {
        let r = if v < 0 { v + dim } else { v };
        assert!((0..dim).contains(&r), "the kernel traps on index {v}");
        r
    };
    let x = &inputs[inp];
    let y = &mut outputs[out];
    let mv = |y: &mut Vec<u8>, t: usize, s: usize, bytes: usize| {
        y[t * bytes..(t + 1) * bytes].copy_from_slice(&x[s * bytes..(s + 1) * bytes])
    };
    match entry {
        "trtc_movement_flat" => {
            let (n, dst, s) = (rest[0] as usize, rest[1] as usize, rest[2] as usize);
            y[dst..dst + n].copy_from_slice(&x[s..s + n]);
        }
        "trtc_movement_copy" => {
            let bytes = type_bytes(&define(src, "ELEM"));
            let rank: usize = define(src, "RANK").parse().unwrap();
            let scatter = define(src, "SCATTER") == "1";
            let (n, src_off, dst_off) = (rest[0], rest[1], rest[2]);
            let dims = &rest[3..10];
            let strides = &rest[10..18];
            for i in 0..n {
                let (mut r, mut off) = (i, 0i64);
                for d in (1..rank).rev() {
                    off += (r % dims[d - 1]) * strides[d];
                    r /= dims[d - 1];
                }
                off += r * strides[0];
                let (t, s) = if scatter { (dst_off + off, src_off + i) } else { (dst_off + i, src_off + off) };
                mv(y, t as usize, s as usize, bytes);
            }
        }
        "trtc_movement_gather" => {
            let bytes = type_bytes(&define(src, "ELEM"));
            let ix = &inputs[idx.unwrap()];
            let (n, inner, count, axis_len) = (rest[0], rest[1], rest[2], rest[3]);
            for i in 0..n {
                let (k, t) = (i % inner, i / inner);
                let (j, o) = ((t % count) as usize, t / count);
                let r = resolve(index(ix, j), axis_len);
                mv(y, i as usize, ((o * axis_len + r) * inner + k) as usize, bytes);
            }
        }
        "trtc_movement_gather_elements" => {
            let bytes = type_bytes(&define(src, "ELEM"));
            let rank: usize = define(src, "RANK").parse().unwrap();
            let ix = &inputs[idx.unwrap()];
            let (n, axis_len, axis_stride) = (rest[0], rest[1], rest[2]);
            let (dims, strides) = (&rest[3..10], &rest[10..18]);
            for i in 0..n {
                let (mut r, mut off) = (i, 0i64);
                for d in (1..rank).rev() {
                    off += (r % dims[d - 1]) * strides[d];
                    r /= dims[d - 1];
                }
                off += r * strides[0] + resolve(index(ix, i as usize), axis_len) * axis_stride;
                mv(y, i as usize, off as usize, bytes);
            }
        }
        "trtc_movement_gather_nd" => {
            let bytes = type_bytes(&define(src, "ELEM"));
            let m: usize = define(src, "M").parse().unwrap();
            let ix = &inputs[idx.unwrap()];
            let (n, block, tuples, batch_len) = (rest[0], rest[1], rest[2], rest[3]);
            let (dims, strides) = (&rest[4..12], &rest[12..20]);
            for i in 0..n {
                let (e, g) = (i % block, i / block);
                let mut off = (g / tuples) * batch_len + e;
                for j in 0..m {
                    off += resolve(index(ix, g as usize * m + j), dims[j]) * strides[j];
                }
                mv(y, i as usize, off as usize, bytes);
            }
        }
        "trtc_movement_reverse_sequence" => {
            let bytes = type_bytes(&define(src, "ELEM"));
            let lens = &inputs[idx.unwrap()];
            let (n, a1, run, time, batch_first) = (rest[0], rest[1], rest[2], rest[3], rest[4] != 0);
            for i in 0..n {
                let (k, t01) = (i % run, i / run);
                let (c1, c0) = (t01 % a1, t01 / a1);
                let (b, t) = if batch_first { (c0, c1) } else { (c1, c0) };
                let len = index(lens, b as usize);
                assert!((0..=time).contains(&len), "the kernel traps on length {len}");
                let st = if t < len { len - 1 - t } else { t };
                let s = if batch_first { c0 * a1 + st } else { st * a1 + c1 };
                mv(y, i as usize, (s * run + k) as usize, bytes);
            }
        }
        "trtc_movement_trilu" => {
            let bytes = type_bytes(&define(src, "NARROW"));
            let (n, rows, cols, k, upper) = (rest[0], rest[1], rest[2], rest[3], rest[4] != 0);
            for i in 0..n {
                let (j, row) = (i % cols, (i / cols) % rows);
                let keep = if upper { j - row >= k } else { j - row <= k };
                if keep {
                    mv(y, i as usize, i as usize, bytes);
                } else {
                    y[i as usize * bytes..(i as usize + 1) * bytes].fill(0);
                }
            }
        }
        "trtc_movement_one_hot" => {
            // Pointers: output, indices, values (integer indices only here).
            let bytes = type_bytes(&define(src, "NARROW"));
            let values = &inputs[idx.unwrap()];
            let (n, inner, depth) = (rest[0], rest[1], rest[2]);
            for i in 0..n {
                let (m, t) = (i % inner, i / inner);
                let (d, o) = (t % depth, t / depth);
                let mut v = index(x, (o * inner + m) as usize);
                if v < 0 {
                    v += depth;
                }
                let pick = if v == d { 1 } else { 0 };
                y[i as usize * bytes..(i as usize + 1) * bytes].copy_from_slice(&values[pick * bytes..(pick + 1) * bytes]);
            }
        }
        "trtc_movement_pad" => {
            let bytes = type_bytes(&define(src, "NARROW"));
            let rank: usize = define(src, "RANK").parse().unwrap();
            let mode: u32 = define(src, "MODE").parse().unwrap();
            let n = rest[0];
            let dim = |d: usize, f: usize| rest[1 + 5 * d + f];
            for i in 0..n {
                let (mut r, mut s, mut inside) = (i, 0i64, true);
                for d in (0..rank).rev() {
                    let c = if d > 0 { r % dim(d, 0) } else { r };
                    if d > 0 {
                        r /= dim(d, 0);
                    }
                    let (rel, m) = (c - dim(d, 1), dim(d, 2));
                    let j = match mode {
                        0 => {
                            inside &= (0..m).contains(&rel);
                            rel
                        }
                        1 if m == 1 => 0,
                        1 => {
                            let p = 2 * (m - 1);
                            let j = rel.rem_euclid(p);
                            if j >= m {
                                p - j
                            } else {
                                j
                            }
                        }
                        2 => rel.clamp(0, m - 1),
                        _ => rel.rem_euclid(m),
                    };
                    s += (dim(d, 3) + j) * dim(d, 4);
                }
                let t = i as usize * bytes;
                if inside {
                    mv(y, i as usize, s as usize, bytes);
                } else if let Some(v) = pad_value {
                    y[t..t + bytes].copy_from_slice(&inputs[v][..bytes]);
                } else {
                    y[t..t + bytes].fill(0);
                }
            }
        }
        e => panic!("no interpretation of {e}"),
    }
}

/// Data of `t`'s type: distinct, deterministic bytes.
fn data(t: &TensorType) -> trtc_runtime::Tensor {
    let bytes: Vec<u8> = (0..t.bytes()).map(|i| (i * 7 + i / 251) as u8).collect();
    trtc_runtime::Tensor::from_bytes(t.clone(), &bytes).unwrap()
}

/// Every candidate of `layer`, interpreted on `inputs` (generated data
/// where `None`), gives the CPU op's output bytes.
fn check_against_cpu(layer: &Layer, given: &[Option<trtc_runtime::Tensor>]) {
    let inputs: Vec<trtc_runtime::Tensor> = layer
        .inputs
        .iter()
        .enumerate()
        .map(|(k, t)| given.get(k).cloned().flatten().unwrap_or_else(|| data(t.as_ref().unwrap())))
        .collect();
    let refs: Vec<Option<&trtc_runtime::Tensor>> = inputs.iter().map(Some).collect();
    let want = layer.op.eval_owned(&refs).unwrap();
    let bytes: Vec<Vec<u8>> = inputs.iter().map(|t| t.bytes().to_vec()).collect();
    for c in layer.candidates() {
        let mut outs: Vec<Vec<u8>> = layer.outputs.iter().map(|t| vec![0xAB; t.bytes()]).collect();
        for l in &c.launches {
            interpret(l, &bytes, &mut outs);
        }
        for (k, w) in want.iter().enumerate() {
            assert!(outs[k] == w.bytes(), "{} ({}): output {k} differs from the CPU's", layer.op.name(), c.tactic);
        }
    }
}

#[test]
fn launches_compute_what_the_cpu_computes() {
    for dtype in [DType::I32, DType::U8, DType::I16, DType::I64] {
        let layers = [
            Layer::new(Reshape { shape: vec![6, 4] }, dtype, &[&[2, 3, 4]]),
            Layer::new(Transpose { perm: vec![0, 2, 3, 1] }, dtype, &[&[2, 8, 3, 5]]),
            Layer::new(Transpose { perm: vec![2, 0, 1] }, dtype, &[&[4, 3, 16]]),
            Layer::new(slice(&[1], &[16], &[48], &[1]), dtype, &[&[2, 64, 3, 4]]),
            Layer::new(slice(&[2], &[-1], &[i64::MIN], &[-1]), dtype, &[&[3, 5, 7]]),
            Layer::new(slice(&[0, 2], &[1, 0], &[100, 7], &[2, 3]), dtype, &[&[9, 4, 7]]),
            Layer::new(slice(&[1], &[4], &[20], &[1]), dtype, &[&[3, 24]]),
            Layer::new(Split { axis: 1, sizes: vec![3, 5, 8] }, dtype, &[&[2, 16, 8]]),
            Layer::new(Concat { axis: 1 }, dtype, &[&[2, 8, 4], &[2, 4, 4], &[2, 0, 4]]),
            Layer::new(Concat { axis: 2 }, dtype, &[&[2, 3, 5], &[2, 3, 16]]),
            Layer::new(Expand { shape: vec![2, 3, 4, 16] }, dtype, &[&[3, 1, 16]]),
            Layer::new(Expand { shape: vec![4, 5] }, dtype, &[&[4, 1]]),
            Layer::new(Tile { repeats: vec![2, 1, 3] }, dtype, &[&[3, 4, 5]]),
            Layer::new(Pad { pads: vec![0, 1, 2, 0, 2, 1], mode: PadMode::Constant }, dtype, &[&[2, 3, 4]]),
            Layer::new(Pad { pads: vec![1, 0, -1, 2], mode: PadMode::Constant }, dtype, &[&[4, 5], &[]]),
            Layer::new(Pad { pads: vec![0, 3, 1, 0, 2, 4], mode: PadMode::Reflect }, dtype, &[&[2, 5, 3]]),
            Layer::new(Pad { pads: vec![0, 0, 1, 1, 0, 0, 2, 1], mode: PadMode::Edge }, dtype, &[&[2, 3, 4, 4]]),
            Layer::new(Pad { pads: vec![2, -1, 1, 3], mode: PadMode::Wrap }, dtype, &[&[3, 5]]),
        ];
        for l in &layers {
            check_against_cpu(l, &[]);
        }
        let idx = trtc_runtime::Tensor::from_vec(vec![2, 3], vec![0i64, -1, 5, -8, 3, 3]).unwrap();
        let gather = Layer::indexed(Gather { axis: 1 }, dtype, &[2, 8, 4], (DType::I64, &[2, 3]));
        check_against_cpu(&gather, &[None, Some(idx)]);
        let idx = trtc_runtime::Tensor::from_vec(vec![3], vec![2i32, -3, 0]).unwrap();
        let gather = Layer::indexed(Gather { axis: 0 }, dtype, &[3, 16], (DType::I32, &[3]));
        check_against_cpu(&gather, &[None, Some(idx)]);
        let idx = trtc_runtime::Tensor::from_vec(vec![3, 2, 2], vec![0i64, 1, -1, 2, 0, 0, 2, 1, -3, 1, 1, 0]).unwrap();
        let ge = Layer::indexed(GatherElements { axis: 1 }, dtype, &[3, 3, 2], (DType::I64, &[3, 2, 2]));
        check_against_cpu(&ge, &[None, Some(idx)]);
        let idx = trtc_runtime::Tensor::from_vec(vec![4, 2], vec![0i32, 1, -1, 5, 4, -6, 2, 2]).unwrap();
        let nd = Layer::indexed(GatherND { batch_dims: 0 }, dtype, &[5, 6, 8], (DType::I32, &[4, 2]));
        check_against_cpu(&nd, &[None, Some(idx)]);
        let idx = trtc_runtime::Tensor::from_vec(vec![2, 3, 1], vec![1i64, 0, -1, 5, 2, 3]).unwrap();
        let nd = Layer::indexed(GatherND { batch_dims: 1 }, dtype, &[2, 6, 7], (DType::I64, &[2, 3, 1]));
        check_against_cpu(&nd, &[None, Some(idx)]);
        for (batch_axis, time_axis, shape) in [(1, 0, [5usize, 4, 8]), (0, 1, [4, 5, 3])] {
            let lens = trtc_runtime::Tensor::from_vec(vec![4], vec![1i64, 5, 0, 3]).unwrap();
            let rs = Layer::indexed(ReverseSequence { batch_axis, time_axis }, dtype, &shape, (DType::I64, &[4]));
            check_against_cpu(&rs, &[None, Some(lens)]);
        }
        for (upper, k) in [(true, 0), (false, 0), (true, 2), (false, -1), (true, -7)] {
            check_against_cpu(&Layer::new(Trilu { upper, k }, dtype, &[&[2, 4, 5]]), &[]);
        }
        let idx = trtc_runtime::Tensor::from_vec(vec![2, 3], vec![0i64, -1, 5, 10, -11, 3]).unwrap();
        for axis in [0, 1, 2] {
            let values = Some(TensorType::new(dtype, [2]));
            let oh = Layer::typed(OneHot { depth: 10, axis }, false, vec![Some(TensorType::new(DType::I64, [2, 3])), values]);
            check_against_cpu(&oh, &[Some(idx.clone())]);
        }
    }
}
