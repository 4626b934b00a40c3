//! Unary math and activations: one op, `Unary`, whose kind carries the
//! activation's parameters. Floats are computed in their own precision (`f32`
//! for `f32`, `f64` for `f64`) and `f16`/`bf16` through `f32`. A few kinds
//! (Abs, Neg, Sign, Relu) also take integers.

use super::broadcast::map1;
use super::float::{map_half, Float};
use crate::dtype::DType;
use crate::error::Result;
use crate::math::Math;
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

/// Which function a [`Unary`] op applies, with its parameters (ONNX's
/// attribute names and defaults).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum UnaryKind {
    Abs,
    Neg,
    Sign,
    Relu,
    Acos,
    Acosh,
    Asin,
    Asinh,
    Atan,
    Atanh,
    Ceil,
    Cos,
    Cosh,
    Erf,
    Exp,
    Floor,
    Log,
    Reciprocal,
    /// Rounds half to even, like numpy.
    Round,
    Sin,
    Sinh,
    Sqrt,
    Tan,
    Tanh,
    Sigmoid,
    /// `x < 0 ? alpha * (exp(x) - 1) : x` (default alpha 1).
    Elu {
        alpha: f32,
    },
    /// `gamma * (x <= 0 ? alpha * exp(x) - alpha : x)`.
    Selu {
        alpha: f32,
        gamma: f32,
    },
    /// `max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`.
    Celu {
        alpha: f32,
    },
    /// `x < 0 ? alpha * x : x` (default alpha 0.01).
    LeakyRelu {
        alpha: f32,
    },
    /// `x > alpha ? x : 0` (default alpha 1).
    ThresholdedRelu {
        alpha: f32,
    },
    /// `max(0, min(1, alpha * x + beta))` (defaults 0.2, 0.5).
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    /// `x * max(0, min(1, x / 6 + 1 / 2))`.
    HardSwish,
    /// `ln(1 + exp(x))`.
    Softplus,
    /// `x / (1 + |x|)`.
    Softsign,
    /// `x * tanh(softplus(x))`.
    Mish,
    /// `x / 2 * (1 + erf(x / sqrt(2)))`.
    Gelu,
    /// Gelu's tanh approximation: `x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))`.
    GeluTanh,
    /// `x < -lambd ? x + bias : x > lambd ? x - bias : 0`.
    Shrink {
        bias: f32,
        lambd: f32,
    },
}

impl UnaryKind {
    /// The function on `f32`, as fused epilogues compute it.
    #[inline]
    pub fn apply_f32(&self, x: f32) -> f32 {
        self.apply(x)
    }

    /// The function on `f64`.
    #[inline]
    pub fn apply_f64(&self, x: f64) -> f64 {
        self.apply(x)
    }

