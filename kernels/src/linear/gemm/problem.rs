//! A Gemm, MatMul, fused Linear, Int8Linear or Fp8Linear layer as one
//! batched GEMM:
//! `Y[z][r][c] = epilogue(Σ_k A[z][r][k] · B[z][k][c])` with the sizes,
//! strides and epilogue operands the kernels take (see `super::simt`).
//!
//! Each layer is read the way its CPU reference op computes:
//! - Gemm: `alpha · A'·B' + beta · C`, C broadcast to `[M, N]` (ignored
//!   when `beta` is 0, as the CPU does);
//! - MatMul: numpy batching; batch dimensions that only A has fold into M
//!   (one big GEMM with B shared), other batch dimensions become the grid's
//!   z as up to two groups of dimensions with one stride each per operand;
//! - fused Linear: Gemm's bias is its C (times `beta`), MatMul's bias is
//!   added like the Add it replaced (broadcast to the output); then the
//!   residual, then the activation;
//! - Int8Linear and Fp8Linear: see `gemm_common.cuh`; the bias and weight
//!   scales are per output channel (the last axis).

use crate::linear::gemm::simt::{AbType, GemmSpec};
use crate::{activation, unsupported, LayerIo, Unsupported};
use trtc_runtime::ops::fused::{Epilogue, FusedOp, LinearKind};
use trtc_runtime::ops::linalg::{Gemm, LinalgOp};
use trtc_runtime::ops::precision::{Fp8Output, Int8Output, PrecisionOp};
use trtc_runtime::ops::util::{broadcast_shapes, broadcast_strides};
use trtc_runtime::{DType, Op, TensorType};

/// An operand read with one stride per index of the kernel's index space
/// `(z0, z1, r, c)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Strided {
    /// The layer input it is.
    pub input: u32,
    pub dtype: DType,
    /// Element strides for z0, z1, r and c (0 broadcasts).
    pub strides: [i64; 4],
}

/// One layer as a batched GEMM.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub spec: GemmSpec,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// The batch grid: `z = z0 · nz[1] + z1`.
    pub nz: [usize; 2],
    /// Element strides of A and B per z0 and z1.
    pub sa: [i64; 2],
    pub sb: [i64; 2],
    /// The addend E (Gemm's C or a bias), scaled by `beta`.
    pub addend: Option<Strided>,
    /// The residual's input (laid out like Y).
    pub residual: Option<u32>,
    /// The per-channel weight scales' input (int8).
    pub w_scale: Option<u32>,
    pub alpha: f32,
    pub beta: f32,
    pub x_scale: f32,
    pub y_scale: f32,
}

impl Problem {
    /// The batch entries (the grid's z).
    pub fn batch(&self) -> usize {
        self.nz[0] * self.nz[1]
    }

