//! Reading and writing `.npz` archives of named tensors (for `trtc run`,
//! calibration data and tests), through the `npyz` crate.

use anyhow::{anyhow, bail, Context, Result};
use npyz::npz::{NpzArchive, NpzWriter};
use npyz::{DType as NpyDType, TypeChar, WriterBuilder};
use std::path::Path;
use trtc_runtime::{DType, Tensor, TensorType};

fn dtype_of(d: &NpyDType) -> Result<DType> {
    let NpyDType::Plain(ts) = d else { bail!("structured npy arrays are not supported") };
    let size = ts.size_field();
    Ok(match (ts.type_char(), size) {
        (TypeChar::Float, 4) => DType::F32,
        (TypeChar::Float, 2) => DType::F16,
        (TypeChar::Float, 8) => DType::F64,
        (TypeChar::Int, 1) => DType::I8,
        (TypeChar::Int, 2) => DType::I16,
        (TypeChar::Int, 4) => DType::I32,
        (TypeChar::Int, 8) => DType::I64,
        (TypeChar::Uint, 1) => DType::U8,
        (TypeChar::Uint, 2) => DType::U16,
        (TypeChar::Uint, 4) => DType::U32,
        (TypeChar::Uint, 8) => DType::U64,
        (TypeChar::Bool, 1) => DType::Bool,
        (c, s) => bail!("npy dtype {c:?}{s} is not supported"),
    })
}

fn type_str(d: DType) -> &'static str {
    match d {
        DType::F32 => "<f4",
        DType::F16 => "<f2",
        DType::F64 => "<f8",
        DType::BF16 => "<u2",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::U8 => "|u1",
        DType::U16 => "<u2",
        DType::U32 => "<u4",
        DType::U64 => "<u8",
        DType::Bool => "|b1",
    }
}

/// Decodes one npy array (from a reader) into a tensor.
pub fn read_npy<R: std::io::Read>(npy: npyz::NpyFile<R>) -> Result<Tensor> {
    let dtype = dtype_of(&npy.dtype())?;
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    if npy.order() == npyz::Order::Fortran && shape.len() > 1 {
        bail!("Fortran-ordered npy arrays are not supported");
    }
    let ty = TensorType::new(dtype, shape);
    let n = ty.checked_len().ok_or_else(|| anyhow!("npy shape overflows"))?;
    macro_rules! read {
        ($t:ty) => {{
            let v: Vec<$t> = npy.into_vec()?;
            if v.len() != n {
                bail!("npy holds {} values, its shape needs {n}", v.len());
            }
            Tensor::from_slice(ty.shape.clone(), &v)?
        }};
    }
    Ok(match dtype {
        DType::F32 => read!(f32),
        DType::F64 => read!(f64),
        DType::I8 => read!(i8),
        DType::I16 => read!(i16),
        DType::I32 => read!(i32),
        DType::I64 => read!(i64),
        DType::U8 => read!(u8),
        DType::U16 => read!(u16),
        DType::U32 => read!(u32),
        DType::U64 => read!(u64),
        DType::Bool => {
            let v: Vec<bool> = npy.into_vec()?;
            Tensor::from_bools(ty.shape.clone(), &v)?
        }
        DType::F16 => read!(half::f16),
        DType::BF16 => unreachable!(),
    })
}

/// Reads every array of an npz file, sorted by name.
pub fn read_npz(path: &Path) -> Result<Vec<(String, Tensor)>> {
    let mut ar = NpzArchive::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    // The zip reader lists names in hash order, which changes from run to
    // run; sort them so that results never depend on it.
    let mut names: Vec<String> = ar.array_names().map(str::to_string).collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let npy = ar.by_name(&name)?.ok_or_else(|| anyhow!("array {name} vanished"))?;
        let t = read_npy(npy).with_context(|| format!("{}: array '{name}'", path.display()))?;
        out.push((name, t));
    }
    Ok(out)
}

/// Reads a single `.npy` file.
pub fn read_npy_file(path: &Path) -> Result<Tensor> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let npy = npyz::NpyFile::new(&bytes[..]).with_context(|| format!("{}", path.display()))?;
    read_npy(npy).with_context(|| format!("{}", path.display()))
}

/// Writes named tensors to an npz file.
pub fn write_npz(path: &Path, tensors: &[(String, Tensor)]) -> Result<()> {
    let mut w = NpzWriter::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    for (name, t) in tensors {
        let shape: Vec<u64> = t.shape().iter().map(|&d| d as u64).collect();
        let ts: npyz::TypeStr = type_str(t.dtype()).parse().map_err(|e| anyhow!("{e}"))?;
        let dtype = NpyDType::Plain(ts);
        macro_rules! write {
            ($t:ty) => {{
                let mut arr = w.array(name, Default::default())?.dtype(dtype).shape(&shape).begin_nd()?;
                arr.extend(t.as_slice::<$t>()?.iter().copied())?;
                arr.finish()?;
            }};
        }
        match t.dtype() {
            DType::F32 => write!(f32),
            DType::F64 => write!(f64),
            DType::I8 => write!(i8),
            DType::I16 => write!(i16),
            DType::I32 => write!(i32),
            DType::I64 => write!(i64),
            DType::U8 => write!(u8),
            DType::F16 => write!(half::f16),
            DType::U16 | DType::BF16 => {
                let v: &[u16] = bytemuck::cast_slice(t.bytes());
                let mut arr = w.array(name, Default::default())?.dtype(dtype).shape(&shape).begin_nd()?;
                arr.extend(v.iter().copied())?;
                arr.finish()?;
            }
            DType::U32 => write!(u32),
            DType::U64 => write!(u64),
            DType::Bool => {
                let v: Vec<bool> = t.as_slice::<u8>()?.iter().map(|&b| b != 0).collect();
                let mut arr = w.array(name, Default::default())?.dtype(dtype).shape(&shape).begin_nd()?;
                arr.extend(v.into_iter())?;
                arr.finish()?;
            }
        }
    }
    drop(w);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn npz_round_trips_every_dtype() {
        let dir = std::env::temp_dir().join(format!("trtc-npz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.npz");
        let tensors = vec![
            ("f".to_string(), Tensor::from_vec(vec![2, 2], vec![1.5f32, -2., 0., 7.]).unwrap()),
            ("d".to_string(), Tensor::from_vec(vec![3], vec![1e-300f64, 2., -3.]).unwrap()),
            ("i".to_string(), Tensor::from_vec(vec![2], vec![i64::MIN, 5]).unwrap()),
            ("u".to_string(), Tensor::from_vec(vec![1], vec![250u8]).unwrap()),
            ("b".to_string(), Tensor::from_bools(vec![3], &[true, false, true]).unwrap()),
            ("h".to_string(), Tensor::from_vec(vec![2], vec![half::f16::from_f32(0.5), half::f16::from_f32(-3.0)]).unwrap()),
            ("s".to_string(), Tensor::from_vec(Vec::<usize>::new(), vec![42i32]).unwrap()),
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
}
