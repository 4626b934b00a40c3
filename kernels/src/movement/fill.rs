//! Pad, Trilu and OneHot: copies that also write values not read from the
//! data (the pad value, zeros, the one-hot values); IndexGrid and SizeOf,
//! whose values follow the shapes bound in a run.

use super::{idx32, job_candidates, source, Elems, Job};
use crate::elementwise::map::MAX_RANK;
use crate::elementwise::{ctype, input, output};
use crate::{unsupported, LayerIo, Selection, SmLimits, Unsupported};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::movement::{type_shapes, IndexGrid, MovementOp, Pad, PadMode, SizeOf};
use trtc_runtime::{DType, TensorType};

const FILL: &str = include_str!("../../cuda/movement_fill.cu");

pub(super) fn candidates(op: &MovementOp, io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let (family, job) = match op {
        MovementOp::Pad(p) => ("movement_pad", pad_job(p, io)?),
        MovementOp::Trilu(t) => {
            let x = input(io, 0)?;
            let out = output(io, 0)?;
            let r = x.shape.len();
            if r < 2 || out != x {
                return unsupported(format!("Trilu: {x} to {out}"));
            }
            let kernel = source(
                FILL,
                "trtc_movement_trilu",
                Elems::single(x.dtype.size()),
                idx32(x.len() as u64),
                &[("KIND", "2".into())],
            );
            let args = vec![
                KernelArg::Output(0),
                KernelArg::Input(0),
                KernelArg::I64(x.len() as i64),
                KernelArg::I64(x.shape[r - 2].max(1) as i64),
                KernelArg::I64(x.shape[r - 1].max(1) as i64),
                KernelArg::I64(t.k),
                KernelArg::I32(t.upper as i32),
            ];
            ("movement_trilu", Job { kernel, args, n: x.len() as u64, vec: 1 })
        }
        MovementOp::OneHot(h) => ("movement_one_hot", one_hot_job(h.depth, h.axis, io)?),
        MovementOp::IndexGrid(g) => ("movement_index_grid", index_grid_job(g, io)?),
        MovementOp::SizeOf(s) => ("movement_sizes", sizes_job(s, io)?),
        op => return unsupported(format!("{} does not fill", op.as_impl().name())),
    };
    Ok(job_candidates(family, &[job], limits))
}

/// The integer types IndexGrid and SizeOf write.
fn index_dtype(out: &TensorType, op: &str) -> Result<(), Unsupported> {
    match out.dtype {
        DType::I64 | DType::I32 => Ok(()),
        d => unsupported(format!("{op}: {d} output")),
    }
}

/// IndexGrid at the shapes of its inputs: the sizes and steps are the ones
/// the CPU op resolves from them, passed as arguments.
fn index_grid_job(g: &IndexGrid, io: &LayerIo<'_>) -> Result<Job, Unsupported> {
    let out = output(io, 0)?;
    index_dtype(out, "IndexGrid")?;
    let (shape, steps) = g.resolve(&type_shapes(&io.inputs)).map_err(|e| Unsupported(e.to_string()))?;
    let r = shape.len();
    if shape != out.shape || out.dtype != g.dtype || r > MAX_RANK {
        return unsupported(format!("IndexGrid: {out} for a grid of {shape:?}"));
    }
    let kernel = source(
        FILL,
        "trtc_movement_index_grid",
        Elems::single(out.dtype.size()),
        idx32(out.len() as u64),
        &[("KIND", "4".into()), ("RANK", r.to_string())],
    );
    let mut args = vec![KernelArg::Output(0), KernelArg::I64(out.len() as i64), KernelArg::I64(g.offset)];
    args.extend((1..MAX_RANK).map(|d| KernelArg::I64(shape.get(d).map_or(1, |&n| n.max(1) as i64))));
    args.extend((0..MAX_RANK).map(|d| KernelArg::I64(steps.get(d).copied().unwrap_or(0))));
    Ok(Job { kernel, args, n: out.len() as u64, vec: 1 })
}

