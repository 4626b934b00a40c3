//! Engine format and executor tests that need no compiler: a plan written by
//! hand, serialized, loaded, validated, and run from several threads.

use trtc_runtime::ops::elementwise::{Binary, BinaryKind};
use trtc_runtime::plan::{Layer, Plan, Storage, TensorDesc};
use trtc_runtime::{DType, Engine, ExecutionContext, Target, Tensor, TensorType};

/// y = (x + w) * x, with w a weight.
fn plan() -> (Plan, Vec<u8>) {
    let ty = TensorType::new(DType::F32, vec![4]);
    let t = |name: &str, storage| TensorDesc { name: name.into(), ty: ty.clone(), storage };
    let plan = Plan {
        tensors: vec![
            t("x", Storage::Arena { offset: 0 }),
            t("w", Storage::Weight { offset: 0 }),
            t("s", Storage::Arena { offset: 256 }),
            t("y", Storage::Arena { offset: 512 }),
        ],
        inputs: vec![0],
        fixed_inputs: vec![],
        outputs: vec![("y".into(), 3)],
        layers: vec![
            Layer {
                name: "add".into(),
                op: Binary::new(BinaryKind::Add).into(),
                inputs: vec![Some(0), Some(1)],
                outputs: vec![2],
            },
            Layer {
                name: "mul".into(),
                op: Binary::new(BinaryKind::Mul).into(),
                inputs: vec![Some(2), Some(0)],
                outputs: vec![3],
            },
        ],
        arena_bytes: 768,
        arena_bytes_without_reuse: 768,
    };
    let weights: Vec<u8> = [1f32, 2., 3., 4.].iter().flat_map(|v| v.to_le_bytes()).collect();
    (plan, weights)
}

fn engine_bytes() -> Vec<u8> {
    let (plan, weights) = plan();
    Engine::serialize(Target::Cpu, vec!["test".into()], &plan, &weights, None).unwrap()
}

#[test]
fn engine_round_trips_and_runs() {
    let engine = Engine::from_bytes(&engine_bytes()).unwrap();
    assert_eq!(engine.inputs()[0].name, "x");
    assert_eq!(engine.outputs()[0].ty, TensorType::new(DType::F32, vec![4]));
    let x = Tensor::from_vec(vec![4], vec![1f32, -1., 0.5, 2.]).unwrap();
    let out = engine.create_context().unwrap().run(&[("x", &x)]).unwrap();
    assert_eq!(out[0].1.as_slice::<f32>().unwrap(), &[2., -1., 1.75, 12.]);
}

#[test]
fn sections_are_aligned_for_zero_copy() {
    let bytes = engine_bytes();
    let engine = Engine::from_bytes(&bytes).unwrap();
    for s in &engine.header().sections {
        assert_eq!(s.offset % 256, 0, "{s:?}");
    }
}

#[test]
fn overlapping_live_tensors_are_refused() {
    let (mut plan, weights) = plan();
    // `s` and `x` are both live at step 1: placing them together is invalid.
    plan.tensors[2].storage = Storage::Arena { offset: 0 };
    let bytes = Engine::serialize(Target::Cpu, vec![], &plan, &weights, None).unwrap();
    let e = Engine::from_bytes(&bytes).unwrap_err().to_string();
    assert!(e.contains("overlap"), "{e}");
}

#[test]
fn declared_types_must_match_inference() {
    let (mut plan, weights) = plan();
    plan.tensors[3].ty = TensorType::new(DType::F32, vec![2, 2]);
    let bytes = Engine::serialize(Target::Cpu, vec![], &plan, &weights, None).unwrap();
    let e = Engine::from_bytes(&bytes).unwrap_err().to_string();
    assert!(e.contains("declared f32[2,2] but the op makes f32[4]"), "{e}");
}

#[test]
fn storage_outside_the_arena_is_refused() {
    let (mut plan, weights) = plan();
    plan.tensors[3].storage = Storage::Arena { offset: 1 << 40 };
    let bytes = Engine::serialize(Target::Cpu, vec![], &plan, &weights, None).unwrap();
    assert!(Engine::from_bytes(&bytes).unwrap_err().to_string().contains("outside its storage"));
}

#[test]
fn engine_is_shared_across_threads_with_one_context_each() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}
    assert_send_sync::<Engine>();
    assert_send::<ExecutionContext<'static>>();
    let engine = Engine::from_bytes(&engine_bytes()).unwrap();
    std::thread::scope(|s| {
        for k in 0..4 {
            let engine = &engine;
            s.spawn(move || {
                let mut ctx = engine.create_context().unwrap();
                for i in 0..100 {
                    let v = (k * 100 + i) as f32;
                    let x = Tensor::from_vec(vec![4], vec![v; 4]).unwrap();
                    let out = ctx.run(&[("x", &x)]).unwrap();
                    let want: Vec<f32> = [1f32, 2., 3., 4.].iter().map(|w| (v + w) * v).collect();
                    assert_eq!(out[0].1.as_slice::<f32>().unwrap(), want.as_slice());
                }
            });
        }
    });
}

#[test]
fn an_arena_larger_than_its_tensors_is_refused() {
    let (mut plan, weights) = plan();
    plan.arena_bytes = 1 << 50;
    let bytes = Engine::serialize(Target::Cpu, vec![], &plan, &weights, None).unwrap();
    let e = Engine::from_bytes(&bytes).unwrap_err().to_string();
    assert!(e.contains("larger than its tensors need"), "{e}");
}
