//! ConvTranspose: the adjoint of Conv (a "deconvolution"), grouped, with
//! strides, dilations, padding and output padding.
//!
//! Inputs: X `[N, C, I1, ..., In]`, W `[C, M/group, k1, ..., kn]`, optional
//! B `[M]`. Output `[N, M, O1, ..., On]` with
//! `O = stride·(I − 1) + output_padding + (k − 1)·dilation + 1 − pad_begin − pad_end`.
//! ONNX's `output_shape` and `auto_pad` are resolved by the compiler into
//! `pads` and `output_padding`.
//!
//! Strategy: per sample and group, one matrix multiply
//! `cols [M/g·K, I] = W_gᵀ · X_g` (W read transposed through strides), then
//! col2im scatters the columns into the output, the mirror image of Conv's
//! im2col.

use super::conv::TapRows;
use super::conv_geometry::ConvGeometry;
use super::num::{narrow_into, widen, with_scratch, Scalar};
use super::window::Window;
use super::GemmArgs;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{input, opt_input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

/// A transposed convolution; field conventions as in [`super::Conv`], plus
/// `output_padding`: extra output positions at the end of each axis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConvTranspose {
    pub kernel_shape: Vec<usize>,
    pub strides: Vec<usize>,
    pub pads: Vec<usize>,
    pub dilations: Vec<usize>,
    pub group: usize,
    pub output_padding: Vec<usize>,
}

/// The sizes of one call.
struct Geometry {
    n: usize,
    c: usize,
    m: usize,
    group: usize,
    /// The output seen as a convolution's input and the input as its output:
    /// output position `i·stride + k·dilation − pad_begin` receives input
    /// position `i` through tap `k`, the same relation Conv's im2col walks.
    mirror: ConvGeometry,
}

impl ConvTranspose {
    fn geometry(&self, x: &[usize], w: &[usize], b: Option<&[usize]>) -> Result<Geometry> {
        let op = "ConvTranspose";
        let win = Window {
            kernel_shape: self.kernel_shape.clone(),
            strides: self.strides.clone(),
            pads: self.pads.clone(),
            dilations: self.dilations.clone(),
        };
        win.validate(op)?;
        let r = win.rank();
        ensure_op!(
            r >= 1 && self.output_padding.len() == r,
            "{op}: output_padding {:?} must have {r} entries",
            self.output_padding
        );
        ensure_op!(x.len() == r + 2 && w.len() == r + 2, "{op}: input {x:?} and weight {w:?} must have rank {}", r + 2);
        ensure_op!(w[2..] == self.kernel_shape[..], "{op}: weight {w:?} does not match kernel_shape {:?}", self.kernel_shape);
        let g = self.group;
        ensure_op!(
            g >= 1 && x[1] == w[0] && x[1].is_multiple_of(g),
            "{op}: input {x:?} does not fit weight {w:?} with group {g}"
        );
        let (n, c, m) = (x[0], x[1], w[1] * g);
        if let Some(b) = b {
            ensure_op!(b == [m], "{op}: bias shape {b:?} must be [{m}]");
        }
        let mut out = Vec::with_capacity(r);
        for d in 0..r {
            let full = self.strides[d] * x[2 + d].saturating_sub(1) + win.span(d) + self.output_padding[d];
            let pads = win.pad_begin(d) + win.pad_end(d);
            ensure_op!(x[2 + d] > 0 && full >= pads, "{op}: pads {:?} remove the whole output of axis {d}", self.pads);
            out.push(full - pads);
        }
        let mirror = ConvGeometry::new(n, m, c, g, out, x[2..].to_vec(), win).checked(op)?;
        Ok(Geometry { n, c, m, group: g, mirror })
    }

    fn output_shape(g: &Geometry) -> Vec<usize> {
        let mut s = vec![g.n, g.m];
        s.extend(&g.mirror.in_spatial);
        s
    }
}