/// SizeOf at the shapes of its inputs: at most 8 sizes, passed as
/// arguments.
fn sizes_job(s: &SizeOf, io: &LayerIo<'_>) -> Result<Job, Unsupported> {
    let out = output(io, 0)?;
    index_dtype(out, "SizeOf")?;
    let sizes = s.sizes(&type_shapes(&io.inputs)).map_err(|e| Unsupported(e.to_string()))?;
    if sizes.len() != out.len() || sizes.len() > 8 {
        return unsupported(format!("SizeOf: {} sizes into {out} (at most 8)", sizes.len()));
    }
    if out.dtype == DType::I32 && sizes.iter().any(|&v| i32::try_from(v).is_err()) {
        return unsupported("SizeOf: a size does not fit an i32");
    }
    let kernel = source(FILL, "trtc_movement_sizes", Elems::single(out.dtype.size()), true, &[("KIND", "5".into())]);
    let mut args = vec![KernelArg::Output(0), KernelArg::I64(sizes.len() as i64)];
    args.extend((0..8).map(|k| KernelArg::I64(sizes.get(k).map_or(0, |&v| v as i64))));
    Ok(Job { kernel, args, n: sizes.len() as u64, vec: 1 })
}

/// One padded dimension: output size, padding before the kept region, kept
/// size, elements cropped from the input's start, input stride.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PadDim {
    out: u64,
    before: u64,
    kept: u64,
    crop: u64,
    stride: i64,
}

impl PadDim {
    /// Neither padded nor cropped: the coordinate maps to itself.
    fn plain(&self) -> bool {
        self.before == 0 && self.crop == 0 && self.kept == self.out
    }
}

/// The dimensions of a Pad as the CPU resolves them, with unit and adjacent
/// untouched dimensions merged; unsupported where the CPU op fails.
fn pad_dims(p: &Pad, shape: &[usize]) -> Result<Vec<PadDim>, Unsupported> {
    let r = shape.len();
    if p.pads.len() != 2 * r {
        return unsupported(format!("Pad: {} pads for rank {r}", p.pads.len()));
    }
    let xs = super::copy::strides(shape);
    let mut dims: Vec<PadDim> = Vec::new();
    for (i, &d) in shape.iter().enumerate() {
        let (b, e) = (p.pads[i], p.pads[r + i]);
        let (crop_b, crop_e) = ((-b).max(0) as u64, (-e).max(0) as u64);
        if crop_b + crop_e > d as u64 {
            return unsupported(format!("Pad: pads {b}, {e} crop more than dimension {i} ({d})"));
        }
        let kept = d as u64 - crop_b - crop_e;
        let (before, after) = (b.max(0) as u64, e.max(0) as u64);
        if p.mode != PadMode::Constant && kept == 0 && before + after > 0 {
            return unsupported(format!("Pad: cannot pad an empty dimension in {:?} mode", p.mode));
        }
        let dim = PadDim { out: before + kept + after, before, kept, crop: crop_b, stride: xs[i] };
        if dim.plain() && dim.out == 1 {
            continue;
        }
        match dims.last_mut() {
            Some(last) if last.plain() && dim.plain() => {
                last.out *= dim.out;
                last.kept = last.out;
                last.stride = dim.stride;
            }
            _ => dims.push(dim),
        }
    }
    Ok(dims)
}

