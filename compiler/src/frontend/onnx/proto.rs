//! Decoding ONNX protobuf values: dtypes, tensors (raw, typed and external
//! data) and attributes. ONNX files are untrusted: every length is checked
//! against the bytes present before anything is allocated.

use anyhow::{anyhow, bail, Context, Result};
use std::path::{Path, PathBuf};
use tract_onnx::pb::{self, tensor_proto::DataType};
use trtc_runtime::{DType, Tensor, TensorType};

/// The trtc dtype of an ONNX element type.
pub fn dtype(elem_type: i32) -> Result<DType> {
    let dt = DataType::try_from(elem_type).map_err(|_| anyhow!("unknown ONNX data type {elem_type}"))?;
    Ok(match dt {
        DataType::Float => DType::F32,
        DataType::Float16 => DType::F16,
        DataType::Bfloat16 => DType::BF16,
        DataType::Double => DType::F64,
        DataType::Int8 => DType::I8,
        DataType::Int16 => DType::I16,
        DataType::Int32 => DType::I32,
        DataType::Int64 => DType::I64,
        DataType::Uint8 => DType::U8,
        DataType::Uint16 => DType::U16,
        DataType::Uint32 => DType::U32,
        DataType::Uint64 => DType::U64,
        DataType::Bool => DType::Bool,
        DataType::Float8e4m3fn => DType::F8E4M3FN,
        DataType::Float8e4m3fnuz => DType::F8E4M3FNUZ,
        DataType::Float8e5m2 => DType::F8E5M2,
        DataType::Float8e5m2fnuz => DType::F8E5M2FNUZ,
        DataType::Int4 => DType::I4,
        DataType::Uint4 => DType::U4,
        other => bail!("ONNX data type {} is not supported", other.as_str_name()),
    })
}

/// Where external data may be read from: the model's directory.
#[derive(Clone, Debug, Default)]
pub struct ExternalDataRoot {
    pub dir: Option<PathBuf>,
}

fn checked_len(dims: &[usize]) -> Result<usize> {
    dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)).ok_or_else(|| anyhow!("tensor dimensions {dims:?} overflow"))
}

/// Decodes a TensorProto into a tensor.
pub fn tensor(t: &pb::TensorProto, root: &ExternalDataRoot) -> Result<Tensor> {
    let name = if t.name.is_empty() { "<unnamed>" } else { t.name.as_str() };
    tensor_inner(t, root).with_context(|| format!("tensor '{name}'"))
}

