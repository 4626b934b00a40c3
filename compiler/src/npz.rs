//! Reading and writing `.npy` arrays and `.npz` archives of named tensors
//! (for `trtc run`, `compare`, calibration data and tests).
//!
//! npz files are untrusted input. An array's npy header (dtype and shape) is
//! read and handed to the caller's [`Accept`] check before any of its data is
//! inflated or allocated, so a small archive that inflates to gigabytes, or
//! whose header declares a shape the caller does not expect, is refused
//! without doing the work. The data is then read to exactly the size the
//! header declares; a member holding more or less is an error.
//!
//! The npy format (NEP 1) is small enough to read and write here: a magic
//! string, a version, a header length, then a Python dict literal such as
//! `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }` padded to
//! 64 bytes, then the raw array. Zip members go through the `zip` crate,
//! deflate and stored only.

use anyhow::{anyhow, bail, Context, Result};
use std::io::{Read, Seek, Write};
use std::path::Path;
use trtc_runtime::{DType, Tensor, TensorType};

/// Decides, from an array's name and declared type, whether to read it (its
/// data not yet inflated).
pub trait Accept {
    fn accept(&mut self, name: &str, ty: &TensorType) -> Result<()>;
}

impl<F: FnMut(&str, &TensorType) -> Result<()>> Accept for F {
    fn accept(&mut self, name: &str, ty: &TensorType) -> Result<()> {
        self(name, ty)
    }
}

/// Accepts arrays while their total size stays within a byte budget.
pub struct Budget {
    left: u64,
}

impl Budget {
    /// The memory this machine has available now (the whole of it when that
    /// cannot be known).
    pub fn available_memory() -> Budget {
        Budget { left: crate::host::available_memory().unwrap_or(u64::MAX) }
    }

    pub fn bytes(n: u64) -> Budget {
        Budget { left: n }
    }
}

impl Accept for Budget {
    fn accept(&mut self, name: &str, ty: &TensorType) -> Result<()> {
        let bytes = ty.checked_bytes().ok_or_else(|| anyhow!("array '{name}' of shape {ty} is too large"))? as u64;
        if bytes > self.left {
            bail!("array '{name}' of shape {ty} needs {bytes} bytes, more than the memory available ({} bytes left)", self.left);
        }
        self.left -= bytes;
        Ok(())
    }
}

/// The longest npy header read (numpy's own limit is 10,000 bytes unless told
/// otherwise; ours is generous enough for any rank a tensor can have here).
const MAX_HEADER: usize = 16 << 20;
const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// An npy header: what the data that follows it is.
#[derive(Debug, Clone, PartialEq)]
struct Header {
    ty: TensorType,
    big_endian: bool,
    /// Bytes from the file's start to the data.
    len: u64,
}

fn dtype_of(descr: &str) -> Result<(DType, bool)> {
    let (order, code) = match descr.as_bytes().first() {
        Some(b'<' | b'|' | b'=') => (false, &descr[1..]),
        Some(b'>') => (true, &descr[1..]),
        _ => (false, descr),
    };
    let dtype = match code {
        "f4" => DType::F32,
        "f2" => DType::F16,
        "f8" => DType::F64,
        "i1" => DType::I8,
        "i2" => DType::I16,
        "i4" => DType::I32,
        "i8" => DType::I64,
        "u1" => DType::U8,
        "u2" => DType::U16,
        "u4" => DType::U32,
        "u8" => DType::U64,
        "b1" => DType::Bool,
        _ => bail!("npy dtype '{descr}' is not supported"),
    };
    Ok((dtype, order && dtype.size() > 1))
}

fn descr_of(d: DType) -> &'static str {
    match d {
        DType::F32 => "<f4",
        DType::F16 => "<f2",
        DType::F64 => "<f8",
        // numpy has no bf16: its bits travel as uint16 words.
        DType::BF16 | DType::U16 => "<u2",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::U8 => "|u1",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::Bool => "|b1",
        // numpy has no 8-bit floats or 4-bit integers: their bytes travel
        // as uint8, the 4-bit ones unpacked (one per byte) as ml_dtypes
        // stores them.
        DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ | DType::U4 => "|u1",
        DType::I4 => "|i1",
    }
}

/// A cursor over the header's dict literal.
struct DictParser<'a> {
    s: &'a [u8],
    at: usize,
}

