//! The storage-only types, one byte per element: the four 8-bit floats
//! (`float8.cuh`, the runtime's `float8.rs` in CUDA: exact decoding,
//! encoding with round to nearest even and ONNX's saturation rules) and the
//! 4-bit integers (held one per byte, as `ml_dtypes` and the runtime hold
//! them). Casts to and from them and their Q/DQ run as map kernels with the
//! CPU's rules: a value converts to f64 exactly, then to an 8-bit float (with
//! or without saturation) or to a 4-bit integer (round to nearest even,
//! clamped, NaN to 0); an 8-bit float converts to f32 exactly, then as an
//! f32 would.

use super::is_f32_storage;
use super::map::{Broadcast, MapKernel};
use crate::{c_type, unsupported, Unsupported};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::{DType, TensorType};

/// Device code of the 8-bit float conversions.
pub(crate) use crate::FLOAT8;

/// The number `float8.cuh` gives an 8-bit float format.
pub(crate) fn float8_format(d: DType) -> Option<u8> {
    match d {
        DType::F8E4M3FN => Some(0),
        DType::F8E4M3FNUZ => Some(1),
        DType::F8E5M2 => Some(2),
        DType::F8E5M2FNUZ => Some(3),
        _ => None,
    }
}

/// Whether `d` is one of the storage-only types.
pub(crate) fn is_storage(d: DType) -> bool {
    float8_format(d).is_some() || matches!(d, DType::I4 | DType::U4)
}

/// The C type of one element of `d`: the usual one, or the byte that holds
/// a storage-only value.
pub(crate) fn byte_ctype(d: DType) -> Result<&'static str, Unsupported> {
    match d {
        DType::I4 => Ok("signed char"),
        DType::U4 => Ok("unsigned char"),
        d if float8_format(d).is_some() => Ok("unsigned char"),
        d => c_type(d).ok_or_else(|| Unsupported(format!("no CUDA type for {d}"))),
    }
}

/// The value of element `*p0` of `d` as an exact f64 expression.
fn as_f64(d: DType) -> Result<String, Unsupported> {
    Ok(match float8_format(d) {
        Some(f) => format!("(double)trtc_f8_decode(*p0, {f})"),
        None if is_f32_storage(d) => "(double)ld(p0)".into(),
        None if d == DType::Bool || d.is_int() || matches!(d, DType::I4 | DType::U4) => "(double)*p0".into(),
        None => return unsupported(format!("Cast from {d}")),
    })
}

/// Cast (or CastNoSaturate, `saturate` false) of input 0 to `out`, where
/// the input or the output is a storage-only type.
pub(super) fn cast(x: &TensorType, out: &TensorType, saturate: bool) -> Result<(MapKernel, Broadcast), Unsupported> {
    let (s, d) = (x.dtype, out.dtype);
    if x.shape != out.shape {
        return unsupported(format!("Cast: input {x} and output {out} differ in shape"));
    }
    let dt = byte_ctype(d)?;
    let same_bytes = s == d || matches!((s, d), (DType::I4, DType::I8) | (DType::U4, DType::U8));
    let body = if same_bytes {
        "*q = *p0;".to_string()
    } else if let Some(f) = float8_format(d) {
        if f == 0 && saturate && is_f32_storage(s) {
            // The f32 encoder of the FP8 layers (the same bits).
            "*q = trtc_e4m3_sat(ld(p0));".to_string()
        } else {
            format!("*q = trtc_f8_encode({}, {f}, {});", as_f64(s)?, u8::from(saturate))
        }
    } else if matches!(d, DType::I4 | DType::U4) {
        let (lo, hi) = if d == DType::I4 { (-8.0, 7.0) } else { (0.0, 15.0) };
        format!("const double v = {};\n*q = ({dt})(v != v ? 0.0 : fmin(fmax(rint(v), {lo:?}), {hi:?}));", as_f64(s)?)
    } else if let Some(f) = float8_format(s) {
        // Decoded to f32 (exact), then as the CPU casts an f32.
        // E4M3FN by the f32 decoder the FP8 layers use (the same value).
        let x = if f == 0 {
            "const float x = trtc_e4m3_value(*p0);\n".to_string()
        } else {
            format!("const float x = trtc_f8_decode(*p0, {f});\n")
        };
        if d == DType::Bool {
            format!("{x}*q = (unsigned char)(x != 0.0f);")
        } else if is_f32_storage(d) {
            format!("{x}st(q, x);")
        } else if d.is_int() {
            format!("{x}*q = trtc_f2i<{dt}>(x);")
        } else {
            return unsupported(format!("Cast from {s} to {d}"));
        }
    } else if matches!(s, DType::I4 | DType::U4) {
        // A 4-bit integer is an i8 or u8 value: as the CPU casts those.
        if d == DType::Bool {
            "*q = (unsigned char)(*p0 != 0);".to_string()
        } else if is_f32_storage(d) {
            "st(q, (float)*p0);".to_string()
        } else if d.is_int() {
            format!("*q = ({dt})*p0;")
        } else {
            return unsupported(format!("Cast from {s} to {d}"));
        }
    } else {
        return unsupported(format!("Cast from {s} to {d}"));
    };
    let kernel = MapKernel {
        entry: "trtc_elementwise_cast_storage".into(),
        prelude: FLOAT8.to_string(),
        out_type: dt.to_string(),
        inputs: vec![(byte_ctype(s)?.to_string(), KernelArg::Input(0))],
        params: Vec::new(),
        body,
    };
    Ok((kernel, Broadcast::same(out.len() as u64, 1)))
}

/// Whether a Cast between `s` and `d` is one for [`cast`].
pub(super) fn handles(s: DType, d: DType) -> bool {
    is_storage(s) || is_storage(d)
}