    /// The ONNX op type of this kind.
    pub fn name(&self) -> &'static str {
        use UnaryKind::*;
        match self {
            Abs => "Abs",
            Neg => "Neg",
            Sign => "Sign",
            Relu => "Relu",
            Acos => "Acos",
            Acosh => "Acosh",
            Asin => "Asin",
            Asinh => "Asinh",
            Atan => "Atan",
            Atanh => "Atanh",
            Ceil => "Ceil",
            Cos => "Cos",
            Cosh => "Cosh",
            Erf => "Erf",
            Exp => "Exp",
            Floor => "Floor",
            Log => "Log",
            Reciprocal => "Reciprocal",
            Round => "Round",
            Sin => "Sin",
            Sinh => "Sinh",
            Sqrt => "Sqrt",
            Tan => "Tan",
            Tanh => "Tanh",
            Sigmoid => "Sigmoid",
            Elu { .. } => "Elu",
            Selu { .. } => "Selu",
            Celu { .. } => "Celu",
            LeakyRelu { .. } => "LeakyRelu",
            ThresholdedRelu { .. } => "ThresholdedRelu",
            HardSigmoid { .. } => "HardSigmoid",
            HardSwish => "HardSwish",
            Softplus => "Softplus",
            Softsign => "Softsign",
            Mish => "Mish",
            Gelu => "Gelu",
            GeluTanh => "Gelu",
            Shrink { .. } => "Shrink",
        }
    }

    /// Whether the kind is defined on signed (and, except Neg, unsigned) integers.
    fn takes_ints(&self) -> bool {
        matches!(self, UnaryKind::Abs | UnaryKind::Neg | UnaryKind::Sign | UnaryKind::Relu)
    }

    /// The function in float type `F`. Inlined into the elementwise loops with
    /// a constant kind, so that each loop holds one formula.
    #[inline(always)]
    fn apply<F: Float>(&self, x: F) -> F {
        use UnaryKind::*;
        let p = F::from_f32;
        match *self {
            Abs => x.abs(),
            Neg => -x,
            Sign => sign(x),
            // `x < 0` is false for NaN, which passes through like numpy's maximum.
            Relu => {
                if x < F::ZERO {
                    F::ZERO
                } else {
                    x
                }
            }
            Acos => x.acos(),
            Acosh => x.acosh(),
            Asin => x.asin(),
            Asinh => x.asinh(),
            Atan => x.atan(),
            Atanh => x.atanh(),
            Ceil => x.ceil(),
            Cos => x.cos(),
            Cosh => x.cosh(),
            Erf => x.erf(),
            Exp => x.exp(),
            Floor => x.floor(),
            Log => x.ln(),
            Reciprocal => F::ONE / x,
            Round => x.round_ties_even(),
            Sin => x.sin(),
            Sinh => x.sinh(),
            Sqrt => x.sqrt(),
            Tan => x.tan(),
            Tanh => x.tanh(),
            Sigmoid => sigmoid(x),
            Elu { alpha } => {
                if x < F::ZERO {
                    p(alpha) * x.exp_m1()
                } else {
                    x
                }
            }
            Selu { alpha, gamma } => {
                let y = if x <= F::ZERO { p(alpha) * x.exp_m1() } else { x };
                p(gamma) * y
            }
            Celu { alpha } => {
                let a = p(alpha);
                let neg = a * (x / a).exp_m1();
                clamp_low(x, F::ZERO) + if neg < F::ZERO { neg } else { F::ZERO }
            }
            LeakyRelu { alpha } => {
                if x < F::ZERO {
                    p(alpha) * x
                } else {
                    x
                }
            }
            ThresholdedRelu { alpha } => {
                if x > p(alpha) {
                    x
                } else {
                    F::ZERO
                }
            }
            HardSigmoid { alpha, beta } => hard_sigmoid(x, p(alpha), p(beta)),
            HardSwish => x * hard_sigmoid(x, F::from_f64(1.0 / 6.0), F::HALF),
            Softplus => softplus(x),
            Softsign => x / (F::ONE + x.abs()),
            Mish => x * softplus(x).tanh(),
            Gelu => F::HALF * x * (F::ONE + (x * F::from_f64(std::f64::consts::FRAC_1_SQRT_2)).erf()),
            GeluTanh => {
                let k = F::from_f64((2.0 / std::f64::consts::PI).sqrt());
                let inner = k * (x + F::from_f64(0.044715) * x * x * x);
                F::HALF * x * (F::ONE + inner.tanh())
            }
            Shrink { bias, lambd } => {
                if x < -p(lambd) {
                    x + p(bias)
                } else if x > p(lambd) {
                    x - p(bias)
                } else {
                    F::ZERO
                }
            }
        }
    }
}

/// numpy's sign: -1, 0 or 1, NaN for NaN.
#[inline(always)]
fn sign<F: Float>(x: F) -> F {
    if x > F::ZERO {
        F::ONE
    } else if x < F::ZERO {
        -F::ONE
    } else {
        x
    }
}

/// `max(x, lo)` that lets NaN through.
#[inline(always)]
fn clamp_low<F: Float>(x: F, lo: F) -> F {
    if x < lo {
        lo
    } else {
        x
    }
}

#[inline(always)]
fn sigmoid<F: Float>(x: F) -> F {
    F::ONE / (F::ONE + (-x).exp())
}

#[inline(always)]
fn hard_sigmoid<F: Float>(x: F, alpha: F, beta: F) -> F {
    let y = alpha * x + beta;
    if y < F::ZERO {
        F::ZERO
    } else if y > F::ONE {
        F::ONE
    } else {
        y
    }
}

/// `ln(1 + exp(x))` without overflow for large `x`.
#[inline(always)]
fn softplus<F: Float>(x: F) -> F {
    if x > F::ZERO {
        x + (-x).exp().ln_1p()
    } else {
        x.exp().ln_1p()
    }
}

/// Applies one function elementwise; `kind` selects it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unary {
    pub kind: UnaryKind,
}

