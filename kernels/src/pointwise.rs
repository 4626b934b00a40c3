//! Pointwise kernels, generated per node from its expression. Shapes are
//! static, so the output's dims and each input's broadcast strides are baked
//! into the source as constants.

use crate::activation::unary;
use crate::{KernelSource, COMMON};
use trtc_runtime::ops::fused::{Instr, PointwiseBinary};

/// The generated kernel computes `out[i] = f(in_0[..], in_1[..], ...)` for
/// `i < n`, one element per thread (grid-stride loop).
pub fn source(program: &[Instr], out_shape: &[usize], input_shapes: &[Vec<usize>]) -> Option<KernelSource> {
    let rank = out_shape.len();
    let n: usize = out_shape.iter().product();
    let mut body = String::new();
    // The coordinates of output element i, then each input's offset.
    let mut out_strides = vec![1usize; rank];
    for d in (0..rank.saturating_sub(1)).rev() {
        out_strides[d] = out_strides[d + 1] * out_shape[d + 1];
    }
    for (k, shape) in input_shapes.iter().enumerate() {
        let off = rank - shape.len();
        let mut own = vec![1usize; shape.len()];
        for d in (0..shape.len().saturating_sub(1)).rev() {
            own[d] = own[d + 1] * shape[d + 1];
        }
        let mut terms = Vec::new();
        for d in 0..rank {
            if d < off || shape[d - off] == 1 {
                continue;
            }
            terms.push(format!("((i / {}ull) % {}ull) * {}ull", out_strides[d], out_shape[d], own[d - off]));
        }
        let idx = if terms.is_empty() { "0ull".to_string() } else { terms.join(" + ") };
        body.push_str(&format!("        const u64 o{k} = {idx};\n"));
    }
    for (s, ins) in program.iter().enumerate() {
        let e = match ins {
            Instr::Input(k) => format!("in{k}[o{k}]"),
            Instr::Const(c) => {
                if c.is_finite() {
                    format!("{c:?}f")
                } else {
                    return None;
                }
            }
            Instr::Unary(kind, a) => unary(*kind, &format!("v{a}"))?,
            Instr::Binary(op, a, b) => {
                let sym = match op {
                    PointwiseBinary::Add => "+",
                    PointwiseBinary::Sub => "-",
                    PointwiseBinary::Mul => "*",
                    PointwiseBinary::Div => "/",
                };
                format!("(v{a} {sym} v{b})")
            }
        };
        body.push_str(&format!("        const float v{s} = {e};\n"));
    }
    let params: Vec<String> = (0..input_shapes.len()).map(|k| format!("const float* __restrict__ in{k}")).collect();
    let last = program.len().checked_sub(1)?;
    let src = format!(
        "{COMMON}\nextern \"C\" __global__ void trtc_pointwise(float* __restrict__ out{}{}) {{\n    for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < {n}ull; i += (u64)gridDim.x * blockDim.x) {{\n{body}        out[i] = v{last};\n    }}\n}}\n",
        if params.is_empty() { "" } else { ", " },
        params.join(", ")
    );
    Some(KernelSource { entry: "trtc_pointwise".into(), source: src })
}
