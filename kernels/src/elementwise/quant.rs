//! QuantizeLinear and DequantizeLinear as map kernels. Each element finds
//! its scale (and zero point) as the runtime's `ScaleLayout` says: element
//! `(o, j, k)` (outer index, index along the axis, inner index) uses entry
//! `o·outer_stride + (j / block)·axis_stride + k·inner_stride`, which covers
//! per-tensor, per-axis and blocked scales with the same code.

use super::map::{Broadcast, MapKernel};
use super::storage::{byte_ctype, float8_format, FLOAT8};
use super::{ctype, input, is_f32_storage, output};
use crate::{unsupported, LayerIo, Selection, SmLimits, Unsupported};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::quant::QuantOp;
use trtc_runtime::DType;

const FAMILY: &str = "quant";

/// The scale index of output element `i`, from the layout arguments.
const SCALE_INDEX: &str = "const IDX qk = i % (IDX)inner;\nconst IDX qt = i / (IDX)inner;\nconst IDX qj = qt % (IDX)axis_len;\nconst IDX qo = qt / (IDX)axis_len;\nconst IDX si = qo * (IDX)outer_stride + (qj / (IDX)block) * (IDX)axis_stride + qk * (IDX)inner_stride;\n";

pub(super) fn candidates(op: &QuantOp, io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let (axis, block_size) = match op {
        QuantOp::QuantizeLinear(q) => (q.axis, q.block_size),
        QuantOp::DequantizeLinear(d) => (d.axis, d.block_size),
        op => return unsupported(format!("{} is not a map (no CUDA kernel)", op.as_impl().name())),
    };
    let name = op.as_impl().name();
    let x = input(io, 0)?;
    let scale = input(io, 1)?;
    let zp = io.inputs.get(2).copied().flatten();
    let out = output(io, 0)?;
    if out.shape != x.shape {
        return unsupported(format!("{name}: input {x} and output {out} differ in shape"));
    }
    if !is_f32_storage(scale.dtype) {
        return unsupported(format!("{name}: {} scales", scale.dtype));
    }
    let layout = layout_args(&x.shape, &scale.shape, axis, block_size)?;
    let st = ctype(scale.dtype)?;
    // Without a zero point (absent, or no slot for it) the kernel has no
    // parameter for it.
    let has_zp = zp.is_some();
    // An 8-bit float's zero point must be 0: any other value traps, as the
    // CPU op fails.
    let float8_zero =
        |f: u8| if has_zp { format!("if (trtc_f8_decode(zero[si], {f}) != 0.0f) __trap();\n") } else { String::new() };
    let (entry, body, zt) = match op {
        QuantOp::QuantizeLinear(_) => {
            let load = match x.dtype {
                DType::F32 | DType::F16 => "ld(p0)",
                DType::I32 => "(float)*p0",
                d => return unsupported(format!("QuantizeLinear of {d}")),
            };
            if let Some(f) = float8_format(out.dtype) {
                // x / scale in f32, encoded from its exact value, saturating
                // (E4M3FN by the f32 encoder the FP8 layers use).
                let encode = if f == 0 {
                    format!("trtc_e4m3_sat({load} / ld(scale + si))")
                } else {
                    format!("trtc_f8_encode((double)({load} / ld(scale + si)), {f}, true)")
                };
                let body = format!("{SCALE_INDEX}{}*q = {encode};", float8_zero(f));
                ("quantize_float8", body, "unsigned char")
            } else {
                // The CPU's range of the integer type.
                let Ok((lo, hi)) = trtc_runtime::ops::quant::int_range(out.dtype) else {
                    return unsupported(format!("QuantizeLinear to {}", out.dtype));
                };
                let zp_load = if has_zp { "(float)zero[si]" } else { "0.0f" };
                let ot = byte_ctype(out.dtype)?;
                // Round half to even, add the zero point, saturate; NaN maps to
                // the zero point (which is in range).
                let body = format!(
                    "{SCALE_INDEX}const float zp = {zp_load};\nconst float r = rintf({load} / ld(scale + si)) + zp;\nconst float c = r != r ? zp : (r < {lo:?}f ? {lo:?}f : (r > {hi:?}f ? {hi:?}f : r));\n*q = ({ot})c;"
                );
                ("quantize", body, ot)
            }
        }
        _ => {
            if !is_f32_storage(out.dtype) {
                return unsupported(format!("DequantizeLinear to {}", out.dtype));
            }
            if let Some(f) = float8_format(x.dtype) {
                // The exact value times the scale, in f32.
                let body = format!("{SCALE_INDEX}{}st(q, trtc_f8_decode(*p0, {f}) * ld(scale + si));", float8_zero(f));
                ("dequantize_float8", body, "unsigned char")
            } else {
                if !matches!(x.dtype, DType::U8 | DType::I8 | DType::U16 | DType::I16 | DType::I32 | DType::U4 | DType::I4) {
                    return unsupported(format!("DequantizeLinear of {}", x.dtype));
                }
                let zp_load = if has_zp { "(long long)zero[si]" } else { "0" };
                // (x - zero point) in i64, rounded to f32, times the scale.
                let body = format!(
                    "{SCALE_INDEX}const long long zp = {zp_load};\nst(q, (float)((long long)*p0 - zp) * ld(scale + si));"
                );
                ("dequantize", body, byte_ctype(x.dtype)?)
            }
        }
    };
    if let Some(z) = zp {
        if byte_ctype(z.dtype)? != zt || z.len() != scale.len() {
            return unsupported(format!("{name}: zero point {z} does not match the scale {scale}"));
        }
    }
    let n = out.len() as u64;
    let mut params = vec![(format!("const {st}* __restrict__ scale"), KernelArg::Input(1))];
    if has_zp {
        params.push((format!("const {zt}* __restrict__ zero"), KernelArg::Input(2)));
    }
    for (name, v) in ["inner", "axis_len", "block", "outer_stride", "axis_stride", "inner_stride"].iter().zip(layout) {
        params.push((format!("long long {name}"), KernelArg::I64(v as i64)));
    }
    let kernel = MapKernel {
        entry: format!("trtc_elementwise_{entry}"),
        prelude: FLOAT8.to_string(),
        out_type: byte_ctype(out.dtype)?.to_string(),
        inputs: vec![(byte_ctype(x.dtype)?.to_string(), KernelArg::Input(0))],
        params,
        body,
    };
    Ok(kernel.candidates(FAMILY, &Broadcast::same(n, 1), limits))
}

