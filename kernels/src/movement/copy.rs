//! Ops that are strided copies: Reshape, Transpose, Slice, Split, Concat,
//! Expand and Tile, planned as the CPU reference plans them (its
//! `Strided` plans, with the same collapsing of dimensions).

use super::{idx32, job_candidates, source, Elems, Job};
use crate::elementwise::map::MAX_RANK;
use crate::elementwise::{input, output};
use crate::{unsupported, KernelSource, LayerIo, Selection, SmLimits, Unsupported, COMMON};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::movement::{resolve_range, MovementOp};

const COPY: &str = include_str!("../../cuda/movement_copy.cu");
const FLAT: &str = include_str!("../../cuda/movement_flat.cu");
const FAMILY: &str = "movement_copy";

/// A strided copy in elements: the iteration space `shape` (row-major), the
/// strided side's `strides`, and both sides' offsets. With `scatter` the
/// input is the contiguous side, otherwise the output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Strided {
    pub shape: Vec<u64>,
    pub strides: Vec<i64>,
    pub src_off: i64,
    pub dst_off: i64,
    pub scatter: bool,
}

impl Strided {
    /// A gather from strided input into contiguous output.
    pub fn gather(shape: &[usize], strides: Vec<i64>, src_off: i64) -> Strided {
        Strided { shape: shape.iter().map(|&d| d as u64).collect(), strides, src_off, dst_off: 0, scatter: false }
    }

    fn n(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Drops unit dimensions and merges neighbours that stay contiguous on
    /// the strided side (the contiguous side always does).
    fn collapsed(&self) -> Strided {
        let (mut shape, mut strides): (Vec<u64>, Vec<i64>) = (Vec::new(), Vec::new());
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            if n == 1 {
                continue;
            }
            if let (Some(last_n), Some(last_s)) = (shape.last_mut(), strides.last_mut()) {
                if *last_s == s * n as i64 {
                    *last_n *= n;
                    *last_s = s;
                    continue;
                }
            }
            shape.push(n);
            strides.push(s);
        }
        Strided { shape, strides, ..self.clone() }
    }

    /// The most adjacent elements (of `narrow` bytes) one thread may move at
    /// once: groups of 8 or 16 bytes dividing the inner run, every stride
    /// and both offsets.
    fn group(&self, narrow: usize) -> usize {
        let Some((&inner, &inner_stride)) = self.shape.last().zip(self.strides.last()) else { return 1 };
        if inner_stride != 1 {
            return 1;
        }
        for bytes in [16, 8] {
            let k = bytes / narrow;
            if k < 2 || bytes % narrow != 0 {
                continue;
            }
            let k64 = k as i64;
            let divides = inner % k as u64 == 0
                && self.strides[..self.strides.len() - 1].iter().all(|s| s % k64 == 0)
                && self.src_off % k64 == 0
                && self.dst_off % k64 == 0;
            if divides {
                return k;
            }
        }
        1
    }

    /// The same copy in units of `k` elements (`k` from [`Strided::group`]).
    fn grouped(&self, k: usize) -> Strided {
        let k64 = k as i64;
        let last = self.shape.len() - 1;
        let mut g = self.clone();
        g.shape[last] /= k as u64;
        for s in &mut g.strides[..last] {
            *s /= k64;
        }
        g.src_off /= k64;
        g.dst_off /= k64;
        g
    }

    /// One past the largest offset either side reaches (in magnitude).
    fn extent(&self) -> u64 {
        let span: i128 = self.shape.iter().zip(&self.strides).map(|(&n, &s)| (n.max(1) as i128 - 1) * (s as i128).abs()).sum();
        let strided_off = if self.scatter { self.dst_off } else { self.src_off };
        let contiguous_off = if self.scatter { self.src_off } else { self.dst_off };
        let reach = (strided_off as i128).abs() + span + 1;
        reach.max(contiguous_off as i128 + self.n() as i128).min(u64::MAX as i128) as u64
    }
}

/// The flat byte copy kernel.
fn flat_kernel() -> KernelSource {
    KernelSource { entry: "trtc_movement_flat".into(), source: format!("{COMMON}\n{FLAT}") }
}

