//! LSTM, GRU and RNN: one op, [`Recurrent`], for ONNX's three recurrent
//! layers, which differ only in their cell.
//!
//! Inputs as ONNX orders them: `X`, `W`, `R`, `B`, `sequence_lens`,
//! `initial_h`, and for the LSTM `initial_c` and the peepholes `P`. Outputs:
//! `Y` (every step's hidden state), `Y_h` (the last one) and for the LSTM
//! `Y_c`. With `layout = 0` the shapes are `X [T, N, I]`, `Y [T, D, N, H]`,
//! states `[D, N, H]`; with `layout = 1` they are batch first: `X [N, T, I]`,
//! `Y [N, T, D, H]`, states `[N, D, H]`.
//!
//! Each direction runs one matrix product of all time steps' inputs with `W`
//! (bias folded in), then per step one product of the previous hidden state
//! with `R` and the cell's gate math. f64 layers compute in f64, every other
//! float type in f32 (ORT's precision). A batch entry whose
//! `sequence_lens` is `L` runs `L` steps (the reverse direction starts at
//! step `L - 1`), its `Y` rows past `L` are zero, and `Y_h`/`Y_c` hold its
//! state after its last step.

use super::gemm_kernel::GemmArgs;
use super::num::Scalar;
use crate::dtype::DType;
use crate::error::Result;
use crate::math::{self, Math};
use crate::ops::{input, opt_input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

/// The recurrent cell: what one step computes from the input projection and
/// the previous state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecurrentCell {
    /// `H = f(x W + h R + b)`.
    Rnn,
    /// Gates z, r, h. With `linear_before_reset` the reset gate scales
    /// `h R + Rb_h` instead of `h`.
    Gru { linear_before_reset: bool },
    /// Gates i, o, f, c. With `input_forget` the forget gate is `1 - i`.
    Lstm { input_forget: bool },
}

impl RecurrentCell {
    /// Gates per hidden unit: the row blocks of `W` and `R`.
    pub fn gates(self) -> usize {
        match self {
            RecurrentCell::Rnn => 1,
            RecurrentCell::Gru { .. } => 3,
            RecurrentCell::Lstm { .. } => 4,
        }
    }

    /// Activations per direction (f; f, g; f, g, h).
    pub fn activations(self) -> usize {
        match self {
            RecurrentCell::Rnn => 1,
            RecurrentCell::Gru { .. } => 2,
            RecurrentCell::Lstm { .. } => 3,
        }
    }

    /// The ONNX op this cell comes from.
    pub fn onnx_name(self) -> &'static str {
        match self {
            RecurrentCell::Rnn => "RNN",
            RecurrentCell::Gru { .. } => "GRU",
            RecurrentCell::Lstm { .. } => "LSTM",
        }
    }

    fn is_lstm(self) -> bool {
        matches!(self, RecurrentCell::Lstm { .. })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecurrentDirection {
    Forward,
    Reverse,
    Bidirectional,
}

impl RecurrentDirection {
    pub fn count(self) -> usize {
        if self == RecurrentDirection::Bidirectional {
            2
        } else {
            1
        }
    }

    /// Whether direction `d` (0 or 1) runs from the last step to the first.
    fn reversed(self, d: usize) -> bool {
        self == RecurrentDirection::Reverse || (self == RecurrentDirection::Bidirectional && d == 1)
    }
}

/// The activation functions ONNX's recurrent layers accept, with their
/// parameters resolved.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum RecurrentActivation {
    Relu,
    Tanh,
    Sigmoid,
    Affine { alpha: f32, beta: f32 },
    LeakyRelu { alpha: f32 },
    ThresholdedRelu { alpha: f32 },
    ScaledTanh { alpha: f32, beta: f32 },
    HardSigmoid { alpha: f32, beta: f32 },
    Elu { alpha: f32 },
    Softsign,
    Softplus,
}

