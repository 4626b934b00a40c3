//! Index-driven copies: Gather, GatherElements, GatherND and
//! ReverseSequence. Indices are i32 or i64 tensors read on the device;
//! out-of-range ones trap (see the family's documentation).

use super::{idx32, job_candidates, source, Elems, Job};
use crate::elementwise::map::MAX_RANK;
use crate::elementwise::{input, output};
use crate::{unsupported, LayerIo, Selection, SmLimits, Unsupported};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::movement::MovementOp;
use trtc_runtime::{DType, TensorType};

const GATHER: &str = include_str!("../../cuda/movement_gather.cu");

/// The C type of an index tensor.
fn index_type(t: &TensorType, what: &str) -> Result<&'static str, Unsupported> {
    match t.dtype {
        DType::I32 => Ok("int"),
        DType::I64 => Ok("long long"),
        d => unsupported(format!("{what}: {d} indices")),
    }
}

/// The most adjacent elements of `narrow` bytes a thread may move at once
/// when every run it moves is a multiple of `run` elements.
fn group(run: usize, narrow: usize) -> usize {
    for bytes in [16, 8] {
        let k = bytes / narrow;
        if k >= 2 && run.is_multiple_of(k) {
            return k;
        }
    }
    1
}

fn product(dims: &[usize]) -> usize {
    dims.iter().product()
}

pub(super) fn candidates(op: &MovementOp, io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let family = format!("movement_{}", family_name(op));
    let job = gather_job(op, io, 16)?;
    let mut cands = job_candidates(&family, std::slice::from_ref(&job), limits);
    if job.vec > 1 {
        // One element per thread, with the default launch shape.
        let single = gather_job(op, io, 1)?;
        cands.extend(job_candidates(&format!("{family}_v1"), &[single], limits).into_iter().take(1));
    }
    Ok(cands)
}