impl Unary {
    pub fn new(kind: UnaryKind) -> Unary {
        Unary { kind }
    }
}

/// Runs `$body` with `$k` bound to a copy of `$kind` built from a constant
/// variant, so that the match inside `apply` folds away in each loop.
#[rustfmt::skip]
macro_rules! specialize {
    ($kind:expr, $k:ident => $body:expr) => {
        specialize!(@arms $kind, $k, $body,
            [Abs, Neg, Sign, Relu, Acos, Acosh, Asin, Asinh, Atan, Atanh, Ceil, Cos, Cosh, Erf, Exp, Floor, Log,
             Reciprocal, Round, Sin, Sinh, Sqrt, Tan, Tanh, Sigmoid, HardSwish, Softplus, Softsign, Mish, Gelu,
             GeluTanh],
            [Elu { alpha }, Selu { alpha, gamma }, Celu { alpha }, LeakyRelu { alpha }, ThresholdedRelu { alpha },
             HardSigmoid { alpha, beta }, Shrink { bias, lambd }])
    };
    (@arms $kind:expr, $k:ident, $body:expr, [$($unit:ident),*], [$($var:ident { $($f:ident),* }),*]) => {
        match $kind {
            $(UnaryKind::$unit => { let $k = UnaryKind::$unit; $body })*
            $(UnaryKind::$var { $($f),* } => { let $k = UnaryKind::$var { $($f),* }; $body })*
        }
    };
}

