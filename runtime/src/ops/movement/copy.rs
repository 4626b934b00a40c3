//! Byte-level copy kernels shared by the movement ops. Movement ops never look
//! at element values, so they work on raw bytes with an element size; the
//! kernels collapse contiguous dimensions and copy whole inner runs with
//! `copy_from_slice` whenever both sides are contiguous there.

use crate::error::{Error, Result};
use crate::tensor::TensorView;

/// A strided copy plan: `shape` walked in row-major order, reading the source
/// at `src_off + Σ idx·src_strides` and writing the destination at
/// `dst_off + Σ idx·dst_strides` (all in elements).
#[derive(Clone, Debug)]
pub struct Strided {
    pub shape: Vec<usize>,
    pub src_strides: Vec<isize>,
    pub dst_strides: Vec<isize>,
    pub src_off: isize,
    pub dst_off: isize,
}

impl Strided {
    /// Drops unit dimensions and merges neighbours that are contiguous on
    /// both sides, so that the innermost loop is as long as possible.
    fn collapsed(&self) -> Strided {
        let mut shape: Vec<usize> = Vec::with_capacity(self.shape.len());
        let mut ss: Vec<isize> = Vec::with_capacity(self.shape.len());
        let mut ds: Vec<isize> = Vec::with_capacity(self.shape.len());
        for i in 0..self.shape.len() {
            let (n, s, d) = (self.shape[i], self.src_strides[i], self.dst_strides[i]);
            if n == 1 {
                continue;
            }
            if let (Some(&ln), Some(&ls), Some(&ld)) = (shape.last(), ss.last(), ds.last()) {
                // The previous (outer) dimension steps over exactly one run of this one.
                if ls == s * n as isize && ld == d * n as isize {
                    let k = shape.len() - 1;
                    shape[k] = ln * n;
                    ss[k] = s;
                    ds[k] = d;
                    continue;
                }
            }
            shape.push(n);
            ss.push(s);
            ds.push(d);
        }
        Strided { shape, src_strides: ss, dst_strides: ds, src_off: self.src_off, dst_off: self.dst_off }
    }
}

/// Side of the square tiles of the 2-D transpose kernel, in elements.
const TILE: usize = 16;

/// Runs a strided copy of elements of `esize` bytes from `src` into `dst`.
/// Fails (never panics) when the plan would step outside either buffer.
pub fn strided_copy(src: &[u8], dst: &mut [u8], esize: usize, plan: &Strided) -> Result<()> {
    if plan.shape.contains(&0) {
        return Ok(());
    }
    let p = plan.collapsed();
    check_bounds(&p.shape, &p.src_strides, p.src_off, src.len() / esize.max(1), "source")?;
    check_bounds(&p.shape, &p.dst_strides, p.dst_off, dst.len() / esize.max(1), "destination")?;
    let rank = p.shape.len();
    if rank == 0 {
        let (s, d) = (p.src_off as usize * esize, p.dst_off as usize * esize);
        dst[d..d + esize].copy_from_slice(&src[s..s + esize]);
        return Ok(());
    }
    let last = rank - 1;
    let n = p.shape[last];
    let (ss, ds) = (p.src_strides[last], p.dst_strides[last]);
    let outer = &p.shape[..last];
    if ss == 1 && ds == 1 {
        let run = n * esize;
        for_each_offset(outer, &p.src_strides[..last], &p.dst_strides[..last], p.src_off, p.dst_off, |s, d| {
            let (s, d) = (s as usize * esize, d as usize * esize);
            dst[d..d + run].copy_from_slice(&src[s..s + run]);
        });
        return Ok(());
    }
    macro_rules! typed {
        ($t:ty) => {{
            let (Ok(sv), Ok(dv)) = (bytemuck::try_cast_slice::<u8, $t>(src), bytemuck::try_cast_slice_mut::<u8, $t>(dst)) else {
                return strided_bytes(src, dst, esize, &p);
            };
            if rank >= 2 && ds == 1 && p.src_strides[last - 1] == 1 {
                // A 2-D transpose in the two innermost dimensions: copy in
                // square tiles so that reads and writes both stay in cache.
                let (rows, dr) = (p.shape[last - 1], p.dst_strides[last - 1]);
                let outer2 = &p.shape[..last - 1];
                for_each_offset(outer2, &p.src_strides[..last - 1], &p.dst_strides[..last - 1], p.src_off, p.dst_off, |s, d| {
                    for r0 in (0..rows).step_by(TILE) {
                        for c0 in (0..n).step_by(TILE) {
                            for r in r0..(r0 + TILE).min(rows) {
                                let drow = d + r as isize * dr;
                                let srow = s + r as isize;
                                for c in c0..(c0 + TILE).min(n) {
                                    dv[(drow + c as isize) as usize] = sv[(srow + c as isize * ss) as usize];
                                }
                            }
                        }
                    }
                });
                return Ok(());
            }
            for_each_offset(outer, &p.src_strides[..last], &p.dst_strides[..last], p.src_off, p.dst_off, |s, d| {
                let (mut s, mut d) = (s, d);
                for _ in 0..n {
                    dv[d as usize] = sv[s as usize];
                    s += ss;
                    d += ds;
                }
            });
            Ok(())
        }};
    }
    match esize {
        1 => typed!(u8),
        2 => typed!(u16),
        4 => typed!(u32),
        8 => typed!(u64),
        _ => strided_bytes(src, dst, esize, &p),
    }
}

