//! LSTM, GRU and RNN (`recurrent.cu`): one block per batch entry and
//! direction runs its whole sequence, the state in shared memory; each
//! step computes every gate row (input and recurrent products, one warp
//! per row) and then the cell's gate math, with every attribute the
//! runtime's `Recurrent` has (directions, activations with their
//! parameters, clip, `linear_before_reset`, `input_forget`, layout,
//! sequence lengths, initial states, peepholes). f32 and f16 storage, i32
//! or i64 sequence lengths.
//!
//! The tactic is the block size (128, 256 or 512 threads; the heuristic
//! takes 256, or 128 when a step has fewer than 8 gate rows per warp of
//! 256). The layer's sequential steps use one SM per batch entry and
//! direction, which suits the small batches of speech and time-series
//! models; the shared memory holds the step's input, the state and the
//! gates, so wide layers (more than 48 KiB of them) run on the host.

use crate::reduce::float_type;
use crate::{unsupported, Candidate, KernelLaunch, KernelSource, LayerIo, Selection, SmLimits, Tactic, COMMON};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::linalg::{Recurrent, RecurrentActivation, RecurrentCell, RecurrentDirection};
use trtc_runtime::DType;

const RECURRENT: &str = include_str!("../../cuda/recurrent.cu");

/// A float as a C literal (finite only).
fn literal(v: f32) -> Result<String, crate::Unsupported> {
    if v.is_finite() {
        Ok(format!("{v:.9e}f"))
    } else {
        unsupported(format!("activation parameter {v}"))
    }
}

/// The C expression of an activation of `x`, as the CPU reference computes
/// it (in f32 here).
fn activation(a: RecurrentActivation) -> Result<String, crate::Unsupported> {
    use RecurrentActivation as A;
    Ok(match a {
        A::Relu => "fmaxf(x, 0.0f)".into(),
        A::Tanh => "tanhf(x)".into(),
        A::Sigmoid => "(1.0f / (1.0f + expf(-x)))".into(),
        A::Affine { alpha, beta } => format!("({} * x + {})", literal(alpha)?, literal(beta)?),
        A::LeakyRelu { alpha } => format!("(x < 0.0f ? {} * x : x)", literal(alpha)?),
        A::ThresholdedRelu { alpha } => format!("(x > {} ? x : 0.0f)", literal(alpha)?),
        A::ScaledTanh { alpha, beta } => format!("({} * tanhf({} * x))", literal(alpha)?, literal(beta)?),
        A::HardSigmoid { alpha, beta } => format!("fminf(fmaxf({} * x + {}, 0.0f), 1.0f)", literal(alpha)?, literal(beta)?),
        A::Elu { alpha } => format!("(x >= 0.0f ? x : {} * expm1f(x))", literal(alpha)?),
        A::Softsign => "(x / (1.0f + fabsf(x)))".into(),
        A::Softplus => "(fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x))))".into(),
    })
}

/// Input positions, as ONNX numbers them.
const B: usize = 3;
const SEQUENCE_LENS: usize = 4;
const INITIAL_H: usize = 5;
const INITIAL_C: usize = 6;
const P: usize = 7;

