//! The CUDA kernels compute what the CPU reference ops compute: small
//! synthetic layers of every kernel family (elementwise, cast, quantize,
//! fused pointwise; movement; reduce, softmax, normalizations, pools;
//! attention; GEMM and GEMV; convolutions), in f32, f16 (`HalfIo`) and int8
//! (`Int8Linear`) storage and integer types where the op takes them, run on
//! the CPU emulator of `kernels/emu/` (every CUDA thread a fiber; inline PTX
//! through the `TRTC_EMULATE` branches, tensor cores included; see its
//! README) and compared with `Op::eval_owned`.
//!
//! For each layer, every candidate runs (or, when there are many, the
//! heuristic choice and an even sample of the rest), twice: threads
//! scheduled in increasing, then decreasing order. The distinct kernel
//! sources are compiled with g++ into a few programs (cached in the target
//! directory by content hash), each candidate's launches run as one process
//! on deterministic random inputs (valid indices where an input is an index,
//! except in the cases that must `__trap()`), and each output is compared:
//! f32 within 1e-4 of max |reference| (3e-3 for TF32 tensor-core tactics),
//! f16 within 1e-2, integers exactly (Int8Linear outputs within one
//! quantization step, where float rounding order may differ; a note says
//! when that slack was used). Deliberately wrong control kernels must be
//! caught. The test prints how many cases ran, passed, failed and were
//! skipped, with the reason of every skip; it fails on any mismatch, crash,
//! sanitizer report or compile error. `TRTC_EMU_FILTER=text` runs only the
//! layers whose name contains `text`; `TRTC_EMU_KEEP=1` keeps the generated
//! files.
//!
//! Needs g++ (C++20, UBSan) on the PATH; no GPU, no CUDA.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use trtc_kernels::{candidates, Candidate, LayerIo, SmLimits, COMMON};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::elementwise::*;
use trtc_runtime::ops::fused::{
    Activation, Attention, Epilogue, Instr, Linear, LinearKind, Pointwise, PointwiseBinary, ScoreScale,
};
use trtc_runtime::ops::linalg::{Conv, ConvTranspose, Gemm, MatMul, Pool, PoolKind};
use trtc_runtime::ops::movement::*;
use trtc_runtime::ops::precision::{HalfIo, Int8Linear, Int8Output};
use trtc_runtime::ops::quant::{DequantizeLinear, QuantizeLinear};
use trtc_runtime::ops::reduce::*;
use trtc_runtime::ops::Op;
use trtc_runtime::{DType, Tensor, TensorType};

// ---------------------------------------------------------------------------
// Cases.

/// How many candidates of a layer run.
#[derive(Clone, Copy, Debug)]
enum Pick {
    /// Every candidate.
    All,
    /// The heuristic choice and up to `n - 1` more, evenly spaced.
    Sample(usize),
}

/// One synthetic layer.
struct Case {
    name: String,
    family: &'static str,
    op: Op,
    inputs: Vec<Option<Tensor>>,
    pick: Pick,
    /// Integer outputs may differ by this much (quantized outputs whose float
    /// computation rounds in another order).
    int_slack: i64,
    /// An invalid index: the CPU reference fails, and the kernel must
    /// execute `__trap()` (the launch fails) rather than return a result.
    expect_trap: bool,
}

/// Deterministic random numbers (a 64-bit LCG).
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    fn below(&mut self, n: u64) -> u64 {
        ((self.unit() * n as f64) as u64).min(n.saturating_sub(1))
    }
}

/// Builds the cases with one random stream.
struct Builder {
    rng: Rng,
    cases: Vec<Case>,
}

fn f16_of(t: &Tensor) -> Tensor {
    let cast: Op = Cast::new(DType::F16).into();
    cast.eval_owned(&[Some(t)]).unwrap().remove(0)
}

fn cast_to(t: &Tensor, to: DType) -> Tensor {
    let cast: Op = Cast::new(to).into();
    cast.eval_owned(&[Some(t)]).unwrap().remove(0)
}

fn half(op: impl Into<Op>) -> Op {
    HalfIo::new(op.into()).into()
}

impl Builder {
    /// Uniform values in [lo, hi) of `dtype` (float types rounded from f32,
    /// integer types truncated).
    fn uniform(&mut self, dtype: DType, shape: &[usize], lo: f64, hi: f64) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|_| self.rng.range(lo, hi) as f32).collect();
        let t = Tensor::from_vec(shape.to_vec(), v).unwrap();
        match dtype {
            DType::F32 => t,
            DType::F16 => f16_of(&t),
            d => cast_to(&t, d),
        }
    }

    /// Values in [-2, 2) of `dtype`.
    fn data(&mut self, dtype: DType, shape: &[usize]) -> Tensor {
        self.uniform(dtype, shape, -2.0, 2.0)
    }

    /// Integer indices of `dtype` in [lo, hi).
    fn indices(&mut self, dtype: DType, shape: &[usize], lo: i64, hi: i64) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<i64> = (0..n).map(|_| lo + self.rng.below((hi - lo) as u64) as i64).collect();
        let t = Tensor::from_vec(shape.to_vec(), v).unwrap();
        if dtype == DType::I64 {
            t
        } else {
            cast_to(&t, dtype)
        }
    }

    fn add(&mut self, family: &'static str, name: impl Into<String>, op: impl Into<Op>, inputs: Vec<Option<Tensor>>, pick: Pick) {
        self.cases.push(Case { name: name.into(), family, op: op.into(), inputs, pick, int_slack: 0, expect_trap: false });
    }

    fn add_trap(&mut self, family: &'static str, name: impl Into<String>, op: impl Into<Op>, inputs: Vec<Option<Tensor>>) {
        self.cases.push(Case {
            name: name.into(),
            family,
            op: op.into(),
            inputs,
            pick: Pick::Sample(2),
            int_slack: 0,
            expect_trap: true,
        });
    }

    fn add_slack(
        &mut self,
        family: &'static str,
        name: impl Into<String>,
        op: impl Into<Op>,
        inputs: Vec<Option<Tensor>>,
        pick: Pick,
    ) {
        self.cases.push(Case { name: name.into(), family, op: op.into(), inputs, pick, int_slack: 1, expect_trap: false });
    }
}

fn cases() -> Vec<Case> {
    let mut b = Builder { rng: Rng(0x5eed_1234_abcd_0001), cases: Vec::new() };
    elementwise_cases(&mut b);
    movement_cases(&mut b);
    reduce_cases(&mut b);
    attention_cases(&mut b);
    gemm_cases(&mut b);
    conv_cases(&mut b);
    edge_cases(&mut b);
    b.cases
}

/// Wraps a float op in HalfIo when `dt` is f16.
fn for_dtype(dt: DType, op: impl Into<Op>) -> Op {
    if dt == DType::F16 {
        half(op)
    } else {
        op.into()
    }
}