    /// The layer's GEMM, or why no kernel computes it.
    pub fn of(io: &LayerIo<'_>) -> Result<Problem, Unsupported> {
        let name = io.op.name();
        let ty = |i: usize| io.inputs.get(i).copied().flatten();
        let out = match io.outputs.as_slice() {
            [o] => *o,
            _ => return unsupported(format!("{name}: expected one output")),
        };
        let (Some(a), Some(b)) = (ty(0), ty(1)) else { return unsupported(format!("{name}: missing an operand")) };
        let p = match io.op {
            Op::Linalg(LinalgOp::Gemm(g)) => {
                let float = float_storage(name, &[Some(a), Some(b), ty(2)], out)?;
                let c = if g.beta != 0.0 { ty(2).map(|c| (2, c)) } else { None };
                gemm(float, g, a, b, c, out, None, &Epilogue::default())?
            }
            Op::Linalg(LinalgOp::MatMul(_)) => {
                let float = float_storage(name, &[Some(a), Some(b)], out)?;
                matmul(float, a, b, out, None, None, &Epilogue::default())?
            }
            Op::Fused(FusedOp::Linear(l)) => {
                let bias = if l.bias { ty(2).map(|t| (2, t)) } else { None };
                let residual = if l.epilogue.residual { Some((3, input(io, 3)?)) } else { None };
                let float = float_storage(name, &[Some(a), Some(b), bias.map(|b| b.1), residual.map(|r| r.1)], out)?;
                match &l.kind {
                    LinearKind::Gemm(g) => {
                        let c = if g.beta != 0.0 { bias } else { None };
                        gemm(float, g, a, b, c, out, residual, &l.epilogue)?
                    }
                    LinearKind::MatMul(_) => matmul(float, a, b, out, bias, residual, &l.epilogue)?,
                    LinearKind::Conv(_) => return unsupported(format!("{name}: a convolution is not a GEMM layer")),
                }
            }
            Op::Precision(PrecisionOp::Int8Linear(l)) => {
                let (out_dtype, y_scale) = match l.output {
                    Int8Output::F32 => (DType::F32, None),
                    Int8Output::F16 => (DType::F16, None),
                    Int8Output::Int8 { scale } => (DType::I8, Some(scale)),
                };
                let q = Quantized { ab: AbType::I8, kind: &l.kind, x_scale: l.x_scale, bias: l.bias, epilogue: &l.epilogue };
                q.problem(io, a, b, out, out_dtype, y_scale)?
            }
            Op::Precision(PrecisionOp::Fp8Linear(l)) => {
                let (out_dtype, y_scale) = match l.output {
                    Fp8Output::F32 => (DType::F32, None),
                    Fp8Output::F16 => (DType::F16, None),
                    Fp8Output::Fp8 { scale } => (DType::F8E4M3FN, Some(scale)),
                };
                let q = Quantized { ab: AbType::F8E4M3, kind: &l.kind, x_scale: l.x_scale, bias: l.bias, epilogue: &l.epilogue };
                q.problem(io, a, b, out, out_dtype, y_scale)?
            }
            op => return unsupported(format!("{}: not a GEMM layer", op.name())),
        };
        p.check_limits(name)?;
        Ok(p)
    }

    /// Sizes the kernels' 32-bit indices and the grid can hold.
    fn check_limits(&self, name: &str) -> Result<(), Unsupported> {
        let i32max = i32::MAX as usize;
        if self.m == 0 || self.n == 0 {
            return unsupported(format!("{name}: empty output"));
        }
        if self.m > i32max || self.n > i32max || self.k > i32max || self.nz[1] > i32max {
            return unsupported(format!("{name}: {}x{}x{} exceeds 32-bit indexing", self.m, self.n, self.k));
        }
        if self.batch() > 65535 {
            return unsupported(format!("{name}: {} batch entries exceed the grid's z", self.batch()));
        }
        Ok(())
    }
}

/// An `Int8Linear` or `Fp8Linear` of Gemm or MatMul kind: quantized A and
/// B, per-channel weight scales (input 2), bias (input 3), residual (input 4).
struct Quantized<'a> {
    ab: AbType,
    kind: &'a LinearKind,
    x_scale: f32,
    bias: bool,
    epilogue: &'a Epilogue,
}