impl RecurrentActivation {
    pub fn apply(self, x: f64) -> f64 {
        match self {
            RecurrentActivation::Relu => x.max(0.0),
            RecurrentActivation::Tanh => x.tanh(),
            RecurrentActivation::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            RecurrentActivation::Affine { alpha, beta } => alpha as f64 * x + beta as f64,
            RecurrentActivation::LeakyRelu { alpha } => {
                if x < 0.0 {
                    alpha as f64 * x
                } else {
                    x
                }
            }
            RecurrentActivation::ThresholdedRelu { alpha } => {
                if x > alpha as f64 {
                    x
                } else {
                    0.0
                }
            }
            RecurrentActivation::ScaledTanh { alpha, beta } => alpha as f64 * (beta as f64 * x).tanh(),
            RecurrentActivation::HardSigmoid { alpha, beta } => (alpha as f64 * x + beta as f64).clamp(0.0, 1.0),
            RecurrentActivation::Elu { alpha } => {
                if x >= 0.0 {
                    x
                } else {
                    alpha as f64 * x.exp_m1()
                }
            }
            RecurrentActivation::Softsign => x / (1.0 + x.abs()),
            // ln(1 + e^x), without overflow for large x.
            RecurrentActivation::Softplus => x.max(0.0) + (-x.abs()).exp().ln_1p(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recurrent {
    pub cell: RecurrentCell,
    pub direction: RecurrentDirection,
    pub hidden_size: usize,
    /// `cell.activations()` per direction, the forward direction's first.
    pub activations: Vec<RecurrentActivation>,
    /// Pre-activation values are clamped to `[-clip, clip]`.
    pub clip: Option<f32>,
    /// ONNX's `layout = 1`: inputs, outputs and states batch first.
    pub batch_major: bool,
}

/// Input positions, as ONNX numbers them.
const X: usize = 0;
const W: usize = 1;
const R: usize = 2;
const B: usize = 3;
const SEQUENCE_LENS: usize = 4;
const INITIAL_H: usize = 5;
const INITIAL_C: usize = 6;
const P: usize = 7;

/// Sizes every input and output is checked against.
#[derive(Clone, Copy)]
struct Dims {
    steps: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    dirs: usize,
    gates: usize,
}

impl Recurrent {
    fn dims(&self, x: &TensorType) -> Result<Dims> {
        let name = self.cell.onnx_name();
        ensure_op!(x.shape.len() == 3 && x.dtype.is_float(), "{name}: input X {x} must be a float [T, N, I] tensor");
        let (steps, batch) = if self.batch_major { (x.shape[1], x.shape[0]) } else { (x.shape[0], x.shape[1]) };
        let dirs = self.direction.count();
        ensure_op!(
            self.activations.len() == dirs * self.cell.activations(),
            "{name}: {} activations given, {} expected",
            self.activations.len(),
            dirs * self.cell.activations()
        );
        Ok(Dims { steps, batch, input: x.shape[2], hidden: self.hidden_size, dirs, gates: self.cell.gates() })
    }

    /// The shape of a state (`initial_h`, `Y_h`, ...).
    fn state_shape(&self, d: &Dims) -> Vec<usize> {
        if self.batch_major {
            vec![d.batch, d.dirs, d.hidden]
        } else {
            vec![d.dirs, d.batch, d.hidden]
        }
    }
}

impl OpImpl for Recurrent {
    fn name(&self) -> &'static str {
        self.cell.onnx_name()
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let name = self.name();
        let x = input(inputs, X, name)?;
        let d = self.dims(x)?;
        if let Some(c) = self.clip {
            // Clamping with a NaN or negative bound would panic.
            ensure_op!(!c.is_nan() && c >= 0.0, "{name}: clip {c} must be a non-negative number");
        }
        let gh = d.gates * d.hidden;
        let expect = |i: usize, what: &str, shape: Vec<usize>, required: bool| -> Result<()> {
            match opt_input(inputs, i) {
                Some(t) => {
                    ensure_op!(t.dtype == x.dtype && t.shape == shape, "{name}: {what} is {t}, expected {} {shape:?}", x.dtype);
                    Ok(())
                }
                None if required => bail_op!("{name}: missing input {what}"),
                None => Ok(()),
            }
        };
        expect(W, "W", vec![d.dirs, gh, d.input], true)?;
        expect(R, "R", vec![d.dirs, gh, d.hidden], true)?;
        expect(B, "B", vec![d.dirs, 2 * gh], false)?;
        if let Some(l) = opt_input(inputs, SEQUENCE_LENS) {
            ensure_op!(
                matches!(l.dtype, DType::I32 | DType::I64) && l.shape == [d.batch],
                "{name}: sequence_lens is {l}, expected i32 [{}]",
                d.batch
            );
        }
        expect(INITIAL_H, "initial_h", self.state_shape(&d), false)?;
        if self.cell.is_lstm() {
            expect(INITIAL_C, "initial_c", self.state_shape(&d), false)?;
            expect(P, "P", vec![d.dirs, 3 * d.hidden], false)?;
        } else {
            ensure_op!(inputs.len() <= INITIAL_C, "{name}: {} inputs, at most 6 expected", inputs.len());
        }
        let y =
            if self.batch_major { vec![d.batch, d.steps, d.dirs, d.hidden] } else { vec![d.steps, d.dirs, d.batch, d.hidden] };
        let mut out = vec![TensorType::new(x.dtype, y), TensorType::new(x.dtype, self.state_shape(&d))];
        if self.cell.is_lstm() {
            out.push(TensorType::new(x.dtype, self.state_shape(&d)));
        }
        Ok(out)
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, X, self.name())?;
        if x.dtype == DType::F64 {
            self.run::<f64>(inputs, outputs)
        } else {
            self.run::<f32>(inputs, outputs)
        }
    }
}

/// The elements of a float view converted to the work type.
fn load<F: Scalar>(v: &TensorView<'_>) -> Vec<F> {
    v.to_f64_vec().into_iter().map(F::from_f64).collect()
}

/// Writes work-type values into a float output.
fn store<F: Scalar>(out: &mut TensorViewMut<'_>, values: &[F]) -> Result<()> {
    fn each<T: Element, F: Scalar>(out: &mut [T], values: &[F]) {
        for (o, v) in out.iter_mut().zip(values) {
            *o = T::from_f64(v.to_f64());
        }
    }
    match out.dtype {
        DType::F32 => each(out.as_mut_slice::<f32>()?, values),
        DType::F64 => each(out.as_mut_slice::<f64>()?, values),
        DType::F16 => each(out.as_mut_slice::<f16>()?, values),
        DType::BF16 => each(out.as_mut_slice::<bf16>()?, values),
        d => bail_op!("recurrent layer: unsupported dtype {d}"),
    }
    Ok(())
}

/// Swaps the two outer axes of `[outer, inner, hidden]` values, giving
/// `[inner, outer, hidden]`.
fn transpose_state<F: Copy>(s: &[F], outer: usize, inner: usize, hidden: usize) -> Vec<F> {
    let mut out = Vec::with_capacity(s.len());
    for i in 0..inner {
        for o in 0..outer {
            out.extend_from_slice(&s[(o * inner + i) * hidden..][..hidden]);
        }
    }
    out
}

impl Recurrent {
    fn run<F: Scalar>(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let name = self.name();
        let xv = input(inputs, X, name)?;
        let d = self.dims(&TensorType::new(xv.dtype, xv.shape.to_vec()))?;
        let (t_len, n, h, gh) = (d.steps, d.batch, d.hidden, d.gates * d.hidden);
        // Time-major input rows: x[(t * N + b) * I ..].
        let mut x = load::<F>(&xv);
        if self.batch_major {
            x = transpose_state(&x, n, t_len, d.input);
        }
        let w = load::<F>(&input(inputs, W, name)?);
        let r = load::<F>(&input(inputs, R, name)?);
        let bias = opt_input(inputs, B).map(|b| load::<F>(&b));
        let peep = opt_input(inputs, P).filter(|_| self.cell.is_lstm()).map(|p| load::<F>(&p));
        let lens: Vec<usize> = match opt_input(inputs, SEQUENCE_LENS) {
            Some(l) => l
                .to_i64_vec()?
                .into_iter()
                .map(|v| match usize::try_from(v) {
                    Ok(v) if v <= t_len => Ok(v),
                    _ => bail_op!("{name}: sequence length {v} is outside 0..={t_len}"),
                })
                .collect::<Result<_>>()?,
            None => vec![t_len; n],
        };
        let state = |i: usize| -> Vec<F> {
            match opt_input(inputs, i) {
                Some(s) if self.batch_major => transpose_state(&load::<F>(&s), n, d.dirs, h),
                Some(s) => load::<F>(&s),
                None => vec![F::default(); d.dirs * n * h],
            }
        };
        let (mut hs, mut cs) = (state(INITIAL_H), state(INITIAL_C));
        // Y as [T, D, N, H]; rows a batch entry does not reach stay zero.
        let mut y = vec![F::default(); t_len * d.dirs * n * h];
        let mut xw = vec![F::default(); t_len * n * gh];
        let mut hr = vec![F::default(); n * gh];
        // The fast gate math (f32 only); the mode is read on the run's thread.
        let mut fast = (std::any::TypeId::of::<F>() == std::any::TypeId::of::<f32>() && crate::math::mode() == Math::Fast)
            .then(|| FastCell::new(self, h));
        let clip = |v: f64| match self.clip {
            Some(c) => v.clamp(-(c as f64), c as f64),
            None => v,
        };
        for dir in 0..d.dirs {
            let wd = &w[dir * gh * d.input..][..gh * d.input];
            let rd = &r[dir * gh * h..][..gh * h];
            let acts = &self.activations[dir * self.cell.activations()..];
            // All steps' input projections, x W^T: W is [GH, I] row-major,
            // read as the [I, GH] right operand through its strides.
            let mut args = GemmArgs { rsb: 1, csb: d.input as isize, ..GemmArgs::row_major(t_len * n, d.input, gh) };
            // Both biases join the projection, except the GRU's recurrent
            // h-gate bias under linear_before_reset, which the reset gate
            // scales.
            let (wb, rb) = match &bias {
                Some(b) => (&b[dir * 2 * gh..][..gh], &b[dir * 2 * gh + gh..][..gh]),
                None => (&[][..], &[][..]),
            };
            let lbr = matches!(self.cell, RecurrentCell::Gru { linear_before_reset: true });
            let rbj = |j: usize| if lbr && j >= 2 * h { 0.0 } else { rb[j].to_f64() };
            if bias.is_some() && fast.is_some() {
                // The fast mode starts each row from the biases' sum and lets
                // the product add into it (no second pass over the rows).
                let sums: Vec<F> = (0..gh).map(|j| F::from_f64(wb[j].to_f64() + rbj(j))).collect();
                xw.chunks_exact_mut(gh).for_each(|row| row.copy_from_slice(&sums));
                args.beta = 1.0;
            }
            F::GEMM(&args, &x, wd, &mut xw);
            if bias.is_some() && fast.is_none() {
                for row in xw.chunks_exact_mut(gh) {
                    for (j, v) in row.iter_mut().enumerate() {
                        *v = F::from_f64(v.to_f64() + wb[j].to_f64() + rbj(j));
                    }
                }
            }
            // The GRU without linear_before_reset multiplies (r * h) by R_h
            // after the reset gate, so the per-step product covers z and r.
            let rec_cols = if matches!(self.cell, RecurrentCell::Gru { linear_before_reset: false }) { 2 * h } else { gh };
            let hd = &mut hs[dir * n * h..][..n * h];
            let cd = &mut cs[dir * n * h..][..n * h];
            let mut prev = vec![F::default(); h];
            let mut scaled = vec![0f64; h];
            // The fast mode reads R^T [H, rec_cols] row-major, so that the
            // small-batch product updates whole rows of gates.
            let rt: Option<Vec<F>> = fast.is_some().then(|| {
                let mut rt = vec![F::default(); h * rec_cols];
                for (j, row) in rd.chunks_exact(h).take(rec_cols).enumerate() {
                    for (k, &v) in row.iter().enumerate() {
                        rt[k * rec_cols + j] = v;
                    }
                }
                rt
            });
            for s in 0..t_len {
                match &rt {
                    Some(rt) => {
                        let args = GemmArgs { rsc: gh as isize, ..GemmArgs::row_major(n, h, rec_cols) };
                        F::GEMM(&args, hd, rt, &mut hr);
                    }
                    None => {
                        let args = GemmArgs { rsb: 1, csb: h as isize, rsc: gh as isize, ..GemmArgs::row_major(n, h, rec_cols) };
                        F::GEMM(&args, hd, rd, &mut hr);
                    }
                }
                for bi in 0..n {
                    if s >= lens[bi] {
                        continue;
                    }
                    let t = if self.direction.reversed(dir) { lens[bi] - 1 - s } else { s };
                    let xr = &xw[(t * n + bi) * gh..][..gh];
                    let rr = &hr[bi * gh..][..gh];
                    let hrow = &mut hd[bi * h..][..h];
                    prev.copy_from_slice(hrow);
                    if let Some(fc) = fast.as_mut() {
                        let step = FastStep {
                            acts,
                            xr: as_f32(xr),
                            rr: as_f32(rr),
                            rd: as_f32(rd),
                            rb: as_f32(rb),
                            peep: peep.as_deref().map(|p| &as_f32(p)[dir * 3 * h..][..3 * h]),
                            prev: as_f32(&prev),
                        };
                        let crow = self.cell.is_lstm().then(|| as_f32_mut(&mut cd[bi * h..][..h]));
                        fc.step(&step, as_f32_mut(hrow), crow);
                        y[((t * d.dirs + dir) * n + bi) * h..][..h].copy_from_slice(hrow);
                        continue;
                    }
                    let pre = |j: usize| xr[j].to_f64() + rr[j].to_f64();
                    match self.cell {
                        RecurrentCell::Rnn => {
                            for (j, v) in hrow.iter_mut().enumerate() {
                                *v = F::from_f64(acts[0].apply(clip(pre(j))));
                            }
                        }
                        RecurrentCell::Gru { linear_before_reset } => {
                            let rh = &rd[2 * h * h..];
                            if !linear_before_reset {
                                for (k, v) in scaled.iter_mut().enumerate() {
                                    *v = acts[0].apply(clip(pre(h + k))) * prev[k].to_f64();
                                }
                            }
                            for j in 0..h {
                                let z = acts[0].apply(clip(pre(j)));
                                let rg = acts[0].apply(clip(pre(h + j)));
                                let cand = if linear_before_reset {
                                    let rbh = rb.get(2 * h + j).map_or(0.0, |v| v.to_f64());
                                    xr[2 * h + j].to_f64() + rg * (rr[2 * h + j].to_f64() + rbh)
                                } else {
                                    let row = &rh[j * h..][..h];
                                    xr[2 * h + j].to_f64() + row.iter().zip(&scaled).map(|(w, v)| w.to_f64() * v).sum::<f64>()
                                };
                                let hh = acts[1].apply(clip(cand));
                                hrow[j] = F::from_f64((1.0 - z) * hh + z * prev[j].to_f64());
                            }
                        }
                        RecurrentCell::Lstm { input_forget } => {
                            let crow = &mut cd[bi * h..][..h];
                            let pv = |k: usize, j: usize| peep.as_ref().map_or(0.0, |p| p[dir * 3 * h + k * h + j].to_f64());
                            for j in 0..h {
                                let c_prev = crow[j].to_f64();
                                let i = acts[0].apply(clip(pre(j) + pv(0, j) * c_prev));
                                let f =
                                    if input_forget { 1.0 - i } else { acts[0].apply(clip(pre(2 * h + j) + pv(2, j) * c_prev)) };
                                let g = acts[1].apply(clip(pre(3 * h + j)));
                                // The cell state is kept in the work type, as the
                                // next step and Y_c read it.
                                let c = F::from_f64(f * c_prev + i * g);
                                crow[j] = c;
                                let o = acts[0].apply(clip(pre(h + j) + pv(1, j) * c.to_f64()));
                                hrow[j] = F::from_f64(o * acts[2].apply(c.to_f64()));
                            }
                        }
                    }
                    y[((t * d.dirs + dir) * n + bi) * h..][..h].copy_from_slice(hrow);
                }
            }
        }
        if self.batch_major {
            // [T, D, N, H] -> [N, T, D, H]: N outermost, then (T, D) pairs.
            let td = t_len * d.dirs;
            store(&mut outputs[0], &transpose_state(&y, td, n, h))?;
            store(&mut outputs[1], &transpose_state(&hs, d.dirs, n, h))?;
            if self.cell.is_lstm() {
                store(&mut outputs[2], &transpose_state(&cs, d.dirs, n, h))?;
            }
        } else {
            store(&mut outputs[0], &y)?;
            store(&mut outputs[1], &hs)?;
            if self.cell.is_lstm() {
                store(&mut outputs[2], &cs)?;
            }
        }
        Ok(())
    }
}

/// `s` as f32 values; only called where `F` is f32.
fn as_f32<F: 'static>(s: &[F]) -> &[f32] {
    assert!(std::any::TypeId::of::<F>() == std::any::TypeId::of::<f32>());
    // SAFETY: F is f32.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), s.len()) }
}

/// `s` as f32 values; only called where `F` is f32.
fn as_f32_mut<F: 'static>(s: &mut [F]) -> &mut [f32] {
    assert!(std::any::TypeId::of::<F>() == std::any::TypeId::of::<f32>());
    // SAFETY: F is f32.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), s.len()) }
}