fn elementwise_cases(b: &mut Builder) {
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

/// Less common attributes and degenerate sizes of every family.
fn edge_cases(b: &mut Builder) {
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

fn slice(axes: &[usize], starts: &[i64], ends: &[i64], steps: &[i64]) -> Slice {
    Slice { axes: axes.to_vec(), starts: starts.to_vec(), ends: ends.to_vec(), steps: steps.to_vec() }
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

fn movement_cases(b: &mut Builder) {
    use DType::*;
    let fam = "movement";
    for dt in [F32, F16, I8, I64] {
        let wrap = |op: Op| if dt == F16 { half(op) } else { op };
        let add = |b: &mut Builder, name: &str, op: Op, shapes: &[&[usize]], pick: Pick| {
            let inputs = shapes.iter().map(|s| Some(b.data(dt, s))).collect();
            b.add(fam, format!("{name} {dt}"), wrap(op), inputs, pick);
        };
        add(b, "Reshape", Reshape { shape: vec![6, 5] }.into(), &[&[2, 3, 5]], Pick::Sample(2));
        add(b, "Transpose 0213", Transpose { perm: vec![0, 2, 1, 3] }.into(), &[&[2, 5, 3, 8]], Pick::All);
        add(b, "Transpose NCHW-NHWC odd", Transpose { perm: vec![0, 2, 3, 1] }.into(), &[&[2, 7, 3, 5]], Pick::Sample(3));
        add(b, "Transpose large", Transpose { perm: vec![1, 0, 2] }.into(), &[&[33, 41, 3]], Pick::All);
        add(b, "Transpose 201", Transpose { perm: vec![2, 0, 1] }.into(), &[&[4, 3, 16]], Pick::Sample(3));
        add(b, "Slice channels", slice(&[1], &[4], &[12], &[1]).into(), &[&[2, 16, 3, 4]], Pick::Sample(3));
        add(b, "Slice reversed", slice(&[2], &[-1], &[i64::MIN], &[-1]).into(), &[&[3, 5, 7]], Pick::Sample(2));
        add(b, "Slice strided", slice(&[0, 2], &[1, 0], &[100, 7], &[2, 3]).into(), &[&[9, 4, 7]], Pick::Sample(2));
        add(b, "Concat axis 1", Concat { axis: 1 }.into(), &[&[2, 8, 4], &[2, 3, 4], &[2, 0, 4], &[2, 5, 4]], Pick::All);
        add(b, "Concat last axis", Concat { axis: 2 }.into(), &[&[2, 3, 5], &[2, 3, 16]], Pick::Sample(3));
        add(b, "Split", Split { axis: 1, sizes: vec![3, 5, 8] }.into(), &[&[2, 16, 8]], Pick::Sample(3));
        add(b, "Expand", Expand { shape: vec![2, 3, 4, 16] }.into(), &[&[3, 1, 16]], Pick::Sample(3));
        add(b, "Expand column", Expand { shape: vec![4, 5] }.into(), &[&[4, 1]], Pick::Sample(2));
        add(b, "Tile", Tile { repeats: vec![2, 1, 3] }.into(), &[&[3, 4, 5]], Pick::Sample(2));
        // Gathers with negative and repeated indices.
        let x = b.data(dt, &[3, 8, 4]);
        let i = b.indices(I64, &[2, 3], -8, 8);
        b.add(fam, format!("Gather axis 1 {dt}"), wrap(Gather { axis: 1 }.into()), vec![Some(x), Some(i)], Pick::Sample(3));
        let x = b.data(dt, &[5, 12]);
        let i = b.indices(I32, &[4], -5, 5);
        b.add(fam, format!("Gather rows i32 {dt}"), wrap(Gather { axis: 0 }.into()), vec![Some(x), Some(i)], Pick::Sample(3));
        let x = b.data(dt, &[3, 3, 2]);
        let i = b.indices(I64, &[3, 2, 2], -3, 3);
        b.add(
            fam,
            format!("GatherElements {dt}"),
            wrap(GatherElements { axis: 1 }.into()),
            vec![Some(x), Some(i)],
            Pick::Sample(2),
        );
        let x = b.data(dt, &[5, 6, 8]);
        let i = Tensor::from_vec(vec![4, 2], vec![0i32, 1, -1, 5, 4, -6, 2, 2]).unwrap();
        b.add(fam, format!("GatherND {dt}"), wrap(GatherND { batch_dims: 0 }.into()), vec![Some(x), Some(i)], Pick::Sample(2));
        let x = b.data(dt, &[2, 6, 7]);
        let i = Tensor::from_vec(vec![2, 3, 1], vec![1i64, 0, -1, 5, 2, 3]).unwrap();
        b.add(
            fam,
            format!("GatherND batch_dims 1 {dt}"),
            wrap(GatherND { batch_dims: 1 }.into()),
            vec![Some(x), Some(i)],
            Pick::Sample(2),
        );
        let x = b.data(dt, &[5, 4, 8]);
        let lens = Tensor::from_vec(vec![4], vec![1i64, 5, 0, 3]).unwrap();
        b.add(
            fam,
            format!("ReverseSequence {dt}"),
            wrap(ReverseSequence { batch_axis: 1, time_axis: 0 }.into()),
            vec![Some(x), Some(lens)],
            Pick::Sample(2),
        );
        // Pads of every mode, negative pads, a constant value input.
        let x = b.data(dt, &[4, 5]);
        let v = b.data(dt, &[]);
        b.add(
            fam,
            format!("Pad constant value {dt}"),
            wrap(Pad { pads: vec![1, 0, -1, 2], mode: PadMode::Constant }.into()),
            vec![Some(x), Some(v)],
            Pick::Sample(3),
        );
        for mode in [PadMode::Reflect, PadMode::Edge, PadMode::Wrap] {
            let x = b.data(dt, &[2, 5, 3]);
            b.add(
                fam,
                format!("Pad {mode:?} {dt}"),
                wrap(Pad { pads: vec![0, 3, 1, 0, 2, 2], mode }.into()),
                vec![Some(x)],
                Pick::Sample(2),
            );
        }
        let x = b.data(dt, &[2, 4, 5]);
        b.add(
            fam,
            format!("Trilu upper k=1 {dt}"),
            wrap(Trilu { upper: true, k: 1 }.into()),
            vec![Some(x.clone())],
            Pick::Sample(2),
        );
        b.add(fam, format!("Trilu lower k=-1 {dt}"), wrap(Trilu { upper: false, k: -1 }.into()), vec![Some(x)], Pick::Sample(1));
        let idx = Tensor::from_vec(vec![2, 3], vec![0i64, -1, 5, 10, -11, 3]).unwrap();
        let values = b.data(dt, &[2]);
        b.add(fam, format!("OneHot {dt}"), OneHot { depth: 10, axis: 1 }, vec![Some(idx), Some(values)], Pick::Sample(2));
    }
    // Invalid indices trap.
    let x = b.data(F32, &[3, 8]);
    let i = Tensor::from_vec(vec![3], vec![1i64, 8, 0]).unwrap();
    b.add_trap(fam, "Gather index out of range traps", Gather { axis: 1 }, vec![Some(x), Some(i)]);
    let x = b.data(F32, &[3, 4, 2]);
    let i = Tensor::from_vec(vec![3, 1, 2], vec![0i64, 1, -5, 2, 3, 0]).unwrap();
    b.add_trap(fam, "GatherElements index out of range traps", GatherElements { axis: 1 }, vec![Some(x), Some(i)]);
    let x = b.data(F32, &[5, 4, 2]);
    let lens = Tensor::from_vec(vec![4], vec![1i64, 6, 0, 3]).unwrap();
    b.add_trap(
        fam,
        "ReverseSequence length past the end traps",
        ReverseSequence { batch_axis: 1, time_axis: 0 },
        vec![Some(x), Some(lens)],
    );
    // Empty tensors and scalars.
    let x = b.data(F32, &[0, 5]);
    let y = b.data(F32, &[5]);
    b.add(fam, "Add empty", Binary::new(BinaryKind::Add), vec![Some(x), Some(y)], Pick::Sample(1));
    let x = b.data(F32, &[]);
    let y = b.data(F32, &[]);
    b.add(fam, "Add scalars", Binary::new(BinaryKind::Add), vec![Some(x), Some(y)], Pick::Sample(1));
    let x = b.data(F16, &[2, 3, 5]);
    let i = Tensor::from_vec(vec![], vec![-2i32]).unwrap();
    b.add(fam, "Gather scalar index f16", half(Gather { axis: 2 }), vec![Some(x), Some(i)], Pick::Sample(2));
    let x = b.data(F32, &[4, 0, 3]);
    b.add(fam, "Transpose empty", Transpose { perm: vec![2, 0, 1] }, vec![Some(x)], Pick::Sample(1));
    // Resize: nearest modes, linear with every coordinate mode, up and down,
    // crop-and-resize with extrapolation, u8 linear.
    use CoordinateMode::*;
    for dt in [F32, F16] {
        for nearest in [NearestMode::RoundPreferFloor, NearestMode::RoundPreferCeil, NearestMode::Floor, NearestMode::Ceil] {
            let r = resize(ResizeMode::Nearest, HalfPixel, nearest, &[1.0, 1.0, 1.7, 2.0], &[1, 3, 8, 10]);
            let x = b.data(dt, &[1, 3, 5, 5]);
            b.add(fam, format!("Resize nearest {nearest:?} {dt}"), for_dtype(dt, r), vec![Some(x)], Pick::Sample(2));
        }
        for coord in [HalfPixel, HalfPixelSymmetric, PytorchHalfPixel, AlignCorners, Asymmetric] {
            let r = resize(ResizeMode::Linear, coord, NearestMode::Floor, &[1.0, 1.0, 2.0, 2.0], &[2, 2, 10, 10]);
            let x = b.data(dt, &[2, 2, 5, 5]);
            b.add(fam, format!("Resize linear up {coord:?} {dt}"), for_dtype(dt, r), vec![Some(x)], Pick::Sample(2));
            let mut d = resize(ResizeMode::Linear, coord, NearestMode::Floor, &[1.0, 0.5, 0.75], &[3, 5, 9]);
            d.exclude_outside = true;
            let x = b.data(dt, &[3, 10, 12]);
            b.add(fam, format!("Resize linear down {coord:?} {dt}"), for_dtype(dt, d), vec![Some(x)], Pick::Sample(1));
        }
        let mut crop = resize(ResizeMode::Linear, TfCropAndResize, NearestMode::Floor, &[1.0, 1.0, 1.5, 1.5], &[1, 2, 6, 6]);
        crop.roi = vec![0.0, 0.0, 0.1, 0.2, 1.0, 1.0, 0.9, 1.2];
        crop.extrapolation_value = -1.0;
        let x = b.data(dt, &[1, 2, 4, 4]);
        b.add(fam, format!("Resize crop linear {dt}"), for_dtype(dt, crop.clone()), vec![Some(x.clone())], Pick::Sample(1));
        crop.mode = ResizeMode::Nearest;
        b.add(fam, format!("Resize crop nearest {dt}"), for_dtype(dt, crop), vec![Some(x)], Pick::Sample(1));
    }
    let r = resize(ResizeMode::Linear, HalfPixel, NearestMode::Floor, &[2.0, 2.0], &[8, 8]);
    let x = b.indices(U8, &[4, 4], 0, 256);
    b.add(fam, "Resize linear u8", r, vec![Some(x)], Pick::Sample(1));
}

fn reduce_cases(b: &mut Builder) {
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
}

fn attention_cases(b: &mut Builder) {
    use DType::*;
    let fam = "attention";
    let att = |mask: bool, q_scale: Option<f32>, ss: Option<ScoreScale>, nz: bool| Attention {
        num_heads: 3,
        q_scale,
        k_scale: q_scale,
        score_scale: ss,
        mask,
        nan_to_zero: nz,
    };
    let (bt, sq, sk, h, d, dv) = (2, 5, 7, 3, 4, 8);
    let q = b.data(F32, &[bt, sq, h * d]);
    let k = b.data(F32, &[bt, sk, h * d]);
    let v = b.data(F32, &[bt, sk, h * dv]);
    let mut m = vec![0f32; bt * sk];
    m[sk + 5] = f32::NEG_INFINITY;
    m[sk + 6] = f32::NEG_INFINITY;
    let mask = Tensor::from_vec(vec![bt, 1, 1, sk], m).unwrap();
    let all = |t: &[&Tensor]| t.iter().map(|t| Some((*t).clone())).collect::<Vec<_>>();
    b.add(fam, "Attention key mask", att(true, None, Some(ScoreScale::Mul(0.5)), true), all(&[&q, &k, &v, &mask]), Pick::All);
    b.add(
        fam,
        "Attention q/k scales, Div",
        att(false, Some(0.7), Some(ScoreScale::Div(1.3)), false),
        all(&[&q, &k, &v]),
        Pick::Sample(2),
    );
    // A fully masked row (query 2 of batch 1) with a per-query mask, with and
    // without the NaN guard.
    let mut m: Vec<f32> = (0..bt * h * sq * sk).map(|_| b.rng.range(-1.0, 1.0) as f32).collect();
    for j in 0..sk {
        for hh in 0..h {
            m[((h + hh) * sq + 2) * sk + j] = f32::NEG_INFINITY;
        }
    }
    let full = Tensor::from_vec(vec![bt, h, sq, sk], m).unwrap();
    b.add(
        fam,
        "Attention fully masked row, nan_to_zero",
        att(true, None, None, true),
        all(&[&q, &k, &v, &full]),
        Pick::Sample(1),
    );
    b.add(fam, "Attention fully masked row, NaN", att(true, None, None, false), all(&[&q, &k, &v, &full]), Pick::Sample(1));
    b.add(
        fam,
        "Attention f16",
        half(att(true, None, Some(ScoreScale::Mul(0.5)), true)),
        vec![Some(f16_of(&q)), Some(f16_of(&k)), Some(f16_of(&v)), Some(f16_of(&mask))],
        Pick::Sample(2),
    );
    // Longer sequences than a key chunk, a causal-like 2-D mask.
    let (bt, sq, sk, d, dv) = (1, 40, 70, 20, 40);
    let q = b.data(F32, &[bt, sq, 3 * d]);
    let k = b.data(F32, &[bt, sk, 3 * d]);
    let v = b.data(F32, &[bt, sk, 3 * dv]);
    let causal: Vec<f32> = (0..sq * sk).map(|i| if i % sk > i / sk + 30 { f32::NEG_INFINITY } else { 0.0 }).collect();
    let mask = Tensor::from_vec(vec![sq, sk], causal).unwrap();
    b.add(
        fam,
        "Attention long, causal",
        att(true, None, Some(ScoreScale::Mul(0.2)), true),
        all(&[&q, &k, &v, &mask]),
        Pick::Sample(4),
    );
}

fn gemm(alpha: f32, beta: f32, trans_a: bool, trans_b: bool) -> Gemm {
    Gemm { alpha, beta, trans_a, trans_b }
}

fn linear(kind: LinearKind, bias: bool, residual: bool, activation: Option<Activation>) -> Linear {
    Linear { kind, bias, epilogue: Epilogue { residual, activation } }
}

fn gemm_cases(b: &mut Builder) {
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
}

fn conv_cases(b: &mut Builder) {
    use DType::*;
    let fam = "conv";
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
}

/// Deliberately wrong kernels for a `Neg` layer, each of which the harness
/// must report: a wrong value, unwritten outputs, a write past the end of
/// the output, a missing `__syncthreads` (the emulator runs thread 0 up to
/// its next barrier before thread 1 starts, and shared memory starts as NaN
/// bytes), a shared-memory overrun and a misaligned vector store (UBSan), a
/// write to an input (read-only) and a read just past the end of an input.
const CONTROLS: [(&str, &str); 8] = [
    ("copies instead of negating", "if (i < n) out[i] = in[i];"),
    ("writes half the outputs", "if (i < n / 2) out[i] = -in[i];"),
    ("writes one element past the end", "if (i <= n) out[i] = -in[i];"),
    (
        "reads shared memory without a barrier",
        "__shared__ float s[64]; s[threadIdx.x] = i < n ? in[i] : 0.0f; const float v = s[threadIdx.x ^ 1]; \
         if ((i ^ 1) < n) out[i ^ 1] = -v;",
    ),
    (
        "overruns a shared array",
        "__shared__ float s[64]; s[threadIdx.x + 1] = i < n ? in[i] : 0.0f; __syncthreads(); if (i < n) out[i] = -s[threadIdx.x + 1];",
    ),
    ("stores a misaligned float2", "if (2 * i + 2 < n) *(float2*)(out + 2 * i + 1) = make_float2(-in[2 * i + 1], -in[2 * i + 2]);"),
    ("writes its input", "if (i < n) { const float v = in[i]; ((float*)in)[i] = 2.0f * v; out[i] = -v; }"),
    ("reads past the end of its input", "if (i < n) out[i] = -in[i] + 0.0f * in[i + 2];"),
];

fn control_case(b: &mut Builder) -> Case {
    let x = b.data(DType::F32, &[5, 7]);
    Case {
        name: "control".into(),
        family: "control",
        op: Unary::new(UnaryKind::Neg).into(),
        inputs: vec![Some(x)],
        pick: Pick::All,
        int_slack: 0,
        expect_trap: false,
    }
}

fn control_launch(body: &str, n: usize) -> trtc_kernels::KernelLaunch {
    let source = format!(
        "{COMMON}\nextern \"C\" __global__ void trtc_control(float* out, const float* in, long long n) {{\n    const long long i = blockIdx.x * blockDim.x + threadIdx.x;\n    {body}\n}}\n"
    );
    trtc_kernels::KernelLaunch {
        kernel: trtc_kernels::KernelSource { entry: "trtc_control".into(), source },
        grid: [1, 1, 1],
        block: [64, 1, 1],
        shared_bytes: 0,
        args: vec![KernelArg::Output(0), KernelArg::Input(0), KernelArg::I64(n as i64)],
    }
}

// ---------------------------------------------------------------------------
// The emulator harness.

/// A layer's kernels for one candidate, ready to run.
struct Run {
    case: usize,
    tactic: String,
    /// A control that must fail.
    control: bool,
    /// (module index, launch) per launch.
    launches: Vec<(usize, trtc_kernels::KernelLaunch)>,
}

/// The outcome of one (layer, candidate).
enum Outcome {
    /// With what the emulator noted (on stderr), if anything.
    Pass(String),
    Fail(String),
    Skip(String),
}

/// A distinct kernel source, rewritten for the emulator.
struct Module {
    entry: String,
    /// The rewritten source, or why it cannot run on the emulator.
    code: Result<String, String>,
    /// The program (index into `programs`) and its entry index there.
    program: usize,
    slot: usize,
}

fn emu_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("emu")
}

fn work_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("emu")
}

/// FNV-1a, for the program cache (stable across runs and Rust versions).
fn fnv(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for p in parts {
        for &b in *p {
            h ^= b as u64;
            h = h.wrapping_mul(0x100000001b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// g++ flags. UBSan reports misaligned accesses (which fault on the GPU),
/// out-of-bounds subscripts of arrays of known size (shared tiles, local
/// arrays) and shifts by the bit width or more, and stops the program.
const CXX_FLAGS: [&str; 9] = [
    "-std=c++20",
    "-O1",
    "-pthread",
    "-w",
    "-fno-strict-aliasing",
    "-fwrapv",
    "-ffp-contract=off",
    "-fsanitize=alignment,bounds,shift",
    "-fno-sanitize-recover=all",
];

/// Whether `line` has an inline asm statement.
fn has_asm(line: &str) -> bool {
    let l = line.trim_start();
    !l.starts_with("//") && (line.contains("asm(") || line.contains("asm volatile") || line.contains("asm ("))
}

/// The first asm statement that is compiled when TRTC_EMULATE is defined
/// (outside the `#else` of an `#ifdef TRTC_EMULATE` or an `#ifndef
/// TRTC_EMULATE`), if any.
fn unguarded_asm(source: &str) -> Option<String> {
    // Per open conditional: whether its current branch is excluded when
    // TRTC_EMULATE is defined; None for conditionals on anything else.
    let mut stack: Vec<Option<bool>> = Vec::new();
    for line in source.lines() {
        let t = line.trim_start();
        if let Some(d) = t.strip_prefix('#') {
            let d = d.trim_start();
            let word = d.split_whitespace().next().unwrap_or("");
            let rest = d[word.len()..].trim();
            match word {
                "ifdef" => stack.push((rest == "TRTC_EMULATE").then_some(false)),
                "ifndef" => stack.push((rest == "TRTC_EMULATE").then_some(true)),
                "if" => stack.push(match rest {
                    "defined(TRTC_EMULATE)" => Some(false),
                    "!defined(TRTC_EMULATE)" => Some(true),
                    _ => None,
                }),
                "else" | "elif" => {
                    if let Some(Some(x)) = stack.last_mut() {
                        *x = !*x;
                    }
                }
                "endif" => {
                    stack.pop();
                }
                _ => {}
            }
            continue;
        }
        if has_asm(line) && !stack.contains(&Some(true)) {
            return Some(line.trim().to_string());
        }
    }
    None
}

/// The source as the emulator compiles it: `extern "C"` dropped (each module
/// lives in its own namespace) and `extern __shared__` arrays turned into
/// pointers to the emulator's dynamic shared memory.
fn rewrite(source: &str) -> Result<String, String> {
    if let Some(line) = unguarded_asm(source) {
        return Err(format!("inline PTX without a TRTC_EMULATE branch: `{line}`"));
    }
    let mut out = String::new();
    for line in source.lines() {
        let mut l = line.replace("extern \"C\" ", "");
        if let Some(pos) = l.find("extern __shared__") {
            // extern __shared__ [__align__(n)] TYPE NAME[];
            let decl = l[pos + "extern __shared__".len()..].trim().trim_end_matches(';').trim().to_string();
            let decl = match decl.strip_prefix("__align__(") {
                Some(r) => r[r.find(')').unwrap() + 1..].trim().to_string(),
                None => decl,
            };
            let Some(decl) = decl.strip_suffix("[]") else {
                return Err(format!("cannot rewrite `{line}`"));
            };
            let split = decl.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).ok_or(format!("cannot rewrite `{line}`"))?;
            let (ty, name) = (decl[..=split].trim(), &decl[split + 1..]);
            l = format!("{}{ty}* const {name} = ({ty}*)trtc_emu::dynamic_shared();", &l[..pos]);
        }
        out.push_str(&l);
        out.push('\n');
    }
    Ok(out)
}

/// Names the source #defines (undefined after its module).
fn defined_macros(source: &str) -> Vec<String> {
    let mut names: Vec<String> = source
        .lines()
        .filter_map(|l| {
            let d = l.trim_start().strip_prefix('#')?.trim_start().strip_prefix("define")?;
            let name: String = d.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            (!name.is_empty()).then_some(name)
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Splits the compilable modules into programs of about `per` modules,
/// the modules one candidate launches always together. The split depends
/// on the modules' contents, not on their order, so that adding or changing
/// a case recompiles only the programs it touches (the cache is by text).
fn program_groups(modules: &[Module], runs: &[Run], per: usize) -> Vec<Vec<usize>> {
    fn find(parent: &mut [usize], x: usize) -> usize {
        let mut r = x;
        while parent[r] != r {
            r = parent[r];
        }
        parent[x] = r;
        r
    }
    let mut parent: Vec<usize> = (0..modules.len()).collect();
    let mut used = vec![false; modules.len()];
    for r in runs {
        let ms: Vec<usize> = r.launches.iter().map(|(m, _)| *m).filter(|&m| modules[m].code.is_ok()).collect();
        for &m in &ms {
            used[m] = true;
        }
        for w in ms.windows(2) {
            let (a, b) = (find(&mut parent, w[0]), find(&mut parent, w[1]));
            parent[a] = b;
        }
    }
    let hash: Vec<u64> = modules.iter().map(|m| fnv(&[m.code.as_deref().unwrap_or("").as_bytes()])).collect();
    let mut units: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for m in (0..modules.len()).filter(|&m| used[m]) {
        let root = find(&mut parent, m);
        units.entry(root).or_default().push(m);
    }
    let mut units: Vec<(u64, Vec<usize>)> = units
        .into_values()
        .map(|mut u| {
            u.sort_by_key(|&m| hash[m]);
            (hash[u[0]], u)
        })
        .collect();
    units.sort();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (key, unit) in units {
        let boundary = key % per.max(1) as u64 == 0;
        match groups.last_mut() {
            Some(g) if !boundary && g.len() + unit.len() <= 2 * per => g.extend(unit),
            _ => groups.push(unit),
        }
    }
    groups
}

/// One generated program: a few modules, compiled into one executable.
struct Program {
    exe: PathBuf,
    /// The compile error, if any.
    error: Option<String>,
}

fn program_text(modules: &[Module], members: &[usize]) -> String {
    let emu = emu_dir();
    let mut s = format!("#include \"{}\"\n", emu.join("shim.h").display());
    for &m in members {
        let module = &modules[m];
        let code = module.code.as_ref().unwrap();
        writeln!(s, "namespace trtc_emu_m{m} {{\n#line 1 \"module{m}.cu\"\n{code}}}").unwrap();
        for name in defined_macros(code) {
            writeln!(s, "#undef {name}").unwrap();
        }
        writeln!(
            s,
            "static void trtc_emu_run_m{m}(const trtc_emu::Arg* a, int n) {{ trtc_emu::invoke(trtc_emu_m{m}::{}, a, n); }}",
            module.entry
        )
        .unwrap();
    }
    s.push_str("const trtc_emu::Entry trtc_emu_entries[] = {\n");
    for &m in members {
        writeln!(s, "    {{\"module{m} {}\", trtc_emu_run_m{m}}},", modules[m].entry).unwrap();
    }
    writeln!(s, "}};\nconst int trtc_emu_entry_count = {};", members.len()).unwrap();
    writeln!(s, "#include \"{}\"", emu.join("driver.h").display()).unwrap();
    s
}

/// Compiles the program unless the cache has it.
fn compile(text: &str, dir: &Path) -> Result<PathBuf, String> {
    let shim = std::fs::read(emu_dir().join("shim.h")).unwrap();
    let driver = std::fs::read(emu_dir().join("driver.h")).unwrap();
    let flags = CXX_FLAGS.join(" ");
    let hash = fnv(&[text.as_bytes(), &shim, &driver, flags.as_bytes()]);
    let exe = dir.join(format!("prog-{hash:016x}"));
    if exe.exists() {
        // Mark it used (the cache drops programs unused for a day).
        std::fs::File::options().append(true).open(&exe).and_then(|f| f.set_modified(std::time::SystemTime::now())).ok();
        return Ok(exe);
    }
    let src = dir.join(format!("prog-{hash:016x}.cpp"));
    std::fs::write(&src, text).unwrap();
    let tmp = dir.join(format!("prog-{hash:016x}.tmp{}", std::process::id()));
    let out =
        Command::new("g++").args(CXX_FLAGS).arg("-o").arg(&tmp).arg(&src).output().map_err(|e| format!("cannot run g++: {e}"))?;
    if !out.status.success() {
        let log = String::from_utf8_lossy(&out.stderr);
        let head: Vec<&str> = log.lines().filter(|l| l.contains("error")).take(8).collect();
        return Err(format!("g++ failed ({}):\n{}", src.display(), head.join("\n")));
    }
    std::fs::rename(&tmp, &exe).unwrap();
    Ok(exe)
}

/// Removes what earlier runs left in the work directory and nobody used
/// for a day: programs of sources that changed since, the files of failed
/// cases.
fn clean_cache(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|a| a > Duration::from_secs(86400));
        if old {
            let p = e.path();
            if p.is_dir() {
                std::fs::remove_dir_all(&p).ok();
            } else {
                std::fs::remove_file(&p).ok();
            }
        }
    }
}

/// Runs `f` on every index below `n` with `workers` threads.
fn parallel<T: Send>(n: usize, workers: usize, f: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<T>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    break;
                }
                let r = f(i);
                results.lock().unwrap()[i] = Some(r);
            });
        }
    });
    results.into_inner().unwrap().into_iter().map(|r| r.unwrap()).collect()
}

