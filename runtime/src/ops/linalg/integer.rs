//! Integer matrix products: MatMulInteger and ConvInteger. 8-bit operands
//! minus their zero points, accumulated exactly in i32 (wrapping, as the
//! hardware does). QLinearMatMul and QLinearConv reuse these kernels and
//! requantize the accumulators.

use super::conv::{conv, Conv};
use super::matmul::{batched, dims};
use super::num::gemm_naive;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{input, opt_input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

/// Whether `d` is an 8-bit quantized type.
pub(crate) fn is_int8(d: DType) -> bool {
    matches!(d, DType::U8 | DType::I8)
}

/// The values of an 8-bit tensor as i32.
pub(crate) fn int8_values(v: &TensorView<'_>) -> Result<Vec<i32>> {
    Ok(match v.dtype {
        DType::U8 => v.as_slice::<u8>()?.iter().map(|&x| x as i32).collect(),
        DType::I8 => v.as_slice::<i8>()?.iter().map(|&x| x as i32).collect(),
        d => bail_op!("expected an 8-bit integer tensor, got {d}"),
    })
}

/// `x - zp[index(i)]` for every element `i` of an 8-bit tensor.
fn minus_zero_point(x: &TensorView<'_>, zp: Option<&TensorView<'_>>, index: impl Fn(usize) -> usize) -> Result<Vec<i32>> {
    let mut v = int8_values(x)?;
    if let Some(zp) = zp {
        let z = int8_values(zp)?;
        if z.len() == 1 {
            v.iter_mut().for_each(|x| *x -= z[0]);
        } else {
            for (i, x) in v.iter_mut().enumerate() {
                *x -= z[index(i) % z.len()];
            }
        }
    }
    Ok(v)
}

/// Checks MatMulInteger's operands and returns the output shape. A's zero
/// point is a scalar or one per row (`[M]` or A's shape with K = 1); B's a
/// scalar or one per column (`[N]` or B's shape with K = 1).
pub(crate) fn matmul_integer_shape(
    a: &TensorType,
    b: &TensorType,
    azp: Option<&TensorType>,
    bzp: Option<&TensorType>,
    op: &str,
) -> Result<Vec<usize>> {
    ensure_op!(is_int8(a.dtype) && is_int8(b.dtype), "{op}: operands must be u8 or i8, got {} and {}", a.dtype, b.dtype);
    let d = dims(&a.shape, &b.shape)?;
    if let Some(z) = azp {
        ensure_op!(z.dtype == a.dtype, "{op}: A's zero point {z} must be {}", a.dtype);
        let rows = a.len() / d.k.max(1);
        ensure_op!(
            z.len() == 1 || (d.k > 0 && (z.len() == d.m || z.len() == rows)),
            "{op}: A's zero point {z} must be a scalar or one per row"
        );
    }
    if let Some(z) = bzp {
        ensure_op!(z.dtype == b.dtype, "{op}: B's zero point {z} must be {}", b.dtype);
        let per_batch = b.len() / (d.k * d.n).max(1);
        ensure_op!(
            z.len() == 1 || z.len() == d.n || z.len() == per_batch * d.n,
            "{op}: B's zero point {z} must be a scalar or one per column"
        );
    }
    Ok(d.out)
}

/// The i32 product `(A - a_zp) · (B - b_zp)`, with MatMul's broadcasting.
pub(crate) fn matmul_integer(
    a: &TensorView<'_>,
    b: &TensorView<'_>,
    azp: Option<&TensorView<'_>>,
    bzp: Option<&TensorView<'_>>,
    out: &mut [i32],
) -> Result<()> {
    let d = dims(a.shape, b.shape)?;
    let (k, n) = (d.k.max(1), d.n.max(1));
    let av = minus_zero_point(a, azp, |i| i / k)?;
    let bv = minus_zero_point(b, bzp, |i| (i / (k * n)) * n + i % n)?;
    batched(&d, &av, &bv, out, gemm_naive::<i32>);
    Ok(())
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MatMulInteger {}

impl OpImpl for MatMulInteger {
    fn name(&self) -> &'static str {
        "MatMulInteger"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let a = input(inputs, 0, self.name())?;
        let b = input(inputs, 1, self.name())?;
        let shape = matmul_integer_shape(a, b, opt_input(inputs, 2), opt_input(inputs, 3), self.name())?;
        Ok(vec![TensorType::new(DType::I32, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let a = input(inputs, 0, self.name())?;
        let b = input(inputs, 1, self.name())?;
        let (azp, bzp) = (opt_input(inputs, 2), opt_input(inputs, 3));
        matmul_integer(&a, &b, azp.as_ref(), bzp.as_ref(), outputs[0].as_mut_slice()?)
    }
}

/// Checks ConvInteger's operands (X's zero point a scalar, W's a scalar or
/// one per output channel) and returns the output shape.
pub(crate) fn conv_integer_shape(
    c: &Conv,
    x: &TensorType,
    w: &TensorType,
    xzp: Option<&TensorType>,
    wzp: Option<&TensorType>,
    op: &str,
) -> Result<Vec<usize>> {
    ensure_op!(is_int8(x.dtype) && is_int8(w.dtype), "{op}: operands must be u8 or i8, got {} and {}", x.dtype, w.dtype);
    let g = c.geometry(&x.shape, &w.shape, None, op)?;
    if let Some(z) = xzp {
        ensure_op!(z.dtype == x.dtype && z.len() == 1, "{op}: X's zero point {z} must be a {} scalar", x.dtype);
    }
    if let Some(z) = wzp {
        ensure_op!(
            z.dtype == w.dtype && (z.len() == 1 || z.len() == g.m),
            "{op}: W's zero point {z} must be a {} scalar or one per output channel",
            w.dtype
        );
    }
    Ok(g.output_shape())
}

/// The i32 convolution `(X - x_zp) * (W - w_zp)`; padding reads as the
/// zero point, i.e. contributes nothing.
pub(crate) fn conv_integer(
    c: &Conv,
    x: &TensorView<'_>,
    w: &TensorView<'_>,
    xzp: Option<&TensorView<'_>>,
    wzp: Option<&TensorView<'_>>,
    out: &mut [i32],
) -> Result<()> {
    let g = c.geometry(x.shape, w.shape, None, "ConvInteger")?;
    let per_filter = w.len() / g.m.max(1);
    let xv = minus_zero_point(x, xzp, |_| 0)?;
    let wv = minus_zero_point(w, wzp, |i| i / per_filter.max(1))?;
    conv::<i32>(&g, &xv, &wv, None, out);
    Ok(())
}

/// ConvInteger; the window fields are those of [`Conv`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConvInteger {
    pub conv: Conv,
}

impl OpImpl for ConvInteger {
    fn name(&self) -> &'static str {
        "ConvInteger"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        let w = input(inputs, 1, self.name())?;
        let shape = conv_integer_shape(&self.conv, x, w, opt_input(inputs, 2), opt_input(inputs, 3), self.name())?;
        Ok(vec![TensorType::new(DType::I32, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        let w = input(inputs, 1, self.name())?;
        let (xzp, wzp) = (opt_input(inputs, 2), opt_input(inputs, 3));
        conv_integer(&self.conv, &x, &w, xzp.as_ref(), wzp.as_ref(), outputs[0].as_mut_slice()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn matmul_integer_subtracts_per_column_zero_points() {
        let a = Tensor::from_vec(vec![1, 2], vec![3u8, 4]).unwrap();
        let b = Tensor::from_vec(vec![2, 2], vec![1u8, 2, 3, 4]).unwrap();
        let azp = Tensor::scalar(1u8);
        let bzp = Tensor::from_vec(vec![2], vec![1u8, 2]).unwrap();
        let op: Op = MatMulInteger {}.into();
        let y = op.eval_owned(&[Some(&a), Some(&b), Some(&azp), Some(&bzp)]).unwrap().remove(0);
        // (A - 1) = [2, 3]; (B - [1, 2]) = [[0, 0], [2, 2]].
        assert_eq!(y.as_slice::<i32>().unwrap(), &[6, 6]);
    }

    #[test]
    fn conv_integer_pads_with_the_zero_point() {
        let x = Tensor::from_vec(vec![1, 1, 3], vec![11i8, 12, 13]).unwrap();
        let w = Tensor::from_vec(vec![1, 1, 2], vec![1i8, 1]).unwrap();
        let xzp = Tensor::scalar(10i8);
        let conv = Conv { kernel_shape: vec![2], strides: vec![1], pads: vec![1, 0], dilations: vec![1], group: 1 };
        let op: Op = ConvInteger { conv }.into();
        let y = op.eval_owned(&[Some(&x), Some(&w), Some(&xzp)]).unwrap().remove(0);
        assert_eq!(y.as_slice::<i32>().unwrap(), &[1, 3, 5]);
    }
}