fn pad_job(p: &Pad, io: &LayerIo<'_>) -> Result<Job, Unsupported> {
    let x = input(io, 0)?;
    let out = output(io, 0)?;
    let value = io.inputs.get(1).copied().flatten();
    if out.dtype != x.dtype || value.is_some_and(|v| v.dtype != x.dtype || v.len() != 1) {
        return unsupported(format!("Pad: {x} to {out}"));
    }
    let dims = pad_dims(p, &x.shape)?;
    let expect: Vec<usize> =
        x.shape.iter().enumerate().map(|(i, &d)| (d as i64 + p.pads[i] + p.pads[x.shape.len() + i]) as usize).collect();
    if expect != out.shape {
        return unsupported(format!("Pad: {x} to {out}"));
    }
    if dims.len() > MAX_RANK {
        return unsupported(format!("Pad: {} dimensions after merging (at most {MAX_RANK})", dims.len()));
    }
    let mode = match p.mode {
        PadMode::Constant => 0,
        PadMode::Reflect => 1,
        PadMode::Edge => 2,
        PadMode::Wrap => 3,
    };
    let has_value = p.mode == PadMode::Constant && value.is_some();
    let defines = [
        ("KIND", "1".to_string()),
        ("MODE", mode.to_string()),
        ("RANK", dims.len().to_string()),
        ("HAS_VALUE", (has_value as u8).to_string()),
    ];
    let n = out.len() as u64;
    let kernel = source(FILL, "trtc_movement_pad", Elems::single(x.dtype.size()), idx32(n.max(x.len() as u64)), &defines);
    let mut args = vec![KernelArg::Output(0), KernelArg::Input(0)];
    if has_value {
        args.push(KernelArg::Input(1));
    }
    args.push(KernelArg::I64(n as i64));
    for d in 0..MAX_RANK {
        let v = dims.get(d).copied().unwrap_or(PadDim { out: 1, before: 0, kept: 1, crop: 0, stride: 0 });
        args.extend([v.out as i64, v.before as i64, v.kept as i64, v.crop as i64, v.stride].map(KernelArg::I64));
    }
    Ok(Job { kernel, args, n, vec: 1 })
}

/// The integer value of an index of `t`'s dtype at pointer `p`, as the CPU's
/// `to_f64().trunc() as i64` (exact for every index a depth can reach).
fn index_value(t: &TensorType) -> Result<&'static str, Unsupported> {
    Ok(match t.dtype {
        DType::F32 | DType::F16 => "trtc_f2i<long long>(ld(p))",
        DType::U64 => "(*(p) > 9223372036854775807ull ? 9223372036854775807LL : (long long)*(p))",
        DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::U16 | DType::U32 => "((long long)*(p))",
        d => return unsupported(format!("OneHot: {d} indices")),
    })
}

fn one_hot_job(depth: usize, axis: usize, io: &LayerIo<'_>) -> Result<Job, Unsupported> {
    let idx = input(io, 0)?;
    let values = input(io, 1)?;
    let out = output(io, 0)?;
    let mut shape = idx.shape.clone();
    if axis > shape.len() || values.len() != 2 || out.dtype != values.dtype {
        return unsupported(format!("OneHot: {idx} with values {values} to {out}"));
    }
    shape.insert(axis, depth);
    if shape != out.shape {
        return unsupported(format!("OneHot: {idx} to {out}"));
    }
    let defines = [
        ("KIND", "3".to_string()),
        ("INDEX_T", ctype(idx.dtype)?.to_string()),
        ("INDEX_VALUE(p)", index_value(idx)?.to_string()),
    ];
    let n = out.len() as u64;
    let kernel =
        source(FILL, "trtc_movement_one_hot", Elems::single(values.dtype.size()), idx32(n.max(idx.len() as u64)), &defines);
    let inner: usize = idx.shape[axis..].iter().product();
    let args = vec![
        KernelArg::Output(0),
        KernelArg::Input(0),
        KernelArg::Input(1),
        KernelArg::I64(n as i64),
        KernelArg::I64(inner.max(1) as i64),
        KernelArg::I64(depth.max(1) as i64),
    ];
    Ok(Job { kernel, args, n, vec: 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spatial_padding_merges_batch_and_channels() {
        let p = Pad { pads: vec![0, 0, 1, 1, 0, 0, 1, 1], mode: PadMode::Constant };
        let dims = pad_dims(&p, &[2, 3, 4, 4]).unwrap();
        assert_eq!(dims.len(), 3);
        assert_eq!((dims[0].out, dims[0].stride), (6, 16));
        assert_eq!((dims[1].out, dims[1].before, dims[1].kept), (6, 1, 4));
    }
}