/// The job of `plan` from input `src` to output `dst` for elements of
/// `narrow` bytes, moving up to `max_group` elements at a time; `None` when
/// there is nothing to copy.
fn job(plan: &Strided, narrow: usize, src: u32, dst: u32, max_group: usize) -> Result<Option<Job>, Unsupported> {
    let n = plan.n();
    if n == 0 {
        return Ok(None);
    }
    let p = plan.collapsed();
    let (w, ins, outs) = (narrow as i64, KernelArg::Input(src), KernelArg::Output(dst));
    if p.shape.is_empty() || (p.shape.len() == 1 && p.strides[0] == 1) {
        let args = vec![outs, ins, KernelArg::I64(n as i64 * w), KernelArg::I64(p.dst_off * w), KernelArg::I64(p.src_off * w)];
        return Ok(Some(Job { kernel: flat_kernel(), args, n: (n * narrow as u64).div_ceil(16), vec: 1 }));
    }
    if p.shape.len() > MAX_RANK {
        return unsupported(format!("a copy over {} merged dimensions (at most {MAX_RANK})", p.shape.len()));
    }
    let k = p.group(narrow).min(max_group);
    // 32-bit indices must also hold the single-element offsets of the
    // misaligned fallback, so the bound is taken before grouping.
    let small = idx32(p.extent());
    let g = if k > 1 { p.grouped(k) } else { p };
    let rank = g.shape.len();
    let kernel = source(
        COPY,
        "trtc_movement_copy",
        Elems { narrow, vec: k },
        small,
        &[("RANK", rank.to_string()), ("SCATTER", (g.scatter as u8).to_string())],
    );
    let mut args = vec![outs, ins, KernelArg::I64(g.n() as i64), KernelArg::I64(g.src_off), KernelArg::I64(g.dst_off)];
    args.extend((1..MAX_RANK).map(|d| KernelArg::I64(g.shape.get(d).map_or(1, |&v| v as i64))));
    args.extend((0..MAX_RANK).map(|d| KernelArg::I64(g.strides.get(d).copied().unwrap_or(0))));
    Ok(Some(Job { kernel, args, n: g.n(), vec: k }))
}

/// The candidates of a layer made of copies `(plan, input, output)`.
pub(super) fn plan_candidates(plans: &[(Strided, u32, u32)], narrow: usize, limits: &SmLimits) -> Selection {
    let build = |max_group: usize| -> Result<Vec<Job>, Unsupported> {
        let mut jobs = Vec::new();
        for (p, src, dst) in plans {
            jobs.extend(job(p, narrow, *src, *dst, max_group)?);
        }
        if jobs.is_empty() {
            // Nothing to copy: one launch that copies nothing.
            let args = vec![KernelArg::Output(0), KernelArg::Input(0), KernelArg::I64(0), KernelArg::I64(0), KernelArg::I64(0)];
            jobs.push(Job { kernel: flat_kernel(), args, n: 0, vec: 1 });
        }
        Ok(jobs)
    };
    let wide = build(16)?;
    let mut cands = job_candidates(FAMILY, &wide, limits);
    if wide.iter().any(|j| j.vec > 1) {
        // The same copies one element per thread, with the default launch shape.
        let single = build(1)?;
        cands.extend(job_candidates(&format!("{FAMILY}_v1"), &single, limits).into_iter().take(1));
    }
    Ok(cands)
}

/// Row-major strides in elements.
pub(super) fn strides(shape: &[usize]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1] as i64;
    }
    s
}