/// What one batch entry's step reads in the fast gate math: its input
/// projection row `xr` (biases folded in), its recurrent product row `rr`,
/// the direction's `R` and biases, the peepholes `[3H]`, and the previous
/// hidden state.
struct FastStep<'a> {
    acts: &'a [RecurrentActivation],
    xr: &'a [f32],
    rr: &'a [f32],
    rd: &'a [f32],
    rb: &'a [f32],
    peep: Option<&'a [f32]>,
    prev: &'a [f32],
}

/// The fast mode's gate math: each step's gates in f32, a whole gate row
/// at a time, so that additions, products and the [`math::sigmoid`] and
/// [`math::tanh`] activations vectorize. Same formulas as the reference,
/// in f32 instead of f64.
struct FastCell {
    cell: RecurrentCell,
    clip: Option<f32>,
    hidden: usize,
    gates: Vec<f32>,
    tmp: Vec<f32>,
}

impl FastCell {
    fn new(layer: &Recurrent, hidden: usize) -> FastCell {
        let gates = vec![0f32; layer.cell.gates() * hidden];
        FastCell { cell: layer.cell, clip: layer.clip, hidden, gates, tmp: vec![0f32; hidden] }
    }

    fn step(&mut self, s: &FastStep<'_>, hrow: &mut [f32], crow: Option<&mut [f32]>) {
        let h = self.hidden;
        let (acts, clip) = (s.acts, self.clip);
        let apply = |k: usize, v: &mut [f32]| match acts[k] {
            RecurrentActivation::Sigmoid => math::sigmoid_in_place(v),
            RecurrentActivation::Tanh => math::tanh_in_place(v),
            a => v.iter_mut().for_each(|x| *x = a.apply(*x as f64) as f32),
        };
        // Pre-activations are clipped; the LSTM's cell state is not.
        let activate = |k: usize, v: &mut [f32]| {
            if let Some(c) = clip {
                v.iter_mut().for_each(|x| *x = x.clamp(-c, c));
            }
            apply(k, v)
        };
        match self.cell {
            RecurrentCell::Rnn => {
                add_into(hrow, &s.xr[..h], &s.rr[..h]);
                activate(0, hrow);
            }
            RecurrentCell::Gru { linear_before_reset } => {
                let (zr, cand) = self.gates.split_at_mut(2 * h);
                add_into(zr, &s.xr[..2 * h], &s.rr[..2 * h]);
                activate(0, zr);
                let (z, r) = zr.split_at(h);
                if linear_before_reset {
                    for (j, c) in cand.iter_mut().enumerate() {
                        let rbh = s.rb.get(2 * h + j).copied().unwrap_or(0.0);
                        *c = s.xr[2 * h + j] + r[j] * (s.rr[2 * h + j] + rbh);
                    }
                } else {
                    // (r * h_prev) R_h^T.
                    for ((t, &rg), &p) in self.tmp.iter_mut().zip(r).zip(s.prev) {
                        *t = rg * p;
                    }
                    let rh = &s.rd[2 * h * h..];
                    for (j, c) in cand.iter_mut().enumerate() {
                        *c = s.xr[2 * h + j] + dot(&rh[j * h..][..h], &self.tmp);
                    }
                }
                activate(1, cand);
                for (j, v) in hrow.iter_mut().enumerate() {
                    *v = (1.0 - z[j]) * cand[j] + z[j] * s.prev[j];
                }
            }
            RecurrentCell::Lstm { input_forget } => {
                let Some(crow) = crow else { return };
                let g = &mut self.gates[..4 * h];
                add_into(g, &s.xr[..4 * h], &s.rr[..4 * h]);
                // Without peepholes and the coupled forget gate, the gates
                // i, o and f (contiguous) take their activation in one call.
                let together = s.peep.is_none() && !input_forget;
                if together {
                    activate(0, &mut g[..3 * h]);
                }
                let (i, rest) = g.split_at_mut(h);
                let (o, rest) = rest.split_at_mut(h);
                let (f, cg) = rest.split_at_mut(h);
                if let Some(p) = s.peep {
                    for j in 0..h {
                        i[j] += p[j] * crow[j];
                        f[j] += p[2 * h + j] * crow[j];
                    }
                }
                if !together {
                    activate(0, i);
                    if input_forget {
                        f.iter_mut().zip(&*i).for_each(|(f, &i)| *f = 1.0 - i);
                    } else {
                        activate(0, f);
                    }
                }
                activate(1, cg);
                for j in 0..h {
                    crow[j] = f[j] * crow[j] + i[j] * cg[j];
                }
                if let Some(p) = s.peep {
                    for j in 0..h {
                        o[j] += p[h + j] * crow[j];
                    }
                }
                if !together {
                    activate(0, o);
                }
                self.tmp.copy_from_slice(crow);
                apply(2, &mut self.tmp);
                for j in 0..h {
                    hrow[j] = o[j] * self.tmp[j];
                }
            }
        }
    }
}