/// The element-by-element fallback for unusual element sizes or alignments.
fn strided_bytes(src: &[u8], dst: &mut [u8], esize: usize, p: &Strided) -> Result<()> {
    let last = p.shape.len() - 1;
    let n = p.shape[last];
    let (ss, ds) = (p.src_strides[last], p.dst_strides[last]);
    for_each_offset(&p.shape[..last], &p.src_strides[..last], &p.dst_strides[..last], p.src_off, p.dst_off, |s, d| {
        for k in 0..n as isize {
            let (s, d) = ((s + k * ss) as usize * esize, (d + k * ds) as usize * esize);
            dst[d..d + esize].copy_from_slice(&src[s..s + esize]);
        }
    });
    Ok(())
}

/// Checks that every offset a plan visits lies in `0..len`.
fn check_bounds(shape: &[usize], strides: &[isize], off: isize, len: usize, what: &str) -> Result<()> {
    let (mut lo, mut hi) = (off as i128, off as i128);
    for (&n, &s) in shape.iter().zip(strides) {
        let span = (n as i128 - 1) * s as i128;
        if span < 0 {
            lo += span;
        } else {
            hi += span;
        }
    }
    if lo < 0 || hi >= len as i128 {
        return Err(Error::op(format!("internal: strided copy steps outside its {what} ({lo}..={hi} of {len})")));
    }
    Ok(())
}

/// Calls `f(src_offset, dst_offset)` for every index of `shape` in row-major
/// order, updating the offsets incrementally (no per-element index math).
pub fn for_each_offset(
    shape: &[usize],
    src_strides: &[isize],
    dst_strides: &[isize],
    src_off: isize,
    dst_off: isize,
    mut f: impl FnMut(isize, isize),
) {
    if shape.contains(&0) {
        return;
    }
    let rank = shape.len();
    let mut idx = vec![0usize; rank];
    let (mut s, mut d) = (src_off, dst_off);
    loop {
        f(s, d);
        let mut k = rank;
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            s += src_strides[k];
            d += dst_strides[k];
            if idx[k] < shape[k] {
                break;
            }
            s -= src_strides[k] * shape[k] as isize;
            d -= dst_strides[k] * shape[k] as isize;
            idx[k] = 0;
        }
    }
}

/// Row-major strides in elements, as `isize`.
pub fn istrides(shape: &[usize]) -> Vec<isize> {
    crate::ops::util::strides(shape).into_iter().map(|s| s as isize).collect()
}

/// Reads an index tensor (i32 or i64) as i64 values.
pub fn index_values(v: &TensorView, op: &str) -> Result<Vec<i64>> {
    match v.dtype {
        crate::DType::I64 => Ok(v.as_slice::<i64>()?.to_vec()),
        crate::DType::I32 => Ok(v.as_slice::<i32>()?.iter().map(|&i| i as i64).collect()),
        d => Err(Error::op(format!("{op}: indices must be i32 or i64, got {d}"))),
    }
}

/// Resolves a possibly negative index against a dimension of size `dim`,
/// failing when it is out of `[-dim, dim)`.
pub fn resolve_index(i: i64, dim: usize, op: &str) -> Result<usize> {
    let d = dim as i64;
    let r = if i < 0 { i + d } else { i };
    if r < 0 || r >= d {
        return Err(Error::op(format!("{op}: index {i} is out of range for a dimension of size {dim}")));
    }
    Ok(r as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposes_a_matrix() {
        let src: Vec<u8> = (0..6).collect(); // 2x3
        let mut dst = vec![0u8; 6];
        let plan = Strided { shape: vec![3, 2], src_strides: vec![1, 3], dst_strides: vec![2, 1], src_off: 0, dst_off: 0 };
        strided_copy(&src, &mut dst, 1, &plan).unwrap();
        assert_eq!(dst, vec![0, 3, 1, 4, 2, 5]);
    }

    #[test]
    fn tiled_transpose_matches_naive() {
        // [3, 37, 21] u32 with perm [0, 2, 1]: crosses several 16x16 tiles.
        let (b, r, c) = (3usize, 37usize, 21usize);
        let src: Vec<u32> = (0..(b * r * c) as u32).collect();
        let mut dst = vec![0u32; src.len()];
        let plan = Strided {
            shape: vec![b, c, r],
            src_strides: vec![(r * c) as isize, 1, c as isize],
            dst_strides: vec![(r * c) as isize, r as isize, 1],
            src_off: 0,
            dst_off: 0,
        };
        strided_copy(bytemuck::cast_slice(&src), bytemuck::cast_slice_mut(&mut dst), 4, &plan).unwrap();
        for i in 0..b {
            for y in 0..c {
                for x in 0..r {
                    assert_eq!(dst[(i * c + y) * r + x], src[(i * r + x) * c + y]);
                }
            }
        }
    }

    #[test]
    fn rejects_out_of_bounds_plans() {
        let src = vec![0u8; 4];
        let mut dst = vec![0u8; 8];
        let plan = Strided { shape: vec![8], src_strides: vec![1], dst_strides: vec![1], src_off: 0, dst_off: 0 };
        assert!(strided_copy(&src, &mut dst, 1, &plan).is_err());
    }

    #[test]
    fn reverses_with_negative_strides() {
        let src: Vec<u8> = (0..4).collect();
        let mut dst = vec![0u8; 4];
        let plan = Strided { shape: vec![4], src_strides: vec![-1], dst_strides: vec![1], src_off: 3, dst_off: 0 };
        strided_copy(&src, &mut dst, 1, &plan).unwrap();
        assert_eq!(dst, vec![3, 2, 1, 0]);
    }
}