impl DictParser<'_> {
    fn skip_ws(&mut self) {
        while self.at < self.s.len() && self.s[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.s.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Result<()> {
        if !self.eat(c) {
            bail!("expected '{}' at byte {}", c as char, self.at);
        }
        Ok(())
    }

    fn string(&mut self) -> Result<String> {
        self.skip_ws();
        let quote = match self.s.get(self.at) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => bail!("expected a string at byte {}", self.at),
        };
        let start = self.at + 1;
        let len = self.s[start..].iter().position(|&c| c == quote).ok_or_else(|| anyhow!("unterminated string"))?;
        self.at = start + len + 1;
        Ok(String::from_utf8_lossy(&self.s[start..start + len]).into_owned())
    }

    fn word(&mut self) -> &str {
        self.skip_ws();
        let start = self.at;
        while self.at < self.s.len() && self.s[self.at].is_ascii_alphanumeric() {
            self.at += 1;
        }
        std::str::from_utf8(&self.s[start..self.at]).unwrap_or("")
    }

    fn shape(&mut self) -> Result<Vec<usize>> {
        self.expect(b'(')?;
        let mut dims = Vec::new();
        while !self.eat(b')') {
            let w = self.word();
            let d = w.strip_suffix('L').unwrap_or(w);
            dims.push(d.parse::<usize>().map_err(|_| anyhow!("shape entry '{w}' is not a dimension"))?);
            if !self.eat(b',') {
                self.expect(b')')?;
                break;
            }
        }
        Ok(dims)
    }
}

fn parse_dict(text: &[u8]) -> Result<(String, bool, Vec<usize>)> {
    let mut p = DictParser { s: text, at: 0 };
    let (mut descr, mut fortran, mut shape) = (None, None, None);
    p.expect(b'{')?;
    while !p.eat(b'}') {
        let key = p.string()?;
        p.expect(b':')?;
        match key.as_str() {
            "descr" if descr.is_none() => {
                p.skip_ws();
                if p.s.get(p.at) == Some(&b'[') {
                    bail!("structured npy arrays are not supported");
                }
                descr = Some(p.string()?)
            }
            "fortran_order" if fortran.is_none() => {
                fortran = Some(match p.word() {
                    "True" => true,
                    "False" => false,
                    w => bail!("fortran_order is '{w}', not True or False"),
                })
            }
            "shape" if shape.is_none() => shape = Some(p.shape()?),
            k => bail!("unexpected or repeated key '{k}'"),
        }
        if !p.eat(b',') {
            p.expect(b'}')?;
            break;
        }
    }
    match (descr, fortran, shape) {
        (Some(d), Some(f), Some(s)) => Ok((d, f, s)),
        _ => bail!("the header needs descr, fortran_order and shape"),
    }
}

fn read_header(r: &mut impl Read) -> Result<Header> {
    let mut pre = [0u8; 8];
    r.read_exact(&mut pre).map_err(|_| anyhow!("not an npy array (too short)"))?;
    if &pre[..6] != MAGIC {
        bail!("not an npy array (bad magic)");
    }
    let (len_bytes, text_len) = match pre[6] {
        1 => {
            let mut b = [0u8; 2];
            r.read_exact(&mut b).map_err(|_| anyhow!("truncated npy header"))?;
            (2, u16::from_le_bytes(b) as usize)
        }
        2 | 3 => {
            let mut b = [0u8; 4];
            r.read_exact(&mut b).map_err(|_| anyhow!("truncated npy header"))?;
            (4, u32::from_le_bytes(b) as usize)
        }
        v => bail!("npy format version {v}.{} is not supported", pre[7]),
    };
    if text_len > MAX_HEADER {
        bail!("npy header of {text_len} bytes is longer than the {MAX_HEADER} allowed");
    }
    let mut text = vec![0u8; text_len];
    r.read_exact(&mut text).map_err(|_| anyhow!("truncated npy header"))?;
    let (descr, fortran, shape) = parse_dict(&text).map_err(|e| anyhow!("malformed npy header: {e}"))?;
    let (dtype, big_endian) = dtype_of(&descr)?;
    if fortran && shape.iter().filter(|&&d| d != 1).count() > 1 {
        bail!("Fortran-ordered npy arrays are not supported (save it with np.ascontiguousarray)");
    }
    let ty = TensorType::new(dtype, shape);
    if ty.checked_bytes().is_none() {
        bail!("npy shape {ty} overflows");
    }
    Ok(Header { ty, big_endian, len: (8 + len_bytes + text_len) as u64 })
}

