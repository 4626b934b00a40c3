//! QLinearMatMul and QLinearConv: integer products of quantized operands,
//! requantized to the output's scale and zero point:
//! `y = saturate(round_half_even(acc · a_scale · b_scale / y_scale) + y_zero_point)`
//! where `acc` is the exact i32 product of the operands minus their zero
//! points (plus QLinearConv's i32 bias).

use super::common::{f32_values, int_range, quantize_value, round_to, write_ints};
use crate::dtype::DType;
use crate::ensure_op;
use crate::error::Result;
use crate::ops::linalg::integer::{conv_integer, conv_integer_shape, is_int8, matmul_integer, matmul_integer_shape};
use crate::ops::linalg::Conv;
use crate::ops::{input, opt_input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

/// Checks a scale input: float, with one of the allowed element counts.
fn check_scale(s: &TensorType, allowed: &[usize], what: &str, op: &str) -> Result<()> {
    ensure_op!(s.dtype.is_float(), "{op}: {what} must be float, got {}", s.dtype);
    ensure_op!(allowed.contains(&s.len()), "{op}: {what} {s} has an unsupported number of elements");
    Ok(())
}

/// The output type: the output zero point's, else `default`.
fn output_dtype(yzp: Option<&TensorType>, default: DType, op: &str) -> Result<DType> {
    let d = yzp.map_or(default, |z| z.dtype);
    ensure_op!(is_int8(d), "{op}: output type must be u8 or i8, got {d}");
    if let Some(z) = yzp {
        ensure_op!(z.len() == 1, "{op}: y_zero_point {z} must be a scalar");
    }
    Ok(d)
}

/// Requantizes accumulators: `multiplier(i)` gives the combined scale of
/// element `i`.
fn requantize(
    acc: &[i32],
    multiplier: impl Fn(usize) -> f32,
    yzp: Option<TensorView<'_>>,
    out: &mut TensorViewMut<'_>,
) -> Result<()> {
    let zp = match yzp {
        Some(z) => z.to_i64_vec()?.first().copied().unwrap_or(0) as f32,
        None => 0.0,
    };
    let range = int_range(out.dtype)?;
    let values = acc.iter().enumerate().map(|(i, &a)| {
        let v = (a as f64 * multiplier(i) as f64) as f32;
        quantize_value(v, zp, range)
    });
    write_ints(out, values)
}

/// `round(round(a · b) / y)` in the scales' precision.
fn combined_scale(d: DType, a: f32, b: f32, y: f32) -> f32 {
    round_to(d, round_to(d, a * b) / y)
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QLinearMatMul {}

impl OpImpl for QLinearMatMul {
    fn name(&self) -> &'static str {
        "QLinearMatMul"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let op = self.name();
        let a = input(inputs, 0, op)?;
        let b = input(inputs, 3, op)?;
        let shape = matmul_integer_shape(a, b, opt_input(inputs, 2), opt_input(inputs, 5), op)?;
        let (m, n) = (
            if a.shape.len() >= 2 { a.shape[a.shape.len() - 2] } else { 1 },
            if b.shape.len() >= 2 { b.shape[b.shape.len() - 1] } else { 1 },
        );
        check_scale(input(inputs, 1, op)?, &[1, m], "a_scale", op)?;
        check_scale(input(inputs, 4, op)?, &[1, n], "b_scale", op)?;
        check_scale(input(inputs, 6, op)?, &[1], "y_scale", op)?;
        let d = output_dtype(opt_input(inputs, 7), a.dtype, op)?;
        Ok(vec![TensorType::new(d, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let op = self.name();
        let a = input(inputs, 0, op)?;
        let b = input(inputs, 3, op)?;
        let (azp, bzp) = (opt_input(inputs, 2), opt_input(inputs, 5));
        let out = &mut outputs[0];
        let mut acc = vec![0i32; out.len()];
        matmul_integer(&a, &b, azp.as_ref(), bzp.as_ref(), &mut acc)?;
        let sd = input(inputs, 1, op)?.dtype;
        let a_scale = f32_values(&input(inputs, 1, op)?)?;
        let b_scale = f32_values(&input(inputs, 4, op)?)?;
        let y_scale = f32_values(&input(inputs, 6, op)?)?[0];
        let n = if b.shape.len() >= 2 { b.shape[b.shape.len() - 1] } else { 1 }.max(1);
        let multiplier = |i: usize| {
            let sa = a_scale[(i / n) % a_scale.len()];
            let sb = b_scale[(i % n) % b_scale.len()];
            combined_scale(sd, sa, sb, y_scale)
        };
        requantize(&acc, multiplier, opt_input(inputs, 7), out)
    }
}

/// QLinearConv; the window fields are those of [`Conv`]. Inputs: x,
/// x_scale, x_zero_point, w, w_scale (scalar or per output channel),
/// w_zero_point, y_scale, y_zero_point, optional i32 bias.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QLinearConv {
    pub conv: Conv,
}

impl OpImpl for QLinearConv {
    fn name(&self) -> &'static str {
        "QLinearConv"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let op = self.name();
        let x = input(inputs, 0, op)?;
        let w = input(inputs, 3, op)?;
        let shape = conv_integer_shape(&self.conv, x, w, opt_input(inputs, 2), opt_input(inputs, 5), op)?;
        let m = shape[1];
        check_scale(input(inputs, 1, op)?, &[1], "x_scale", op)?;
        check_scale(input(inputs, 4, op)?, &[1, m], "w_scale", op)?;
        check_scale(input(inputs, 6, op)?, &[1], "y_scale", op)?;
        if let Some(b) = opt_input(inputs, 8) {
            ensure_op!(b.dtype == DType::I32 && b.shape == [m], "{op}: bias {b} must be i32[{m}]");
        }
        let d = output_dtype(opt_input(inputs, 7), x.dtype, op)?;
        Ok(vec![TensorType::new(d, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let op = self.name();
        let x = input(inputs, 0, op)?;
        let w = input(inputs, 3, op)?;
        let (xzp, wzp) = (opt_input(inputs, 2), opt_input(inputs, 5));
        let out = &mut outputs[0];
        let mut acc = vec![0i32; out.len()];
        conv_integer(&self.conv, &x, &w, xzp.as_ref(), wzp.as_ref(), &mut acc)?;
        let (m, plane) = (out.shape[1].max(1), out.shape[2..].iter().product::<usize>().max(1));
        if let Some(b) = opt_input(inputs, 8) {
            let bias = b.as_slice::<i32>()?;
            for (i, a) in acc.iter_mut().enumerate() {
                *a = a.wrapping_add(bias[(i / plane) % m]);
            }
        }
        let sd = input(inputs, 1, op)?.dtype;
        let x_scale = f32_values(&input(inputs, 1, op)?)?[0];
        let w_scale = f32_values(&input(inputs, 4, op)?)?;
        let y_scale = f32_values(&input(inputs, 6, op)?)?[0];
        let multiplier = |i: usize| combined_scale(sd, x_scale, w_scale[((i / plane) % m) % w_scale.len()], y_scale);
        requantize(&acc, multiplier, opt_input(inputs, 7), out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn qlinear_matmul_requantizes() {
        let a = Tensor::from_vec(vec![1, 2], vec![12u8, 14]).unwrap();
        let b = Tensor::from_vec(vec![2, 1], vec![3u8, 5]).unwrap();
        let (a_s, a_z) = (Tensor::scalar(0.5f32), Tensor::scalar(10u8));
        let (b_s, b_z) = (Tensor::scalar(1f32), Tensor::scalar(1u8));
        let (y_s, y_z) = (Tensor::scalar(0.25f32), Tensor::scalar(100u8));
        let op: Op = QLinearMatMul {}.into();
        let ins = [Some(&a), Some(&a_s), Some(&a_z), Some(&b), Some(&b_s), Some(&b_z), Some(&y_s), Some(&y_z)];
        let y = op.eval_owned(&ins).unwrap().remove(0);
        // acc = 2*2 + 4*4 = 20; 20 * 0.5 / 0.25 = 40; + 100.
        assert_eq!(y.as_slice::<u8>().unwrap(), &[140]);
    }
}
