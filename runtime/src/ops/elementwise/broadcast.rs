//! Loops over inputs broadcast numpy-style to an output shape.
//!
//! The output shape is simplified first: size-1 dimensions are dropped and
//! adjacent dimensions are merged wherever every input is either broadcast
//! along both or along neither. What remains is an outer odometer over a few
//! dimensions and an innermost run in which each input is either contiguous
//! (stride 1) or a single repeated value (stride 0). The inner runs are plain
//! slice loops that the compiler vectorizes: `[N,C,H,W] + [1,C,1,1]` becomes
//! `N*C` runs of `H*W` elements against one scalar, `[B,S,H] + [H]` becomes
//! `B*S` runs of `H` elements against the same row.

use crate::ensure_op;
use crate::error::Result;

/// The simplified iteration space of `N` inputs broadcast to one output.
pub(super) struct Plan<const N: usize> {
    /// Merged output dimensions, outermost first; never empty.
    dims: Vec<usize>,
    /// For each input, its element stride along each merged dimension (0
    /// where the input is broadcast).
    strides: [Vec<usize>; N],
}

impl<const N: usize> Plan<N> {
    /// Plans reading inputs of `shapes` broadcast to `out`. Fails unless each
    /// shape broadcasts to `out` exactly.
    pub(super) fn new(shapes: [&[usize]; N], out: &[usize]) -> Result<Plan<N>> {
        let rank = out.len();
        for s in &shapes {
            ensure_op!(s.len() <= rank, "shape {s:?} does not broadcast to {out:?}");
            let off = rank - s.len();
            for (i, &d) in s.iter().enumerate() {
                ensure_op!(d == out[off + i] || d == 1, "shape {s:?} does not broadcast to {out:?}");
            }
        }
        // Whether input k is broadcast along output dimension d.
        let broadcast = |k: usize, d: usize| {
            let s = shapes[k];
            let off = rank - s.len();
            d < off || s[d - off] == 1
        };
        // Merge adjacent non-trivial dimensions with the same broadcast pattern.
        let mut dims: Vec<usize> = Vec::new();
        let mut patterns: Vec<[bool; N]> = Vec::new();
        for (d, &size) in out.iter().enumerate() {
            if size == 1 {
                continue;
            }
            let pattern: [bool; N] = std::array::from_fn(|k| broadcast(k, d));
            match (dims.last_mut(), patterns.last()) {
                (Some(last), Some(p)) if *p == pattern => *last *= size,
                _ => {
                    dims.push(size);
                    patterns.push(pattern);
                }
            }
        }
        if dims.is_empty() {
            dims.push(1);
            patterns.push([true; N]);
        }
        let strides = std::array::from_fn(|k| {
            let mut s = vec![0usize; dims.len()];
            let mut acc = 1usize;
            for d in (0..dims.len()).rev() {
                if !patterns[d][k] {
                    s[d] = acc;
                    acc *= dims[d];
                }
            }
            s
        });
        Ok(Plan { dims, strides })
    }

    /// Length of the innermost run.
    pub(super) fn inner(&self) -> usize {
        self.dims[self.dims.len() - 1]
    }

    /// Whether input `k` is contiguous (rather than repeated) along the run.
    pub(super) fn contiguous(&self, k: usize) -> bool {
        self.strides[k][self.dims.len() - 1] == 1
    }

    /// Calls `f(out_offset, input_offsets)` for the start of every innermost
    /// run, in output order. Always inlined, so that `f` is compiled for
    /// the caller's target features (see `binary::arith_widest`).
    #[inline(always)]
    pub(super) fn for_each_run(&self, mut f: impl FnMut(usize, [usize; N])) {
        let outer = &self.dims[..self.dims.len() - 1];
        let count: usize = outer.iter().product();
        let inner = self.inner();
        if count == 0 || inner == 0 {
            return;
        }
        let mut idx = vec![0usize; outer.len()];
        let mut offs = [0usize; N];
        for run in 0..count {
            f(run * inner, offs);
            for d in (0..outer.len()).rev() {
                idx[d] += 1;
                for (off, s) in offs.iter_mut().zip(&self.strides) {
                    *off += s[d];
                }
                if idx[d] < outer[d] {
                    break;
                }
                for (off, s) in offs.iter_mut().zip(&self.strides) {
                    *off -= s[d] * outer[d];
                }
                idx[d] = 0;
            }
        }
    }
}

fn check_len(what: &str, len: usize, shape: &[usize]) -> Result<()> {
    let want = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    ensure_op!(want == Some(len), "{what} holds {len} elements but its shape is {shape:?}");
    Ok(())
}

/// `out[i] = f(a[i])` over equally long slices.
#[inline(always)]
pub(super) fn map1<A: Copy, O>(a: &[A], out: &mut [O], f: impl Fn(A) -> O) -> Result<()> {
    ensure_op!(a.len() == out.len(), "input holds {} elements, output {}", a.len(), out.len());
    for (o, &x) in out.iter_mut().zip(a) {
        *o = f(x);
    }
    Ok(())
}

