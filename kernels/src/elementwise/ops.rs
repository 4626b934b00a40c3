//! The elementwise ops of the runtime (Unary, Binary, Compare, Pow, Where,
//! Clip, Cast, Not, BitwiseNot, IsNaN, IsInf) as map kernels. Each body
//! follows the CPU reference op; the comments name the rule it reproduces.

use super::map::{Broadcast, MapKernel};
use super::{ctype, input, is_f32_storage, output};
use crate::activation::unary;
use crate::{unsupported, LayerIo, Selection, SmLimits, Unsupported};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::elementwise::{BinaryKind, Cast, CompareKind, ElementwiseOp, UnaryKind};
use trtc_runtime::ops::Op;
use trtc_runtime::{DType, Tensor, TensorType};

const FAMILY: &str = "elementwise";

type Built = Result<(MapKernel, Broadcast), Unsupported>;

pub(super) fn candidates(op: &ElementwiseOp, io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let out = output(io, 0)?;
    let (kernel, b) = match op {
        ElementwiseOp::Unary(u) => unary_kernel(u.kind, io, out)?,
        ElementwiseOp::Binary(b) => binary_kernel(b.kind, io, out)?,
        ElementwiseOp::Compare(c) => compare_kernel(c.kind, io, out)?,
        ElementwiseOp::Pow(_) => pow_kernel(io, out)?,
        ElementwiseOp::Where(_) => where_kernel(io, out)?,
        ElementwiseOp::Clip(c) => clip_kernel(c.min, c.max, io, out)?,
        ElementwiseOp::Cast(_) if super::storage::handles(input(io, 0)?.dtype, out.dtype) => {
            super::storage::cast(input(io, 0)?, out, true)?
        }
        ElementwiseOp::Cast(c) => cast_kernel(c, io, out)?,
        ElementwiseOp::CastNoSaturate(_) => super::storage::cast(input(io, 0)?, out, false)?,
        ElementwiseOp::Not(_) => {
            let x = input(io, 0)?;
            if x.dtype != DType::Bool || out.dtype != DType::Bool {
                return unsupported(format!("Not: {} input", x.dtype));
            }
            map1("not", x, out, "*q = (unsigned char)(*p0 == 0);")?
        }
        ElementwiseOp::BitwiseNot(_) => {
            let x = input(io, 0)?;
            if !x.dtype.is_int() || out.dtype != x.dtype {
                return unsupported(format!("BitwiseNot: {} input", x.dtype));
            }
            let t = ctype(x.dtype)?;
            map1("bitwise_not", x, out, &format!("*q = ({t})~*p0;"))?
        }
        ElementwiseOp::IsNaN(_) => {
            let x = float_input(io)?;
            map1("isnan", x, out, "const float x = ld(p0);\n*q = (unsigned char)(x != x);")?
        }
        ElementwiseOp::IsInf(i) => {
            let x = float_input(io)?;
            let body = "const float x = ld(p0);\nconst float inf = __int_as_float(0x7f800000);\n*q = (unsigned char)((pos && x == inf) || (neg && x == -inf));";
            let (mut k, b) = map1("isinf", x, out, body)?;
            k.params.push(("int pos".into(), KernelArg::I32(i.detect_positive as i32)));
            k.params.push(("int neg".into(), KernelArg::I32(i.detect_negative as i32)));
            (k, b)
        }
    };
    Ok(kernel.candidates(FAMILY, &b, limits))
}

/// A kernel over the layer's inputs `ins`, broadcast to `out`.
fn map_kernel(what: &str, io: &LayerIo<'_>, ins: &[usize], out: &TensorType, body: String) -> Built {
    let mut inputs = Vec::new();
    let mut shapes = Vec::new();
    for &k in ins {
        let t = input(io, k)?;
        inputs.push((ctype(t.dtype)?.to_string(), KernelArg::Input(k as u32)));
        shapes.push(t.shape.as_slice());
    }
    let b = Broadcast::new(&out.shape, &shapes)?;
    let kernel = MapKernel {
        entry: format!("trtc_elementwise_{what}"),
        prelude: String::new(),
        out_type: ctype(out.dtype)?.to_string(),
        inputs,
        params: Vec::new(),
        body,
    };
    Ok((kernel, b))
}

/// A kernel of input 0, which has the output's shape.
fn map1(what: &str, x: &TensorType, out: &TensorType, body: &str) -> Built {
    if x.shape != out.shape {
        return unsupported(format!("{what}: input {x} and output {out} differ in shape"));
    }
    let kernel = MapKernel {
        entry: format!("trtc_elementwise_{what}"),
        prelude: String::new(),
        out_type: ctype(out.dtype)?.to_string(),
        inputs: vec![(ctype(x.dtype)?.to_string(), KernelArg::Input(0))],
        params: Vec::new(),
        body: body.to_string(),
    };
    Ok((kernel, Broadcast::same(out.len() as u64, 1)))
}