/// `[inner, axis_len, block, outer_stride, axis_stride, inner_stride]` of
/// the runtime's scale layout (a one-element, unblocked scale is per tensor).
fn layout_args(x: &[usize], scale: &[usize], axis: usize, block_size: usize) -> Result<[u64; 6], Unsupported> {
    let total: usize = x.iter().product();
    let n: usize = scale.iter().product();
    // Sizes of 0 only occur in empty tensors, where no element reads them;
    // they are raised to 1 so that no launch ever divides by zero.
    if n == 1 && block_size == 0 {
        return Ok([1, total.max(1) as u64, 1, 0, 0, 0]);
    }
    if axis >= x.len() {
        return unsupported(format!("quantization axis {axis} out of range for {x:?}"));
    }
    let inner: usize = x[axis + 1..].iter().product();
    let axis_len = x[axis];
    if block_size == 0 {
        if scale != [axis_len] {
            return unsupported(format!("scale {scale:?} does not fit {x:?} along axis {axis}"));
        }
        return Ok([inner.max(1) as u64, axis_len.max(1) as u64, 1, 0, 1, 0]);
    }
    let blocks = axis_len.div_ceil(block_size);
    let fits = scale.len() == x.len()
        && scale.iter().zip(x).enumerate().all(|(d, (&s, &v))| if d == axis { s == blocks } else { s == v });
    if !fits {
        return unsupported(format!("scale {scale:?} does not fit {x:?} in blocks of {block_size} along axis {axis}"));
    }
    Ok([inner.max(1) as u64, axis_len.max(1) as u64, block_size as u64, (blocks * inner) as u64, inner as u64, 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_layouts_match_the_runtime() {
        assert_eq!(layout_args(&[2, 3], &[], 0, 0).unwrap(), [1, 6, 1, 0, 0, 0]);
        assert_eq!(layout_args(&[2, 3, 4], &[3], 1, 0).unwrap(), [4, 3, 1, 0, 1, 0]);
        assert_eq!(layout_args(&[2, 5], &[2, 3], 1, 2).unwrap(), [1, 5, 2, 3, 1, 1]);
        assert!(layout_args(&[2, 3], &[2], 1, 0).is_err());
    }
}