/// `out = f(a, b)` with `a` and `b` broadcast to `out_shape`.
#[inline(always)]
pub(super) fn map2<A: Copy, B: Copy, O: Copy>(
    (a, a_shape): (&[A], &[usize]),
    (b, b_shape): (&[B], &[usize]),
    out: &mut [O],
    out_shape: &[usize],
    f: impl Fn(A, B) -> O,
) -> Result<()> {
    check_len("first input", a.len(), a_shape)?;
    check_len("second input", b.len(), b_shape)?;
    check_len("output", out.len(), out_shape)?;
    if a_shape == out_shape && b_shape == out_shape {
        for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
            *o = f(x, y);
        }
        return Ok(());
    }
    let plan = Plan::new([a_shape, b_shape], out_shape)?;
    let n = plan.inner();
    let (ca, cb) = (plan.contiguous(0), plan.contiguous(1));
    plan.for_each_run(|oo, [ia, ib]| {
        let o = &mut out[oo..oo + n];
        match (ca, cb) {
            (true, true) => {
                for ((o, &x), &y) in o.iter_mut().zip(&a[ia..ia + n]).zip(&b[ib..ib + n]) {
                    *o = f(x, y);
                }
            }
            (true, false) => {
                let y = b[ib];
                for (o, &x) in o.iter_mut().zip(&a[ia..ia + n]) {
                    *o = f(x, y);
                }
            }
            (false, true) => {
                let x = a[ia];
                for (o, &y) in o.iter_mut().zip(&b[ib..ib + n]) {
                    *o = f(x, y);
                }
            }
            (false, false) => {
                o.fill(f(a[ia], b[ib]));
            }
        }
    });
    Ok(())
}

/// `out = f(a, b, c)` with all three broadcast to `out_shape`.
#[inline(always)]
pub(super) fn map3<A: Copy, B: Copy, C: Copy, O>(
    (a, a_shape): (&[A], &[usize]),
    (b, b_shape): (&[B], &[usize]),
    (c, c_shape): (&[C], &[usize]),
    out: &mut [O],
    out_shape: &[usize],
    f: impl Fn(A, B, C) -> O,
) -> Result<()> {
    check_len("first input", a.len(), a_shape)?;
    check_len("second input", b.len(), b_shape)?;
    check_len("third input", c.len(), c_shape)?;
    check_len("output", out.len(), out_shape)?;
    if a_shape == out_shape && b_shape == out_shape && c_shape == out_shape {
        for (((o, &x), &y), &z) in out.iter_mut().zip(a).zip(b).zip(c) {
            *o = f(x, y, z);
        }
        return Ok(());
    }
    let plan = Plan::new([a_shape, b_shape, c_shape], out_shape)?;
    let n = plan.inner();
    let step = |k: usize| usize::from(plan.contiguous(k));
    let (sa, sb, sc) = (step(0), step(1), step(2));
    plan.for_each_run(|oo, [ia, ib, ic]| {
        for (j, o) in out[oo..oo + n].iter_mut().enumerate() {
            *o = f(a[ia + j * sa], b[ib + j * sb], c[ic + j * sc]);
        }
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_broadcast_merges_spatial_dims() {
        let plan = Plan::new([&[2, 3, 4, 5][..], &[1, 3, 1, 1][..]], &[2, 3, 4, 5]).unwrap();
        assert_eq!(plan.dims, vec![2, 3, 20]);
        assert_eq!(plan.strides[0], vec![60, 20, 1]);
        assert_eq!(plan.strides[1], vec![0, 1, 0]);
    }

    #[test]
    fn row_broadcast_is_one_run_per_row() {
        let plan = Plan::new([&[2, 4, 8][..], &[8][..]], &[2, 4, 8]).unwrap();
        assert_eq!(plan.dims, vec![8, 8]);
        assert!(plan.contiguous(0) && plan.contiguous(1));
        assert_eq!(plan.strides[1], vec![0, 1]);
    }

    #[test]
    fn outer_product() {
        let a = [1, 2, 3];
        let b = [10, 20];
        let mut out = [0; 6];
        map2((&a[..], &[3, 1][..]), (&b[..], &[2][..]), &mut out, &[3, 2], |x, y| x + y).unwrap();
        assert_eq!(out, [11, 21, 12, 22, 13, 23]);
    }

    #[test]
    fn scalars_and_empty_tensors() {
        let mut out = [0; 1];
        map2((&[2][..], &[][..]), (&[3][..], &[1][..]), &mut out, &[1], |x, y| x * y).unwrap();
        assert_eq!(out, [6]);
        let mut none: [i32; 0] = [];
        map2((&[][..], &[0, 2][..]), (&[1, 2][..], &[2][..]), &mut none, &[0, 2], |x: i32, y: i32| x + y).unwrap();
    }

    #[test]
    fn three_way_broadcast() {
        let c = [1u8, 0];
        let x = [1, 2, 3, 4];
        let y = [9];
        let mut out = [0; 4];
        map3(
            (&c[..], &[2][..]),
            (&x[..], &[2, 2][..]),
            (&y[..], &[][..]),
            &mut out,
            &[2, 2],
            |c, x, y| {
                if c != 0 {
                    x
                } else {
                    y
                }
            },
        )
        .unwrap();
        assert_eq!(out, [1, 9, 3, 9]);
    }
}
