//! Pooling over the spatial axes of `[N, C, D1, ..., Dn]`: MaxPool (with
//! optional Indices output), AveragePool and LpPool. The global variants
//! are these with the kernel covering the whole input.
//!
//! Every kernel tap is one pass of a strided loop over the output plane,
//! like the depthwise convolution, so no per-element index math is needed.

use super::conv::TapRows;
use super::conv_geometry::ConvGeometry;
use super::window::{valid_range, Window};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PoolKind {
    Max,
    /// With `count_include_pad`, the divisor counts padded taps too (but not
    /// the taps past the end padding that `ceil_mode` adds).
    Average {
        count_include_pad: bool,
    },
    /// `(Σ |x|^p)^(1/p)` over the window.
    Lp {
        p: f32,
    },
}

/// A pooling op. `pads` holds every begin pad, then every end pad.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    pub kind: PoolKind,
    pub kernel_shape: Vec<usize>,
    pub strides: Vec<usize>,
    pub pads: Vec<usize>,
    pub dilations: Vec<usize>,
    pub ceil_mode: bool,
    /// MaxPool only: also output the flat input index of each maximum (i64).
    pub indices: bool,
    /// Layout of those indices: false = row-major (ONNX storage_order 0),
    /// true = column-major within each spatial plane.
    pub column_major_indices: bool,
}

impl Pool {
    /// A pool with unit strides and dilations, no padding, floor mode.
    pub fn new(kind: PoolKind, kernel_shape: Vec<usize>) -> Pool {
        let w = Window::dense(kernel_shape);
        Pool {
            kind,
            kernel_shape: w.kernel_shape,
            strides: w.strides,
            pads: w.pads,
            dilations: w.dilations,
            ceil_mode: false,
            indices: false,
            column_major_indices: false,
        }
    }

    pub fn window(&self) -> Window {
        Window {
            kernel_shape: self.kernel_shape.clone(),
            strides: self.strides.clone(),
            pads: self.pads.clone(),
            dilations: self.dilations.clone(),
        }
    }

    fn geometry(&self, x: &[usize]) -> Result<ConvGeometry> {
        let name = self.name();
        let win = self.window();
        win.validate(name)?;
        ensure_op!(x.len() == win.rank() + 2 && win.rank() >= 1, "{name}: input {x:?} does not match kernel rank {}", win.rank());
        let out = win.output_shape(&x[2..], self.ceil_mode, name)?;
        ConvGeometry::new(x[0], x[1], x[1], x[1], x[2..].to_vec(), out, win).checked(name)
    }
}

impl OpImpl for Pool {
    fn name(&self) -> &'static str {
        match self.kind {
            PoolKind::Max => "MaxPool",
            PoolKind::Average { .. } => "AveragePool",
            PoolKind::Lp { .. } => "LpPool",
        }
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        let float = matches!(x.dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16);
        match self.kind {
            PoolKind::Max => {
                ensure_op!(float || matches!(x.dtype, DType::I8 | DType::U8), "MaxPool: unsupported dtype {}", x.dtype)
            }
            _ => ensure_op!(float, "{}: unsupported dtype {}", self.name(), x.dtype),
        }
        ensure_op!(!self.indices || self.kind == PoolKind::Max, "{}: only MaxPool has indices", self.name());
        let g = self.geometry(&x.shape)?;
        let shape = g.output_shape();
        let mut out = vec![TensorType::new(x.dtype, shape.clone())];
        if self.indices {
            out.push(TensorType::new(DType::I64, shape));
        }
        Ok(out)
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        let g = self.geometry(x.shape)?;
        let (y, rest) =
            outputs.split_first_mut().ok_or_else(|| crate::error::Error::op(format!("{}: missing output", self.name())))?;
        let indices = match rest.first_mut() {
            Some(i) if self.indices => Some(i.as_mut_slice::<i64>()?),
            _ => None,
        };
        match x.dtype {
            DType::F32 => {
                let (x, y) = (x.as_slice()?, y.as_mut_slice()?);
                // The vector max pooling gives the same bits where it applies.
                let vector = self.kind == PoolKind::Max && indices.is_none() && super::max_pool_f32::max_pool_f32(&g, x, y);
                if !vector {
                    self.run::<f32>(&g, x, y, indices)
                }
            }
            DType::F64 => self.run::<f64>(&g, x.as_slice()?, y.as_mut_slice()?, indices),
            DType::F16 => self.run::<f16>(&g, x.as_slice()?, y.as_mut_slice()?, indices),
            DType::BF16 => self.run::<bf16>(&g, x.as_slice()?, y.as_mut_slice()?, indices),
            DType::I8 => self.run::<i8>(&g, x.as_slice()?, y.as_mut_slice()?, indices),
            DType::U8 => self.run::<u8>(&g, x.as_slice()?, y.as_mut_slice()?, indices),
            d => bail_op!("{}: unsupported dtype {d}", self.name()),
        }
        Ok(())
    }
}

