//! CUDA expressions of the activations an epilogue or a pointwise kernel
//! applies, matching the runtime's reference definitions (`UnaryKind::apply`
//! and `Activation::apply`), NaN handling included.
//!
//! Expressions that use their operand more than once, or need a temporary,
//! are immediately invoked lambdas, so that the operand is evaluated once;
//! their names (`trtc_x`, `trtc_y`) cannot clash with a macro parameter such
//! as `v` when an expression becomes the body of a `#define`. Products that
//! the CPU rounds before adding use `__fmul_rn`, which is never contracted
//! into a fused multiply-add.

use trtc_runtime::ops::elementwise::UnaryKind;
use trtc_runtime::ops::fused::Activation;

/// An f32 as a C literal that reads back as exactly that f32.
pub(crate) fn lit(v: f32) -> String {
    // Exact: the f32's bits as a hex float literal are not valid C, so use
    // the shortest round-trip decimal, with an f suffix.
    if v.is_finite() {
        format!("{v:?}f")
    } else if v.is_nan() {
        "__int_as_float(0x7fc00000)".into()
    } else if v > 0.0 {
        "__int_as_float(0x7f800000)".into()
    } else {
        "__int_as_float(0xff800000)".into()
    }
}

/// `body` (a C expression of `trtc_x`) applied to `x`, which is evaluated
/// once.
fn apply(body: &str, x: &str) -> String {
    format!("([](float trtc_x) -> float {{ return {body}; }})({x})")
}

/// `max(0, min(1, alpha * x + beta))` with NaN passing through, as the
/// CPU's comparisons let it.
fn hard_sigmoid(alpha: f32, beta: f32) -> String {
    format!(
        "[](float trtc_x) -> float {{ const float trtc_y = __fmul_rn({}, trtc_x) + {}; return trtc_y < 0.0f ? 0.0f : (trtc_y > 1.0f ? 1.0f : trtc_y); }}(trtc_x)",
        lit(alpha),
        lit(beta)
    )
}

/// `ln(1 + exp(x))` without overflow for large `x`, as the CPU computes it.
const SOFTPLUS: &str = "(trtc_x > 0.0f ? trtc_x + log1pf(expf(-trtc_x)) : log1pf(expf(trtc_x)))";

/// The CUDA expression of `kind` applied to the f32 expression `x`, or
/// `None` for kinds without a CUDA implementation.
pub fn unary(kind: UnaryKind, x: &str) -> Option<String> {
    use UnaryKind::*;
    Some(match kind {
        Abs => format!("fabsf({x})"),
        Neg => format!("(-({x}))"),
        // numpy's sign: NaN and zeros pass through.
        Sign => apply("trtc_x > 0.0f ? 1.0f : (trtc_x < 0.0f ? -1.0f : trtc_x)", x),
        Relu => format!("trtc_relu({x})"),
        Acos => format!("acosf({x})"),
        Acosh => format!("acoshf({x})"),
        Asin => format!("asinf({x})"),
        Asinh => format!("asinhf({x})"),
        Atan => format!("atanf({x})"),
        Atanh => format!("atanhf({x})"),
        Ceil => format!("ceilf({x})"),
        Cos => format!("cosf({x})"),
        Cosh => format!("coshf({x})"),
        Erf => format!("erff({x})"),
        Exp => format!("expf({x})"),
        Floor => format!("floorf({x})"),
        Log => format!("logf({x})"),
        Reciprocal => format!("(1.0f / ({x}))"),
        // rintf rounds half to even in the default rounding mode.
        Round => format!("rintf({x})"),
        Sin => format!("sinf({x})"),
        Sinh => format!("sinhf({x})"),
        Sqrt => format!("sqrtf({x})"),
        Tan => format!("tanf({x})"),
        Tanh => format!("tanhf({x})"),
        Sigmoid => format!("trtc_sigmoid({x})"),
        Elu { alpha } => apply(&format!("trtc_x < 0.0f ? {} * expm1f(trtc_x) : trtc_x", lit(alpha)), x),
        Selu { alpha, gamma } => {
            apply(&format!("{} * (trtc_x <= 0.0f ? {} * expm1f(trtc_x) : trtc_x)", lit(gamma), lit(alpha)), x)
        }
        Celu { alpha } => apply(
            &format!(
                "(trtc_x < 0.0f ? 0.0f : trtc_x) + [](float trtc_y) -> float {{ return trtc_y < 0.0f ? trtc_y : 0.0f; }}({a} * expm1f(trtc_x / {a}))",
                a = lit(alpha)
            ),
            x,
        ),
        LeakyRelu { alpha } => apply(&format!("trtc_x < 0.0f ? {} * trtc_x : trtc_x", lit(alpha)), x),
        ThresholdedRelu { alpha } => apply(&format!("trtc_x > {} ? trtc_x : 0.0f", lit(alpha)), x),
        HardSigmoid { alpha, beta } => apply(&hard_sigmoid(alpha, beta), x),
        // The CPU's 1/6 is the f64 constant rounded to f32, as 1.0f / 6.0f is.
        HardSwish => apply(&format!("trtc_x * {}", hard_sigmoid(1.0 / 6.0, 0.5)), x),
        Softplus => apply(SOFTPLUS, x),
        Softsign => apply("trtc_x / (1.0f + fabsf(trtc_x))", x),
        Mish => apply(&format!("trtc_x * tanhf({SOFTPLUS})"), x),
        Gelu => format!("trtc_gelu({x})"),
        GeluTanh => format!("trtc_gelu_tanh({x})"),
        Shrink { bias, lambd } => apply(
            &format!(
                "trtc_x < {nl} ? trtc_x + {b} : (trtc_x > {l} ? trtc_x - {b} : 0.0f)",
                nl = lit(-lambd),
                l = lit(lambd),
                b = lit(bias)
            ),
            x,
        ),
    })
}

/// The CUDA expression of an epilogue activation applied to `x`.
pub fn epilogue(a: &Activation, x: &str) -> Option<String> {
    match a {
        Activation::Unary(k) => unary(*k, x),
        Activation::Silu => Some(apply("trtc_x * trtc_sigmoid(trtc_x)", x)),
        Activation::Clip { min, max } => {
            // Comparisons, not fmaxf/fminf, so that NaN passes through.
            let mut body = "trtc_x".to_string();
            if let Some(lo) = min {
                body = format!("[](float trtc_x) -> float {{ return trtc_x < {l} ? {l} : trtc_x; }}({body})", l = lit(*lo));
            }
            if let Some(hi) = max {
                body = format!("[](float trtc_x) -> float {{ return trtc_x > {h} ? {h} : trtc_x; }}({body})", h = lit(*hi));
            }
            Some(apply(&body, x))
        }
    }
}

/// Every unary kind with a CUDA expression (for the compile tests).
pub fn supported_unary_kinds() -> Vec<UnaryKind> {
    use UnaryKind::*;
    vec![
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
        Round,
        Sin,
        Sinh,
        Sqrt,
        Tan,
        Tanh,
        Sigmoid,
        Elu { alpha: 1.0 },
        Selu { alpha: 1.673_263_2, gamma: 1.050_701 },
        Celu { alpha: 1.0 },
        LeakyRelu { alpha: 0.01 },
        ThresholdedRelu { alpha: 1.0 },
        HardSigmoid { alpha: 0.2, beta: 0.5 },
        HardSwish,
        Softplus,
        Softsign,
        Mish,
        Gelu,
        GeluTanh,
        Shrink { bias: 0.0, lambd: 0.5 },
    ]
}