fn tensor_inner(t: &pb::TensorProto, root: &ExternalDataRoot) -> Result<Tensor> {
    let dt = dtype(t.data_type)?;
    let mut dims = Vec::with_capacity(t.dims.len());
    for &d in &t.dims {
        if d < 0 {
            bail!("negative dimension {d}");
        }
        dims.push(d as usize);
    }
    let n = checked_len(&dims)?;
    let ty = TensorType::new(dt, dims.clone());
    if dt.is_int4() {
        return int4_tensor(t, root, ty, n);
    }
    let nbytes = n.checked_mul(dt.size()).ok_or_else(|| anyhow!("tensor size overflows"))?;
    if t.data_location == Some(pb::tensor_proto::DataLocation::External as i32) {
        let bytes = read_external(t, root, nbytes)?;
        return Ok(Tensor::from_bytes(ty, &bytes)?);
    }
    if !t.raw_data.is_empty() || n == 0 {
        if t.raw_data.len() != nbytes {
            bail!("raw_data holds {} bytes, {} needs {}", t.raw_data.len(), ty, nbytes);
        }
        // Raw data is little-endian, as is every machine trtc runs on.
        return Ok(Tensor::from_bytes(ty, &t.raw_data)?);
    }
    let count_ok = |len: usize, field: &str| -> Result<()> {
        if len != n {
            bail!("{field} holds {len} values, {ty} needs {n}");
        }
        Ok(())
    };
    let out = match dt {
        DType::F32 => {
            count_ok(t.float_data.len(), "float_data")?;
            Tensor::from_slice(dims, &t.float_data)?
        }
        DType::F64 => {
            count_ok(t.double_data.len(), "double_data")?;
            Tensor::from_slice(dims, &t.double_data)?
        }
        DType::I64 => {
            count_ok(t.int64_data.len(), "int64_data")?;
            Tensor::from_slice(dims, &t.int64_data)?
        }
        DType::U64 => {
            count_ok(t.uint64_data.len(), "uint64_data")?;
            Tensor::from_slice(dims, &t.uint64_data)?
        }
        DType::U32 => {
            count_ok(t.uint64_data.len(), "uint64_data")?;
            let v: Vec<u32> = t.uint64_data.iter().map(|&v| v as u32).collect();
            Tensor::from_slice(dims, &v)?
        }
        DType::I32 => {
            count_ok(t.int32_data.len(), "int32_data")?;
            Tensor::from_slice(dims, &t.int32_data)?
        }
        DType::I4 | DType::U4 => bail!("4-bit tensors are decoded by int4_tensor"),
        DType::I16
        | DType::I8
        | DType::U16
        | DType::U8
        | DType::Bool
        | DType::F16
        | DType::BF16
        | DType::F8E4M3FN
        | DType::F8E4M3FNUZ
        | DType::F8E5M2
        | DType::F8E5M2FNUZ => {
            count_ok(t.int32_data.len(), "int32_data")?;
            let mut out = Tensor::zeros(ty)?;
            let bytes = out.bytes_mut();
            let size = dt.size();
            for (i, &v) in t.int32_data.iter().enumerate() {
                let le = v.to_le_bytes();
                let v = if dt == DType::Bool { [(v != 0) as u8, 0, 0, 0] } else { le };
                bytes[i * size..(i + 1) * size].copy_from_slice(&v[..size]);
            }
            out
        }
    };
    Ok(out)
}

/// Decodes a 4-bit tensor. ONNX packs two elements a byte, the first in
/// the low nibble, in raw or external data, and one packed byte per value
/// of `int32_data`; trtc holds them unpacked, one per byte, sign-extended
/// for INT4.
fn int4_tensor(t: &pb::TensorProto, root: &ExternalDataRoot, ty: TensorType, n: usize) -> Result<Tensor> {
    let nbytes = n.div_ceil(2);
    let packed: Vec<u8> = if t.data_location == Some(pb::tensor_proto::DataLocation::External as i32) {
        read_external(t, root, nbytes)?
    } else if !t.raw_data.is_empty() || n == 0 {
        if t.raw_data.len() != nbytes {
            bail!("raw_data holds {} bytes, {} packs into {}", t.raw_data.len(), ty, nbytes);
        }
        t.raw_data.clone()
    } else {
        if t.int32_data.len() != nbytes {
            bail!("int32_data holds {} values, {} packs into {}", t.int32_data.len(), ty, nbytes);
        }
        t.int32_data.iter().map(|&v| v as u8).collect()
    };
    let signed = ty.dtype == DType::I4;
    let nibble = |b: u8| if signed && b & 0x8 != 0 { b | 0xf0 } else { b };
    let unpacked: Vec<u8> = (0..n).map(|i| nibble((packed[i / 2] >> (4 * (i % 2))) & 0xf)).collect();
    Ok(Tensor::from_bytes(ty, &unpacked)?)
}