impl Pool {
    fn run<T: Element>(&self, g: &ConvGeometry, x: &[T], y: &mut [T], indices: Option<&mut [i64]>) {
        if g.out_size == 0 || g.n * g.c == 0 {
            return;
        }
        match self.kind {
            PoolKind::Max => max_pool(g, x, y, indices, self.column_major_indices),
            PoolKind::Average { count_include_pad } => {
                let divisors = average_divisors(g, count_include_pad);
                sum_pool(g, x, y, |v| v, |acc, i| acc / divisors[i]);
            }
            PoolKind::Lp { p } => {
                let p = p as f64;
                if p == 2.0 {
                    sum_pool(g, x, y, |v| v * v, |acc, _| acc.sqrt());
                } else if p == 1.0 {
                    sum_pool(g, x, y, f64::abs, |acc, _| acc);
                } else {
                    sum_pool(g, x, y, |v| v.abs().powf(p), |acc, _| acc.powf(1.0 / p));
                }
            }
        }
    }
}

/// Max over each window; optionally records the flat input index of the
/// first maximum. Without indices, planes are split over the context's
/// threads.
fn max_pool<T: Element>(g: &ConvGeometry, x: &[T], y: &mut [T], indices: Option<&mut [i64]>, column_major: bool) {
    let taps = TapRows::new(g);
    let Some(ind) = indices else {
        crate::parallel::par_chunks_mut(y, g.out_size, g.planes_per_piece(), |first, planes| {
            for (i, yp) in planes.chunks_exact_mut(g.out_size).enumerate() {
                max_plane(&taps, &x[(first + i) * g.in_size..][..g.in_size], yp, None);
            }
        });
        return;
    };
    let mut arg = vec![0usize; g.out_size];
    for plane in 0..g.n * g.c {
        let yp = &mut y[plane * g.out_size..][..g.out_size];
        max_plane(&taps, &x[plane * g.in_size..][..g.in_size], yp, Some(&mut arg));
        for (o, &a) in ind[plane * g.out_size..][..g.out_size].iter_mut().zip(&arg) {
            let within = if column_major { column_major_index(a, &g.in_spatial) } else { a };
            *o = (plane * g.in_size + within) as i64;
        }
    }
}

/// Max pooling of one plane; `arg` receives each maximum's index within
/// the plane.
fn max_plane<T: Element>(taps: &TapRows, xp: &[T], yp: &mut [T], arg: Option<&mut [usize]>) {
    let s = taps.stride;
    yp.fill(T::from_f64(f64::NEG_INFINITY));
    let Some(arg) = arg else {
        // Values only: the same comparisons as below, as plain strided runs
        // the compiler can vectorize.
        for r in taps.valid() {
            let dst = &mut yp[r.out_row + r.lo..r.out_row + r.hi];
            let src = xp[r.input..].iter().step_by(s);
            if r.tap == 0 {
                dst.iter_mut().zip(src).for_each(|(o, &v)| *o = v);
            } else {
                dst.iter_mut().zip(src).for_each(|(o, &v)| *o = if v > *o { v } else { *o });
            }
        }
        return;
    };
    for r in taps.valid() {
        for j in 0..r.hi - r.lo {
            let (o, i) = (r.out_row + r.lo + j, r.input + j * s);
            // The first tap always wins, so that a window of -inf or NaN
            // still reports an index inside it.
            if r.tap == 0 || xp[i] > yp[o] {
                yp[o] = xp[i];
                arg[o] = i;
            }
        }
    }
}