/// The launch of an index gather moving at most `max_group` elements at a
/// time.
fn gather_job(op: &MovementOp, io: &LayerIo<'_>, max_group: usize) -> Result<Job, Unsupported> {
    let group = |run: usize, narrow: usize| group(run, narrow).min(max_group);
    let x = input(io, 0)?;
    let idx = input(io, 1)?;
    let out = output(io, 0)?;
    let name = op.as_impl().name();
    if out.dtype != x.dtype {
        return unsupported(format!("{name}: {} data, {} output", x.dtype, out.dtype));
    }
    let it = index_type(idx, name)?;
    let narrow = x.dtype.size();
    let small = idx32(x.len().max(out.len()).max(idx.len()) as u64);
    let n_out = out.len() as u64;
    Ok(match op {
        MovementOp::Gather(g) => {
            let a = g.axis;
            if a >= x.shape.len() {
                return unsupported(format!("Gather: axis {a} out of range for {x}"));
            }
            let mut shape = x.shape[..a].to_vec();
            shape.extend(&idx.shape);
            shape.extend(&x.shape[a + 1..]);
            if shape != out.shape {
                return unsupported(format!("Gather: {x} by {idx} to {out}"));
            }
            let inner = product(&x.shape[a + 1..]);
            let k = group(inner, narrow);
            let kernel = source(
                GATHER,
                "trtc_movement_gather",
                Elems { narrow, vec: k },
                small,
                &[("KIND", "1".into()), ("INDEX_T", it.into())],
            );
            let n = n_out / k as u64;
            let args = vec![
                KernelArg::Output(0),
                KernelArg::Input(0),
                KernelArg::Input(1),
                KernelArg::I64(n as i64),
                KernelArg::I64((inner / k) as i64),
                KernelArg::I64(idx.len() as i64),
                KernelArg::I64(x.shape[a] as i64),
            ];
            Job { kernel, args, n, vec: k }
        }
        MovementOp::GatherElements(g) => {
            let (a, r) = (g.axis, x.shape.len());
            let fits =
                a < r && idx.shape.len() == r && (0..r).all(|d| d == a || idx.shape[d] <= x.shape[d]) && out.shape == idx.shape;
            if !fits {
                return unsupported(format!("GatherElements: {x} by {idx} to {out}"));
            }
            if r > MAX_RANK {
                return unsupported(format!("GatherElements: rank {r} (at most {MAX_RANK})"));
            }
            let mut xs = super::copy::strides(&x.shape);
            let axis_stride = xs[a];
            xs[a] = 0;
            let kernel = source(
                GATHER,
                "trtc_movement_gather_elements",
                Elems::single(narrow),
                small,
                &[("KIND", "2".into()), ("INDEX_T", it.into()), ("RANK", r.to_string())],
            );
            let mut args = vec![
                KernelArg::Output(0),
                KernelArg::Input(0),
                KernelArg::Input(1),
                KernelArg::I64(n_out as i64),
                KernelArg::I64(x.shape[a] as i64),
                KernelArg::I64(axis_stride),
            ];
            args.extend((1..MAX_RANK).map(|d| KernelArg::I64(idx.shape.get(d).map_or(1, |&v| v as i64))));
            args.extend((0..MAX_RANK).map(|d| KernelArg::I64(xs.get(d).copied().unwrap_or(0))));
            Job { kernel, args, n: n_out, vec: 1 }
        }
        MovementOp::GatherND(g) => {
            let b = g.batch_dims;
            let q = idx.shape.len();
            let Some(&m) = idx.shape.last() else { return unsupported("GatherND: scalar indices") };
            if b >= q || b > x.shape.len() || x.shape[..b] != idx.shape[..b] || b + m > x.shape.len() {
                return unsupported(format!("GatherND: {x} by {idx} with batch_dims {b}"));
            }
            let mut shape = idx.shape[..q - 1].to_vec();
            shape.extend(&x.shape[b + m..]);
            if shape != out.shape {
                return unsupported(format!("GatherND: {x} by {idx} to {out}"));
            }
            if m > MAX_RANK {
                return unsupported(format!("GatherND: index tuples of {m} (at most {MAX_RANK})"));
            }
            let block = product(&x.shape[b + m..]);
            let k = group(block, narrow);
            let xs = super::copy::strides(&x.shape);
            let kernel = source(
                GATHER,
                "trtc_movement_gather_nd",
                Elems { narrow, vec: k },
                small,
                &[("KIND", "3".into()), ("INDEX_T", it.into()), ("M", m.to_string())],
            );
            let n = n_out / k as u64;
            let mut args = vec![
                KernelArg::Output(0),
                KernelArg::Input(0),
                KernelArg::Input(1),
                KernelArg::I64(n as i64),
                KernelArg::I64((block / k).max(1) as i64),
                KernelArg::I64(product(&idx.shape[b..q - 1]).max(1) as i64),
                KernelArg::I64((product(&x.shape[b..]) / k) as i64),
            ];
            args.extend((0..MAX_RANK).map(|j| KernelArg::I64(if j < m { x.shape[b + j] as i64 } else { 1 })));
            args.extend((0..MAX_RANK).map(|j| KernelArg::I64(if j < m { xs[b + j] / k as i64 } else { 0 })));
            Job { kernel, args, n, vec: k }
        }
        MovementOp::ReverseSequence(r) => {
            let ok = x.shape.len() >= 2
                && r.batch_axis <= 1
                && r.time_axis <= 1
                && r.batch_axis != r.time_axis
                && idx.shape == [x.shape[r.batch_axis]]
                && out.shape == x.shape;
            if !ok {
                return unsupported(format!("ReverseSequence: {x} with lengths {idx}"));
            }
            let run = product(&x.shape[2..]);
            let k = group(run, narrow);
            let kernel = source(
                GATHER,
                "trtc_movement_reverse_sequence",
                Elems { narrow, vec: k },
                small,
                &[("KIND", "4".into()), ("INDEX_T", it.into())],
            );
            let n = n_out / k as u64;
            let args = vec![
                KernelArg::Output(0),
                KernelArg::Input(0),
                KernelArg::Input(1),
                KernelArg::I64(n as i64),
                KernelArg::I64(x.shape[1] as i64),
                KernelArg::I64((run / k).max(1) as i64),
                KernelArg::I64(x.shape[r.time_axis] as i64),
                KernelArg::I32((r.batch_axis == 0) as i32),
            ];
            Job { kernel, args, n, vec: k }
        }
        op => return unsupported(format!("{} is not an index gather", op.as_impl().name())),
    })
}

fn family_name(op: &MovementOp) -> &'static str {
    match op {
        MovementOp::Gather(_) => "gather",
        MovementOp::GatherElements(_) => "gather_elements",
        MovementOp::GatherND(_) => "gather_nd",
        _ => "reverse_sequence",
    }
}
