//! What every front end (HTTP, gRPC) shares of the KServe v2 inference
//! protocol: tensor datatypes by their protocol names, errors with the class
//! each protocol maps to a status, and decoding request tensors (raw bytes
//! or JSON values) into runtime tensors, checked against the binding before
//! anything is allocated.

use std::fmt;

use half::{bf16, f16};
use serde_json::Value as Json;
use trtc_runtime::{DType, Tensor, TensorType};

use crate::shapes::InputSpec;

/// A tensor datatype as the protocol names it (`FP32`, `INT64`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Datatype {
    Bool,
    Uint8,
    Uint16,
    Uint32,
    Uint64,
    Int8,
    Int16,
    Int32,
    Int64,
    Fp16,
    Fp32,
    Fp64,
    Bf16,
    /// Strings; no trtc engine binds them, so requests with them are refused.
    Bytes,
}

const ALL: [(Datatype, &str, Option<DType>); 14] = [
    (Datatype::Bool, "BOOL", Some(DType::Bool)),
    (Datatype::Uint8, "UINT8", Some(DType::U8)),
    (Datatype::Uint16, "UINT16", Some(DType::U16)),
    (Datatype::Uint32, "UINT32", Some(DType::U32)),
    (Datatype::Uint64, "UINT64", Some(DType::U64)),
    (Datatype::Int8, "INT8", Some(DType::I8)),
    (Datatype::Int16, "INT16", Some(DType::I16)),
    (Datatype::Int32, "INT32", Some(DType::I32)),
    (Datatype::Int64, "INT64", Some(DType::I64)),
    (Datatype::Fp16, "FP16", Some(DType::F16)),
    (Datatype::Fp32, "FP32", Some(DType::F32)),
    (Datatype::Fp64, "FP64", Some(DType::F64)),
    (Datatype::Bf16, "BF16", Some(DType::BF16)),
    (Datatype::Bytes, "BYTES", None),
];

impl Datatype {
    pub fn parse(name: &str) -> Option<Datatype> {
        ALL.iter().find(|(_, n, _)| *n == name).map(|(d, _, _)| *d)
    }

    pub fn name(self) -> &'static str {
        ALL.iter().find(|(d, _, _)| *d == self).map_or("BYTES", |(_, n, _)| n)
    }

    /// The runtime's element type; `None` for `BYTES`.
    pub fn dtype(self) -> Option<DType> {
        ALL.iter().find(|(d, _, _)| *d == self).and_then(|(_, _, t)| *t)
    }

    /// The protocol's datatype for `dtype`; `Bytes` for the 8-bit floats and
    /// 4-bit integers, which it has none for (models binding them are not
    /// loaded).
    pub fn of(dtype: DType) -> Datatype {
        ALL.iter().find(|(_, _, t)| *t == Some(dtype)).map_or(Datatype::Bytes, |(d, _, _)| *d)
    }
}

/// The class of an error, which each front end maps to its status
/// (HTTP 400/404/503/500, gRPC INVALID_ARGUMENT/NOT_FOUND/...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidArgument,
    NotFound,
    /// The model is not ready, its queue is full or the request timed out.
    Unavailable,
    Internal,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeError {
    pub kind: ErrorKind,
    pub message: String,
}

