//! The attention family: candidates for BERT-base, GPT-2 and odd shapes
//! (f32 and f16, with and without masks), their validity and tactics, the
//! shapes that stay on the host, and NVRTC compiles of the heuristic
//! candidates for every SM trtc targets.

use trtc_kernels::{candidates, Candidate, SmLimits};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::fused::{Attention, ScoreScale};
use trtc_runtime::ops::Op;
use trtc_runtime::{DType, TensorType};

mod common;
use common::{Layer, SMS};

/// The sizes of an attention layer: `[batch, sq, heads * d]` queries,
/// `[batch, sk, heads * d]` keys and `[batch, sk, heads * dv]` values.
#[derive(Clone, Copy)]
struct Dims {
    batch: usize,
    sq: usize,
    sk: usize,
    heads: usize,
    d: usize,
    dv: usize,
}

/// Dims from `[batch, sq, sk, heads, d, dv]`.
fn dims([batch, sq, sk, heads, d, dv]: [usize; 6]) -> Dims {
    Dims { batch, sq, sk, heads, d, dv }
}

/// An attention layer with a mask of `mask` shape when given; f16 layers
/// are HalfIo.
fn layer(dtype: DType, dims: Dims, mask: Option<&[usize]>) -> Layer {
    let Dims { batch, sq, sk, heads, d, dv } = dims;
    let att = Attention {
        num_heads: heads,
        q_scale: None,
        k_scale: None,
        score_scale: Some(ScoreScale::Mul(1.0 / (d as f32).sqrt())),
        mask: mask.is_some(),
        nan_to_zero: mask.is_some(),
    };
    let mut inputs = vec![
        Some(TensorType::new(dtype, vec![batch, sq, heads * d])),
        Some(TensorType::new(dtype, vec![batch, sk, heads * d])),
        Some(TensorType::new(dtype, vec![batch, sk, heads * dv])),
    ];
    if let Some(m) = mask {
        inputs.push(Some(TensorType::new(dtype, m)));
    }
    Layer::typed(att, dtype == DType::F16, inputs)
}

impl Layer {
    fn candidates(&self) -> Vec<Candidate> {
        let limits = SmLimits::for_sm(80);
        let cands = candidates(&self.io(), &limits).unwrap_or_else(|e| panic!("{e}"));
        assert!(!cands.is_empty());
        common::assert_unique_tactics("attention", &cands);
        for c in &cands {
            for l in &c.launches {
                let threads: u32 = l.block.iter().product();
                assert!(threads <= 1024 && threads.is_multiple_of(32));
                common::assert_grid(&c.tactic, l.grid);
                assert!(l.shared_bytes <= limits.max_shared_bytes_per_block, "{}: {} bytes", c.tactic, l.shared_bytes);
                for a in &l.args {
                    match *a {
                        KernelArg::Input(k) => assert!((k as usize) < self.inputs.len()),
                        KernelArg::Output(k) => assert!((k as usize) < self.outputs.len()),
                        _ => {}
                    }
                }
            }
        }
        cands
    }
}

fn compile(c: &Candidate, sms: &[u32]) {
    common::compile(c, sms, false);
}

#[test]
fn bert_and_gpt_layers_compile() {
    for dtype in [DType::F32, DType::F16] {
        // BERT-base, batch 1 and 8, with the [batch, 1, 1, seq] padding mask.
        let bert1 = layer(dtype, dims([1, 128, 128, 12, 64, 64]), Some(&[1, 1, 1, 128]));
        let c = bert1.candidates();
        assert_eq!(c[0].tactic, "attention_fused q8 w4");
        assert_eq!(c[0].launches[0].grid, [16, 12, 1]);
        compile(&c[0], &SMS);
        let bert8 = layer(dtype, dims([8, 128, 128, 12, 64, 64]), Some(&[8, 1, 1, 128]));
        let c = bert8.candidates();
        assert_eq!(c[0].tactic, "attention_fused q32 w4");
        compile(&c[0], &SMS);
        // GPT-2 style causal mask [seq, seq], no padding mask; and no mask.
        let gpt = layer(dtype, dims([2, 256, 256, 12, 64, 64]), Some(&[256, 256]));
        compile(&gpt.candidates()[0], &SMS);
        let plain = layer(dtype, dims([1, 77, 77, 8, 40, 40]), None);
        compile(&plain.candidates()[0], &SMS);
    }
}

#[test]
fn every_tactic_compiles_at_the_limits() {
    // The largest head and key sequence, odd query length, dv != d.
    let big = layer(DType::F16, dims([1, 300, 512, 4, 128, 96]), Some(&[1, 4, 300, 512]));
    let cands = big.candidates();
    assert_eq!(cands[0].tactic, "attention_fused q8 w4");
    for c in &cands {
        compile(c, &[80]);
    }
    // Small heads: every tile fits.
    let small = layer(DType::F32, dims([2, 200, 64, 6, 32, 33]), Some(&[2, 6, 200, 64]));
    let cands = small.candidates();
    assert_eq!(cands.len(), 6);
    for c in &cands {
        compile(c, &[80]);
    }
}

#[test]
fn arguments_follow_the_kernel_signature() {
    let l = layer(DType::F32, dims([2, 5, 7, 3, 4, 8]), Some(&[2, 1, 1, 7]));
    let mut op = match &l.op {
        Op::Fused(trtc_runtime::ops::fused::FusedOp::Attention(a)) => a.clone(),
        _ => unreachable!(),
    };
    op.score_scale = Some(ScoreScale::Div(2.0));
    op.q_scale = Some(0.5);
    let l = Layer { op: op.into(), ..l };
    let c = l.candidates();
    let args = &c[0].launches[0].args;
    assert_eq!(
        args[..8],
        [
            KernelArg::Input(0),
            KernelArg::Input(1),
            KernelArg::Input(2),
            KernelArg::Input(3),
            KernelArg::I64(7),
            KernelArg::I64(0),
            KernelArg::I64(0),
            KernelArg::I64(1),
        ]
    );
    assert_eq!(
        args[8..],
        [
            KernelArg::Output(0),
            KernelArg::I32(3),
            KernelArg::I32(5),
            KernelArg::I32(7),
            KernelArg::I32(4),
            KernelArg::I32(8),
            KernelArg::F32(0.5),
            KernelArg::F32(1.0),
            KernelArg::F32(2.0),
            KernelArg::I32(1),
            KernelArg::I32(1),
        ]
    );
}

#[test]
fn long_sequences_and_wide_heads_stay_on_the_host() {
    let refused = |l: Layer| candidates(&l.io(), &SmLimits::for_sm(90)).unwrap_err().0;
    assert!(refused(layer(DType::F32, dims([1, 1024, 1024, 16, 64, 64]), None)).contains("1024"));
    assert!(refused(layer(DType::F16, dims([1, 64, 64, 2, 256, 256]), None)).contains("256"));
}
