//! The storage-only types: casts to and from the four 8-bit floats (with
//! and without saturation; every bit pattern decoded; values around every
//! rounding boundary, beyond the range, subnormal, signed zeros, NaN and
//! infinities encoded) and the 4-bit integers, and their QuantizeLinear /
//! DequantizeLinear (per tensor and per axis; an 8-bit float zero point
//! that is not 0 traps, as the CPU op fails).

use crate::*;
use trtc_runtime::ops::quant::{DequantizeLinear, QuantizeLinear};

const FLOAT8: [DType; 4] = [DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ];

/// Every byte, as a tensor of `d`.
fn every_byte(d: DType) -> Tensor {
    Tensor::from_bytes(TensorType::new(d, vec![16, 16]), &(0..=255u8).collect::<Vec<_>>()).unwrap()
}

/// Values that exercise encoding: each 8-bit float value and the midpoints
/// between neighbours (ties), scaled over the formats' ranges, tiny and
/// huge values, signed zeros, NaN and infinities.
fn encodable() -> Tensor {
    let mut v: Vec<f32> = Vec::new();
    for f in FLOAT8 {
        let values: Vec<f32> = every_byte(f).to_f64_vec().into_iter().filter(|x| x.is_finite()).map(|x| x as f32).collect();
        v.extend(values.iter().step_by(7));
        // Midpoints of neighbours, which round to the even one.
        let mut sorted: Vec<f32> = values.clone();
        sorted.sort_by(f32::total_cmp);
        v.extend(sorted.windows(2).step_by(11).map(|w| (w[0] + w[1]) / 2.0));
    }
    v.extend([0.0, -0.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e-30, -1e-30, 500.0, -500.0, 1e6, -1e6, 60000.0, 3e38]);
    Tensor::from_vec(vec![v.len()], v).unwrap()
}

/// Every finite E4M3FN value, each midpoint between neighbours (a tie) and
/// the f32 values just below and above it, values past 448, f32
/// subnormals, signed zeros, NaN and infinities, with both signs: every
/// rounding decision of the f32 E4M3 encoder (`trtc_e4m3_sat`).
fn e4m3_boundaries() -> Tensor {
    let mut mags: Vec<f32> =
        every_byte(DType::F8E4M3FN).to_f64_vec().into_iter().filter(|x| x.is_finite() && *x >= 0.0).map(|x| x as f32).collect();
    mags.sort_by(f32::total_cmp);
    mags.dedup();
    let mut v = mags.clone();
    for w in mags.windows(2) {
        let mid = (w[0] + w[1]) / 2.0;
        v.extend([mid, mid.next_down(), mid.next_up()]);
    }
    v.extend([448.0f32.next_up(), 463.9, 464.0, 464.1, 479.0, 480.0, 1e6, f32::MAX, f32::INFINITY, 1e-40, 1e-45, 0.0]);
    v.extend([0.001953125 / 2.0, (0.001953125f32 / 2.0).next_up(), (0.001953125f32 / 2.0).next_down()]);
    let negated: Vec<f32> = v.iter().map(|x| -x).collect();
    v.extend(negated);
    v.push(f32::NAN);
    Tensor::from_vec(vec![v.len()], v).unwrap()
}