impl ServeError {
    pub fn invalid(message: impl Into<String>) -> ServeError {
        ServeError { kind: ErrorKind::InvalidArgument, message: message.into() }
    }
    pub fn not_found(message: impl Into<String>) -> ServeError {
        ServeError { kind: ErrorKind::NotFound, message: message.into() }
    }
    pub fn unavailable(message: impl Into<String>) -> ServeError {
        ServeError { kind: ErrorKind::Unavailable, message: message.into() }
    }
    pub fn internal(message: impl Into<String>) -> ServeError {
        ServeError { kind: ErrorKind::Internal, message: message.into() }
    }
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

pub type ServeResult<T> = Result<T, ServeError>;

/// A request's data for one input, before decoding.
pub enum TensorData<'a> {
    /// Little-endian elements, row-major (HTTP binary extension, gRPC raw).
    Raw(&'a [u8]),
    /// A JSON array of values, flat or nested row-major.
    Json(&'a Json),
}

/// Checks a request input's declared datatype and shape against what the
/// model takes and returns the tensor's type. Nothing is allocated here, so
/// a request declaring a huge shape costs nothing.
pub fn check_input(spec: &InputSpec, datatype: &str, shape: &[i64]) -> ServeResult<TensorType> {
    let name = &spec.name;
    let Some(dt) = Datatype::parse(datatype) else {
        return Err(ServeError::invalid(format!("input '{name}': unknown datatype '{datatype}'")));
    };
    let want = Datatype::of(spec.dtype);
    if dt != want {
        return Err(ServeError::invalid(format!(
            "input '{name}': datatype {} does not match the model's {}",
            dt.name(),
            want.name()
        )));
    }
    if !spec.admits(shape) {
        return Err(ServeError::invalid(format!(
            "input '{name}': shape {shape:?} does not match the model's {}",
            spec.describe()
        )));
    }
    // `admits` checked every dim against a range of usize values.
    Ok(TensorType::new(spec.dtype, shape.iter().map(|&d| d as usize).collect::<Vec<_>>()))
}

/// Decodes one input's data into a tensor of `ty` (from [`check_input`]).
pub fn decode_tensor(name: &str, ty: &TensorType, data: TensorData<'_>) -> ServeResult<Tensor> {
    let expected = ty.checked_bytes().ok_or_else(|| ServeError::invalid(format!("input '{name}' is too large")))?;
    match data {
        TensorData::Raw(bytes) => {
            if bytes.len() != expected {
                return Err(ServeError::invalid(format!(
                    "input '{name}': {} bytes of data for shape {:?} of {}, which needs {expected}",
                    bytes.len(),
                    ty.shape,
                    Datatype::of(ty.dtype).name()
                )));
            }
            if ty.dtype == DType::Bool && bytes.iter().any(|&b| b > 1) {
                return Err(ServeError::invalid(format!("input '{name}': BOOL bytes must be 0 or 1")));
            }
            Tensor::from_bytes(ty.clone(), bytes).map_err(|e| ServeError::invalid(format!("input '{name}': {e}")))
        }
        TensorData::Json(value) => {
            let mut values = Vec::new();
            flatten(value, ty.len(), &mut values).map_err(|e| ServeError::invalid(format!("input '{name}': {e}")))?;
            if values.len() != ty.len() {
                return Err(ServeError::invalid(format!(
                    "input '{name}': {} values for shape {:?}, which needs {}",
                    values.len(),
                    ty.shape,
                    ty.len()
                )));
            }
            let mut bytes = Vec::with_capacity(expected);
            for v in values {
                encode_json_value(ty.dtype, v, &mut bytes).map_err(|e| ServeError::invalid(format!("input '{name}': {e}")))?;
            }
            Tensor::from_bytes(ty.clone(), &bytes).map_err(|e| ServeError::invalid(format!("input '{name}': {e}")))
        }
    }
}

/// Collects the leaves of a (possibly nested) JSON array, without recursion,
/// stopping once there are more than `limit`.
fn flatten<'a>(value: &'a Json, limit: usize, out: &mut Vec<&'a Json>) -> Result<(), String> {
    if !value.is_array() {
        return Err("'data' must be an array".to_string());
    }
    // Items are pushed in reverse, so leaves pop in row-major order.
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Json::Array(items) => stack.extend(items.iter().rev()),
            leaf => {
                out.push(leaf);
                if out.len() > limit {
                    return Err(format!("more than the {limit} values its shape holds"));
                }
            }
        }
    }
    Ok(())
}