/// Re-expresses a row-major flat index within a plane as column-major.
fn column_major_index(mut flat: usize, shape: &[usize]) -> usize {
    let mut idx = vec![0usize; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = flat % shape[d];
        flat /= shape[d];
    }
    let mut out = 0;
    for d in (0..shape.len()).rev() {
        out = out * shape[d] + idx[d];
    }
    out
}

/// Accumulates `map(x)` over each window in f64, then writes
/// `finish(sum, output index within the plane)`. Planes are split over the
/// context's threads.
fn sum_pool<T: Element>(
    g: &ConvGeometry,
    x: &[T],
    y: &mut [T],
    map: impl Fn(f64) -> f64 + Sync,
    finish: impl Fn(f64, usize) -> f64 + Sync,
) {
    let win = &g.win;
    if g.out_size == 1
        && win.kernel_shape == g.in_spatial
        && win.pads.iter().all(|&p| p == 0)
        && win.dilations.iter().all(|&d| d == 1)
    {
        return whole_plane_sums(g, x, y, map, finish);
    }
    let taps = TapRows::new(g);
    let s = taps.stride;
    crate::parallel::par_chunks_mut(y, g.out_size, g.planes_per_piece(), |first, planes| {
        let mut acc = vec![0f64; g.out_size];
        for (i, yp) in planes.chunks_exact_mut(g.out_size).enumerate() {
            let xp = &x[(first + i) * g.in_size..][..g.in_size];
            if g.out_size == 1 {
                // One window per plane (global pooling): the same sum in the
                // same order, in a register instead of through memory.
                let sum = taps.valid().fold(0f64, |a, r| a + map(xp[r.input].to_f64()));
                yp[0] = T::from_f64(finish(sum, 0));
                continue;
            }
            acc.fill(0.0);
            for r in taps.valid() {
                for (j, a) in acc[r.out_row + r.lo..r.out_row + r.hi].iter_mut().enumerate() {
                    *a += map(xp[r.input + j * s].to_f64());
                }
            }
            for (i, (o, &a)) in yp.iter_mut().zip(&acc).enumerate() {
                *o = T::from_f64(finish(a, i));
            }
        }
    });
}

/// [`sum_pool`] for a window that is the whole plane (global pooling):
/// each plane's sum in input order, as the tap walk adds it, but eight
/// planes at a time so that eight independent additions are in flight
/// instead of one long chain.
fn whole_plane_sums<T: Element>(
    g: &ConvGeometry,
    x: &[T],
    y: &mut [T],
    map: impl Fn(f64) -> f64 + Sync,
    finish: impl Fn(f64, usize) -> f64 + Sync,
) {
    const LANES: usize = 8;
    let plane = g.in_size;
    let grain = crate::parallel::grain_elements(plane);
    crate::parallel::par_chunks_mut(y, 1, grain, |first, outs| {
        for (group, ys) in outs.chunks_mut(LANES).enumerate() {
            let p0 = first + group * LANES;
            // A short last group repeats its last plane in the spare lanes.
            let xs: [&[T]; LANES] = std::array::from_fn(|l| &x[(p0 + l.min(ys.len() - 1)) * plane..][..plane]);
            let mut acc = [0f64; LANES];
            for i in 0..plane {
                for (a, xp) in acc.iter_mut().zip(&xs) {
                    *a += map(xp[i].to_f64());
                }
            }
            for (o, &a) in ys.iter_mut().zip(&acc) {
                *o = T::from_f64(finish(a, 0));
            }
        }
    });
}

