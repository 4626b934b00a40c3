//! Tensors: an owned, aligned byte buffer plus a dtype and a static shape, and
//! borrowed views of the same that ops read and write.

use crate::dtype::DType;
use crate::error::{Error, Result};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

/// The dtype and static shape of a tensor.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TensorType {
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl TensorType {
    pub fn new(dtype: DType, shape: impl Into<Vec<usize>>) -> TensorType {
        TensorType { dtype, shape: shape.into() }
    }

    /// Number of elements, or `None` on overflow.
    pub fn checked_len(&self) -> Option<usize> {
        self.shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }

    /// Number of elements. Shapes in a validated plan or graph never overflow.
    pub fn len(&self) -> usize {
        self.checked_len().expect("tensor element count overflows usize")
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Size in bytes, or `None` on overflow.
    pub fn checked_bytes(&self) -> Option<usize> {
        self.checked_len()?.checked_mul(self.dtype.size())
    }

    pub fn bytes(&self) -> usize {
        self.checked_bytes().expect("tensor byte size overflows usize")
    }
}

impl std::fmt::Display for TensorType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, d) in self.shape.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// A Rust scalar type that is the storage of some [`DType`].
pub trait Element: bytemuck::Pod + PartialOrd + std::fmt::Debug + Send + Sync + 'static {
    const DTYPE: DType;
    /// Whether a tensor of `dtype` may be viewed as a slice of `Self`.
    /// Booleans and 4-bit integers are viewed as the 8-bit integers.
    fn accepts(dtype: DType) -> bool {
        dtype == Self::DTYPE
    }
    fn to_f64(self) -> f64;
    /// Conversion with Rust `as` semantics (saturating for floats to ints).
    fn from_f64(v: f64) -> Self;
}

macro_rules! element {
    ($t:ty, $d:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
        }
    };
}
element!(f32, DType::F32);
element!(f64, DType::F64);
element!(i16, DType::I16);
element!(i32, DType::I32);
element!(i64, DType::I64);
element!(u16, DType::U16);
element!(u32, DType::U32);
element!(u64, DType::U64);

/// Signed 4-bit integers are stored one per byte, sign-extended, so they
/// are viewed as `i8` too.
impl Element for i8 {
    const DTYPE: DType = DType::I8;
    fn accepts(dtype: DType) -> bool {
        dtype == DType::I8 || dtype == DType::I4
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as i8
    }
}

/// Booleans and unsigned 4-bit integers are stored one per byte and viewed
/// as `u8` too.
impl Element for u8 {
    const DTYPE: DType = DType::U8;
    fn accepts(dtype: DType) -> bool {
        matches!(dtype, DType::U8 | DType::Bool | DType::U4)
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as u8
    }
}

impl Element for f16 {
    const DTYPE: DType = DType::F16;
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
}

impl Element for bf16 {
    const DTYPE: DType = DType::BF16;
    fn to_f64(self) -> f64 {
        self.to_f64()
    }
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
    }
}

/// Alignment of every tensor buffer, in bytes.
pub const ALIGN: usize = 64;

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Block([u8; ALIGN]);

/// A byte buffer whose start is aligned to [`ALIGN`] bytes, so that it can be
/// viewed as a slice of any [`Element`].
#[derive(Clone, Default)]
pub struct AlignedBytes {
    blocks: Vec<Block>,
    len: usize,
}

impl AlignedBytes {
    /// A zero-filled buffer of `len` bytes. Aborts if memory runs out; use
    /// [`AlignedBytes::try_zeroed`] for sizes read from untrusted input.
    pub fn zeroed(len: usize) -> AlignedBytes {
        AlignedBytes { blocks: vec![Block([0; ALIGN]); len.div_ceil(ALIGN)], len }
    }

    /// A zero-filled buffer, or an error when the memory cannot be had
    /// (a failed allocation would otherwise abort the process).
    pub fn try_zeroed(len: usize) -> Result<AlignedBytes> {
        let n = len.div_ceil(ALIGN);
        let mut blocks = Vec::new();
        blocks.try_reserve_exact(n).map_err(|_| Error::op(format!("cannot allocate {len} bytes")))?;
        blocks.resize(n, Block([0; ALIGN]));
        Ok(AlignedBytes { blocks, len })
    }

    pub fn from_bytes(bytes: &[u8]) -> AlignedBytes {
        let mut b = AlignedBytes::zeroed(bytes.len());
        b.as_mut_slice().copy_from_slice(bytes);
        b
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `blocks` holds at least `len` initialized bytes.
        unsafe { std::slice::from_raw_parts(self.blocks.as_ptr() as *const u8, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `blocks` holds at least `len` initialized bytes, borrowed mutably.
        unsafe { std::slice::from_raw_parts_mut(self.blocks.as_mut_ptr() as *mut u8, self.len) }
    }

    /// Raw pointer to the first byte, for executors that hand out disjoint
    /// views of one arena.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut u8 {
        self.blocks.as_mut_ptr() as *mut u8
    }
}

impl std::fmt::Debug for AlignedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedBytes({} bytes)", self.len)
    }
}