pub(super) fn candidates(op: &MovementOp, io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let x = input(io, 0)?;
    let out = output(io, 0)?;
    let name = op.as_impl().name();
    if io.outputs.iter().any(|o| o.dtype != x.dtype) || io.inputs.iter().flatten().any(|t| t.dtype != x.dtype) {
        return unsupported(format!("{name}: dtypes differ"));
    }
    let narrow = x.dtype.size();
    let xs = strides(&x.shape);
    let plans: Vec<(Strided, u32, u32)> = match op {
        MovementOp::Reshape(_) | MovementOp::DynamicReshape(_) => {
            if x.len() != out.len() {
                return unsupported(format!("Reshape: {x} to {out}"));
            }
            vec![(Strided::gather(&[x.len()], vec![1], 0), 0, 0)]
        }
        MovementOp::Transpose(t) => {
            let mut sorted = t.perm.clone();
            sorted.sort_unstable();
            let shape: Option<Vec<usize>> = t.perm.iter().map(|&p| x.shape.get(p).copied()).collect();
            if sorted != (0..x.shape.len()).collect::<Vec<_>>() || shape.as_ref() != Some(&out.shape) {
                return unsupported(format!("Transpose {:?}: {x} to {out}", t.perm));
            }
            vec![(Strided::gather(&out.shape, t.perm.iter().map(|&p| xs[p]).collect(), 0), 0, 0)]
        }
        MovementOp::Slice(s) => {
            let n = s.axes.len();
            if s.starts.len() != n || s.ends.len() != n || s.steps.len() != n || s.steps.contains(&0) {
                return unsupported("Slice: malformed attributes");
            }
            let mut shape = x.shape.clone();
            let mut st = xs.clone();
            let mut off = 0i64;
            for i in 0..n {
                let a = s.axes[i];
                if a >= x.shape.len() {
                    return unsupported(format!("Slice: axis {a} out of range for {x}"));
                }
                // The runtime's own clamping, so the kernel reads what the
                // CPU op reads.
                let r = resolve_range(s.starts[i], s.ends[i], s.steps[i], x.shape[a]);
                off += r.start as i64 * xs[a];
                st[a] = r.step * xs[a];
                shape[a] = r.len;
            }
            if shape != out.shape {
                return unsupported(format!("Slice: {x} to {out}, expected {shape:?}"));
            }
            vec![(Strided::gather(&shape, st, off), 0, 0)]
        }
        MovementOp::Split(s) => {
            let a = s.axis;
            if a >= x.shape.len() || s.sizes.len() != io.outputs.len() || s.sizes.iter().sum::<usize>() != x.shape[a] {
                return unsupported(format!("Split {:?} on axis {a} of {x}", s.sizes));
            }
            let mut plans = Vec::new();
            let mut col = 0i64;
            for (j, (&size, o)) in s.sizes.iter().zip(&io.outputs).enumerate() {
                let mut shape = x.shape.clone();
                shape[a] = size;
                if o.shape != shape {
                    return unsupported(format!("Split: output {j} is {o}, expected {shape:?}"));
                }
                plans.push((Strided::gather(&shape, xs.clone(), col * xs[a]), 0, j as u32));
                col += size as i64;
            }
            plans
        }
        MovementOp::Concat(c) => {
            let a = c.axis;
            if a >= out.shape.len() {
                return unsupported(format!("Concat: axis {a} out of range for {out}"));
            }
            let os = strides(&out.shape);
            let mut plans = Vec::new();
            let mut col = 0i64;
            for (k, t) in io.inputs.iter().enumerate() {
                let Some(t) = t else { return unsupported(format!("Concat: input {k} is missing")) };
                let fits = t.shape.len() == out.shape.len() && (0..out.shape.len()).all(|d| d == a || t.shape[d] == out.shape[d]);
                if !fits {
                    return unsupported(format!("Concat: input {k} {t} does not fit {out}"));
                }
                let plan = Strided {
                    shape: t.shape.iter().map(|&d| d as u64).collect(),
                    strides: os.clone(),
                    src_off: 0,
                    dst_off: col * os[a],
                    scatter: true,
                };
                plans.push((plan, k as u32, 0));
                col += t.shape[a] as i64;
            }
            if col as usize != out.shape[a] {
                return unsupported(format!("Concat: inputs do not add up to {out}"));
            }
            plans
        }
        MovementOp::Expand(e) => {
            let (r, xr) = (e.shape.len(), x.shape.len());
            let fits =
                e.shape == out.shape && xr <= r && x.shape.iter().enumerate().all(|(i, &d)| d == 1 || d == e.shape[r - xr + i]);
            if !fits {
                return unsupported(format!("Expand: {x} to {out}"));
            }
            let st = (0..r).map(|d| if d < r - xr || x.shape[d - (r - xr)] == 1 { 0 } else { xs[d - (r - xr)] }).collect();
            vec![(Strided::gather(&out.shape, st, 0), 0, 0)]
        }
        MovementOp::Tile(t) => {
            let shape: Vec<usize> = x.shape.iter().zip(&t.repeats).map(|(&d, &r)| d * r).collect();
            if t.repeats.len() != x.shape.len() || shape != out.shape {
                return unsupported(format!("Tile {:?}: {x} to {out}", t.repeats));
            }
            // The output viewed as [r0, d0, r1, d1, ...]: repeats read with stride 0.
            let mut view = Vec::new();
            let mut st = Vec::new();
            for (d, (&size, &r)) in x.shape.iter().zip(&t.repeats).enumerate() {
                view.extend([r, size]);
                st.extend([0, xs[d]]);
            }
            vec![(Strided::gather(&view, st, 0), 0, 0)]
        }
        op => return unsupported(format!("{} is not a copy", op.as_impl().name())),
    };
    plan_candidates(&plans, narrow, limits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_plans_collapse_and_group() {
        // NCHW -> NHWC of [2, 8, 4, 4]: output [2, 4, 4, 8] reads channel with stride 16.
        let xs = strides(&[2, 8, 4, 4]);
        let p = Strided::gather(&[2, 4, 4, 8], vec![xs[0], xs[2], xs[3], xs[1]], 0).collapsed();
        assert_eq!(p.shape, vec![2, 16, 8]);
        assert_eq!(p.strides, vec![128, 1, 16]);
        assert_eq!(p.group(4), 1);
        // A channel slice keeps 16-element runs: groups of 4 f32.
        let s = Strided::gather(&[1, 4, 4, 4], xs.clone(), 2 * xs[1]).collapsed();
        assert_eq!((s.shape.clone(), s.strides.clone()), (vec![64], vec![1]));
        let c = Strided { shape: vec![2, 3, 8], strides: vec![48, 8, 1], src_off: 0, dst_off: 16, scatter: true }.collapsed();
        assert_eq!(c.shape, vec![2, 24]);
        assert_eq!(c.group(4), 4);
        assert_eq!(c.grouped(4).strides, vec![12, 1]);
    }
}
