//! DeformConv (2-D): a convolution whose every tap reads the input at a
//! learned fractional offset. For output position `(oy, ox)` and kernel tap
//! `(ky, kx)`, channel `c` is sampled bilinearly at
//! `(oy·sy − pad_top + ky·dy + Δy, ox·sx − pad_left + kx·dx + Δx)`, where
//! `(Δy, Δx)` come from `offset [N, offset_group·2·kH·kW, oH, oW]` (the
//! offset group of `c`, then the tap, then y before x), corners outside the
//! image reading zero; the sample is scaled by `mask [N, offset_group·kH·kW,
//! oH, oW]` when given. The samples form the im2col matrix of each group,
//! which one GEMM with the weights turns into the output, plus the bias.
//! Computed in f64, like onnx's reference (which samples with GridSample,
//! `align_corners=1`, zero padding).

use super::conv::Conv;
use super::conv_geometry::ConvGeometry;
use super::gemm_kernel::gemm_f64;
use super::GemmArgs;
use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, opt_input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

/// The most values of the im2col matrix (2 GiB of f64).
const MAX_COLUMNS: usize = 1 << 28;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeformConv {
    /// Kernel, strides, pads, dilations and group, as a Conv's.
    pub conv: Conv,
    /// Groups of input channels sharing one set of offsets (and mask).
    pub offset_group: usize,
}

impl DeformConv {
    /// Checks the shapes of X, W, offset, B and mask.
    fn geometry(&self, shapes: [Option<&[usize]>; 5]) -> Result<ConvGeometry> {
        let [x, w, offset, b, mask] = shapes;
        let (x, w, offset) = (x.unwrap_or_default(), w.unwrap_or_default(), offset.unwrap_or_default());
        ensure_op!(
            self.conv.kernel_shape.len() == 2,
            "DeformConv: only 2-D inputs are supported, got kernel {:?}",
            self.conv.kernel_shape
        );
        let g = self.conv.geometry(x, w, b, "DeformConv")?;
        let og = self.offset_group;
        ensure_op!(og >= 1 && g.c % og == 0, "DeformConv: {} input channels are not divisible by offset_group {og}", g.c);
        let taps = g.k_size;
        let (oh, ow) = (g.out_spatial[0], g.out_spatial[1]);
        ensure_op!(
            offset == [g.n, og * 2 * taps, oh, ow],
            "DeformConv: offset shape {offset:?} must be [{}, {}, {oh}, {ow}]",
            g.n,
            og * 2 * taps
        );
        // The im2col matrix of one group (f64): engines are untrusted, and an
        // allocation that fails aborts, so its size is refused up front.
        let cols = (g.c / g.group).checked_mul(taps).and_then(|v| v.checked_mul(oh)).and_then(|v| v.checked_mul(ow));
        ensure_op!(
            cols.is_some_and(|c| c <= MAX_COLUMNS),
            "DeformConv: its im2col matrix would hold more than {MAX_COLUMNS} values"
        );
        if let Some(mask) = mask {
            ensure_op!(
                mask == [g.n, og * taps, oh, ow],
                "DeformConv: mask shape {mask:?} must be [{}, {}, {oh}, {ow}]",
                g.n,
                og * taps
            );
        }
        Ok(g)
    }
}

/// `plane [h, w]` sampled at `(y, x)` bilinearly, corners outside reading 0.
fn bilinear(plane: &[f64], h: usize, w: usize, y: f64, x: f64) -> f64 {
    let (y0, x0) = (y.floor(), x.floor());
    let (ly, lx) = (y - y0, x - x0);
    let mut v = 0.0;
    for (dy, wy) in [(0.0, 1.0 - ly), (1.0, ly)] {
        let yy = y0 + dy;
        if !(0.0..h as f64).contains(&yy) {
            continue;
        }
        for (dx, wx) in [(0.0, 1.0 - lx), (1.0, lx)] {
            let xx = x0 + dx;
            if (0.0..w as f64).contains(&xx) {
                v += wy * wx * plane[yy as usize * w + xx as usize];
            }
        }
    }
    v
}