fn view_as<T: Element>(dtype: DType, bytes: &[u8]) -> Result<&[T]> {
    if !T::accepts(dtype) {
        return Err(Error::op(format!("expected a {} tensor, got {}", T::DTYPE, dtype)));
    }
    bytemuck::try_cast_slice(bytes).map_err(|e| Error::op(format!("misaligned tensor: {e}")))
}

fn view_as_mut<T: Element>(dtype: DType, bytes: &mut [u8]) -> Result<&mut [T]> {
    if !T::accepts(dtype) {
        return Err(Error::op(format!("expected a {} tensor, got {}", T::DTYPE, dtype)));
    }
    bytemuck::try_cast_slice_mut(bytes).map_err(|e| Error::op(format!("misaligned tensor: {e}")))
}

/// An owned tensor.
#[derive(Clone)]
pub struct Tensor {
    ty: TensorType,
    data: AlignedBytes,
}

impl Tensor {
    /// A zero-filled tensor. Fails when the byte size overflows.
    pub fn zeros(ty: TensorType) -> Result<Tensor> {
        let bytes = ty.checked_bytes().ok_or_else(|| Error::op(format!("tensor {ty} is too large")))?;
        Ok(Tensor { ty, data: AlignedBytes::try_zeroed(bytes)? })
    }

    /// A tensor from raw little-endian bytes; the length must match exactly.
    pub fn from_bytes(ty: TensorType, bytes: &[u8]) -> Result<Tensor> {
        match ty.checked_bytes() {
            Some(n) if n == bytes.len() => Ok(Tensor { ty, data: AlignedBytes::from_bytes(bytes) }),
            _ => Err(Error::op(format!("tensor {ty} does not match {} bytes of data", bytes.len()))),
        }
    }

    pub fn from_vec<T: Element>(shape: impl Into<Vec<usize>>, values: Vec<T>) -> Result<Tensor> {
        Self::from_slice(shape, &values)
    }

    pub fn from_slice<T: Element>(shape: impl Into<Vec<usize>>, values: &[T]) -> Result<Tensor> {
        Tensor::from_bytes(TensorType::new(T::DTYPE, shape), bytemuck::cast_slice(values))
    }

    /// A boolean tensor.
    pub fn from_bools(shape: impl Into<Vec<usize>>, values: &[bool]) -> Result<Tensor> {
        let bytes: Vec<u8> = values.iter().map(|&b| b as u8).collect();
        Tensor::from_bytes(TensorType::new(DType::Bool, shape), &bytes)
    }

    pub fn scalar<T: Element>(v: T) -> Tensor {
        Tensor::from_slice(Vec::new(), &[v]).expect("scalar tensor")
    }

    pub fn ty(&self) -> &TensorType {
        &self.ty
    }

    /// The tensor's buffer.
    pub(crate) fn into_aligned_bytes(self) -> AlignedBytes {
        self.data
    }

    pub fn dtype(&self) -> DType {
        self.ty.dtype
    }

    pub fn shape(&self) -> &[usize] {
        &self.ty.shape
    }

    pub fn len(&self) -> usize {
        self.ty.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn bytes(&self) -> &[u8] {
        self.data.as_slice()
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.data.as_mut_slice()
    }

    pub fn as_slice<T: Element>(&self) -> Result<&[T]> {
        view_as(self.ty.dtype, self.data.as_slice())
    }

    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T]> {
        view_as_mut(self.ty.dtype, self.data.as_mut_slice())
    }

    /// The same data under another shape with the same element count.
    pub fn reshaped(mut self, shape: impl Into<Vec<usize>>) -> Result<Tensor> {
        let ty = TensorType::new(self.ty.dtype, shape);
        if ty.checked_len() != Some(self.len()) {
            return Err(Error::op(format!("cannot reshape {} to {}", self.ty, ty)));
        }
        self.ty = ty;
        Ok(self)
    }

    pub fn view(&self) -> TensorView<'_> {
        TensorView { dtype: self.ty.dtype, shape: &self.ty.shape, bytes: self.data.as_slice() }
    }

    pub fn view_mut(&mut self) -> TensorViewMut<'_> {
        TensorViewMut { dtype: self.ty.dtype, shape: &self.ty.shape, bytes: self.data.as_mut_slice() }
    }

    /// Every element converted to f64 (for tests, calibration and comparisons).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        self.view().to_f64_vec()
    }

    /// Integer elements as i64 (for shape-like tensors). Fails for floats.
    pub fn to_i64_vec(&self) -> Result<Vec<i64>> {
        self.view().to_i64_vec()
    }
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor({}", self.ty)?;
        if self.len() <= 16 {
            write!(f, " {:?}", self.to_f64_vec())?;
        }
        f.write_str(")")
    }
}

impl PartialEq for Tensor {
    fn eq(&self, other: &Tensor) -> bool {
        self.ty == other.ty && self.bytes() == other.bytes()
    }
}

/// A borrowed, read-only tensor.
#[derive(Clone, Copy, Debug)]
pub struct TensorView<'a> {
    pub dtype: DType,
    pub shape: &'a [usize],
    pub bytes: &'a [u8],
}

