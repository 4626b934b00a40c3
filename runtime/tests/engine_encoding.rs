//! Pins the engine's encoding. The plan (every op's attributes included),
//! the header and the kernel table are stored with postcard, whose bytes
//! follow the types' serde form: a field added, removed, renamed or
//! reordered, or a variant inserted, changes what old engines mean. This
//! test traces that form for every type an engine stores and compares it
//! with the snapshot, so such a change cannot land unnoticed: update the
//! snapshot and bump `FORMAT_VERSION` in the same change (old engines are
//! then refused, not misread; a change that only appends enum variants
//! keeps the old encoding, so `OLDEST_READABLE_VERSION` may stay) (`INSTA_UPDATE=always cargo test -p
//! trtc-runtime --test engine_encoding` rewrites the snapshot). The format
//! version is pinned too. A new enum anywhere in the plan shows up as
//! `MissingVariants([...])`: add it to the list below.

use serde_reflection::{Samples, Tracer, TracerConfig};
use trtc_runtime::ops::control::{Constant, Step, SubPlan};
use trtc_runtime::{DType, Tensor, TensorType};

#[test]
fn the_engine_encoding_is_pinned() {
    let mut tracer = Tracer::new(TracerConfig::default().record_samples_for_structs(true));
    // Types that check what they decode (a sub-plan, its constants) are
    // traced from sample values, which decoding then returns.
    let mut samples = Samples::new();
    let scalar = TensorType::new(DType::F32, vec![1]);
    let neg = trtc_runtime::ops::elementwise::Unary { kind: trtc_runtime::ops::elementwise::UnaryKind::Neg };
    let sub_plan = SubPlan::new(
        vec![("x".into(), scalar.clone()), ("k".into(), scalar.clone()), ("y".into(), scalar)],
        vec![0],
        vec![(1, Constant(Tensor::from_vec(vec![1], vec![1f32]).unwrap()))],
        vec![Step { name: "neg".into(), op: neg.into(), inputs: vec![Some(0)], outputs: vec![2] }],
        vec![2],
    )
    .unwrap();
    tracer.trace_value(&mut samples, &sub_plan).expect("SubPlan");
    // Each enum is traced on its own until all its variants are seen (a
    // type traced only through a parent shows its first variant alone).
    macro_rules! trace {
        ($($t:ty),* $(,)?) => {
            $(tracer.trace_type::<$t>(&samples).expect(stringify!($t));)*
        };
    }
    trace!(
        trtc_runtime::DType,
        trtc_runtime::engine::Target,
        trtc_runtime::engine::SectionKind,
        trtc_runtime::plan::Storage,
        trtc_runtime::kernels::KernelArg,
        trtc_runtime::kernels::LayerKernels,
        trtc_runtime::ops::elementwise::UnaryKind,
        trtc_runtime::ops::elementwise::BinaryKind,
        trtc_runtime::ops::elementwise::CompareKind,
        trtc_runtime::ops::elementwise::ElementwiseOp,
        trtc_runtime::ops::fused::Activation,
        trtc_runtime::ops::fused::LinearKind,
        trtc_runtime::ops::fused::PointwiseBinary,
        trtc_runtime::ops::fused::Instr,
        trtc_runtime::ops::fused::ScoreScale,
        trtc_runtime::ops::fused::FusedOp,
        trtc_runtime::ops::reduce::ArgKind,
        trtc_runtime::ops::reduce::SoftmaxKind,
        trtc_runtime::ops::reduce::LossReduction,
        trtc_runtime::ops::movement::CoordinateMode,
        trtc_runtime::ops::movement::NearestMode,
        trtc_runtime::ops::movement::ResizeMode,
        trtc_runtime::ops::movement::PadMode,
        trtc_runtime::ops::movement::AspectPolicy,
        trtc_runtime::ops::movement::GridSampleMode,
        trtc_runtime::ops::movement::GridPadding,
        trtc_runtime::ops::movement::ScatterReduction,
        trtc_runtime::ops::movement::ReshapeDim,
        trtc_runtime::ops::movement::ResizeSize,
        trtc_runtime::ops::movement::GridValue,
        trtc_runtime::ops::movement::SignedDim,
        trtc_runtime::ops::control::ValueShapedOp,
        trtc_runtime::ops::linalg::PoolKind,
        trtc_runtime::ops::linalg::RecurrentCell,
        trtc_runtime::ops::linalg::RecurrentDirection,
        trtc_runtime::ops::linalg::RecurrentActivation,
        trtc_runtime::ops::precision::Int8Output,
        trtc_runtime::ops::precision::Fp8Output,
        trtc_runtime::ops::linalg::LinalgOp,
        trtc_runtime::ops::movement::MovementOp,
        trtc_runtime::ops::precision::PrecisionOp,
        trtc_runtime::ops::quant::QuantOp,
        trtc_runtime::ops::reduce::ReduceKind,
        trtc_runtime::ops::reduce::ReduceOp,
        trtc_runtime::ops::control::ControlOp,
        trtc_runtime::Op,
        trtc_runtime::plan::Plan,
        trtc_runtime::engine::Header,
        trtc_runtime::kernels::KernelTable,
        trtc_runtime::profile::Profile,
    );
    let registry = tracer.registry().expect("every type of the plan is complete");
    let mut text = format!("FORMAT_VERSION = {}\n", trtc_runtime::engine::FORMAT_VERSION);
    for (name, format) in &registry {
        text.push_str(&format!("{name}: {format:?}\n"));
    }
    insta::assert_snapshot!(text);
}