/// Applies `kind` in place on f32 data, with the same monomorphized loop the
/// op itself runs (fused epilogues use it, so fusing changes no bit).
///
/// This loop and [`map_f32`]'s are compiled for the widest vectors the CPU
/// has (AVX-512, AVX2, else the baseline): the same per-element arithmetic
/// (Rust never contracts a multiply and an add into an FMA), so the same
/// bits on every CPU.
pub fn apply_in_place_f32(kind: UnaryKind, data: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F.
            return unsafe { in_place_avx512(kind, data) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { in_place_avx2(kind, data) };
        }
    }
    in_place_body(kind, data)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn in_place_avx512(kind: UnaryKind, data: &mut [f32]) {
    in_place_body(kind, data)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn in_place_avx2(kind: UnaryKind, data: &mut [f32]) {
    in_place_body(kind, data)
}

#[inline(always)]
fn in_place_body(kind: UnaryKind, data: &mut [f32]) {
    specialize!(kind, k => {
        for v in data.iter_mut() {
            *v = k.apply(*v);
        }
    })
}

/// `out[i] = kind(a[i])` for f32, as [`apply_in_place_f32`] compiles it.
fn map_f32(kind: UnaryKind, a: &[f32], out: &mut [f32]) -> Result<()> {
    ensure_op!(a.len() == out.len(), "input holds {} elements, output {}", a.len(), out.len());
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F.
            unsafe { map_avx512(kind, a, out) };
            return Ok(());
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            unsafe { map_avx2(kind, a, out) };
            return Ok(());
        }
    }
    map_body(kind, a, out);
    Ok(())
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn map_avx512(kind: UnaryKind, a: &[f32], out: &mut [f32]) {
    map_body(kind, a, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn map_avx2(kind: UnaryKind, a: &[f32], out: &mut [f32]) {
    map_body(kind, a, out)
}

#[inline(always)]
fn map_body(kind: UnaryKind, a: &[f32], out: &mut [f32]) {
    specialize!(kind, k => {
        for (o, &v) in out.iter_mut().zip(a) {
            *o = k.apply(v);
        }
    })
}

/// [`apply_in_place_f32`] in `math`'s mode: under [`Math::Fast`], Sigmoid,
/// Tanh and Gelu (both forms) use the vectorizable [`crate::math`] versions.
pub fn apply_in_place_f32_in(math: Math, kind: UnaryKind, data: &mut [f32]) {
    match (math, kind) {
        (Math::Fast, UnaryKind::Sigmoid) => crate::math::sigmoid_in_place(data),
        (Math::Fast, UnaryKind::Tanh) => crate::math::tanh_in_place(data),
        (Math::Fast, UnaryKind::GeluTanh) => crate::math::gelu_tanh_in_place(data),
        (Math::Fast, UnaryKind::Gelu) => crate::math::gelu_in_place(data),
        _ => apply_in_place_f32(kind, data),
    }
}

fn run_float(kind: UnaryKind, x: TensorView, out: &mut TensorViewMut) -> Result<()> {
    match x.dtype {
        DType::F32
            if matches!(kind, UnaryKind::Sigmoid | UnaryKind::Tanh | UnaryKind::Gelu | UnaryKind::GeluTanh)
                && crate::math::mode() == Math::Fast =>
        {
            let (a, o) = (x.as_slice::<f32>()?, out.as_mut_slice::<f32>()?);
            o.copy_from_slice(a);
            apply_in_place_f32_in(Math::Fast, kind, o);
            Ok(())
        }
        DType::F32 => {
            let (a, o) = (x.as_slice::<f32>()?, out.as_mut_slice::<f32>()?);
            map_f32(kind, a, o)
        }
        DType::F64 => {
            let (a, o) = (x.as_slice::<f64>()?, out.as_mut_slice::<f64>()?);
            specialize!(kind, k => map1(a, o, |v| k.apply(v)))
        }
        DType::F16 => {
            let (a, o) = (x.as_slice::<f16>()?, out.as_mut_slice::<f16>()?);
            specialize!(kind, k => map_half(a, o, |v| k.apply(v)))
        }
        DType::BF16 => {
            let (a, o) = (x.as_slice::<bf16>()?, out.as_mut_slice::<bf16>()?);
            specialize!(kind, k => map_half(a, o, |v| k.apply(v)))
        }
        d => bail_op!("{}: {d} input is not a float", kind.name()),
    }
}

/// The integer kinds, with wrapping arithmetic (numpy's behaviour on MIN).
trait IntUnary: crate::tensor::Element + Copy {
    fn apply_int(kind: UnaryKind, x: Self) -> Self;
}

macro_rules! int_unary {
    (signed $($t:ty),*) => {$(
        impl IntUnary for $t {
            #[inline(always)]
            fn apply_int(kind: UnaryKind, x: Self) -> Self {
                match kind {
                    UnaryKind::Abs => x.wrapping_abs(),
                    UnaryKind::Neg => x.wrapping_neg(),
                    UnaryKind::Sign => x.signum(),
                    _ => x.max(0),
                }
            }
        }
    )*};
    (unsigned $($t:ty),*) => {$(
        impl IntUnary for $t {
            #[inline(always)]
            fn apply_int(kind: UnaryKind, x: Self) -> Self {
                match kind {
                    UnaryKind::Sign => (x != 0) as $t,
                    UnaryKind::Neg => x.wrapping_neg(),
                    _ => x,
                }
            }
        }
    )*};
}
int_unary!(signed i8, i16, i32, i64);
int_unary!(unsigned u8, u16, u32, u64);

fn run_int_typed<T: IntUnary>(kind: UnaryKind, x: TensorView, out: &mut TensorViewMut) -> Result<()> {
    let (a, o) = (x.as_slice::<T>()?, out.as_mut_slice::<T>()?);
    match kind {
        UnaryKind::Abs => map1(a, o, |v| T::apply_int(UnaryKind::Abs, v)),
        UnaryKind::Neg => map1(a, o, |v| T::apply_int(UnaryKind::Neg, v)),
        UnaryKind::Sign => map1(a, o, |v| T::apply_int(UnaryKind::Sign, v)),
        UnaryKind::Relu => map1(a, o, |v| T::apply_int(UnaryKind::Relu, v)),
        k => bail_op!("{}: integer inputs are not supported", k.name()),
    }
}

fn run_int(kind: UnaryKind, x: TensorView, out: &mut TensorViewMut) -> Result<()> {
    match x.dtype {
        DType::I8 => run_int_typed::<i8>(kind, x, out),
        DType::I16 => run_int_typed::<i16>(kind, x, out),
        DType::I32 => run_int_typed::<i32>(kind, x, out),
        DType::I64 => run_int_typed::<i64>(kind, x, out),
        DType::U8 => run_int_typed::<u8>(kind, x, out),
        DType::U16 => run_int_typed::<u16>(kind, x, out),
        DType::U32 => run_int_typed::<u32>(kind, x, out),
        DType::U64 => run_int_typed::<u64>(kind, x, out),
        d => bail_op!("{}: {d} inputs are not supported", kind.name()),
    }
}

impl OpImpl for Unary {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        let ok = x.dtype.is_float()
            || (self.kind.takes_ints() && x.dtype.is_signed_int())
            || (self.kind.takes_ints() && self.kind != UnaryKind::Neg && x.dtype.is_int());
        ensure_op!(ok, "{}: {} inputs are not supported", self.name(), x.dtype);
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        let out = outputs.first_mut().ok_or_else(|| crate::error::Error::op("Unary: missing output"))?;
        ensure_op!(out.dtype == x.dtype, "{}: output dtype {} differs from input {}", self.name(), out.dtype, x.dtype);
        if x.dtype.is_float() {
            run_float(self.kind, x, out)
        } else {
            run_int(self.kind, x, out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn eval(kind: UnaryKind, x: &Tensor) -> Tensor {
        let op: Op = Unary::new(kind).into();
        op.eval_owned(&[Some(x)]).unwrap().remove(0)
    }

    #[test]
    fn relu_and_leaky_relu() {
        let x = Tensor::from_vec(vec![4], vec![-2f32, -0.5, 0., 3.]).unwrap();
        assert_eq!(eval(UnaryKind::Relu, &x).as_slice::<f32>().unwrap(), &[0., 0., 0., 3.]);
        let y = eval(UnaryKind::LeakyRelu { alpha: 0.1 }, &x);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[-0.2, -0.05, 0., 3.]);
        assert!(UnaryKind::Relu.apply_f32(f32::NAN).is_nan());
    }

    #[test]
    fn round_is_half_to_even() {
        let x = Tensor::from_vec(vec![5], vec![0.5f64, 1.5, 2.5, -2.5, 2.6]).unwrap();
        assert_eq!(eval(UnaryKind::Round, &x).as_slice::<f64>().unwrap(), &[0., 2., 2., -2., 3.]);
    }

    #[test]
    fn f16_goes_through_f32() {
        let x = Tensor::from_vec(vec![2], vec![f16::from_f32(0.0), f16::from_f32(2.0)]).unwrap();
        let y = eval(UnaryKind::Sigmoid, &x);
        let v = y.to_f64_vec();
        assert_eq!(v[0], 0.5);
        assert!((v[1] - 0.880797).abs() < 1e-3);
    }

    #[test]
    fn activations_match_hand_values() {
        let k = |kind: UnaryKind, x: f32| kind.apply_f32(x);
        assert!((k(UnaryKind::Elu { alpha: 2.0 }, -1.0) - 2.0 * (-1f32).exp_m1()).abs() < 1e-7);
        assert_eq!(k(UnaryKind::HardSwish, 6.0), 6.0);
        assert_eq!(k(UnaryKind::HardSwish, -3.0), 0.0);
        assert_eq!(k(UnaryKind::HardSigmoid { alpha: 0.2, beta: 0.5 }, 0.0), 0.5);
        assert_eq!(k(UnaryKind::Shrink { bias: 1.0, lambd: 1.5 }, 2.0), 1.0);
        assert_eq!(k(UnaryKind::Shrink { bias: 1.0, lambd: 1.5 }, -1.0), 0.0);
        assert_eq!(k(UnaryKind::ThresholdedRelu { alpha: 1.0 }, 1.0), 0.0);
        assert!((k(UnaryKind::Softplus, 100.0) - 100.0).abs() < 1e-5);
        assert!((k(UnaryKind::Gelu, 1.0) - 0.841_344_7).abs() < 1e-6);
        assert!((k(UnaryKind::GeluTanh, 1.0) - 0.841_192).abs() < 1e-5);
        assert!((k(UnaryKind::Celu { alpha: 2.0 }, -1.0) - 2.0 * (-0.5f32).exp_m1()).abs() < 1e-7);
    }

    #[test]
    fn integer_kinds() {
        let x = Tensor::from_vec(vec![3], vec![-3i32, 0, 5]).unwrap();
        assert_eq!(eval(UnaryKind::Abs, &x).as_slice::<i32>().unwrap(), &[3, 0, 5]);
        assert_eq!(eval(UnaryKind::Sign, &x).as_slice::<i32>().unwrap(), &[-1, 0, 1]);
        assert_eq!(eval(UnaryKind::Relu, &x).as_slice::<i32>().unwrap(), &[0, 0, 5]);
        let t = TensorType::new(DType::I32, vec![3]);
        assert!(Unary::new(UnaryKind::Exp).infer(&[Some(&t)]).is_err());
        let u = TensorType::new(DType::U8, vec![3]);
        assert!(Unary::new(UnaryKind::Neg).infer(&[Some(&u)]).is_err());
    }
}