fn float_input<'a>(io: &LayerIo<'a>) -> Result<&'a TensorType, Unsupported> {
    let x = input(io, 0)?;
    if !is_f32_storage(x.dtype) {
        return unsupported(format!("{}: {} input", io.op.name(), x.dtype));
    }
    Ok(x)
}

fn unary_kernel(kind: UnaryKind, io: &LayerIo<'_>, out: &TensorType) -> Built {
    let x = input(io, 0)?;
    if out.dtype != x.dtype {
        return unsupported(format!("{}: {} input, {} output", kind.name(), x.dtype, out.dtype));
    }
    if is_f32_storage(x.dtype) {
        let Some(e) = unary(kind, "x") else {
            return unsupported(format!("{}: no CUDA expression", kind.name()));
        };
        return map1("unary", x, out, &format!("const float x = ld(p0);\nst(q, {e});"));
    }
    if !x.dtype.is_int() {
        return unsupported(format!("{}: {} input", kind.name(), x.dtype));
    }
    // Integer kinds wrap like Rust's wrapping_abs / wrapping_neg; Sign is
    // signum; Relu is max(x, 0).
    let t = ctype(x.dtype)?;
    let e = match kind {
        UnaryKind::Abs => "trtc_lt0(x) ? trtc_wneg(x) : x".to_string(),
        UnaryKind::Neg if x.dtype.is_signed_int() => "trtc_wneg(x)".to_string(),
        UnaryKind::Sign => format!("trtc_lt0(x) ? ({t})-1 : (x != ({t})0 ? ({t})1 : ({t})0)"),
        UnaryKind::Relu => format!("trtc_lt0(x) ? ({t})0 : x"),
        k => return unsupported(format!("{}: {} input", k.name(), x.dtype)),
    };
    map1("unary_int", x, out, &format!("const {t} x = *p0;\n*q = {e};"))
}

/// Python's remainder on floats: C's fmod, moved to the divisor's sign.
const PYMOD: &str = "__device__ __forceinline__ float trtc_pymod(float a, float b) {\n    const float r = fmodf(a, b);\n    return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;\n}\n";

fn binary_kernel(kind: BinaryKind, io: &LayerIo<'_>, out: &TensorType) -> Built {
    let (a, b) = (input(io, 0)?, input(io, 1)?);
    if a.dtype != b.dtype || out.dtype != a.dtype {
        return unsupported(format!("{kind:?}: dtypes {}, {} -> {}", a.dtype, b.dtype, out.dtype));
    }
    let d = a.dtype;
    use BinaryKind::*;
    let body = if is_f32_storage(d) {
        // numpy's maximum/minimum: a NaN first operand wins, a NaN second
        // one falls through the comparison.
        let e = match kind {
            Add => "a + b",
            Sub => "a - b",
            Mul => "a * b",
            Div => "a / b",
            Max => "(a != a || a > b) ? a : b",
            Min => "(a != a || a < b) ? a : b",
            Mod { fmod: true } => "fmodf(a, b)",
            Mod { fmod: false } => "trtc_pymod(a, b)",
            PRelu => "a < 0.0f ? b * a : a",
            k => return unsupported(format!("{k:?} on {d}")),
        };
        format!("const float a = ld(p0);\nconst float b = ld(p1);\nst(q, {e});")
    } else if d.is_int() {
        let e = match kind {
            Add => "trtc_wadd(a, b)",
            Sub => "trtc_wsub(a, b)",
            Mul => "trtc_wmul(a, b)",
            Div => "trtc_idiv(a, b)",
            Max => "a > b ? a : b",
            Min => "a < b ? a : b",
            Mod { fmod: true } => "trtc_irem(a, b, true)",
            Mod { fmod: false } => "trtc_irem(a, b, false)",
            PRelu => "trtc_lt0(a) ? trtc_wmul(b, a) : a",
            BitwiseAnd => "a & b",
            BitwiseOr => "a | b",
            BitwiseXor => "a ^ b",
            BitShiftLeft => "trtc_shl(a, b)",
            BitShiftRight => "trtc_shr(a, b)",
            k => return unsupported(format!("{k:?} on {d}")),
        };
        let t = ctype(d)?;
        format!("const {t} a = *p0;\nconst {t} b = *p1;\n*q = ({t})({e});")
    } else if d == DType::Bool {
        let e = match kind {
            And => "a && b",
            Or => "a || b",
            Xor => "a != b",
            k => return unsupported(format!("{k:?} on bool")),
        };
        format!("const bool a = *p0 != 0;\nconst bool b = *p1 != 0;\n*q = (unsigned char)({e});")
    } else {
        return unsupported(format!("{kind:?} on {d}"));
    };
    let (mut k, bc) = map_kernel("binary", io, &[0, 1], out, body)?;
    if matches!(kind, Mod { fmod: false }) && is_f32_storage(d) {
        k.prelude = PYMOD.to_string();
    }
    Ok((k, bc))
}