impl Quantized<'_> {
    fn problem(
        &self,
        io: &LayerIo<'_>,
        a: &TensorType,
        b: &TensorType,
        out: &TensorType,
        out_dtype: DType,
        y_scale: Option<f32>,
    ) -> Result<Problem, Unsupported> {
        let name = io.op.name();
        let operands = match self.ab {
            AbType::F8E4M3 => DType::F8E4M3FN,
            _ => DType::I8,
        };
        if a.dtype != operands || b.dtype != operands {
            return unsupported(format!("{name}: x and w must be {operands}"));
        }
        let residual = if self.epilogue.residual { Some((4, input(io, 4)?)) } else { None };
        if let Some((_, r)) = residual {
            float_type(name, r)?;
        }
        if out.dtype != out_dtype {
            return unsupported(format!("{name}: output {out} does not match its {out_dtype} output"));
        }
        let mut p = match self.kind {
            LinearKind::Gemm(g) => {
                let g = Gemm { beta: 0.0, ..g.clone() };
                gemm(self.ab, &g, a, b, None, out, residual, self.epilogue)?
            }
            LinearKind::MatMul(_) => {
                if b.shape.len() < 2 {
                    return unsupported(format!("{name}: a 1-D weight has no output channel axis"));
                }
                matmul(self.ab, a, b, out, None, residual, self.epilogue)?
            }
            LinearKind::Conv(_) => return unsupported(format!("{name}: a convolution is not a GEMM layer")),
        };
        let ws = input(io, 2)?;
        if ws.dtype != DType::F32 || ws.shape != [p.n] {
            return unsupported(format!("{name}: w_scale {ws} is not f32[{}]", p.n));
        }
        p.w_scale = Some(2);
        if self.bias {
            let bias = input(io, 3)?;
            if bias.dtype != DType::F32 || bias.shape != [p.n] {
                return unsupported(format!("{name}: bias {bias} is not f32[{}]", p.n));
            }
            p.addend = Some(Strided { input: 3, dtype: DType::F32, strides: [0, 0, 0, 1] });
            p.spec.addend = Some(DType::F32);
            p.beta = 1.0;
        }
        p.x_scale = self.x_scale;
        if let Some(scale) = y_scale {
            p.y_scale = scale;
        }
        Ok(p)
    }
}

fn input<'a>(io: &LayerIo<'a>, i: usize) -> Result<&'a TensorType, Unsupported> {
    match io.inputs.get(i).copied().flatten() {
        Some(t) => Ok(t),
        None => unsupported(format!("{}: input {i} is missing", io.op.name())),
    }
}

fn float_type(name: &str, t: &TensorType) -> Result<AbType, Unsupported> {
    match t.dtype {
        DType::F32 => Ok(AbType::F32),
        DType::F16 => Ok(AbType::F16),
        d => unsupported(format!("{name}: no GEMM kernel for {d}")),
    }
}

/// The storage of a float layer's A and B (f32 or f16, the same for both);
/// every other float operand and the output must be f32 or f16.
fn float_storage(name: &str, operands: &[Option<&TensorType>], out: &TensorType) -> Result<AbType, Unsupported> {
    let Some(Some(a)) = operands.first() else { return unsupported(format!("{name}: no A operand")) };
    let ab = float_type(name, a)?;
    if operands[1].map(|b| b.dtype) != operands[0].map(|a| a.dtype) {
        return unsupported(format!("{name}: A and B differ in type"));
    }
    for t in operands.iter().flatten() {
        float_type(name, t)?;
    }
    float_type(name, out)?;
    Ok(ab)
}

fn activation_of(name: &str, e: &Epilogue) -> Result<Option<String>, Unsupported> {
    match &e.activation {
        None => Ok(None),
        Some(a) => match activation::epilogue(a, "v") {
            Some(x) => Ok(Some(x)),
            None => unsupported(format!("{name}: no CUDA expression for activation {}", a.name())),
        },
    }
}

fn spec(ab: AbType, out: &TensorType, residual: Option<(u32, &TensorType)>, e: &Epilogue) -> Result<GemmSpec, Unsupported> {
    Ok(GemmSpec {
        ab,
        trans_a: false,
        trans_b: false,
        addend: None,
        residual: residual.map(|r| r.1.dtype),
        out: out.dtype,
        activation: activation_of("GEMM", e)?,
    })
}

fn strides_i64(shape: &[usize], into: &[usize]) -> Vec<i64> {
    broadcast_strides(shape, into).into_iter().map(|s| s as i64).collect()
}

