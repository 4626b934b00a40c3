//! LSTM, GRU and RNN layers: every cell variant, direction and layout,
//! optional inputs present and absent, sequence lengths shorter than the
//! sequence (and one past it, which traps), clip and parameterized
//! activations; hidden sizes that are not multiples of a warp.

use crate::*;
use trtc_runtime::ops::linalg::{Recurrent, RecurrentActivation as A, RecurrentCell, RecurrentDirection};

/// The layer's inputs: X, W, R, then B, sequence_lens, initial_h and for
/// the LSTM initial_c and P, each when `optional` says (trailing absent
/// ones dropped); weights scaled down so that gates do not all saturate.
fn inputs(
    b: &mut Builder,
    op: &Recurrent,
    dt: DType,
    (t, n, i): (usize, usize, usize),
    optional: [bool; 5],
    lens: DType,
) -> Vec<Option<Tensor>> {
    let (d, h, g) = (op.direction.count(), op.hidden_size, op.cell.gates());
    let x = b.data(dt, &if op.batch_major { [n, t, i] } else { [t, n, i] });
    let w = b.uniform(dt, &[d, g * h, i], -0.5, 0.5);
    let r = b.uniform(dt, &[d, g * h, h], -0.5, 0.5);
    let state = if op.batch_major { [n, d, h] } else { [d, n, h] };
    let mut v = vec![Some(x), Some(w), Some(r)];
    v.push(optional[0].then(|| b.uniform(dt, &[d, 2 * g * h], -0.5, 0.5)));
    v.push(optional[1].then(|| b.indices(lens, &[n], 0, t as i64 + 1)));
    v.push(optional[2].then(|| b.data(dt, &state)));
    if matches!(op.cell, RecurrentCell::Lstm { .. }) {
        v.push(optional[3].then(|| b.data(dt, &state)));
        v.push(optional[4].then(|| b.uniform(dt, &[d, 3 * h], -0.5, 0.5)));
    }
    while v.last().is_some_and(Option::is_none) {
        v.pop();
    }
    v
}

fn op(cell: RecurrentCell, direction: RecurrentDirection, hidden: usize, batch_major: bool, per_direction: &[A]) -> Recurrent {
    let activations = per_direction.iter().copied().cycle().take(per_direction.len() * direction.count()).collect();
    Recurrent { cell, direction, hidden_size: hidden, activations, clip: None, batch_major }
}

pub(crate) fn recurrent_cases(b: &mut Builder) {
    use DType::*;
    use RecurrentDirection::*;
    let fam = "recurrent";
    let lstm_acts = [A::Sigmoid, A::Tanh, A::Tanh];
    let gru_acts = [A::Sigmoid, A::Tanh];
    for dt in [F32, F16] {
        // A bidirectional LSTM with every optional input; peepholes.
        let o = op(RecurrentCell::Lstm { input_forget: false }, Bidirectional, 9, false, &lstm_acts);
        let ins = inputs(b, &o, dt, (5, 3, 7), [true; 5], I32);
        b.add(fam, format!("LSTM bidirectional, all inputs {dt}"), for_dtype(dt, o), ins, Pick::All);
        // GRUs, both reset variants, batch first, lengths and a state.
        for lbr in [false, true] {
            let o = op(RecurrentCell::Gru { linear_before_reset: lbr }, Bidirectional, 33, true, &gru_acts);
            let ins = inputs(b, &o, dt, (4, 2, 5), [true, true, true, false, false], I64);
            b.add(fam, format!("GRU linear_before_reset={lbr} batch first {dt}"), for_dtype(dt, o), ins, Pick::Sample(2));
        }
    }
    // The LSTM's coupled input and forget gates, batch first, clipped, no
    // bias, an initial cell state but no hidden one.
    let mut o = op(RecurrentCell::Lstm { input_forget: true }, Forward, 12, true, &lstm_acts);
    o.clip = Some(0.75);
    let ins = inputs(b, &o, F32, (6, 2, 4), [false, true, false, true, false], I32);
    b.add(fam, "LSTM input_forget clip batch first", o, ins, Pick::Sample(1));
    // A reverse RNN, no optional input, clipped, a parameterized
    // activation; and one per other activation on a forward GRU.
    let mut o = op(RecurrentCell::Rnn, Reverse, 40, false, &[A::ScaledTanh { alpha: 1.5, beta: 0.5 }]);
    o.clip = Some(1.0);
    let ins = inputs(b, &o, F32, (7, 3, 6), [false; 5], I32);
    b.add(fam, "RNN reverse clip ScaledTanh", o, ins, Pick::Sample(1));
    for (k, pair) in [
        [A::HardSigmoid { alpha: 0.2, beta: 0.5 }, A::Affine { alpha: 0.5, beta: -0.25 }],
        [A::LeakyRelu { alpha: 0.1 }, A::ThresholdedRelu { alpha: 0.2 }],
        [A::Elu { alpha: 0.7 }, A::Softsign],
        [A::Softplus, A::Relu],
    ]
    .iter()
    .enumerate()
    {
        let o = op(RecurrentCell::Gru { linear_before_reset: k % 2 == 1 }, Forward, 6, false, pair);
        let ins = inputs(b, &o, F32, (3, 2, 5), [true, false, true, false, false], I32);
        b.add(fam, format!("GRU activations {pair:?}"), o, ins, Pick::Sample(1));
    }
    // A sequence length past the sequence traps, as the CPU op fails.
    let o = op(RecurrentCell::Rnn, Forward, 4, false, &[A::Tanh]);
    let mut ins = inputs(b, &o, F32, (3, 2, 2), [false, true, false, false, false], I32);
    ins[4] = Some(Tensor::from_vec(vec![2], vec![1i32, 4]).unwrap());
    b.add_trap(fam, "RNN sequence length past the sequence traps", o, ins);
}