impl OpImpl for ConvTranspose {
    fn name(&self) -> &'static str {
        "ConvTranspose"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        let w = input(inputs, 1, self.name())?;
        let b = opt_input(inputs, 2);
        ensure_op!(
            matches!(x.dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16),
            "ConvTranspose: unsupported dtype {}",
            x.dtype
        );
        ensure_op!(w.dtype == x.dtype && b.is_none_or(|b| b.dtype == x.dtype), "ConvTranspose: dtypes differ");
        let g = self.geometry(&x.shape, &w.shape, b.map(|b| b.shape.as_slice()))?;
        Ok(vec![TensorType::new(x.dtype, Self::output_shape(&g))])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        let w = input(inputs, 1, self.name())?;
        let b = opt_input(inputs, 2);
        let g = self.geometry(x.shape, w.shape, b.map(|b| b.shape))?;
        let out = &mut outputs[0];
        match x.dtype {
            DType::F32 => {
                let b = b.map(|b| b.as_slice::<f32>()).transpose()?;
                conv_transpose::<f32>(&g, x.as_slice()?, w.as_slice()?, b, out.as_mut_slice()?)
            }
            DType::F64 => {
                let b = b.map(|b| b.as_slice::<f64>()).transpose()?;
                conv_transpose::<f64>(&g, x.as_slice()?, w.as_slice()?, b, out.as_mut_slice()?)
            }
            DType::F16 | DType::BF16 => {
                let (xf, wf) = (widen(&x)?, widen(&w)?);
                let bf = b.map(|b| widen(&b)).transpose()?;
                let mut yf = vec![0f32; out.len()];
                conv_transpose(&g, &xf, &wf, bf.as_deref(), &mut yf);
                narrow_into(out, &yf)?;
            }
            d => bail_op!("ConvTranspose: unsupported dtype {d}"),
        }
        Ok(())
    }
}

fn conv_transpose<T: Scalar>(g: &Geometry, x: &[T], w: &[T], bias: Option<&[T]>, y: &mut [T]) {
    let mir = &g.mirror;
    let (cg, mg) = (g.c / g.group, g.m / g.group);
    let (in_size, out_size, k) = (mir.out_size, mir.in_size, mir.k_size);
    for (ch, plane) in y.chunks_exact_mut(out_size.max(1)).enumerate() {
        plane.fill(bias.map_or(T::default(), |b| b[ch % g.m.max(1)]));
    }
    if g.n == 0 || in_size == 0 || out_size == 0 || mg == 0 {
        return;
    }
    // cols = W_gᵀ (W_g is [cg, mg·k] row-major) times X_g [cg, in_size].
    let args = GemmArgs { rsa: 1, csa: (mg * k) as isize, ..GemmArgs::row_major(mg * k, cg, in_size) };
    with_scratch::<T, _>(mg * k * in_size, |cols| {
        for n in 0..g.n {
            for grp in 0..g.group {
                let x_g = &x[(n * g.c + grp * cg) * in_size..][..cg * in_size];
                let w_g = &w[grp * cg * mg * k..][..cg * mg * k];
                T::GEMM(&args, w_g, x_g, cols);
                let y_g = &mut y[(n * g.m + grp * mg) * out_size..][..mg * out_size];
                col2im(mir, cols, mg, y_g);
            }
        }
    });
}

/// Adds the columns `[mg·K, I]` into `mg` output planes: the adjoint of
/// Conv's im2col under the mirrored geometry.
fn col2im<T: Scalar>(mir: &ConvGeometry, cols: &[T], mg: usize, y: &mut [T]) {
    let taps = TapRows::new(mir);
    let s = taps.stride;
    for r in taps.valid() {
        for mo in 0..mg {
            let seg = &cols[(mo * mir.k_size + r.tap) * mir.out_size + r.out_row..][r.lo..r.hi];
            let yp = &mut y[mo * mir.in_size..][..mir.in_size];
            for (j, &v) in seg.iter().enumerate() {
                yp[r.input + j * s] = yp[r.input + j * s].sadd(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn op(strides: usize, pads: [usize; 2], output_padding: usize) -> Op {
        ConvTranspose {
            kernel_shape: vec![3],
            strides: vec![strides],
            pads: pads.to_vec(),
            dilations: vec![1],
            group: 1,
            output_padding: vec![output_padding],
        }
        .into()
    }

    #[test]
    fn one_d_transposed_convolution() {
        // ONNX's convtranspose_1d: x = [0, 1, 2], W = ones(2 out channels).
        let x = Tensor::from_vec(vec![1, 1, 3], vec![0f32, 1., 2.]).unwrap();
        let w = Tensor::from_vec(vec![1, 2, 3], vec![1f32; 6]).unwrap();
        let y = op(1, [0, 0], 0).eval_owned(&[Some(&x), Some(&w)]).unwrap().remove(0);
        assert_eq!(y.shape(), &[1, 2, 5]);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[0., 1., 3., 3., 2., 0., 1., 3., 3., 2.]);
    }

    #[test]
    fn strided_with_padding_and_output_padding() {
        let x = Tensor::from_vec(vec![1, 1, 2], vec![1f32, 10.]).unwrap();
        let w = Tensor::from_vec(vec![1, 1, 3], vec![1f32, 2., 3.]).unwrap();
        let b = Tensor::from_vec(vec![1], vec![100f32]).unwrap();
        // Full: [1, 2, 3+10, 20, 30] then output padding adds a 0 position.
        let y = op(2, [1, 0], 1).eval_owned(&[Some(&x), Some(&w), Some(&b)]).unwrap().remove(0);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[102., 113., 120., 130., 100.]);
    }
}