fn workers() -> usize {
    std::env::var("TRTC_EMU_JOBS").ok().and_then(|v| v.parse().ok()).unwrap_or(2)
}

/// Runs a process with a time limit; its stderr (an error on failure).
fn run_with_timeout(cmd: &mut Command, limit: Duration) -> Result<String, String> {
    let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().map_err(|e| format!("cannot start: {e}"))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let mut err = String::new();
                use std::io::Read;
                child.stderr.take().unwrap().read_to_string(&mut err).ok();
                return if status.success() { Ok(err.trim().to_string()) } else { Err(format!("{status}: {}", err.trim())) };
            }
            Ok(None) if start.elapsed() > limit => {
                child.kill().ok();
                child.wait().ok();
                return Err(format!("timed out after {limit:?}"));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            Err(e) => return Err(format!("wait failed: {e}")),
        }
    }
}

/// Picks the candidates a case runs: indices into `cands`.
fn pick(pick: Pick, n: usize) -> Vec<usize> {
    match pick {
        Pick::All => (0..n).collect(),
        Pick::Sample(k) if n <= k => (0..n).collect(),
        Pick::Sample(k) => {
            let mut v: Vec<usize> = (0..k).map(|i| i * (n - 1) / (k - 1).max(1)).collect();
            v.dedup();
            v
        }
    }
}