fn encode_json_value(dtype: DType, v: &Json, out: &mut Vec<u8>) -> Result<(), String> {
    let int = || -> Result<i128, String> {
        if let Some(i) = v.as_i64() {
            Ok(i as i128)
        } else if let Some(u) = v.as_u64() {
            Ok(u as i128)
        } else {
            Err(format!("{v} is not an integer"))
        }
    };
    let float = || -> Result<f64, String> { v.as_f64().ok_or_else(|| format!("{v} is not a number")) };
    macro_rules! int_as {
        ($t:ty) => {{
            let i = int()?;
            let x = <$t>::try_from(i).map_err(|_| format!("{i} is out of range for {}", Datatype::of(dtype).name()))?;
            out.extend_from_slice(&x.to_le_bytes());
        }};
    }
    match dtype {
        DType::Bool => match v {
            Json::Bool(b) => out.push(*b as u8),
            _ => return Err(format!("{v} is not true or false")),
        },
        DType::U8 => int_as!(u8),
        DType::U16 => int_as!(u16),
        DType::U32 => int_as!(u32),
        DType::U64 => int_as!(u64),
        DType::I8 => int_as!(i8),
        DType::I16 => int_as!(i16),
        DType::I32 => int_as!(i32),
        DType::I64 => int_as!(i64),
        DType::F16 => out.extend_from_slice(&f16::from_f64(float()?).to_le_bytes()),
        DType::BF16 => out.extend_from_slice(&bf16::from_f64(float()?).to_le_bytes()),
        DType::F32 => out.extend_from_slice(&(float()? as f32).to_le_bytes()),
        DType::F64 => out.extend_from_slice(&float()?.to_le_bytes()),
        d => return Err(format!("the protocol has no datatype for {d}")),
    }
    Ok(())
}