/// The divisor of every output position of a plane: the number of window
/// taps inside the input (or inside the padded input, with
/// `count_include_pad`). Windows are boxes, so it is a product of per-axis
/// counts.
fn average_divisors(g: &ConvGeometry, count_include_pad: bool) -> Vec<f64> {
    let win = &g.win;
    let per_axis: Vec<Vec<usize>> = (0..win.rank())
        .map(|d| {
            let (pb, pe) = (win.pad_begin(d), win.pad_end(d));
            let (lo_bound, len) = if count_include_pad { (pb as isize, g.in_spatial[d] + pb + pe) } else { (0, g.in_spatial[d]) };
            let mut counts = vec![0usize; g.out_spatial[d]];
            for k in 0..win.kernel_shape[d] {
                // Input index o*s + k*dil - pb, shifted by lo_bound so that
                // the counted region starts at 0.
                let off = (k * win.dilations[d]) as isize - pb as isize + lo_bound;
                let (lo, hi) = valid_range(g.out_spatial[d], len, win.strides[d], off);
                counts[lo..hi].iter_mut().for_each(|c| *c += 1);
            }
            counts
        })
        .collect();
    let mut out = vec![1f64; g.out_size];
    let mut idx = vec![0usize; win.rank()];
    for (i, o) in out.iter_mut().enumerate() {
        super::window::unflatten(i, &g.out_spatial, &mut idx);
        let n: usize = idx.iter().enumerate().map(|(d, &j)| per_axis[d][j]).product();
        *o = n.max(1) as f64;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn ramp(shape: Vec<usize>) -> Tensor {
        let n = shape.iter().product::<usize>();
        Tensor::from_vec(shape, (0..n).map(|v| v as f32).collect()).unwrap()
    }

    #[test]
    fn max_pool_ceil_mode_with_indices() {
        let mut op = Pool::new(PoolKind::Max, vec![3, 3]);
        op.strides = vec![2, 2];
        op.ceil_mode = true;
        op.indices = true;
        let x = ramp(vec![1, 1, 4, 4]);
        let out = Op::from(op).eval_owned(&[Some(&x)]).unwrap();
        assert_eq!(out[0].shape(), &[1, 1, 2, 2]);
        assert_eq!(out[0].as_slice::<f32>().unwrap(), &[10., 11., 14., 15.]);
        assert_eq!(out[1].as_slice::<i64>().unwrap(), &[10, 11, 14, 15]);
    }

    #[test]
    fn average_pool_excludes_or_includes_padding() {
        let x = Tensor::from_vec(vec![1, 1, 3], vec![2f32, 4., 6.]).unwrap();
        let mut op = Pool::new(PoolKind::Average { count_include_pad: false }, vec![2]);
        op.pads = vec![1, 0];
        let y = Op::from(op.clone()).eval_owned(&[Some(&x)]).unwrap().remove(0);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[2., 3., 5.]);
        op.kind = PoolKind::Average { count_include_pad: true };
        let y = Op::from(op).eval_owned(&[Some(&x)]).unwrap().remove(0);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[1., 3., 5.]);
    }

    #[test]
    fn an_enormous_sliding_window_is_refused_at_shape_inference() {
        // 4M taps over 3,001 output rows: never allocated, refused.
        let x = crate::tensor::TensorType::new(crate::dtype::DType::F32, vec![1, 1, 5000, 5000]);
        let op = Op::from(Pool::new(PoolKind::Max, vec![2000, 2000]));
        let e = op.infer(&[Some(&x)]).unwrap_err().to_string();
        assert!(e.contains("(tap, row) pairs"), "{e}");
        // A global pooling of a 4096x4096 map, at the limit, is fine.
        let x = crate::tensor::TensorType::new(crate::dtype::DType::F32, vec![1, 1, 4096, 4096]);
        let op = Op::from(Pool::new(PoolKind::Average { count_include_pad: false }, vec![4096, 4096]));
        assert!(op.infer(&[Some(&x)]).is_ok());
    }

    #[test]
    fn global_pools_sum_each_plane_in_input_order() {
        // 2 x 13 planes: one group of eight and a short one per sample.
        let values: Vec<f32> = (0..2 * 13 * 35).map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 1.37e-3).collect();
        let x = Tensor::from_vec(vec![2, 13, 5, 7], values.clone()).unwrap();
        for (kind, map, finish) in [
            (
                PoolKind::Average { count_include_pad: false },
                (|v: f64| v) as fn(f64) -> f64,
                (|s: f64| s / 35.0) as fn(f64) -> f64,
            ),
            (PoolKind::Lp { p: 3.0 }, |v: f64| v.abs().powf(3.0), |s: f64| s.powf(1.0 / 3.0)),
        ] {
            let y = Op::from(Pool::new(kind.clone(), vec![5, 7])).eval_owned(&[Some(&x)]).unwrap().remove(0);
            let want: Vec<f32> =
                values.chunks(35).map(|p| finish(p.iter().fold(0f64, |a, &v| a + map(v as f64))) as f32).collect();
            assert_eq!(y.shape(), &[2, 13, 1, 1]);
            assert!(y.as_slice::<f32>().unwrap().iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{kind:?}");
        }
    }

    /// The vector max pooling against the scalar loop, bit for bit: NaN
    /// first and later in windows, signed zeros, -inf, padding, ceil mode,
    /// dilation, strides 1 and 2, rows wider than a vector.
    #[test]
    fn vector_max_pooling_gives_the_scalar_loops_bits() {
        let mut s = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let special = [f32::NAN, 0.0, -0.0, f32::NEG_INFINITY, f32::INFINITY, 1.0];
        // (input h, w), kernel, strides, pads [top, left, bottom, right], dilations, ceil mode
        let cases = [
            ([16, 16], [3, 3], [2, 2], [1, 1, 1, 1], [1, 1], false),
            ([15, 15], [3, 3], [2, 2], [0, 0, 0, 0], [1, 1], true),
            ([9, 40], [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], false),
            ([7, 37], [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], false),
            ([11, 35], [3, 2], [1, 2], [2, 0, 1, 1], [2, 3], true),
            ([5, 6], [5, 6], [1, 1], [0, 0, 0, 0], [1, 1], false),
            ([6, 9], [2, 2], [3, 3], [1, 1, 1, 1], [1, 1], false),
        ];
        let mut vector_cases = 0;
        for (i, (input, kernel, strides, pads, dilations, ceil_mode)) in cases.into_iter().enumerate() {
            let mut op = Pool::new(PoolKind::Max, kernel.to_vec());
            op.strides = strides.to_vec();
            op.pads = pads.to_vec();
            op.dilations = dilations.to_vec();
            op.ceil_mode = ceil_mode;
            let g = op.geometry(&[2, 3, input[0], input[1]]).unwrap();
            let x: Vec<f32> = (0..6 * g.in_size)
                .map(|_| match next() % 8 {
                    0 => special[(next() % 6) as usize],
                    _ => (next() % 9) as f32 - 4.0,
                })
                .collect();
            let mut want = vec![0f32; 6 * g.out_size];
            max_pool(&g, &x, &mut want, None, false);
            let mut got = vec![7f32; want.len()];
            if !super::super::max_pool_f32::max_pool_f32(&g, &x, &mut got) {
                continue;
            }
            vector_cases += 1;
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "case {i}");
        }
        let has_avx512 = cfg!(target_arch = "x86_64") && {
            #[cfg(target_arch = "x86_64")]
            let has = std::arch::is_x86_feature_detected!("avx512f");
            #[cfg(not(target_arch = "x86_64"))]
            let has = false;
            has
        };
        if has_avx512 {
            assert_eq!(vector_cases, 6, "every case but the stride-3 one takes the vector path");
        } else {
            eprintln!("skipped: 6 of 7 cases (this CPU has no AVX-512, so max pooling has no vector path)");
        }
    }

    #[test]
    fn lp_pool_p2_is_the_euclidean_norm() {
        let x = Tensor::from_vec(vec![1, 1, 2, 1], vec![3f32, 4.]).unwrap();
        let op = Pool::new(PoolKind::Lp { p: 2.0 }, vec![2, 1]);
        let y = Op::from(op).eval_owned(&[Some(&x)]).unwrap().remove(0);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[5.]);
    }
}