/// Relative tolerance of float outputs.
fn tolerance(dtype: DType, tactic: &str) -> f64 {
    match dtype {
        DType::F16 | DType::BF16 => 1e-2,
        _ if tactic.contains("tf32") => 3e-3,
        _ => 1e-4,
    }
}

/// Compares one output; the first mismatch, described, or a note when
/// integers differ within the case's slack.
fn compare(want: &Tensor, got: &Tensor, tactic: &str, int_slack: i64) -> Result<Option<String>, String> {
    let shape = want.shape().to_vec();
    let coords = |mut i: usize| {
        let mut c = vec![0; shape.len()];
        for d in (0..shape.len()).rev() {
            c[d] = i % shape[d].max(1);
            i /= shape[d].max(1);
        }
        c
    };
    if want.dtype().is_float() {
        let (w, g) = (want.to_f64_vec(), got.to_f64_vec());
        let scale = w.iter().filter(|v| v.is_finite()).fold(0.0f64, |m, v| m.max(v.abs()));
        let tol = tolerance(want.dtype(), tactic) * if scale > 0.0 { scale } else { 1.0 };
        let bad: Vec<usize> = (0..w.len())
            .filter(|&i| {
                let (w, g) = (w[i], g[i]);
                !(w.is_nan() && g.is_nan() || w.is_infinite() && w == g || w.is_finite() && g.is_finite() && (w - g).abs() <= tol)
            })
            .collect();
        if let Some(&i) = bad.first() {
            return Err(format!(
                "{} of {} elements differ; first at {i} {:?}: expected {}, got {} (tolerance {tol:.3e})",
                bad.len(),
                w.len(),
                coords(i),
                w[i],
                g[i]
            ));
        }
    } else {
        let ints = |t: &Tensor| -> Vec<i64> {
            if t.dtype() == DType::Bool {
                t.bytes().iter().map(|&b| b as i64).collect()
            } else {
                t.to_i64_vec().unwrap()
            }
        };
        let (w, g) = (ints(want), ints(got));
        let bad: Vec<usize> = (0..w.len()).filter(|&i| (w[i] - g[i]).abs() > int_slack).collect();
        if let Some(&i) = bad.first() {
            return Err(format!(
                "{} of {} elements differ; first at {i} {:?}: expected {}, got {}",
                bad.len(),
                w.len(),
                coords(i),
                w[i],
                g[i]
            ));
        }
        let near = (0..w.len()).filter(|&i| w[i] != g[i]).count();
        if near > 0 {
            return Ok(Some(format!("{near} of {} integer outputs within {int_slack} of the reference (not equal)", w.len())));
        }
    }
    Ok(None)
}

