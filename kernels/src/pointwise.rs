//! Fused pointwise programs (`FusedOp::Pointwise`) as map kernels: the
//! program becomes straight-line f32 code, one `const float` per
//! instruction, and the inputs broadcast through the elementwise family's
//! map kernel, whose sizes and strides are arguments. The source depends on
//! the program, the inputs' storage types and the broadcast structure only.
//!
//! The CPU reference evaluates the program one instruction at a time in f32,
//! rounding after each; the kernel does the same (the `__f*_rn` intrinsics
//! keep the compiler from contracting a multiply and an add into one fused
//! multiply-add).

use crate::activation::{lit, unary};
use crate::elementwise::map::{Broadcast, MapKernel};
use crate::elementwise::{ctype, is_f32_storage};
use crate::{unsupported, KernelSource, LayerIo, Selection, SmLimits};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::fused::{Instr, Pointwise, PointwiseBinary};
use trtc_runtime::DType;

/// The kernel body of a program: `p<k>` points at input `k`'s element, `q`
/// at the output's. `None` when an instruction has no CUDA expression or
/// refers to a missing value.
fn body(program: &[Instr], inputs: usize) -> Option<String> {
    let mut body = String::new();
    for (s, ins) in program.iter().enumerate() {
        let e = match *ins {
            Instr::Input(k) if k < inputs => format!("ld(p{k})"),
            Instr::Const(c) => lit(c),
            Instr::Unary(kind, a) if a < s => unary(kind, &format!("v{a}"))?,
            Instr::Binary(op, a, b) if a < s && b < s => {
                let f = match op {
                    PointwiseBinary::Add => "__fadd_rn",
                    PointwiseBinary::Sub => "__fsub_rn",
                    PointwiseBinary::Mul => "__fmul_rn",
                    PointwiseBinary::Div => "__fdiv_rn",
                };
                format!("{f}(v{a}, v{b})")
            }
            _ => return None,
        };
        body.push_str(&format!("const float v{s} = {e};\n"));
    }
    let last = program.len().checked_sub(1)?;
    body.push_str(&format!("st(q, v{last});"));
    Some(body)
}

/// The map kernel of a program over inputs of the given storage dtypes and
/// shapes, with its broadcast plan.
fn kernel(program: &[Instr], out_shape: &[usize], inputs: &[(DType, &[usize])], out: DType) -> Option<(MapKernel, Broadcast)> {
    let shapes: Vec<&[usize]> = inputs.iter().map(|(_, s)| *s).collect();
    let b = Broadcast::new(out_shape, &shapes).ok()?;
    let mut ins = Vec::new();
    for (k, (d, _)) in inputs.iter().enumerate() {
        ins.push((ctype(*d).ok()?.to_string(), KernelArg::Input(k as u32)));
    }
    let k = MapKernel {
        entry: "trtc_pointwise".into(),
        prelude: String::new(),
        out_type: ctype(out).ok()?.to_string(),
        inputs: ins,
        params: Vec::new(),
        body: body(program, inputs.len())?,
    };
    Some((k, b))
}

/// The kernel of a program on f32 tensors of these shapes (the output's and
/// the inputs'), or `None` when some instruction has no CUDA expression.
/// Only the shapes' broadcast structure reaches the source.
pub fn source(program: &[Instr], out_shape: &[usize], input_shapes: &[Vec<usize>]) -> Option<KernelSource> {
    let inputs: Vec<(DType, &[usize])> = input_shapes.iter().map(|s| (DType::F32, s.as_slice())).collect();
    let (k, b) = kernel(program, out_shape, &inputs, DType::F32)?;
    Some(k.instantiate(&b).0)
}

/// The candidates of a fused pointwise layer (f32 tensors, or f16 ones
/// under HalfIo).
pub(crate) fn candidates(p: &Pointwise, io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let Some(out) = io.outputs.first() else { return unsupported("Pointwise: no output") };
    let mut inputs = Vec::new();
    for (k, t) in io.inputs.iter().enumerate() {
        match t {
            Some(t) if is_f32_storage(t.dtype) => inputs.push((t.dtype, t.shape.as_slice())),
            Some(t) => return unsupported(format!("Pointwise: input {k} is {}", t.dtype)),
            None => return unsupported(format!("Pointwise: input {k} is missing")),
        }
    }
    if !is_f32_storage(out.dtype) {
        return unsupported(format!("Pointwise: {} output", out.dtype));
    }
    let Some((k, b)) = kernel(&p.program, &out.shape, &inputs, out.dtype) else {
        return unsupported(
            "Pointwise: the program has an instruction without a CUDA expression, or its inputs do not broadcast",
        );
    };
    Ok(k.candidates("pointwise", &b, limits))
}
