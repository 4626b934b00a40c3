//! Element types of tensors.

use serde::{Deserialize, Serialize};

/// The element type of a tensor. Booleans are stored as one byte, 0 or 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DType {
    F32,
    F16,
    BF16,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    Bool,
    /// The 8-bit floats of ONNX ([`crate::float8`]): 4 exponent and 3
    /// mantissa bits with NaN but no infinity (`FN`), or also without
    /// negative zero (`FNUZ`, NaN is 0x80); 5 and 2 bits with IEEE
    /// infinities, or the `FNUZ` variant of that.
    F8E4M3FN,
    F8E4M3FNUZ,
    F8E5M2,
    F8E5M2FNUZ,
    /// 4-bit integers, stored unpacked, one per byte (sign-extended for
    /// `I4`), as ml_dtypes holds them; ONNX's packed form (two per byte,
    /// low nibble first) exists only in ONNX files.
    I4,
    U4,
}

impl DType {
    pub const ALL: [DType; 19] = [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F64,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U16,
        DType::U32,
        DType::U64,
        DType::Bool,
        DType::F8E4M3FN,
        DType::F8E4M3FNUZ,
        DType::F8E5M2,
        DType::F8E5M2FNUZ,
        DType::I4,
        DType::U4,
    ];

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Bool | DType::I4 | DType::U4 => 1,
            DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 => 8,
        }
    }

    /// The floats ops compute in. The 8-bit floats are storage formats
    /// only (Cast, QuantizeLinear and DequantizeLinear convert them), so
    /// they are not among these; see [`DType::is_float8`].
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::BF16 | DType::F64)
    }

    pub fn is_float8(self) -> bool {
        matches!(self, DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ)
    }

    /// The integers ops compute in. The 4-bit integers are storage formats
    /// like the 8-bit floats; see [`DType::is_int4`].
    pub fn is_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::U16 | DType::U32 | DType::U64)
    }

    pub fn is_int4(self) -> bool {
        matches!(self, DType::I4 | DType::U4)
    }

    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    /// The dtype whose elements numpy uses to carry this one's bits: numpy
    /// has no bf16, 8-bit floats or 4-bit integers, so arrays of those
    /// arrive as uint16 words, bytes, and (unpacked) int8 or uint8.
    pub fn numpy_storage(self) -> DType {
        match self {
            DType::BF16 => DType::U16,
            DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ | DType::U4 => DType::U8,
            DType::I4 => DType::I8,
            d => d,
        }
    }

    /// Lower-case short name used in IR dumps and `inspect`, e.g. `f32`.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F64 => "f64",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U16 => "u16",
            DType::U32 => "u32",
            DType::U64 => "u64",
            DType::Bool => "bool",
            DType::F8E4M3FN => "f8e4m3fn",
            DType::F8E4M3FNUZ => "f8e4m3fnuz",
            DType::F8E5M2 => "f8e5m2",
            DType::F8E5M2FNUZ => "f8e5m2fnuz",
            DType::I4 => "i4",
            DType::U4 => "u4",
        }
    }
}

impl std::fmt::Display for DType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