/// A launch argument as the job file spells it.
fn job_arg(a: &KernelArg, inputs: &[Option<Tensor>]) -> String {
    match *a {
        KernelArg::Input(k) => match inputs.get(k as usize) {
            Some(Some(_)) => format!("b{k}"),
            _ => "n".into(),
        },
        KernelArg::Output(k) => format!("b{}", 32 + k),
        KernelArg::I32(v) => format!("i4:{v}"),
        KernelArg::I64(v) => format!("i8:{v}"),
        KernelArg::F32(v) => format!("f:{:08x}", v.to_bits()),
    }
}

/// Runs one candidate of a case; `expected` are the reference outputs.
fn run_one(case: &Case, run: &Run, expected: &[Tensor], modules: &[Module], programs: &[Program], dir: &Path) -> Outcome {
    for (m, _) in &run.launches {
        if let Err(why) = &modules[*m].code {
            return Outcome::Skip(why.clone());
        }
    }
    let mut exe: Option<&Path> = None;
    for (m, _) in &run.launches {
        let p = &programs[modules[*m].program];
        if let Some(e) = &p.error {
            return Outcome::Fail(format!("compile error: {e}"));
        }
        if exe.is_some_and(|x| x != p.exe) {
            return Outcome::Fail("internal: a candidate's modules are in different programs".into());
        }
        exe = Some(&p.exe);
    }
    if run.launches.is_empty() {
        // Nothing to launch (an empty tensor): the outputs are empty too.
        return if expected.iter().all(|t| t.is_empty()) {
            Outcome::Pass(String::new())
        } else {
            Outcome::Fail("no launches for a non-empty output".into())
        };
    }
    std::fs::create_dir_all(dir).unwrap();
    for (k, t) in case.inputs.iter().enumerate() {
        if let Some(t) = t {
            std::fs::write(dir.join(format!("in{k}.bin")), t.bytes()).unwrap();
        }
    }
    // The launches twice: threads scheduled in increasing order on buffers
    // aligned like cudaMalloc's (256 bytes), then in decreasing order on
    // buffers aligned to 16 bytes only and ending less than 16 bytes before
    // an inaccessible page (a missing barrier shows in one order or the
    // other; a read past the end of a buffer crashes).
    let mut job = String::new();
    for (pass, (order, align)) in [("forward", 256), ("reverse", 16)].iter().enumerate() {
        writeln!(job, "order {order}").unwrap();
        for (k, t) in case.inputs.iter().enumerate() {
            if let Some(t) = t {
                writeln!(job, "buf {k} {} in {} {align}", t.bytes().len(), dir.join(format!("in{k}.bin")).display()).unwrap();
            }
        }
        for (k, t) in expected.iter().enumerate() {
            writeln!(job, "buf {} {} out {align}", 32 + k, t.bytes().len()).unwrap();
        }
        for (m, l) in &run.launches {
            let args: Vec<String> = l.args.iter().map(|a| job_arg(a, &case.inputs)).collect();
            let [gx, gy, gz] = l.grid;
            let [bx, by, bz] = l.block;
            let slot = modules[*m].slot;
            writeln!(job, "launch {slot} {gx} {gy} {gz} {bx} {by} {bz} {} {} {}", l.shared_bytes, args.len(), args.join(" "))
                .unwrap();
        }
        for k in 0..expected.len() {
            writeln!(job, "save {} {}", 32 + k, dir.join(format!("out{k}.{pass}.bin")).display()).unwrap();
        }
    }
    let job_path = dir.join("job.txt");
    std::fs::write(&job_path, &job).unwrap();
    let result = run_with_timeout(Command::new(exe.unwrap()).arg(&job_path), Duration::from_secs(120));
    if case.expect_trap {
        return match result {
            Err(e) if e.contains("__trap()") => Outcome::Pass(String::new()),
            Err(e) => Outcome::Fail(format!("expected __trap(), got: {e}")),
            Ok(_) => Outcome::Fail("expected __trap() on an invalid index, the launch completed".into()),
        };
    }
    let notes = match result {
        Ok(notes) => notes,
        Err(e) => return Outcome::Fail(format!("emulator: {e}")),
    };
    let mut notes = notes;
    for (pass, order) in ["", " (threads in reverse order)"].iter().enumerate() {
        for (k, want) in expected.iter().enumerate() {
            let bytes = std::fs::read(dir.join(format!("out{k}.{pass}.bin"))).unwrap();
            let got = Tensor::from_bytes(want.ty().clone(), &bytes).unwrap();
            match compare(want, &got, &run.tactic, case.int_slack) {
                Err(e) => return Outcome::Fail(format!("output {k}{order}: {e}")),
                Ok(Some(n)) if pass == 0 => notes.push_str(&n),
                Ok(_) => {}
            }
        }
    }
    Outcome::Pass(notes)
}

