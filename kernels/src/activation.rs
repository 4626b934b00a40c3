//! CUDA expressions of the activations an epilogue or a pointwise kernel
//! applies, matching the runtime's reference definitions.

use trtc_runtime::ops::elementwise::UnaryKind;
use trtc_runtime::ops::fused::Activation;

fn lit(v: f32) -> String {
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

/// The CUDA expression of `kind` applied to the expression `x`, or `None`
/// for kinds without a CUDA implementation yet.
pub fn unary(kind: UnaryKind, x: &str) -> Option<String> {
    use UnaryKind::*;
    Some(match kind {
        Abs => format!("fabsf({x})"),
        Neg => format!("(-({x}))"),
        Relu => format!("trtc_relu({x})"),
        Sigmoid => format!("trtc_sigmoid({x})"),
        Tanh => format!("tanhf({x})"),
        Exp => format!("expf({x})"),
        Log => format!("logf({x})"),
        Sqrt => format!("sqrtf({x})"),
        Reciprocal => format!("(1.0f / ({x}))"),
        Erf => format!("erff({x})"),
        Floor => format!("floorf({x})"),
        Ceil => format!("ceilf({x})"),
        Sin => format!("sinf({x})"),
        Cos => format!("cosf({x})"),
        Gelu => format!("trtc_gelu({x})"),
        GeluTanh => format!("trtc_gelu_tanh({x})"),
        HardSwish => format!("(({x}) * trtc_hard_sigmoid({x}, 1.0f / 6.0f, 0.5f))"),
        HardSigmoid { alpha, beta } => format!("trtc_hard_sigmoid({x}, {}, {})", lit(alpha), lit(beta)),
        LeakyRelu { alpha } => format!("(({x}) >= 0.0f ? ({x}) : {} * ({x}))", lit(alpha)),
        Softplus => format!("log1pf(expf({x}))"),
        _ => return None,
    })
}

/// The CUDA expression of an epilogue activation applied to `x`.
pub fn epilogue(a: &Activation, x: &str) -> Option<String> {
    match a {
        Activation::Unary(k) => unary(*k, x),
        Activation::Silu => Some(format!("(({x}) * trtc_sigmoid({x}))")),
        Activation::Clip { min, max } => {
            let mut e = x.to_string();
            if let Some(lo) = min {
                e = format!("fmaxf({e}, {})", lit(*lo));
            }
            if let Some(hi) = max {
                e = format!("fminf({e}, {})", lit(*hi));
            }
            Some(e)
        }
    }
}

/// Every unary kind with a CUDA expression (for the compile tests).
pub fn supported_unary_kinds() -> Vec<UnaryKind> {
    use UnaryKind::*;
    vec![Abs, Neg, Relu, Sigmoid, Tanh, Exp, Log, Sqrt, Reciprocal, Erf, Floor, Ceil, Sin, Cos, Gelu, GeluTanh, HardSwish, HardSigmoid { alpha: 0.2, beta: 0.5 }, LeakyRelu { alpha: 0.01 }, Softplus]
}