/// Reads an array's data, exactly as much as its header declares, into a
/// tensor; `r` must end there.
fn read_data(r: &mut impl Read, h: Header) -> Result<Tensor> {
    let mut t = Tensor::zeros(h.ty.clone())?;
    r.read_exact(t.bytes_mut()).map_err(|_| anyhow!("array data is truncated ({} needs {} bytes)", h.ty, h.ty.bytes()))?;
    let mut extra = [0u8; 1];
    if r.read(&mut extra)? != 0 {
        bail!("array holds more data than its shape {} declares", h.ty);
    }
    let size = h.ty.dtype.size();
    if h.big_endian {
        t.bytes_mut().chunks_exact_mut(size).for_each(|c| c.reverse());
    }
    if h.ty.dtype == DType::Bool {
        t.bytes_mut().iter_mut().for_each(|b| *b = (*b != 0) as u8);
    }
    Ok(t)
}

/// Reads one npy array from a reader, asking `accept` before reading data.
pub fn read_npy(r: &mut impl Read, name: &str, accept: &mut dyn Accept) -> Result<Tensor> {
    let h = read_header(r)?;
    accept.accept(name, &h.ty)?;
    read_data(r, h)
}

/// Reads a `.npy` file, asking `accept` (with the file's stem as the name)
/// before reading its data.
pub fn read_npy_file_with(path: &Path, accept: &mut dyn Accept) -> Result<Tensor> {
    let file = trtc_runtime::file::open(path)?;
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    read_npy(&mut std::io::BufReader::new(file), &name, accept).with_context(|| format!("{}", path.display()))
}

/// Reads a `.npy` file within the memory available.
pub fn read_npy_file(path: &Path) -> Result<Tensor> {
    read_npy_file_with(path, &mut Budget::available_memory())
}

/// The arrays of an open npz archive: names (sorted) and how to read each.
pub struct Npz<R: Read + Seek = std::fs::File> {
    archive: zip::ZipArchive<R>,
    path: String,
    names: Vec<(String, String)>,
}

impl Npz {
    pub fn open(path: &Path) -> Result<Npz> {
        let file = trtc_runtime::file::open(path)?;
        Npz::from_reader(file, &path.display().to_string())
    }
}

impl<R: Read + Seek> Npz<R> {
    /// An archive read from `reader`; `path` names it in errors.
    pub fn from_reader(reader: R, path: &str) -> Result<Npz<R>> {
        let archive = zip::ZipArchive::new(reader).map_err(|e| anyhow!("{path}: not an npz archive ({e})"))?;
        // The zip reader lists names in hash order, which changes from run to
        // run; sort them so that results never depend on it.
        let mut names: Vec<(String, String)> = Vec::with_capacity(archive.len());
        for member in archive.file_names() {
            let Some(array) = member.strip_suffix(".npy") else {
                bail!("{path}: member '{}' is not an .npy array", crate::text::printable(member));
            };
            names.push((array.to_string(), member.to_string()));
        }
        names.sort();
        Ok(Npz { archive, path: path.to_string(), names })
    }

    /// The array names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(|(a, _)| a.as_str())
    }

    /// An array's declared type, without reading its data.
    pub fn peek(&mut self, name: &str) -> Result<TensorType> {
        let path = self.path.clone();
        let (mut member, _) = self.member(name)?;
        read_header(&mut member).map(|h| h.ty).with_context(|| format!("{path}: array '{}'", crate::text::printable(name)))
    }

    fn member(&mut self, name: &str) -> Result<(zip::read::ZipFile<'_>, u64)> {
        let member = &self.names.iter().find(|(a, _)| a == name).ok_or_else(|| anyhow!("no array named '{name}'"))?.1;
        let f = self.archive.by_name(member).map_err(|e| anyhow!("{}: member '{member}': {e}", self.path))?;
        let size = f.size();
        Ok((f, size))
    }

    /// Reads one array, asking `accept` first.
    pub fn read(&mut self, name: &str, accept: &mut dyn Accept) -> Result<Tensor> {
        let path = self.path.clone();
        let (mut member, declared) = self.member(name)?;
        (|| {
            let h = read_header(&mut member)?;
            accept.accept(name, &h.ty)?;
            let expected = h.len + h.ty.bytes() as u64;
            if declared != expected {
                bail!("the zip member declares {declared} bytes, its npy header {expected}");
            }
            read_data(&mut member, h)
        })()
        .with_context(|| format!("{path}: array '{}'", crate::text::printable(name)))
    }

    /// Reads every array, sorted by name, asking `accept` before each.
    pub fn read_all(&mut self, accept: &mut dyn Accept) -> Result<Vec<(String, Tensor)>> {
        let names: Vec<String> = self.names().map(str::to_string).collect();
        names.into_iter().map(|n| Ok((n.clone(), self.read(&n, accept)?))).collect()
    }
}

/// Reads every array of an npz file, sorted by name, asking `accept` before
/// inflating each.
pub fn read_npz_with(path: &Path, accept: &mut dyn Accept) -> Result<Vec<(String, Tensor)>> {
    Npz::open(path)?.read_all(accept)
}