#[test]
fn kernels_compute_what_the_cpu_reference_computes() {
    let start = Instant::now();
    let gxx = Command::new("g++").arg("--version").output();
    assert!(gxx.is_ok_and(|o| o.status.success()), "the emulated kernel test needs g++ (C++20) on the PATH");
    clean_cache(&work_dir());
    let filter = std::env::var("TRTC_EMU_FILTER").ok();
    let all = cases();
    let mut cases: Vec<Case> = all.into_iter().filter(|c| filter.as_ref().is_none_or(|f| c.name.contains(f.as_str()))).collect();
    let control = cases.len();
    cases.push(control_case(&mut Builder { rng: Rng(7), cases: Vec::new() }));
    let limits = SmLimits::for_sm(80);

    // Reference outputs, candidates, distinct sources.
    let mut modules: Vec<Module> = Vec::new();
    let mut by_source: HashMap<String, usize> = HashMap::new();
    let mut runs: Vec<Run> = Vec::new();
    let mut expected: Vec<Vec<Tensor>> = Vec::new();
    let mut layer_skips: Vec<(usize, String)> = Vec::new();
    let mut unsampled = 0usize;
    let mut bad_cases: Vec<String> = Vec::new();
    for (ci, case) in cases.iter().enumerate() {
        if ci == control {
            expected.push(case.op.eval_owned(&[case.inputs[0].as_ref()]).unwrap());
            for (what, body) in CONTROLS {
                let l = control_launch(body, case.inputs[0].as_ref().unwrap().len());
                let m = modules.len();
                modules.push(Module {
                    entry: l.kernel.entry.clone(),
                    code: rewrite(&l.kernel.source),
                    program: usize::MAX,
                    slot: 0,
                });
                runs.push(Run { case: ci, tactic: what.into(), control: true, launches: vec![(m, l)] });
            }
            continue;
        }
        let refs: Vec<Option<&Tensor>> = case.inputs.iter().map(|t| t.as_ref()).collect();
        let reference = if case.expect_trap {
            match case.op.eval_owned(&refs) {
                Ok(_) => Err("the CPU reference accepts the invalid indices".to_string()),
                Err(_) => {
                    let types: Vec<Option<&TensorType>> = case.inputs.iter().map(|t| t.as_ref().map(|t| t.ty())).collect();
                    Ok(case.op.infer(&types).unwrap().into_iter().map(|t| Tensor::zeros(t).unwrap()).collect())
                }
            }
        } else {
            case.op.eval_owned(&refs).map_err(|e| e.to_string())
        };
        let want = match reference {
            Ok(w) => w,
            Err(e) => {
                bad_cases.push(format!("FAIL {}: the CPU reference rejects the case: {e}", case.name));
                expected.push(Vec::new());
                continue;
            }
        };
        let in_types: Vec<Option<TensorType>> = case.inputs.iter().map(|t| t.as_ref().map(|t| t.ty().clone())).collect();
        let out_types: Vec<TensorType> = want.iter().map(|t| t.ty().clone()).collect();
        let io =
            LayerIo { op: &case.op, inputs: in_types.iter().map(|t| t.as_ref()).collect(), outputs: out_types.iter().collect() };
        expected.push(want);
        let cands: Vec<Candidate> = match candidates(&io, &limits) {
            Ok(c) => c,
            Err(e) => {
                layer_skips.push((ci, format!("no kernel: {e}")));
                continue;
            }
        };
        let picked = pick(case.pick, cands.len());
        unsampled += cands.len() - picked.len();
        for i in picked {
            let c = &cands[i];
            let mut launches = Vec::new();
            for l in &c.launches {
                let m = *by_source.entry(l.kernel.source.clone()).or_insert_with(|| {
                    modules.push(Module {
                        entry: l.kernel.entry.clone(),
                        code: rewrite(&l.kernel.source),
                        program: usize::MAX,
                        slot: 0,
                    });
                    modules.len() - 1
                });
                launches.push((m, l.clone()));
            }
            runs.push(Run { case: ci, tactic: c.tactic.clone(), control: false, launches });
        }
    }

    // Programs: a few compilable modules each; a candidate's modules always
    // share a program.
    let dir = work_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let per_program: usize = std::env::var("TRTC_EMU_MODULES_PER_PROGRAM").ok().and_then(|v| v.parse().ok()).unwrap_or(6);
    let groups = program_groups(&modules, &runs, per_program);
    let texts: Vec<String> = groups.iter().map(|g| program_text(&modules, g)).collect();
    let compile_start = Instant::now();
    let compiled = parallel(texts.len(), workers(), |i| compile(&texts[i], &dir));
    let compile_time = compile_start.elapsed();
    let mut programs = Vec::new();
    for (pi, (g, r)) in groups.iter().zip(compiled).enumerate() {
        for (slot, &m) in g.iter().enumerate() {
            modules[m].program = pi;
            modules[m].slot = slot;
        }
        let (exe, error) = match r {
            Ok(e) => (e, None),
            Err(e) => (PathBuf::new(), Some(e)),
        };
        programs.push(Program { exe, error });
    }

    // Run everything.
    let run_start = Instant::now();
    let run_dir = dir.join(format!("run-{}", std::process::id()));
    let keep = std::env::var("TRTC_EMU_KEEP").is_ok();
    let outcomes = parallel(runs.len(), workers(), |i| {
        let r = &runs[i];
        let dir = run_dir.join(format!("{i}"));
        let o = run_one(&cases[r.case], r, &expected[r.case], &modules, &programs, &dir);
        // The files of a failed case stay for inspection.
        if r.control || (matches!(o, Outcome::Pass(_)) && !keep) {
            std::fs::remove_dir_all(&dir).ok();
        }
        o
    });
    let run_time = run_start.elapsed();
    let kept = std::fs::read_dir(&run_dir).map_or(0, |d| d.count());
    if kept == 0 {
        std::fs::remove_dir_all(&run_dir).ok();
    }

    // Report.
    #[derive(Default)]
    struct Tally {
        layers: usize,
        run: usize,
        pass: usize,
        fail: usize,
        skip: usize,
    }
    let mut tally: BTreeMap<&str, Tally> = BTreeMap::new();
    for c in cases.iter().filter(|c| c.family != "control") {
        tally.entry(c.family).or_default().layers += 1;
    }
    let mut failures = bad_cases;
    let mut skips: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut controls = Vec::new();
    let mut notes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (r, o) in runs.iter().zip(&outcomes) {
        let case = &cases[r.case];
        if r.control {
            match o {
                Outcome::Fail(why) => controls.push(format!("control kernel that {}: reported ({why})", r.tactic)),
                _ => failures.push(format!("FAIL the harness missed a control kernel that {}", r.tactic)),
            }
            continue;
        }
        let t = tally.get_mut(case.family).unwrap();
        match o {
            Outcome::Pass(n) => {
                t.run += 1;
                t.pass += 1;
                if !n.is_empty() {
                    notes.entry(n.clone()).or_default().push(format!("{} ({})", case.name, r.tactic));
                }
            }
            Outcome::Fail(why) => {
                t.run += 1;
                t.fail += 1;
                failures.push(format!("FAIL {} [{}] ({}): {why}", case.name, case.family, r.tactic));
            }
            Outcome::Skip(why) => {
                t.skip += 1;
                skips.entry(why.clone()).or_default().push(format!("{} ({})", case.name, r.tactic));
            }
        }
    }
    for (ci, why) in &layer_skips {
        let case = &cases[*ci];
        tally.get_mut(case.family).unwrap().skip += 1;
        skips.entry(why.clone()).or_default().push(case.name.clone());
    }
    println!("\nemulated kernels: {} layers, {} modules in {} programs", cases.len() - 1, modules.len(), programs.len());
    println!("{:<14} {:>6} {:>6} {:>6} {:>6} {:>6}", "family", "layers", "run", "passed", "failed", "skipped");
    let mut total = Tally::default();
    for (f, t) in &tally {
        println!("{f:<14} {:>6} {:>6} {:>6} {:>6} {:>6}", t.layers, t.run, t.pass, t.fail, t.skip);
        total.layers += t.layers;
        total.run += t.run;
        total.pass += t.pass;
        total.fail += t.fail;
        total.skip += t.skip;
    }
    println!("{:<14} {:>6} {:>6} {:>6} {:>6} {:>6}", "total", total.layers, total.run, total.pass, total.fail, total.skip);
    println!("({unsampled} further candidates not sampled)");
    let mut entries: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (r, o) in runs.iter().zip(&outcomes) {
        for (m, _) in &r.launches {
            let e = entries.entry(modules[*m].entry.as_str()).or_default();
            e.0 += 1;
            e.1 += matches!(o, Outcome::Pass(_)) as usize;
        }
    }
    let list: Vec<String> = entries.iter().map(|(e, (n, p))| format!("{e} {p}/{n}")).collect();
    println!("entry points (launches passed/run): {}", list.join(", "));
    for (why, what) in &skips {
        println!("SKIP {} case(s): {why}\n     {}", what.len(), what.join(", "));
    }
    for (note, what) in &notes {
        println!("NOTE {} case(s): {note}\n     {}", what.len(), what.join(", "));
    }
    for c in &controls {
        println!("{c}");
    }
    for f in &failures {
        println!("{f}");
    }
    println!(
        "time: {:.1}s (compile {:.1}s, run {:.1}s)",
        start.elapsed().as_secs_f64(),
        compile_time.as_secs_f64(),
        run_time.as_secs_f64()
    );
    assert!(failures.is_empty(), "{} of {} emulated cases failed (see above)", failures.len(), total.run);
    let idle: Vec<&str> = tally.iter().filter(|(_, t)| t.pass == 0).map(|(f, _)| *f).collect();
    assert!(idle.is_empty(), "no case of {idle:?} ran on the emulator (see the skips above)");
}