fn compare_kernel(kind: CompareKind, io: &LayerIo<'_>, out: &TensorType) -> Built {
    let (a, b) = (input(io, 0)?, input(io, 1)?);
    if a.dtype != b.dtype || out.dtype != DType::Bool {
        return unsupported(format!("{kind:?}: dtypes {}, {} -> {}", a.dtype, b.dtype, out.dtype));
    }
    let sym = match kind {
        CompareKind::Equal => "==",
        CompareKind::Less => "<",
        CompareKind::LessOrEqual => "<=",
        CompareKind::Greater => ">",
        CompareKind::GreaterOrEqual => ">=",
    };
    // f16 compares exactly as its f32 widening; NaN compares false.
    let body = if is_f32_storage(a.dtype) {
        format!("*q = (unsigned char)(ld(p0) {sym} ld(p1));")
    } else {
        format!("*q = (unsigned char)(*p0 {sym} *p1);")
    };
    map_kernel("compare", io, &[0, 1], out, body)
}

fn pow_kernel(io: &LayerIo<'_>, out: &TensorType) -> Built {
    let (a, e) = (input(io, 0)?, input(io, 1)?);
    if out.dtype != a.dtype || e.dtype == DType::Bool {
        return unsupported(format!("Pow: dtypes {}, {} -> {}", a.dtype, e.dtype, out.dtype));
    }
    let body = if is_f32_storage(a.dtype) {
        // The exponent converts through f64 to f32, as the CPU's
        // `F::from_f64(p.to_f64())`; squaring is a plain multiply there.
        let exp = if is_f32_storage(e.dtype) { "ld(p1)" } else { "(float)(double)*p1" };
        format!("const float v = ld(p0);\nconst float e = {exp};\nst(q, e == 2.0f ? v * v : powf(v, e));")
    } else if a.dtype.is_int() && e.dtype.is_int() {
        // Integer powers wrap; the exponent is `p.to_f64() as i64`.
        "*q = trtc_ipow(*p0, trtc_f2i<long long>((double)*p1));".to_string()
    } else {
        return unsupported(format!("Pow: {} base with {} exponent", a.dtype, e.dtype));
    };
    map_kernel("pow", io, &[0, 1], out, body)
}

/// The unsigned C type of an element size, for ops that only move elements.
fn width_type(bytes: usize) -> Result<&'static str, Unsupported> {
    Ok(match bytes {
        1 => "unsigned char",
        2 => "unsigned short",
        4 => "unsigned int",
        8 => "unsigned long long",
        b => return unsupported(format!("no element type of {b} bytes")),
    })
}

fn where_kernel(io: &LayerIo<'_>, out: &TensorType) -> Built {
    let (c, x, y) = (input(io, 0)?, input(io, 1)?, input(io, 2)?);
    if c.dtype != DType::Bool || x.dtype != y.dtype || out.dtype != x.dtype {
        return unsupported(format!("Where: dtypes {}, {}, {} -> {}", c.dtype, x.dtype, y.dtype, out.dtype));
    }
    // A selection only moves elements: by element size.
    let t = width_type(x.dtype.size())?;
    let (mut k, b) = map_kernel("where", io, &[0, 1, 2], out, "*q = *p0 != 0 ? *p1 : *p2;".into())?;
    k.out_type = t.into();
    k.inputs[1].0 = t.into();
    k.inputs[2].0 = t.into();
    Ok((k, b))
}

/// The bits of `v` converted to `to` by the runtime's own Cast (Rust `as`
/// for integers, round to nearest even for f16), little-endian in a u64.
pub(crate) fn cast_bits(v: f64, to: DType) -> Result<u64, Unsupported> {
    let op: Op = Cast::new(to).into();
    let t = op.eval_owned(&[Some(&Tensor::scalar(v))]).map_err(|e| Unsupported(format!("cannot convert {v} to {to}: {e}")))?;
    let mut bytes = [0u8; 8];
    let src = t[0].bytes();
    bytes[..src.len()].copy_from_slice(src);
    Ok(u64::from_le_bytes(bytes))
}

/// An integer bit pattern of `d` sign-extended (signed types) to i64.
fn int_arg(bits: u64, d: DType) -> i64 {
    let shift = 64 - 8 * d.size() as u32;
    if d.is_signed_int() {
        ((bits << shift) as i64) >> shift
    } else {
        bits as i64
    }
}