/// A Gemm (plain, fused, or the product of an Int8Linear) with its C.
#[allow(clippy::too_many_arguments)]
fn gemm(
    ab: AbType,
    g: &Gemm,
    a: &TensorType,
    b: &TensorType,
    c: Option<(u32, &TensorType)>,
    out: &TensorType,
    residual: Option<(u32, &TensorType)>,
    e: &Epilogue,
) -> Result<Problem, Unsupported> {
    if a.shape.len() != 2 || b.shape.len() != 2 {
        return unsupported(format!("Gemm: A {a} and B {b} must be matrices"));
    }
    let (m, k) = if g.trans_a { (a.shape[1], a.shape[0]) } else { (a.shape[0], a.shape[1]) };
    let (k2, n) = if g.trans_b { (b.shape[1], b.shape[0]) } else { (b.shape[0], b.shape[1]) };
    if k != k2 || out.shape != [m, n] {
        return unsupported(format!("Gemm: shapes A {a}, B {b}, Y {out} do not agree"));
    }
    let mut spec = spec(ab, out, residual, e)?;
    spec.trans_a = g.trans_a;
    spec.trans_b = g.trans_b;
    let addend = match c {
        None => None,
        Some((input, c)) => {
            if c.shape.len() > 2 || broadcast_shapes(&[&c.shape, &out.shape]).ok().as_deref() != Some(&out.shape[..]) {
                return unsupported(format!("Gemm: C {c} does not broadcast to {out}"));
            }
            let s = strides_i64(&c.shape, &out.shape);
            spec.addend = Some(c.dtype);
            Some(Strided { input, dtype: c.dtype, strides: [0, 0, s[0], s[1]] })
        }
    };
    if let Some((_, r)) = residual {
        if r.shape != out.shape {
            return unsupported(format!("Gemm: residual {r} is not {out}"));
        }
    }
    Ok(Problem {
        spec,
        m,
        n,
        k,
        nz: [1, 1],
        sa: [0, 0],
        sb: [0, 0],
        addend,
        residual: residual.map(|r| r.0),
        w_scale: None,
        alpha: g.alpha,
        beta: g.beta,
        x_scale: 1.0,
        y_scale: 1.0,
    })
}

/// The stride of consecutive dimensions merged into one index, if the
/// operand's strides allow it (size-1 dimensions do not matter); 0 for no
/// dimension.
fn merge(sizes: &[usize], strides: &[i64]) -> Option<i64> {
    let dims: Vec<(usize, i64)> = sizes.iter().copied().zip(strides.iter().copied()).filter(|&(s, _)| s != 1).collect();
    for w in dims.windows(2) {
        if w[0].1 != w[1].1 * w[1].0 as i64 {
            return None;
        }
    }
    Some(dims.last().map_or(0, |d| d.1))
}