/// Reads a tensor's external data, following onnx's security rules: the
/// path stays under the model's directory, no symlinks or hard links, only
/// known keys, and `offset + length` within the file.
fn read_external(t: &pb::TensorProto, root: &ExternalDataRoot, nbytes: usize) -> Result<Vec<u8>> {
    let dir = root.dir.as_ref().ok_or_else(|| anyhow!("uses external data, which needs the model to be loaded from a file"))?;
    let (mut location, mut offset, mut length) = (None, 0u64, None);
    for e in &t.external_data {
        match e.key.as_str() {
            "location" => location = Some(e.value.clone()),
            "offset" => offset = e.value.parse().map_err(|_| anyhow!("bad external data offset '{}'", e.value))?,
            "length" => length = Some(e.value.parse::<u64>().map_err(|_| anyhow!("bad external data length '{}'", e.value))?),
            "checksum" => {}
            k => bail!("unknown external data key '{k}'"),
        }
    }
    let location = location.ok_or_else(|| anyhow!("external data without a location"))?;
    let rel = Path::new(&location);
    if rel.is_absolute() || rel.components().any(|c| !matches!(c, std::path::Component::Normal(_))) {
        bail!("external data location '{location}' must be a relative path inside the model's directory");
    }
    let dir = dir.canonicalize().with_context(|| format!("model directory {}", dir.display()))?;
    let path = dir.join(rel);
    let meta = std::fs::symlink_metadata(&path).with_context(|| format!("external data file {}", path.display()))?;
    if meta.file_type().is_symlink() || !meta.is_file() {
        bail!("external data file {} is not a regular file", path.display());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if meta.nlink() > 1 {
            bail!("external data file {} has several hard links; refusing it", path.display());
        }
    }
    let canon = path.canonicalize()?;
    if !canon.starts_with(&dir) {
        bail!("external data file {} lies outside the model's directory", path.display());
    }
    let length = length.unwrap_or(nbytes as u64);
    if length != nbytes as u64 {
        bail!("external data length {length} does not match the tensor's {nbytes} bytes");
    }
    let end = offset.checked_add(length).ok_or_else(|| anyhow!("external data offset overflows"))?;
    if end > meta.len() {
        bail!("external data range {offset}..{end} is past the end of {} ({} bytes)", path.display(), meta.len());
    }
    use std::io::{Read, Seek, SeekFrom};
    let mut f = trtc_runtime::file::open(&canon)?;
    f.seek(SeekFrom::Start(offset))?;
    let mut buf = vec![0u8; nbytes];
    f.read_exact(&mut buf)?;
    Ok(buf)
}

/// The kinds of attribute value ONNX defines (`AttributeProto.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttrKind {
    Float,
    Int,
    String,
    Tensor,
    Graph,
    Floats,
    Ints,
    Strings,
    Other(i32),
}

impl AttrKind {
    fn of(a: &pb::AttributeProto) -> Option<AttrKind> {
        Some(match a.r#type {
            1 => AttrKind::Float,
            2 => AttrKind::Int,
            3 => AttrKind::String,
            4 => AttrKind::Tensor,
            5 => AttrKind::Graph,
            6 => AttrKind::Floats,
            7 => AttrKind::Ints,
            8 => AttrKind::Strings,
            // Very old exporters leave the type unset: take it from the
            // field that holds a value (none: any kind, at its default).
            0 => {
                if !a.floats.is_empty() {
                    AttrKind::Floats
                } else if !a.ints.is_empty() {
                    AttrKind::Ints
                } else if !a.strings.is_empty() {
                    AttrKind::Strings
                } else if !a.s.is_empty() {
                    AttrKind::String
                } else if a.t.is_some() {
                    AttrKind::Tensor
                } else if a.g.is_some() {
                    AttrKind::Graph
                } else if a.f != 0.0 {
                    AttrKind::Float
                } else if a.i != 0 {
                    AttrKind::Int
                } else {
                    return None;
                }
            }
            t => AttrKind::Other(t),
        })
    }

    fn name(self) -> String {
        match self {
            AttrKind::Float => "FLOAT".into(),
            AttrKind::Int => "INT".into(),
            AttrKind::String => "STRING".into(),
            AttrKind::Tensor => "TENSOR".into(),
            AttrKind::Graph => "GRAPH".into(),
            AttrKind::Floats => "FLOATS".into(),
            AttrKind::Ints => "INTS".into(),
            AttrKind::Strings => "STRINGS".into(),
            AttrKind::Other(t) => pb::attribute_proto::AttributeType::try_from(t)
                .map(|k| k.as_str_name().to_string())
                .unwrap_or_else(|_| format!("type {t}")),
        }
    }
}