fn clip_kernel(min: Option<f64>, max: Option<f64>, io: &LayerIo<'_>, out: &TensorType) -> Built {
    let x = input(io, 0)?;
    if out.dtype != x.dtype || min.is_some_and(f64::is_nan) || max.is_some_and(f64::is_nan) {
        return unsupported(format!("Clip: {} input, {} output", x.dtype, out.dtype));
    }
    // NaN passes through: `x < lo` and `y > hi` are false for it.
    if is_f32_storage(x.dtype) {
        // The bounds are the f32 the CPU clamps with (for f16 storage, the
        // HalfIo wrapper's f32 computation; the result rounds once on store).
        let lo = min.map_or(f32::NEG_INFINITY, |v| v as f32);
        let hi = max.map_or(f32::INFINITY, |v| v as f32);
        let (mut k, b) =
            map1("clip", x, out, "const float x = ld(p0);\nconst float y = x < lo ? lo : x;\nst(q, y > hi ? hi : y);")?;
        k.params = vec![("float lo".into(), KernelArg::F32(lo)), ("float hi".into(), KernelArg::F32(hi))];
        return Ok((k, b));
    }
    if !x.dtype.is_int() {
        return unsupported(format!("Clip: {} input", x.dtype));
    }
    let t = ctype(x.dtype)?;
    let bits = 8 * x.dtype.size() as u32;
    // Absent bounds are the type's extremes; present ones convert with `as`.
    let (lowest, highest) = if x.dtype.is_signed_int() {
        ((1u64 << (bits - 1)).wrapping_neg(), (1u64 << (bits - 1)) - 1)
    } else {
        (0, u64::MAX >> (64 - bits))
    };
    let lo = min.map_or(Ok(lowest), |v| cast_bits(v, x.dtype))?;
    let hi = max.map_or(Ok(highest), |v| cast_bits(v, x.dtype))?;
    let body = format!("const {t} lo = ({t})lo_;\nconst {t} hi = ({t})hi_;\nconst {t} x = *p0;\nconst {t} y = x < lo ? lo : x;\n*q = y > hi ? hi : y;");
    let (mut k, b) = map1("clip_int", x, out, &body)?;
    k.params = vec![
        ("long long lo_".into(), KernelArg::I64(int_arg(lo, x.dtype))),
        ("long long hi_".into(), KernelArg::I64(int_arg(hi, x.dtype))),
    ];
    Ok((k, b))
}

fn cast_kernel(c: &Cast, io: &LayerIo<'_>, out: &TensorType) -> Built {
    let x = input(io, 0)?;
    let (s, d) = (x.dtype, out.dtype);
    // A HalfIo-wrapped Cast to f32 stores f16: the value converts to f32
    // first and rounds to f16 on store, which `st` does.
    let wrapped = c.to == DType::F32 && d == DType::F16;
    if c.to != d && !wrapped {
        return unsupported(format!("Cast to {}: {} output", c.to, d));
    }
    let dt = ctype(d)?;
    let body = if s == d || (s == DType::Bool && d == DType::U8) {
        // Same dtype: a bit copy, as the CPU copies bytes.
        "*q = *p0;".to_string()
    } else if d == DType::Bool {
        // Anything to bool is `x != 0` (NaN is true).
        if is_f32_storage(s) {
            "*q = (unsigned char)(ld(p0) != 0.0f);".to_string()
        } else {
            "*q = (unsigned char)(*p0 != 0);".to_string()
        }
    } else if is_f32_storage(d) {
        // Integers convert to f32 rounding to nearest. Below 2^24 that is
        // exact, and above it f16 overflows either way, so rounding through
        // f32 equals the CPU's single rounding from f64 to f16.
        if is_f32_storage(s) {
            "st(q, ld(p0));".to_string()
        } else {
            "st(q, (float)*p0);".to_string()
        }
    } else if is_f32_storage(s) {
        // Floats to integers truncate and saturate; NaN becomes 0.
        format!("*q = trtc_f2i<{dt}>(ld(p0));")
    } else {
        // Integers to integers wrap (the conversion is modular).
        format!("*q = ({dt})*p0;")
    };
    map1("cast", x, out, &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cast_bits_follow_rust_as() {
        assert_eq!(cast_bits(300.0, DType::U8).unwrap(), 255);
        assert_eq!(int_arg(cast_bits(-300.0, DType::I8).unwrap(), DType::I8), -128);
        assert_eq!(int_arg(cast_bits(-1.5, DType::I64).unwrap(), DType::I64), -1);
        assert_eq!(cast_bits(1.0, DType::F16).unwrap(), 0x3c00);
    }
}
