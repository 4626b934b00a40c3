//! Fused attention.

use crate::*;

pub(crate) fn attention_cases(b: &mut Builder) {
    use DType::*;
    let fam = "attention";
    let att = |mask: bool, q_scale: Option<f32>, ss: Option<ScoreScale>, nz: bool| Attention {
        num_heads: 3,
        q_scale,
        k_scale: q_scale,
        score_scale: ss,
        mask,
        nan_to_zero: nz,
    };
    let (bt, sq, sk, h, d, dv) = (2, 5, 7, 3, 4, 8);
    let q = b.data(F32, &[bt, sq, h * d]);
    let k = b.data(F32, &[bt, sk, h * d]);
    let v = b.data(F32, &[bt, sk, h * dv]);
    let mut m = vec![0f32; bt * sk];
    m[sk + 5] = f32::NEG_INFINITY;
    m[sk + 6] = f32::NEG_INFINITY;
    let mask = Tensor::from_vec(vec![bt, 1, 1, sk], m).unwrap();
    let all = |t: &[&Tensor]| t.iter().map(|t| Some((*t).clone())).collect::<Vec<_>>();
    b.add(fam, "Attention key mask", att(true, None, Some(ScoreScale::Mul(0.5)), true), all(&[&q, &k, &v, &mask]), Pick::All);
    b.add(
        fam,
        "Attention q/k scales, Div",
        att(false, Some(0.7), Some(ScoreScale::Div(1.3)), false),
        all(&[&q, &k, &v]),
        Pick::Sample(2),
    );
    // A fully masked row (query 2 of batch 1) with a per-query mask, with and
    // without the NaN guard.
    let mut m: Vec<f32> = (0..bt * h * sq * sk).map(|_| b.rng.range(-1.0, 1.0) as f32).collect();
    for j in 0..sk {
        for hh in 0..h {
            m[((h + hh) * sq + 2) * sk + j] = f32::NEG_INFINITY;
        }
    }
    let full = Tensor::from_vec(vec![bt, h, sq, sk], m).unwrap();
    b.add(
        fam,
        "Attention fully masked row, nan_to_zero",
        att(true, None, None, true),
        all(&[&q, &k, &v, &full]),
        Pick::Sample(1),
    );
    b.add(fam, "Attention fully masked row, NaN", att(true, None, None, false), all(&[&q, &k, &v, &full]), Pick::Sample(1));
    b.add(
        fam,
        "Attention f16",
        half(att(true, None, Some(ScoreScale::Mul(0.5)), true)),
        vec![Some(f16_of(&q)), Some(f16_of(&k)), Some(f16_of(&v)), Some(f16_of(&mask))],
        Pick::Sample(2),
    );
    // Longer sequences than a key chunk, a causal-like 2-D mask.
    let (bt, sq, sk, d, dv) = (1, 40, 70, 20, 40);
    let q = b.data(F32, &[bt, sq, 3 * d]);
    let k = b.data(F32, &[bt, sk, 3 * d]);
    let v = b.data(F32, &[bt, sk, 3 * dv]);
    let causal: Vec<f32> = (0..sq * sk).map(|i| if i % sk > i / sk + 30 { f32::NEG_INFINITY } else { 0.0 }).collect();
    let mask = Tensor::from_vec(vec![sq, sk], causal).unwrap();
    b.add(
        fam,
        "Attention long, causal",
        att(true, None, Some(ScoreScale::Mul(0.2)), true),
        all(&[&q, &k, &v, &mask]),
        Pick::Sample(4),
    );
}