/// Typed access to a node's attributes. The ONNX spec fixes each
/// attribute's type; one of another type is an error naming the attribute
/// and both types (the caller adds the node), never a silent default.
pub struct Attributes<'a> {
    pub node: &'a pb::NodeProto,
}

impl<'a> Attributes<'a> {
    fn get(&self, name: &str) -> Option<&'a pb::AttributeProto> {
        self.node.attribute.iter().find(|a| a.name == name)
    }

    /// The attribute `name` when present, checked to be of `kind`.
    fn typed(&self, name: &str, kind: AttrKind) -> Result<Option<&'a pb::AttributeProto>> {
        let Some(a) = self.get(name) else { return Ok(None) };
        match AttrKind::of(a) {
            Some(k) if k != kind => {
                bail!("attribute '{name}' must be {} (ONNX type {}), got {}", kind_text(kind), kind.name(), k.name())
            }
            _ => Ok(Some(a)),
        }
    }

    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    pub fn int(&self, name: &str) -> Result<Option<i64>> {
        Ok(self.typed(name, AttrKind::Int)?.map(|a| a.i))
    }

    pub fn int_or(&self, name: &str, default: i64) -> Result<i64> {
        Ok(self.int(name)?.unwrap_or(default))
    }

    pub fn float(&self, name: &str) -> Result<Option<f32>> {
        Ok(self.typed(name, AttrKind::Float)?.map(|a| a.f))
    }

    pub fn float_or(&self, name: &str, default: f32) -> Result<f32> {
        Ok(self.float(name)?.unwrap_or(default))
    }

    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>> {
        Ok(self.typed(name, AttrKind::Ints)?.map(|a| a.ints.clone()))
    }

    pub fn floats(&self, name: &str) -> Result<Option<Vec<f32>>> {
        Ok(self.typed(name, AttrKind::Floats)?.map(|a| a.floats.clone()))
    }

    pub fn string(&self, name: &str) -> Result<Option<String>> {
        Ok(self.typed(name, AttrKind::String)?.map(|a| String::from_utf8_lossy(&a.s).into_owned()))
    }

    pub fn strings(&self, name: &str) -> Result<Option<Vec<String>>> {
        Ok(self
            .typed(name, AttrKind::Strings)?
            .map(|a| a.strings.iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect()))
    }

    pub fn tensor(&self, name: &str, root: &ExternalDataRoot) -> Result<Option<Tensor>> {
        match self.typed(name, AttrKind::Tensor)?.and_then(|a| a.t.as_ref()) {
            Some(t) => Ok(Some(tensor(t, root)?)),
            None => Ok(None),
        }
    }

    /// A subgraph attribute (If branches, Loop and Scan bodies).
    pub fn graph(&self, name: &str) -> Result<Option<&'a pb::GraphProto>> {
        Ok(self.typed(name, AttrKind::Graph)?.and_then(|a| a.g.as_ref()))
    }

    /// Whether the attribute holds a subgraph (If/Loop/Scan bodies).
    pub fn has_graph(&self) -> bool {
        self.node.attribute.iter().any(|a| a.g.is_some() || !a.graphs.is_empty())
    }
}

fn kind_text(k: AttrKind) -> &'static str {
    match k {
        AttrKind::Float => "a float",
        AttrKind::Int => "an int",
        AttrKind::String => "a string",
        AttrKind::Tensor => "a tensor",
        AttrKind::Graph => "a graph",
        AttrKind::Floats => "a list of floats",
        AttrKind::Ints => "a list of ints",
        AttrKind::Strings => "a list of strings",
        AttrKind::Other(_) => "another kind",
    }
}