/// A MatMul (plain, fused with a bias broadcast like Add, or the product of
/// an Int8Linear).
fn matmul(
    ab: AbType,
    a: &TensorType,
    b: &TensorType,
    out: &TensorType,
    bias: Option<(u32, &TensorType)>,
    residual: Option<(u32, &TensorType)>,
    e: &Epilogue,
) -> Result<Problem, Unsupported> {
    if a.shape.is_empty() || b.shape.is_empty() {
        return unsupported("MatMul: scalar operands");
    }
    let a2: Vec<usize> = if a.shape.len() == 1 { vec![1, a.shape[0]] } else { a.shape.clone() };
    let b2: Vec<usize> = if b.shape.len() == 1 { vec![b.shape[0], 1] } else { b.shape.clone() };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (k2, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    let (a_batch, b_batch) = (&a2[..a2.len() - 2], &b2[..b2.len() - 2]);
    let Ok(batch) = broadcast_shapes(&[a_batch, b_batch]) else {
        return unsupported("MatMul: batch dimensions do not broadcast");
    };
    // The logical result [batch.., M, N] and the stored one, which drops
    // the dimension of a 1-D operand.
    let mut full = batch.clone();
    full.extend([m, n]);
    let mut stored = batch.clone();
    if a.shape.len() > 1 {
        stored.push(m);
    }
    if b.shape.len() > 1 {
        stored.push(n);
    }
    if k != k2 || out.shape != stored {
        return unsupported(format!("MatMul: shapes A {a}, B {b}, Y {out} do not agree"));
    }
    // Element strides of each operand over the logical result's dimensions.
    let nb = batch.len();
    let mut sa: Vec<i64> = strides_i64(a_batch, &batch).into_iter().map(|s| s * (m * k) as i64).collect();
    sa.extend([k as i64, 0]);
    let mut sb: Vec<i64> = strides_i64(b_batch, &batch).into_iter().map(|s| s * (k * n) as i64).collect();
    sb.extend([0, 0]);
    let se = match bias {
        None => None,
        Some((_, t)) => {
            if broadcast_shapes(&[&t.shape, &out.shape]).ok().as_deref() != Some(&out.shape[..]) {
                return unsupported(format!("MatMul: bias {t} does not broadcast into {out}"));
            }
            let s = strides_i64(&t.shape, &out.shape);
            // Back to the logical dimensions: the dropped ones have size 1.
            let mut full_s = s[..nb].to_vec();
            full_s.push(if a.shape.len() > 1 { s[nb] } else { 0 });
            full_s.push(if b.shape.len() > 1 { *s.last().expect("rank >= 1") } else { 0 });
            Some(full_s)
        }
    };
    if let Some((_, r)) = residual {
        if r.shape != out.shape {
            return unsupported(format!("MatMul: residual {r} is not {out}"));
        }
    }
    let mut spec = spec(ab, out, residual, e)?;
    spec.addend = bias.map(|b| b.1.dtype);
    let strided = |s: [i64; 4]| bias.map(|(input, t)| Strided { input, dtype: t.dtype, strides: s });
    let problem = |m: usize, nz: [usize; 2], sa: [i64; 2], sb: [i64; 2], se: Option<[i64; 4]>| Problem {
        spec: spec.clone(),
        m,
        n,
        k,
        nz,
        sa,
        sb,
        addend: se.and_then(strided),
        residual: residual.map(|r| r.0),
        w_scale: None,
        alpha: 1.0,
        beta: 1.0,
        x_scale: 1.0,
        y_scale: 1.0,
    };
    let batch_rows: usize = batch.iter().product::<usize>() * m;

    // Batch dimensions folded into M: B must be shared by every batch entry
    // and A's (and the bias's) rows must stay one stride apart.
    let rows = &full[..nb + 1];
    let fold_b = merge(rows, &sb[..nb + 1]) == Some(0);
    let fold_a = merge(rows, &sa[..nb + 1]) == Some(k as i64);
    let fold_e = match &se {
        None => Some(0),
        Some(s) => merge(rows, &s[..nb + 1]),
    };
    if let (true, true, Some(ser)) = (fold_a, fold_b, fold_e) {
        let se = se.as_ref().map(|s| [0, 0, ser, s[nb + 1]]);
        return Ok(problem(batch_rows, [1, 1], [0, 0], [0, 0], se));
    }
    // Otherwise the batch dimensions split into two groups for the grid's
    // z0 and z1, at the first split point every operand can be merged at.
    for split in 0..=nb {
        let groups = [0..split, split..nb];
        let merged = |s: &[i64]| -> Option<[i64; 2]> {
            Some([
                merge(&full[groups[0].clone()], &s[groups[0].clone()])?,
                merge(&full[groups[1].clone()], &s[groups[1].clone()])?,
            ])
        };
        let (Some(za), Some(zb)) = (merged(&sa), merged(&sb)) else { continue };
        let ze = match &se {
            None => None,
            Some(s) => match merged(s) {
                Some(z) => Some([z[0], z[1], s[nb], s[nb + 1]]),
                None => continue,
            },
        };
        let nz = [full[groups[0].clone()].iter().product(), full[groups[1].clone()].iter().product()];
        return Ok(problem(m, nz, za, zb, ze));
    }
    unsupported(format!("MatMul: batch broadcasting of {a} x {b} needs more than two batch strides"))
}
