//! The recurrent family (`linear::recurrent`): LSTM, GRU and RNN layers of
//! speech and time-series models (forward, reverse and bidirectional; both
//! layouts; sequence lengths, initial states, peepholes, clip, every
//! activation), f32 and f16, get one candidate per block size, with every
//! pointer argument naming a tensor the layer has, and the heuristic
//! candidate of each compiles with NVRTC for sm_80 to sm_90 without
//! register spills, its arguments matching the kernel's parameters. Wide
//! layers say why they run on the host. Needs libnvrtc (no GPU).

mod common;

use common::{compile_heuristic, require_nvrtc, tensor, Family, Layer};
use trtc_runtime::ops::linalg::{Recurrent, RecurrentActivation as A, RecurrentCell, RecurrentDirection};
use trtc_runtime::DType;

const FAMILY: Family = Family { threads: 128..=512, max_shared: 48 * 1024, entry_prefix: "trtc_recurrent", param_sizes: true };

fn op(cell: RecurrentCell, direction: RecurrentDirection, hidden: usize, batch_major: bool) -> Recurrent {
    let per = match cell {
        RecurrentCell::Rnn => vec![A::Tanh],
        RecurrentCell::Gru { .. } => vec![A::Sigmoid, A::Tanh],
        RecurrentCell::Lstm { .. } => vec![A::Sigmoid, A::Tanh, A::Tanh],
    };
    let activations = per.iter().copied().cycle().take(per.len() * direction.count()).collect();
    Recurrent { cell, direction, hidden_size: hidden, activations, clip: None, batch_major }
}

/// A layer of `op` on X [T, N, I] (or [N, T, I]) with the optional inputs
/// `optional` (B, sequence_lens, initial_h, initial_c, P) present.
fn layer(op: Recurrent, dtype: DType, (t, n, i): (usize, usize, usize), optional: [bool; 5]) -> Layer {
    let (d, h, g) = (op.direction.count(), op.hidden_size, op.cell.gates());
    let state = if op.batch_major { [n, d, h] } else { [d, n, h] };
    let x = if op.batch_major { [n, t, i] } else { [t, n, i] };
    let lstm = matches!(op.cell, RecurrentCell::Lstm { .. });
    let mut inputs = vec![Some(tensor(dtype, &x)), Some(tensor(dtype, &[d, g * h, i])), Some(tensor(dtype, &[d, g * h, h]))];
    inputs.push(optional[0].then(|| tensor(dtype, &[d, 2 * g * h])));
    inputs.push(optional[1].then(|| tensor(DType::I32, &[n])));
    inputs.push(optional[2].then(|| tensor(dtype, &state)));
    if lstm {
        inputs.push(optional[3].then(|| tensor(dtype, &state)));
        inputs.push(optional[4].then(|| tensor(dtype, &[d, 3 * h])));
    }
    // Trailing absent inputs are not listed, as the importer leaves them.
    while inputs.last().is_some_and(Option::is_none) {
        inputs.pop();
    }
    Layer::typed(op, dtype == DType::F16, inputs)
}

#[test]
fn recurrent_layers_compile() {
    require_nvrtc();
    use RecurrentDirection::*;
    let mut layers = Vec::new();
    for dtype in [DType::F32, DType::F16] {
        // A speech encoder's bidirectional LSTM with peepholes and lengths.
        layers.push(layer(
            op(RecurrentCell::Lstm { input_forget: false }, Bidirectional, 256, false),
            dtype,
            (100, 4, 80),
            [true; 5],
        ));
        // A time-series GRU, batch first, both reset variants.
        for lbr in [false, true] {
            layers.push(layer(
                op(RecurrentCell::Gru { linear_before_reset: lbr }, Forward, 64, true),
                dtype,
                (48, 8, 12),
                [true, false, true, false, false],
            ));
        }
    }
    // An RNN running backwards with every optional input absent, clipped,
    // and activations with parameters.
    let mut rnn = op(RecurrentCell::Rnn, Reverse, 32, false);
    rnn.clip = Some(3.0);
    rnn.activations = vec![A::ScaledTanh { alpha: 1.5, beta: 0.5 }];
    layers.push(layer(rnn, DType::F32, (20, 2, 16), [false; 5]));
    let mut lstm = op(RecurrentCell::Lstm { input_forget: true }, Forward, 16, false);
    lstm.activations = vec![A::HardSigmoid { alpha: 0.2, beta: 0.5 }, A::Elu { alpha: 1.0 }, A::Softsign];
    layers.push(layer(lstm, DType::F32, (5, 3, 7), [true, true, false, true, false]));
    let tactics = compile_heuristic(&layers, &FAMILY);
    assert!(tactics.iter().all(|t| t.starts_with("recurrent b")), "{tactics:?}");
}

#[test]
fn wide_or_unusual_recurrent_layers_say_why_they_run_on_the_host() {
    let wide = layer(
        op(RecurrentCell::Lstm { input_forget: false }, RecurrentDirection::Forward, 2048, false),
        DType::F32,
        (4, 1, 512),
        [false; 5],
    );
    assert!(wide.refused().contains("floats of state per sequence"), "{}", wide.refused());
    let f64_layer = layer(op(RecurrentCell::Rnn, RecurrentDirection::Forward, 8, false), DType::F64, (4, 1, 4), [false; 5]);
    assert!(f64_layer.refused().contains("f64"), "{}", f64_layer.refused());
    let mut nan = op(RecurrentCell::Rnn, RecurrentDirection::Forward, 8, false);
    nan.activations = vec![A::LeakyRelu { alpha: f32::NAN }];
    let nan = layer(nan, DType::F32, (4, 1, 4), [false; 5]);
    assert!(nan.refused().contains("activation parameter NaN"), "{}", nan.refused());
}