pub(crate) fn storage_cases(b: &mut Builder) {
    use DType::*;
    let fam = "storage";
    b.add(fam, "Cast f32 to f8e4m3fn at every boundary", Cast::new(F8E4M3FN), vec![Some(e4m3_boundaries())], Pick::Sample(1));
    let x = encodable();
    let xh = cast_to(&x, F16);
    for f in FLOAT8 {
        b.add(fam, format!("Cast f32 to {f}"), Cast::new(f), vec![Some(x.clone())], Pick::Sample(1));
        b.add(fam, format!("CastNoSaturate f32 to {f}"), CastNoSaturate { to: f }, vec![Some(x.clone())], Pick::Sample(1));
        b.add(fam, format!("Cast f16 to {f}"), Cast::new(f), vec![Some(xh.clone())], Pick::Sample(1));
        for to in [F32, F16, I32, Bool] {
            b.add(fam, format!("Cast {f} to {to}"), Cast::new(to), vec![Some(every_byte(f))], Pick::Sample(1));
        }
    }
    b.add(fam, "Cast f8e4m3fn to f8e5m2", Cast::new(F8E5M2), vec![Some(every_byte(F8E4M3FN))], Pick::Sample(1));
    b.add(fam, "Cast f8e5m2 to f8e4m3fnuz", Cast::new(F8E4M3FNUZ), vec![Some(every_byte(F8E5M2))], Pick::Sample(1));
    let ints = b.indices(I32, &[40], -20, 20);
    b.add(fam, "Cast i32 to f8e4m3fn", Cast::new(F8E4M3FN), vec![Some(ints.clone())], Pick::Sample(1));
    for (four, wide) in [(I4, I8), (U4, U8)] {
        b.add(fam, format!("Cast f32 to {four}"), Cast::new(four), vec![Some(x.clone())], Pick::Sample(1));
        b.add(fam, format!("Cast i32 to {four}"), Cast::new(four), vec![Some(ints.clone())], Pick::Sample(1));
        let q = cast_to(&ints, four);
        for to in [F32, F16, I32, wide] {
            b.add(fam, format!("Cast {four} to {to}"), Cast::new(to), vec![Some(q.clone())], Pick::Sample(1));
        }
    }
    // Q/DQ: per tensor and per axis scales.
    let x = b.uniform(F32, &[2, 3, 5], -60.0, 60.0);
    let s = Tensor::from_vec(vec![], vec![0.37f32]).unwrap();
    let sa = b.uniform(F32, &[3], 0.05, 0.5);
    for f in FLOAT8 {
        let zero = Tensor::from_bytes(TensorType::new(f, vec![]), &[0]).unwrap();
        let q = QuantizeLinear { axis: 0, block_size: 0, output_dtype: f };
        b.add(
            fam,
            format!("QuantizeLinear to {f}"),
            q.clone(),
            vec![Some(x.clone()), Some(s.clone()), Some(zero.clone())],
            Pick::Sample(1),
        );
        let q = QuantizeLinear { axis: 1, block_size: 0, output_dtype: f };
        b.add(fam, format!("QuantizeLinear per axis to {f}"), q, vec![Some(x.clone()), Some(sa.clone())], Pick::Sample(1));
        let dq = DequantizeLinear { axis: 0, block_size: 0 };
        b.add(
            fam,
            format!("DequantizeLinear of {f}"),
            dq,
            vec![Some(every_byte(f)), Some(s.clone()), Some(zero)],
            Pick::Sample(1),
        );
    }
    let q = QuantizeLinear { axis: 0, block_size: 0, output_dtype: F8E4M3FN };
    let one = Tensor::from_bytes(TensorType::new(F8E4M3FN, vec![]), &[0x38]).unwrap();
    b.add_trap(
        fam,
        "QuantizeLinear to f8e4m3fn with a zero point of 1 traps",
        q,
        vec![Some(x.clone()), Some(s.clone()), Some(one)],
    );
    for (four, lo, hi) in [(I4, -8, 8), (U4, 0, 16)] {
        let z = cast_to(&Tensor::from_vec(vec![3], vec![lo + 3, lo + 8, hi - 2]).unwrap(), four);
        let q = QuantizeLinear { axis: 1, block_size: 0, output_dtype: four };
        b.add(
            fam,
            format!("QuantizeLinear per axis to {four}"),
            q,
            vec![Some(x.clone()), Some(sa.clone()), Some(z.clone())],
            Pick::Sample(1),
        );
        let v = cast_to(&b.indices(I32, &[2, 3, 5], lo, hi), four);
        let dq = DequantizeLinear { axis: 1, block_size: 0 };
        b.add(fam, format!("DequantizeLinear per axis of {four}"), dq, vec![Some(v), Some(sa.clone()), Some(z)], Pick::Sample(1));
    }
}
