//! A tensor seen as a set of independent reductions: `nq` outputs of `n`
//! reduced elements each, with the element (q, r) at `base(q) + off(r)`.
//!
//! As the CPU op's `ReducePlan` does, axes of size 1 are dropped and
//! adjacent axes that are all reduced (or all kept) merged. What is left
//! must be at most two kept and two reduced dims, in any interleaving (e.g.
//! `[kept, reduced, kept]` for a middle axis, `[reduced, kept, reduced]`
//! for per-channel statistics over N, H, W): the output index q splits into
//! (q1, q0) and the reduced index r into (r1, r0), each part with its own
//! element stride.

use trtc_runtime::kernels::KernelArg;

/// The largest reduced count or index a kernel takes as an `int`, with
/// headroom for a block-stride step past the end.
pub const MAX_N: u64 = 1 << 30;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisView {
    /// Number of outputs.
    pub nq: u64,
    /// Size of the inner kept dim, and the strides of the outer and inner
    /// kept dims.
    pub q0n: u64,
    pub sq1: u64,
    pub sq0: u64,
    /// Number of reduced elements per output.
    pub n: u64,
    /// Size of the inner reduced dim, and the strides of the outer and
    /// inner reduced dims.
    pub r0n: u64,
    pub sr1: u64,
    pub sr0: u64,
    /// Whether the innermost dim (of more than one element) is reduced: the
    /// reduced elements of an output are then contiguous runs, so a team of
    /// threads per output reads coalesced; otherwise adjacent outputs are
    /// adjacent in memory.
    pub inner_reduced: bool,
}

impl AxisView {
    /// The view of `shape` reduced over `axes` (distinct, in range), or
    /// `None` when the merged dims are more than two kept and two reduced.
    pub fn new(shape: &[usize], axes: &[usize]) -> Option<AxisView> {
        let mut merged: Vec<(u64, bool)> = Vec::new();
        for (i, &d) in shape.iter().enumerate() {
            if d == 1 {
                continue;
            }
            let reduced = axes.contains(&i);
            match merged.last_mut() {
                Some((size, r)) if *r == reduced => *size *= d as u64,
                _ => merged.push((d as u64, reduced)),
            }
        }
        let mut strides = vec![0u64; merged.len()];
        let mut s = 1u64;
        for i in (0..merged.len()).rev() {
            strides[i] = s;
            s *= merged[i].0;
        }
        let pick = |reduced: bool| -> Vec<(u64, u64)> {
            merged.iter().zip(&strides).filter(|((_, r), _)| *r == reduced).map(|(&(n, _), &st)| (n, st)).collect()
        };
        let split = |dims: Vec<(u64, u64)>| -> Option<((u64, u64), (u64, u64))> {
            match dims.as_slice() {
                [] => Some(((1, 0), (1, 0))),
                [a] => Some(((1, 0), *a)),
                [a, b] => Some((*a, *b)),
                _ => None,
            }
        };
        let ((q1n, sq1), (q0n, sq0)) = split(pick(false))?;
        let ((r1n, sr1), (r0n, sr0)) = split(pick(true))?;
        Some(AxisView {
            nq: q1n * q0n,
            q0n,
            sq1,
            sq0,
            n: r1n * r0n,
            r0n,
            sr1,
            sr0,
            inner_reduced: merged.last().is_some_and(|m| m.1),
        })
    }

    /// Whether the reduced elements span two merged dims (the kernels'
    /// `RED2`).
    pub fn red2(&self) -> bool {
        self.n != self.r0n
    }

    /// Whether the kernels can take the view: counts that fit an `int`.
    pub fn fits_int(&self) -> bool {
        self.n <= MAX_N
    }

    /// The kernels' `VIEW_PARAMS`, in order.
    pub fn args(&self) -> Vec<KernelArg> {
        vec![
            KernelArg::I64(self.nq as i64),
            KernelArg::I64(self.q0n as i64),
            KernelArg::I64(self.sq1 as i64),
            KernelArg::I64(self.sq0 as i64),
            KernelArg::I32(self.n as i32),
            KernelArg::I32(self.r0n as i32),
            KernelArg::I64(self.sr1 as i64),
            KernelArg::I64(self.sr0 as i64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offset of element (q, r), as the kernels compute it.
    fn offset(v: &AxisView, q: u64, r: u64) -> u64 {
        let (q1, q0) = (q / v.q0n, q % v.q0n);
        let (r1, r0) = (r / v.r0n, r % v.r0n);
        q1 * v.sq1 + q0 * v.sq0 + r1 * v.sr1 + r0 * v.sr0
    }

    /// Every (q, r) of the view, mapped to offsets, must hit each element
    /// of the tensor once, and the outputs must be in the order of the kept
    /// dims (what a reduction with contiguous output writes at q).
    fn check(shape: &[usize], axes: &[usize]) {
        let v = AxisView::new(shape, axes).unwrap();
        let len: usize = shape.iter().product();
        assert_eq!((v.nq * v.n) as usize, len);
        let mut seen = vec![false; len];
        for q in 0..v.nq {
            for r in 0..v.n {
                let o = offset(&v, q, r) as usize;
                assert!(!seen[o], "{shape:?} {axes:?}: offset {o} twice");
                seen[o] = true;
                // The kept coordinates of o, flattened, are q.
                let mut rest = o;
                let mut kept = 0usize;
                let mut coords = vec![0usize; shape.len()];
                for d in (0..shape.len()).rev() {
                    coords[d] = rest % shape[d];
                    rest /= shape[d];
                }
                for (d, &c) in coords.iter().enumerate() {
                    if !axes.contains(&d) {
                        kept = kept * shape[d] + c;
                    }
                }
                assert_eq!(kept as u64, q, "{shape:?} {axes:?}");
            }
        }
    }

    #[test]
    fn views_cover_each_element_once() {
        check(&[2, 3, 4], &[1]);
        check(&[2, 3, 4], &[0, 2]);
        check(&[2, 3, 4, 5], &[0, 2, 3]);
        check(&[2, 3, 4, 5], &[1, 3]);
        check(&[2, 3, 4, 5], &[0, 2]);
        check(&[2, 1, 4, 5], &[0, 2]);
        check(&[3, 5], &[]);
        check(&[3, 5], &[0, 1]);
        check(&[], &[]);
    }

    #[test]
    fn too_many_runs_are_refused() {
        assert!(AxisView::new(&[2, 3, 4, 5, 6], &[1, 3]).is_none());
        assert!(AxisView::new(&[2, 3, 4, 5, 6], &[0, 2, 4]).is_none());
        assert!(AxisView::new(&[2, 1, 4, 5, 6], &[0, 2, 4]).is_some());
    }
}