/// A borrowed tensor that an op writes its result into.
#[derive(Debug)]
pub struct TensorViewMut<'a> {
    pub dtype: DType,
    pub shape: &'a [usize],
    pub bytes: &'a mut [u8],
}

/// Views of named tensors, for the executors' `run_views`.
pub fn views<'a>(tensors: &[(&'a str, &'a Tensor)]) -> Vec<(&'a str, TensorView<'a>)> {
    tensors.iter().map(|&(n, t)| (n, t.view())).collect()
}

/// 8-bit floats, decoded exactly.
fn float8_f64(bytes: &[u8], format: crate::float8::Float8) -> Vec<f64> {
    bytes.iter().map(|&b| f64::from(format.decode(b))).collect()
}

/// Every element of little-endian `bytes` of type `T`, as f64. Reads with
/// `pod_read_unaligned`, so any byte slice works, aligned or not.
fn elements_f64<T: Element>(bytes: &[u8]) -> Vec<f64> {
    bytes.chunks_exact(std::mem::size_of::<T>()).map(|c| bytemuck::pod_read_unaligned::<T>(c).to_f64()).collect()
}

impl<'a> TensorView<'a> {
    /// A view of `bytes` (little-endian elements, any alignment) as a
    /// tensor of `dtype` and `shape`; the byte count must match exactly.
    pub fn new(dtype: DType, shape: &'a [usize], bytes: &'a [u8]) -> Result<TensorView<'a>> {
        let ty = TensorType::new(dtype, shape);
        match ty.checked_bytes() {
            Some(n) if n == bytes.len() => Ok(TensorView { dtype, shape, bytes }),
            Some(n) => Err(Error::invalid(format!("a {ty} tensor has {n} bytes, not {}", bytes.len()))),
            None => Err(Error::invalid(format!("the size of a {ty} tensor overflows"))),
        }
    }

    pub fn ty(&self) -> TensorType {
        TensorType::new(self.dtype, self.shape)
    }

    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn as_slice<T: Element>(&self) -> Result<&'a [T]> {
        view_as(self.dtype, self.bytes)
    }

    pub fn to_owned(&self) -> Tensor {
        Tensor { ty: self.ty(), data: AlignedBytes::from_bytes(self.bytes) }
    }

    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self.dtype {
            DType::F32 => elements_f64::<f32>(self.bytes),
            DType::F16 => elements_f64::<f16>(self.bytes),
            DType::BF16 => elements_f64::<bf16>(self.bytes),
            DType::F64 => elements_f64::<f64>(self.bytes),
            DType::I8 => elements_f64::<i8>(self.bytes),
            DType::I16 => elements_f64::<i16>(self.bytes),
            DType::I32 => elements_f64::<i32>(self.bytes),
            DType::I64 => elements_f64::<i64>(self.bytes),
            DType::U8 | DType::Bool => elements_f64::<u8>(self.bytes),
            DType::U16 => elements_f64::<u16>(self.bytes),
            DType::U32 => elements_f64::<u32>(self.bytes),
            DType::U64 => elements_f64::<u64>(self.bytes),
            DType::I4 => elements_f64::<i8>(self.bytes),
            DType::U4 => elements_f64::<u8>(self.bytes),
            DType::F8E4M3FN => float8_f64(self.bytes, crate::float8::Float8::E4M3FN),
            DType::F8E4M3FNUZ => float8_f64(self.bytes, crate::float8::Float8::E4M3FNUZ),
            DType::F8E5M2 => float8_f64(self.bytes, crate::float8::Float8::E5M2),
            DType::F8E5M2FNUZ => float8_f64(self.bytes, crate::float8::Float8::E5M2FNUZ),
        }
    }

    pub fn to_i64_vec(&self) -> Result<Vec<i64>> {
        Ok(match self.dtype {
            DType::I64 => self.as_slice::<i64>()?.to_vec(),
            DType::I32 => self.as_slice::<i32>()?.iter().map(|&v| v as i64).collect(),
            DType::I16 => self.as_slice::<i16>()?.iter().map(|&v| v as i64).collect(),
            DType::I8 | DType::I4 => self.as_slice::<i8>()?.iter().map(|&v| v as i64).collect(),
            DType::U8 | DType::Bool | DType::U4 => self.as_slice::<u8>()?.iter().map(|&v| v as i64).collect(),
            DType::U16 => self.as_slice::<u16>()?.iter().map(|&v| v as i64).collect(),
            DType::U32 => self.as_slice::<u32>()?.iter().map(|&v| v as i64).collect(),
            DType::U64 => self.as_slice::<u64>()?.iter().map(|&v| v as i64).collect(),
            d => return Err(Error::op(format!("expected an integer tensor, got {d}"))),
        })
    }
}

impl<'a> TensorViewMut<'a> {
    pub fn ty(&self) -> TensorType {
        TensorType::new(self.dtype, self.shape)
    }

    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T]> {
        view_as_mut(self.dtype, self.bytes)
    }

    pub fn as_view(&self) -> TensorView<'_> {
        TensorView { dtype: self.dtype, shape: self.shape, bytes: self.bytes }
    }
}