/// An output tensor's elements as a flat JSON array (non-finite floats,
/// which JSON cannot hold, become `null`; ask for binary data to get them).
pub fn tensor_to_json(t: &Tensor) -> Json {
    let b = t.bytes();
    macro_rules! each {
        ($t:ty, $n:expr, $f:expr) => {
            b.chunks_exact($n).map(|c| $f(<$t>::from_le_bytes(c.try_into().expect("chunk of the element size")))).collect()
        };
    }
    let num = |x: f64| serde_json::Number::from_f64(x).map_or(Json::Null, Json::Number);
    Json::Array(match t.dtype() {
        DType::Bool => b.iter().map(|&x| Json::Bool(x != 0)).collect(),
        DType::U8 => each!(u8, 1, |x: u8| Json::from(x)),
        DType::U16 => each!(u16, 2, |x: u16| Json::from(x)),
        DType::U32 => each!(u32, 4, |x: u32| Json::from(x)),
        DType::U64 => each!(u64, 8, |x: u64| Json::from(x)),
        DType::I8 => each!(i8, 1, |x: i8| Json::from(x)),
        DType::I16 => each!(i16, 2, |x: i16| Json::from(x)),
        DType::I32 => each!(i32, 4, |x: i32| Json::from(x)),
        DType::I64 => each!(i64, 8, |x: i64| Json::from(x)),
        DType::F16 => each!(f16, 2, |x: f16| num(x.to_f64())),
        DType::BF16 => each!(bf16, 2, |x: bf16| num(x.to_f64())),
        DType::F32 => each!(f32, 4, |x: f32| num(x as f64)),
        DType::F64 => each!(f64, 8, num),
        // No protocol datatype: models with such bindings are not loaded.
        _ => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn binding(dtype: DType, shape: &[usize]) -> InputSpec {
        InputSpec { name: "x".into(), dtype, max_batch: 0, axes: shape.iter().map(|&d| (d, d)).collect() }
    }

    #[test]
    fn datatype_names_round_trip() {
        for d in DType::ALL.into_iter().filter(|d| !d.is_float8() && !d.is_int4()) {
            let dt = Datatype::of(d);
            assert_eq!(Datatype::parse(dt.name()), Some(dt));
            assert_eq!(dt.dtype(), Some(d));
        }
        assert_eq!(Datatype::parse("BYTES").unwrap().dtype(), None);
        assert_eq!(Datatype::parse("fp32"), None);
    }

    #[test]
    fn checks_declared_type_and_shape_before_allocating() {
        let b = binding(DType::F32, &[2, 3]);
        assert!(check_input(&b, "FP32", &[2, 3]).is_ok());
        for (dt, shape, needle) in [
            ("FP16", &[2i64, 3][..], "does not match the model's FP32"),
            ("FLOAT", &[2, 3], "unknown datatype"),
            ("FP32", &[3, 2], "shape [3, 2]"),
            ("FP32", &[2, -3], "shape [2, -3]"),
            ("FP32", &[i64::MAX, i64::MAX], "does not match"),
        ] {
            let e = check_input(&b, dt, shape).unwrap_err();
            assert_eq!(e.kind, ErrorKind::InvalidArgument);
            assert!(e.message.contains(needle), "{e}");
        }
    }

    #[test]
    fn decodes_json_flat_and_nested_for_each_type() {
        let ty = TensorType::new(DType::I64, vec![2, 2]);
        let t = decode_tensor("x", &ty, TensorData::Json(&json!([[1, -2], [3, 9007199254740993i64]]))).unwrap();
        assert_eq!(t.as_slice::<i64>().unwrap(), [1, -2, 3, 9007199254740993]);
        let ty = TensorType::new(DType::Bool, vec![3]);
        let t = decode_tensor("x", &ty, TensorData::Json(&json!([true, false, true]))).unwrap();
        assert_eq!(t.bytes(), [1, 0, 1]);
        let ty = TensorType::new(DType::F16, vec![2]);
        let t = decode_tensor("x", &ty, TensorData::Json(&json!([0.5, -2]))).unwrap();
        assert_eq!(t.as_slice::<f16>().unwrap(), [f16::from_f32(0.5), f16::from_f32(-2.0)]);
        assert_eq!(tensor_to_json(&t), json!([0.5, -2.0]));
        for (dtype, data, needle) in [
            (DType::F32, json!([1, 2]), "2 values for shape [3]"),
            (DType::F32, json!([1, 2, 3, 4]), "more than the 3 values"),
            (DType::F32, json!([1, "a", 3]), "is not a number"),
            (DType::I8, json!([1, 300, 3]), "out of range for INT8"),
            (DType::I32, json!([1, 2.5, 3]), "not an integer"),
            (DType::Bool, json!([1, 0, 1]), "not true or false"),
            (DType::F32, json!(7), "must be an array"),
        ] {
            let e = decode_tensor("x", &TensorType::new(dtype, vec![3]), TensorData::Json(&data)).unwrap_err();
            assert!(e.message.contains(needle), "{dtype:?} {data}: {e}");
        }
    }

    #[test]
    fn decodes_raw_bytes_of_exactly_the_right_size() {
        let ty = TensorType::new(DType::F32, vec![2]);
        let t = decode_tensor("x", &ty, TensorData::Raw(&[0, 0, 128, 63, 0, 0, 0, 64])).unwrap();
        assert_eq!(t.as_slice::<f32>().unwrap(), [1.0, 2.0]);
        let e = decode_tensor("x", &ty, TensorData::Raw(&[0; 7])).unwrap_err();
        assert!(e.message.contains("7 bytes of data"), "{e}");
        let e = decode_tensor("x", &TensorType::new(DType::Bool, vec![1]), TensorData::Raw(&[2])).unwrap_err();
        assert!(e.message.contains("0 or 1"), "{e}");
    }

    #[test]
    fn non_finite_floats_become_null_in_json() {
        let t = Tensor::from_slice(vec![3], &[1.0f32, f32::NAN, f32::INFINITY]).unwrap();
        assert_eq!(tensor_to_json(&t), json!([1.0, null, null]));
    }
}