/// `out = a + b`.
fn add_into(out: &mut [f32], a: &[f32], b: &[f32]) {
    for ((o, &a), &b) in out.iter_mut().zip(a).zip(b) {
        *o = a + b;
    }
}

/// Σ a·b with 8 partial sums, so that it vectorizes.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ac, bc) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ac.remainder().iter().zip(bc.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ac.zip(bc) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn t(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_vec(shape.to_vec(), v.to_vec()).unwrap()
    }

    fn run(op: Recurrent, inputs: &[Option<Tensor>]) -> Vec<Vec<f32>> {
        let refs: Vec<Option<&Tensor>> = inputs.iter().map(Option::as_ref).collect();
        Op::from(op).eval_owned(&refs).unwrap().iter().map(|o| o.as_slice::<f32>().unwrap().to_vec()).collect()
    }

    /// An RNN whose activation is the identity: `h_t = w x_t + r h_{t-1} + b`,
    /// worked out by hand below.
    fn linear_rnn(direction: RecurrentDirection) -> Recurrent {
        let activations = vec![RecurrentActivation::Affine { alpha: 1.0, beta: 0.0 }; direction.count()];
        Recurrent { cell: RecurrentCell::Rnn, direction, hidden_size: 1, activations, clip: None, batch_major: false }
    }

    fn close(a: &[f32], b: &[f32]) {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn a_linear_rnn_by_hand_in_each_direction() {
        // x = 1, 2, 3; w = 2, r = 0.5, Wb + Rb = 0.25 + 0.25, h0 = 1.
        let inputs = |dirs: usize| {
            let rep = |v: &[f32]| v.repeat(dirs);
            vec![
                Some(t(&[3, 1, 1], &[1.0, 2.0, 3.0])),
                Some(t(&[dirs, 1, 1], &rep(&[2.0]))),
                Some(t(&[dirs, 1, 1], &rep(&[0.5]))),
                Some(t(&[dirs, 2], &rep(&[0.25, 0.25]))),
                None,
                Some(t(&[dirs, 1, 1], &rep(&[1.0]))),
            ]
        };
        // Forward: 2 + 0.5 + 0.5 = 3, 4 + 1.5 + 0.5 = 6, 6 + 3 + 0.5 = 9.5.
        let out = run(linear_rnn(RecurrentDirection::Forward), &inputs(1));
        close(&out[0], &[3.0, 6.0, 9.5]);
        close(&out[1], &[9.5]);
        // Reverse, from the last step: 6 + 0.5 + 0.5 = 7, 4 + 3.5 + 0.5 = 8,
        // 2 + 4 + 0.5 = 6.5; Y stays in time order.
        let out = run(linear_rnn(RecurrentDirection::Reverse), &inputs(1));
        close(&out[0], &[6.5, 8.0, 7.0]);
        close(&out[1], &[6.5]);
        // Both: Y is [T, 2, N, H], Y_h [2, N, H].
        let out = run(linear_rnn(RecurrentDirection::Bidirectional), &inputs(2));
        close(&out[0], &[3.0, 6.5, 6.0, 8.0, 9.5, 7.0]);
        close(&out[1], &[9.5, 6.5]);
    }

    #[test]
    fn sequence_lengths_stop_each_batch_entry_and_zero_the_rest_of_y() {
        // Two batch entries with the same inputs; the second runs 2 steps.
        let inputs = vec![
            Some(t(&[3, 2, 1], &[1.0, 1.0, 2.0, 2.0, 3.0, 3.0])),
            Some(t(&[2, 1, 1], &[2.0, 2.0])),
            Some(t(&[2, 1, 1], &[0.5, 0.5])),
            Some(t(&[2, 2], &[0.25, 0.25, 0.25, 0.25])),
            Some(Tensor::from_vec(vec![2], vec![3i32, 2]).unwrap()),
            Some(t(&[2, 2, 1], &[1.0, 1.0, 1.0, 1.0])),
        ];
        let out = run(linear_rnn(RecurrentDirection::Bidirectional), &inputs);
        // Entry 1's reverse direction starts at its step 1: 4 + 0.5 + 0.5 = 5,
        // then 2 + 2.5 + 0.5 = 5.
        #[rustfmt::skip]
        close(&out[0], &[
            3.0, 3.0, 6.5, 5.0, // t = 0: fwd (b0, b1), rev (b0, b1)
            6.0, 6.0, 8.0, 5.0, // t = 1
            9.5, 0.0, 7.0, 0.0, // t = 2: entry 1 has ended
        ]);
        close(&out[1], &[9.5, 6.0, 6.5, 5.0]);

        let mut bad = inputs;
        bad[SEQUENCE_LENS] = Some(Tensor::from_vec(vec![2], vec![4i32, 2]).unwrap());
        let refs: Vec<Option<&Tensor>> = bad.iter().map(Option::as_ref).collect();
        let err = Op::from(linear_rnn(RecurrentDirection::Bidirectional)).eval_owned(&refs).unwrap_err().to_string();
        assert!(err.contains("sequence length 4 is outside 0..=3"), "{err}");
    }

    #[test]
    fn clip_bounds_what_the_activation_sees() {
        let mut op = linear_rnn(RecurrentDirection::Forward);
        op.clip = Some(4.0);
        let inputs = vec![
            Some(t(&[3, 1, 1], &[1.0, 2.0, 3.0])),
            Some(t(&[1, 1, 1], &[2.0])),
            Some(t(&[1, 1, 1], &[0.5])),
            Some(t(&[1, 2], &[0.25, 0.25])),
            None,
            Some(t(&[1, 1, 1], &[1.0])),
        ];
        // 3, then min(4 + 1.5 + 0.5, 4) = 4, then min(6 + 2 + 0.5, 4) = 4.
        close(&run(op, &inputs)[0], &[3.0, 4.0, 4.0]);
    }

    #[test]
    fn batch_major_layout_transposes_inputs_outputs_and_states() {
        // Steps 2, batch 3, input 2, hidden 2, both directions: the same
        // numbers in either layout give the same results, transposed.
        let (steps, batch, input, hidden) = (2, 3, 2, 2);
        let seq = |n: usize, k: f32| (0..n).map(|i| (i as f32 * 0.37 + k).sin()).collect::<Vec<f32>>();
        let x_tm = seq(steps * batch * input, 0.1);
        let h0_tm = seq(2 * batch * hidden, 0.7);
        let c0_tm = seq(2 * batch * hidden, 1.3);
        let swap = |v: &[f32], a: usize, b: usize, inner: usize| transpose_state(v, a, b, inner);
        let lstm = |batch_major| Recurrent {
            cell: RecurrentCell::Lstm { input_forget: false },
            direction: RecurrentDirection::Bidirectional,
            hidden_size: hidden,
            activations: [RecurrentActivation::Sigmoid, RecurrentActivation::Tanh, RecurrentActivation::Tanh].repeat(2),
            clip: None,
            batch_major,
        };
        let weights = |x: Tensor, h0: Tensor, c0: Tensor| {
            vec![
                Some(x),
                Some(t(&[2, 4 * hidden, input], &seq(2 * 4 * hidden * input, 2.0))),
                Some(t(&[2, 4 * hidden, hidden], &seq(2 * 4 * hidden * hidden, 3.0))),
                Some(t(&[2, 8 * hidden], &seq(2 * 8 * hidden, 4.0))),
                Some(Tensor::from_vec(vec![batch], vec![2i32, 1, 2]).unwrap()),
                Some(h0),
                Some(c0),
                Some(t(&[2, 3 * hidden], &seq(2 * 3 * hidden, 5.0))),
            ]
        };
        let tm = run(
            lstm(false),
            &weights(t(&[steps, batch, input], &x_tm), t(&[2, batch, hidden], &h0_tm), t(&[2, batch, hidden], &c0_tm)),
        );
        let bm = run(
            lstm(true),
            &weights(
                t(&[batch, steps, input], &swap(&x_tm, steps, batch, input)),
                t(&[batch, 2, hidden], &swap(&h0_tm, 2, batch, hidden)),
                t(&[batch, 2, hidden], &swap(&c0_tm, 2, batch, hidden)),
            ),
        );
        // Y [T, D, N, H] -> [N, T, D, H]; states [D, N, H] -> [N, D, H].
        close(&bm[0], &swap(&tm[0], steps * 2, batch, hidden));
        close(&bm[1], &swap(&tm[1], 2, batch, hidden));
        close(&bm[2], &swap(&tm[2], 2, batch, hidden));
    }

    #[test]
    fn one_lstm_step_reads_the_gates_in_onnx_order() {
        // Hidden size 1, one step, input 1: W holds the gates i, o, f, c;
        // the peepholes i, o, f; R and the initial h are zero.
        let (wi, wo, wf, wc) = (0.3f64, -0.2f64, 0.5f64, 0.9f64);
        let (pi, po, pf) = (0.1f64, 0.4f64, -0.3f64);
        let c0 = 0.6f64;
        let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
        for input_forget in [false, true] {
            let op = Recurrent {
                cell: RecurrentCell::Lstm { input_forget },
                direction: RecurrentDirection::Forward,
                hidden_size: 1,
                activations: vec![RecurrentActivation::Sigmoid, RecurrentActivation::Tanh, RecurrentActivation::Tanh],
                clip: None,
                batch_major: false,
            };
            let inputs = vec![
                Some(t(&[1, 1, 1], &[1.0])),
                Some(t(&[1, 4, 1], &[wi as f32, wo as f32, wf as f32, wc as f32])),
                Some(t(&[1, 4, 1], &[0.0; 4])),
                None,
                None,
                None,
                Some(t(&[1, 1, 1], &[c0 as f32])),
                Some(t(&[1, 3], &[pi as f32, po as f32, pf as f32])),
            ];
            let out = run(op, &inputs);
            let i = sig(wi + pi * c0);
            let f = if input_forget { 1.0 - i } else { sig(wf + pf * c0) };
            let c = f * c0 + i * wc.tanh();
            let o = sig(wo + po * c);
            close(&out[2], &[c as f32]);
            close(&out[1], &[(o * c.tanh()) as f32]);
            close(&out[0], &[(o * c.tanh()) as f32]);
        }
    }

    #[test]
    fn one_gru_step_with_and_without_linear_before_reset() {
        // Hidden size 1, input 1, x = 1: W and R hold z, r, h; both biases set.
        let (wz, wr, wh) = (0.3f64, -0.4f64, 0.8f64);
        let (rz, rr, rh) = (0.2f64, 0.6f64, -0.7f64);
        let (wbz, wbr, wbh, rbz, rbr, rbh) = (0.1f64, 0.2f64, -0.1f64, 0.05f64, -0.3f64, 0.45f64);
        let h0 = 0.9f64;
        let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
        let z = sig(wz + rz * h0 + wbz + rbz);
        let r = sig(wr + rr * h0 + wbr + rbr);
        for linear_before_reset in [false, true] {
            let op = Recurrent {
                cell: RecurrentCell::Gru { linear_before_reset },
                direction: RecurrentDirection::Forward,
                hidden_size: 1,
                activations: vec![RecurrentActivation::Sigmoid, RecurrentActivation::Tanh],
                clip: None,
                batch_major: false,
            };
            let f = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
            let inputs = vec![
                Some(t(&[1, 1, 1], &[1.0])),
                Some(t(&[1, 3, 1], &f(&[wz, wr, wh]))),
                Some(t(&[1, 3, 1], &f(&[rz, rr, rh]))),
                Some(t(&[1, 6], &f(&[wbz, wbr, wbh, rbz, rbr, rbh]))),
                None,
                Some(t(&[1, 1, 1], &[h0 as f32])),
            ];
            let hh = if linear_before_reset { wh + r * (rh * h0 + rbh) + wbh } else { wh + (r * h0) * rh + rbh + wbh }.tanh();
            let h = (1.0 - z) * hh + z * h0;
            close(&run(op, &inputs)[1], &[h as f32]);
        }
    }

    #[test]
    fn inference_checks_every_input_shape() {
        let op = Op::from(linear_rnn(RecurrentDirection::Bidirectional));
        let f = |s: &[usize]| TensorType::new(DType::F32, s.to_vec());
        let (x, w, r, b, h0) = (f(&[3, 2, 4]), f(&[2, 1, 4]), f(&[2, 1, 1]), f(&[2, 2]), f(&[2, 2, 1]));
        let out = op.infer(&[Some(&x), Some(&w), Some(&r), Some(&b), None, Some(&h0)]).unwrap();
        assert_eq!(out, [f(&[3, 2, 2, 1]), f(&[2, 2, 1])]);
        // A forward-only W for a bidirectional layer, a wrong bias, a wrong
        // initial state, integer X.
        assert!(op.infer(&[Some(&x), Some(&f(&[1, 1, 4])), Some(&r)]).is_err());
        assert!(op.infer(&[Some(&x), Some(&w), Some(&r), Some(&f(&[2, 1]))]).is_err());
        assert!(op.infer(&[Some(&x), Some(&w), Some(&r), None, None, Some(&f(&[2, 3, 1]))]).is_err());
        let xi = TensorType::new(DType::I64, vec![3, 2, 4]);
        assert!(op.infer(&[Some(&xi), Some(&w), Some(&r)]).is_err());
        // An RNN has no initial_c.
        assert!(op.infer(&[Some(&x), Some(&w), Some(&r), None, None, None, Some(&h0)]).is_err());
        // A clip a hostile engine could carry, which clamping would panic on.
        for clip in [f32::NAN, -1.0] {
            let mut bad = linear_rnn(RecurrentDirection::Bidirectional);
            bad.clip = Some(clip);
            assert!(Op::from(bad).infer(&[Some(&x), Some(&w), Some(&r)]).is_err(), "clip {clip}");
        }
    }
}