impl OpImpl for DeformConv {
    fn name(&self) -> &'static str {
        "DeformConv"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        ensure_op!(x.dtype.is_float(), "DeformConv: unsupported dtype {}", x.dtype);
        for i in 1..5 {
            if let Some(t) = opt_input(inputs, i) {
                ensure_op!(t.dtype == x.dtype, "DeformConv: input {i} is {}, X is {}", t.dtype, x.dtype);
            }
        }
        input(inputs, 1, self.name())?;
        input(inputs, 2, self.name())?;
        let shape = |i: usize| opt_input(inputs, i).map(|t| t.shape.as_slice());
        let g = self.geometry([shape(0), shape(1), shape(2), shape(3), shape(4)])?;
        Ok(vec![TensorType::new(x.dtype, g.output_shape())])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let shape = |i: usize| opt_input(inputs, i).map(|t| t.shape);
        let g = self.geometry([shape(0), shape(1), shape(2), shape(3), shape(4)])?;
        let x = input(inputs, 0, self.name())?.to_f64_vec();
        let w = input(inputs, 1, self.name())?.to_f64_vec();
        let offset = input(inputs, 2, self.name())?.to_f64_vec();
        let bias = opt_input(inputs, 3).map(|b| b.to_f64_vec());
        let mask = opt_input(inputs, 4).map(|m| m.to_f64_vec());
        let (h, wd) = (g.in_spatial[0], g.in_spatial[1]);
        let (oh, ow) = (g.out_spatial[0], g.out_spatial[1]);
        let (kh, kw) = (self.conv.kernel_shape[0], self.conv.kernel_shape[1]);
        let (sy, sx) = (self.conv.strides[0] as f64, self.conv.strides[1] as f64);
        let (dy, dx) = (self.conv.dilations[0] as f64, self.conv.dilations[1] as f64);
        let (top, left) = (self.conv.pads[0] as f64, self.conv.pads[1] as f64);
        let (taps, positions) = (g.k_size, g.out_size);
        let (cg, mg) = (g.c / g.group, g.m / g.group);
        let per_offset_group = g.c / self.offset_group;
        let mut cols = vec![0f64; cg * taps * positions];
        let mut y = vec![0f64; g.n * g.m * positions];
        for n in 0..g.n {
            for grp in 0..g.group {
                for ci in 0..cg {
                    let c = grp * cg + ci;
                    let og = c / per_offset_group;
                    let plane = &x[(n * g.c + c) * g.in_size..][..g.in_size];
                    for (tap, (ky, kx)) in (0..kh).flat_map(|ky| (0..kw).map(move |kx| (ky, kx))).enumerate() {
                        let offsets = &offset[(n * self.offset_group + og) * 2 * taps * positions..];
                        let (off_y, off_x) = (&offsets[2 * tap * positions..], &offsets[(2 * tap + 1) * positions..]);
                        let scale = mask.as_ref().map(|m| &m[((n * self.offset_group + og) * taps + tap) * positions..]);
                        let row = &mut cols[(ci * taps + tap) * positions..][..positions];
                        for oy in 0..oh {
                            for ox in 0..ow {
                                let p = oy * ow + ox;
                                let at_y = oy as f64 * sy - top + ky as f64 * dy + off_y[p];
                                let at_x = ox as f64 * sx - left + kx as f64 * dx + off_x[p];
                                let v = bilinear(plane, h, wd, at_y, at_x);
                                row[p] = scale.map_or(v, |s| v * s[p]);
                            }
                        }
                    }
                }
                let k = cg * taps;
                let out = &mut y[(n * g.m + grp * mg) * positions..][..mg * positions];
                gemm_f64(&GemmArgs::row_major(mg, k, positions), &w[grp * mg * k..][..mg * k], &cols, out);
                if let Some(b) = &bias {
                    for (m, row) in out.chunks_mut(positions).enumerate() {
                        row.iter_mut().for_each(|v| *v += b[grp * mg + m]);
                    }
                }
            }
        }
        crate::ops::util::store_f64(&mut outputs[0], &y, self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn op(offset_group: usize) -> DeformConv {
        DeformConv { conv: Conv::new_2d([1, 1], [1, 1], [0; 4], [1, 1], 1), offset_group }
    }

    #[test]
    fn zero_offsets_are_a_plain_convolution_and_half_offsets_interpolate() {
        // A 1x1 kernel of weight 2 over X = [[0, 1], [2, 3]].
        let x = Tensor::from_vec(vec![1, 1, 2, 2], vec![0f32, 1., 2., 3.]).unwrap();
        let w = Tensor::from_vec(vec![1, 1, 1, 1], vec![2f32]).unwrap();
        let zero = Tensor::from_vec(vec![1, 2, 2, 2], vec![0f32; 8]).unwrap();
        let y = Op::from(op(1)).eval_owned(&[Some(&x), Some(&w), Some(&zero)]).unwrap().remove(0);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[0., 2., 4., 6.]);
        // Offsets (+0.5, +0.5) everywhere: the first position reads the
        // mean of all four pixels; the last reads 3 · 0.25 (three corners
        // outside), times 2. A mask halves the second row.
        let half = Tensor::from_vec(vec![1, 2, 2, 2], vec![0.5f32; 8]).unwrap();
        let mask = Tensor::from_vec(vec![1, 1, 2, 2], vec![1f32, 1., 0.5, 0.5]).unwrap();
        let y = Op::from(op(1)).eval_owned(&[Some(&x), Some(&w), Some(&half), None, Some(&mask)]).unwrap().remove(0);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[3.0, 2.0, 1.25, 0.75]);
    }

    #[test]
    fn bad_shapes_are_errors() {
        let x = TensorType::new(crate::DType::F32, vec![1, 2, 3, 3]);
        let w = TensorType::new(crate::DType::F32, vec![1, 2, 1, 1]);
        let offset = TensorType::new(crate::DType::F32, vec![1, 2, 3, 3]);
        let e = Op::from(op(3)).infer(&[Some(&x), Some(&w), Some(&offset)]).unwrap_err().to_string();
        assert!(e.contains("not divisible by offset_group 3"), "{e}");
        let e = Op::from(op(2)).infer(&[Some(&x), Some(&w), Some(&offset)]).unwrap_err().to_string();
        assert!(e.contains("offset shape [1, 2, 3, 3] must be [1, 4, 3, 3]"), "{e}");
        // A hostile engine's shapes cannot make it allocate without bound.
        let x = TensorType::new(crate::DType::F32, vec![1, 1 << 12, 1 << 10, 1 << 10]);
        let w = TensorType::new(crate::DType::F32, vec![1, 1 << 12, 1, 1]);
        let offset = TensorType::new(crate::DType::F32, vec![1, 2, 1 << 10, 1 << 10]);
        let e = Op::from(op(1)).infer(&[Some(&x), Some(&w), Some(&offset)]).unwrap_err().to_string();
        assert!(e.contains("im2col matrix would hold more than"), "{e}");
    }
}