/// Takes an array read from numpy as `want`, the type of the binding it
/// feeds: numpy has no bf16, 8-bit floats or 4-bit integers, so arrays of
/// those arrive as the words that carry their bits ([`DType::numpy_storage`];
/// 4-bit values unpacked, which must then lie in their type's range).
/// Anything else is returned as it is, for the caller's type check.
pub fn as_binding_type(t: Tensor, want: DType) -> Result<Tensor> {
    if want == t.dtype() || want.numpy_storage() != t.dtype() {
        return Ok(t);
    }
    let (lo, hi) = match want {
        DType::I4 => (-8, 7),
        DType::U4 => (0, 15),
        _ => (i64::MIN, i64::MAX),
    };
    if want.is_int4() {
        if let Some(v) = t.to_i64_vec()?.into_iter().find(|v| !(lo..=hi).contains(v)) {
            bail!("holds {v}, out of {want}'s range [{lo}, {hi}]");
        }
    }
    Ok(Tensor::from_bytes(TensorType::new(want, t.shape().to_vec()), t.bytes())?)
}

/// Reads every array of an npz file within the memory available.
pub fn read_npz(path: &Path) -> Result<Vec<(String, Tensor)>> {
    read_npz_with(path, &mut Budget::available_memory())
}

/// The npy header of an array of `dtype` and `shape`: magic, version,
/// length, and the dict padded so that the data starts on a 64-byte
/// boundary. Version 1 has a 2-byte length; longer headers (ranks in the
/// thousands) take version 2's 4 bytes.
fn header_bytes(dtype: DType, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut dict = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {shape}, }}", descr_of(dtype));
    let (version, len_bytes) = if dict.len() + 64 < u16::MAX as usize { (1u8, 2) } else { (2u8, 4) };
    let unpadded = MAGIC.len() + 2 + len_bytes + dict.len() + 1;
    dict.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    dict.push('\n');
    let mut out = Vec::with_capacity(unpadded + 64);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(dict.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out
}

/// The npy encoding of a tensor.
pub fn write_npy(w: &mut impl Write, t: &Tensor) -> std::io::Result<()> {
    w.write_all(&header_bytes(t.dtype(), t.shape()))?;
    w.write_all(t.bytes())
}

/// Whether `name` may become an npz member name: no path that escapes the
/// archive's folder when extracted, nothing that garbles a terminal.
pub fn check_member_name(name: &str) -> Result<()> {
    if name.is_empty() {
        bail!("an array without a name cannot be stored in an npz file");
    }
    if name.chars().any(char::is_control) || name.contains('\\') || name.split('/').any(|c| c == "..") {
        bail!(
            "array name '{}' cannot be an npz member name (it contains '..', a backslash or a control character)",
            crate::text::printable(name)
        );
    }
    Ok(())
}

/// The bytes of an npz archive of named tensors (stored, like `np.savez`).
pub fn npz_bytes(tensors: &[(String, Tensor)]) -> Result<Vec<u8>> {
    let mut seen = std::collections::HashSet::new();
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, t) in tensors {
        check_member_name(name)?;
        if !seen.insert(name.as_str()) {
            bail!("two arrays are named '{}'; an npz file holds one of each name", crate::text::printable(name));
        }
        let options = zip::write::FileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(t.bytes().len() as u64 > u32::MAX as u64 / 2);
        w.start_file(format!("{name}.npy"), options)?;
        write_npy(&mut w, t)?;
    }
    let mut cursor = w.finish()?;
    cursor.rewind()?;
    Ok(cursor.into_inner())
}