pub fn candidates(op: &Recurrent, io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let given = |k: usize| io.inputs.get(k).copied().flatten();
    let (Some(x), Some(w), Some(r)) = (given(0), given(1), given(2)) else {
        return unsupported("missing X, W or R");
    };
    let t = float_type(x)?;
    let floats = [Some(w), Some(r), given(B), given(INITIAL_H), given(INITIAL_C), given(P)];
    if floats.iter().flatten().any(|v| v.dtype != x.dtype) || io.outputs.iter().any(|o| o.dtype != x.dtype) {
        return unsupported("tensors of different types");
    }
    if x.shape.len() != 3 || x.is_empty() {
        return unsupported(format!("X {x}"));
    }
    let ti = match given(SEQUENCE_LENS).map(|l| l.dtype) {
        None | Some(DType::I32) => "int",
        Some(DType::I64) => "long long",
        Some(d) => return unsupported(format!("{d} sequence lengths")),
    };
    let (steps, batch) = if op.batch_major { (x.shape[1], x.shape[0]) } else { (x.shape[0], x.shape[1]) };
    let (input, hidden, dirs) = (x.shape[2], op.hidden_size, op.direction.count());
    let gates = op.cell.gates();
    let shared_floats = input + 3 * hidden + gates * hidden;
    let shared_bytes = shared_floats * 4;
    if hidden == 0 || shared_bytes > limits.max_shared_bytes_per_block as usize {
        return unsupported(format!("{} floats of state per sequence (input {input}, hidden {hidden})", shared_floats));
    }
    if batch > i32::MAX as usize || batch == 0 {
        return unsupported(format!("batch {batch}"));
    }
    let per_dir = op.cell.activations();
    let mut cases = String::new();
    for (slot, a) in op.activations.iter().enumerate() {
        cases.push_str(&format!("        case {slot}: return {};\n", activation(*a)?));
    }
    let (cell, lbr, input_forget) = match op.cell {
        RecurrentCell::Rnn => (0, false, false),
        RecurrentCell::Gru { linear_before_reset } => (1, linear_before_reset, false),
        RecurrentCell::Lstm { input_forget } => (2, false, input_forget),
    };
    let lstm = cell == 2;
    let flag = |b: bool| u8::from(b);
    let defines = format!(
        "#define T {t}\n#define TI {ti}\n#define CELL {cell}\n#define LINEAR_BEFORE_RESET {}\n#define INPUT_FORGET {}\n\
         #define HAS_CLIP {}\n#define BATCH_MAJOR {}\n#define REVERSE_ONLY {}\n#define HAS_B {}\n#define HAS_LENS {}\n\
         #define HAS_H0 {}\n#define HAS_C0 {}\n#define HAS_P {}\n#define ACTS {per_dir}\n\
         __device__ __forceinline__ float trtc_rnn_act(int slot, float x) {{\n    switch (slot) {{\n{cases}    }}\n    return x;\n}}\n",
        flag(lbr),
        flag(input_forget),
        flag(op.clip.is_some()),
        flag(op.batch_major),
        flag(op.direction == RecurrentDirection::Reverse),
        flag(given(B).is_some()),
        flag(given(SEQUENCE_LENS).is_some()),
        flag(given(INITIAL_H).is_some()),
        flag(lstm && given(INITIAL_C).is_some()),
        flag(lstm && given(P).is_some()),
    );
    let kernel = KernelSource { entry: "trtc_recurrent".into(), source: format!("{COMMON}\n{defines}\n{RECURRENT}") };
    // An absent input's pointer is never read: X stands in for it (the
    // layer may have fewer inputs than the kernel takes pointers).
    let ptr = |k: usize| if given(k).is_some() { KernelArg::Input(k as u32) } else { KernelArg::Input(0) };
    let mut args = vec![KernelArg::Output(0), KernelArg::Output(1), KernelArg::Output(if lstm { 2 } else { 1 })];
    args.extend([KernelArg::Input(0), KernelArg::Input(1), KernelArg::Input(2)]);
    args.extend([B, SEQUENCE_LENS, INITIAL_H, INITIAL_C, P].map(ptr));
    args.extend([steps, batch, input, hidden, dirs].map(|v| KernelArg::I64(v as i64)));
    args.push(KernelArg::F32(op.clip.unwrap_or(0.0)));
    let rows_per_warp_of_256 = (gates * hidden).div_ceil(8);
    let heuristic = if rows_per_warp_of_256 < 8 { 128 } else { 256 };
    let mut blocks = vec![heuristic];
    blocks.extend([128, 256, 512].into_iter().filter(|&b| b != heuristic && b <= limits.max_threads_per_block));
    Ok(blocks
        .into_iter()
        .map(|block| Candidate {
            tactic: Tactic::Recurrent { block },
            launches: vec![KernelLaunch {
                kernel: kernel.clone(),
                grid: [batch as u32, dirs as u32, 1],
                block: [block, 1, 1],
                shared_bytes: shared_bytes as u32,
                args: args.clone(),
            }],
        })
        .collect())
}