/// Writes named tensors to an npz file (atomically: a failed write leaves
/// no partial file).
pub fn write_npz(path: &Path, tensors: &[(String, Tensor)]) -> Result<()> {
    let bytes = npz_bytes(tensors)?;
    trtc_runtime::file::write(path, &bytes)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("trtc-npz-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn npz_round_trips_every_dtype() {
        let dir = temp("round-trip");
        let path = dir.join("t.npz");
        let tensors = vec![
            ("f".to_string(), Tensor::from_vec(vec![2, 2], vec![1.5f32, -2., 0., 7.]).unwrap()),
            ("d".to_string(), Tensor::from_vec(vec![3], vec![1e-300f64, 2., -3.]).unwrap()),
            ("i".to_string(), Tensor::from_vec(vec![2], vec![i64::MIN, 5]).unwrap()),
            ("u".to_string(), Tensor::from_vec(vec![1], vec![250u8]).unwrap()),
            ("b".to_string(), Tensor::from_bools(vec![3], &[true, false, true]).unwrap()),
            ("h".to_string(), Tensor::from_vec(vec![2], vec![half::f16::from_f32(0.5), half::f16::from_f32(-3.0)]).unwrap()),
            ("s".to_string(), Tensor::from_vec(Vec::<usize>::new(), vec![42i32]).unwrap()),
            ("e".to_string(), Tensor::zeros(TensorType::new(DType::F32, vec![0, 3])).unwrap()),
            ("/a/b:0".to_string(), Tensor::from_vec(vec![1], vec![7u16]).unwrap()),
        ];
        write_npz(&path, &tensors).unwrap();
        let back = read_npz(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(back.len(), tensors.len());
        for (name, a) in &tensors {
            let b = &back.iter().find(|(n, _)| n == name).expect("array present").1;
            assert_eq!(a, b, "{name}");
        }
    }

    #[test]
    fn headers_are_64_byte_aligned_and_long_ones_use_version_2() {
        for rank in [0usize, 1, 2, 7, 30_000] {
            let t = Tensor::zeros(TensorType::new(DType::U8, vec![1; rank])).unwrap();
            let mut bytes = Vec::new();
            write_npy(&mut bytes, &t).unwrap();
            let h = read_header(&mut &bytes[..]).unwrap();
            assert_eq!(h.len % 64, 0, "rank {rank}");
            assert_eq!(bytes[6], if rank < 10_000 { 1 } else { 2 }, "rank {rank}");
            assert_eq!(h.ty, *t.ty());
            assert_eq!(read_data(&mut &bytes[h.len as usize..], h).unwrap(), t);
        }
    }

    #[test]
    fn numpy_written_headers_parse() {
        // Exactly what numpy 1.x/2.x write, including the trailing comma of
        // 1-d shapes and Python 2's long suffix.
        let cases: [(&str, DType, &[usize]); 4] = [
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", DType::F32, &[2, 3]),
            ("{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }", DType::Bool, &[5]),
            ("{'descr': '<i8', 'fortran_order': False, 'shape': (), }", DType::I64, &[]),
            ("{\"descr\":\">u2\",\"shape\":(3L,),\"fortran_order\":True}", DType::U16, &[3]),
        ];
        for (text, dtype, shape) in cases {
            let (descr, _, s) = parse_dict(text.as_bytes()).unwrap();
            assert_eq!(dtype_of(&descr).unwrap().0, dtype, "{text}");
            assert_eq!(s, shape, "{text}");
        }
    }

    #[test]
    fn malformed_headers_are_one_line_errors() {
        for text in [
            "{'descr': '<f4', 'shape': (2, 3), }",
            "{'descr': '<f4' 'fortran_order': False}",
            "{'descr': [('a', '<f4')], }",
            "not a dict",
            "{'shape': (2, x), 'descr': '<f4', 'fortran_order': False}",
        ] {
            let e = parse_dict(text.as_bytes()).unwrap_err().to_string();
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn member_names_that_escape_or_repeat_are_refused() {
        let t = Tensor::from_vec(vec![1], vec![1f32]).unwrap();
        for bad in ["../evil", "a/../../b", "a\\b", "x\ny", ""] {
            assert!(npz_bytes(&[(bad.to_string(), t.clone())]).is_err(), "{bad:?}");
        }
        let e = npz_bytes(&[("y".into(), t.clone()), ("y".into(), t)]).unwrap_err().to_string();
        assert!(e.contains("two arrays are named 'y'"), "{e}");
    }

    #[test]
    fn a_bomb_is_refused_before_it_inflates() {
        // 256 MiB of zeros deflate to about 256 KB; the budget refuses it from
        // the header alone.
        let dir = temp("bomb");
        let path = dir.join("bomb.npz");
        let mut w = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        w.start_file("x.npy", zip::write::FileOptions::default().compression_method(zip::CompressionMethod::Deflated)).unwrap();
        w.write_all(&header_bytes(DType::U8, &[1 << 28])).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..256 {
            w.write_all(&zeros).unwrap();
        }
        w.finish().unwrap();
        let start = std::time::Instant::now();
        let e = read_npz_with(&path, &mut Budget::bytes(1 << 20)).unwrap_err();
        assert!(format!("{e:#}").contains("more than the memory available"), "{e:#}");
        let e = read_npz_with(&path, &mut |_: &str, ty: &TensorType| -> Result<()> { bail!("shape {ty} is not the binding's") })
            .unwrap_err();
        assert!(format!("{e:#}").contains("u8[268435456] is not the binding's"), "{e:#}");
        assert!(start.elapsed().as_secs_f64() < 5.0, "the data was inflated");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
