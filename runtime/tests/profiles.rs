//! Engines whose input shapes vary within an optimization profile, on the
//! CPU executor: a plan written by hand at the profile's maximum, run at
//! shapes inside it, refused outside it.

use trtc_runtime::ops::elementwise::{Binary, BinaryKind};
use trtc_runtime::plan::{Layer, Plan, Storage, TensorDesc};
use trtc_runtime::profile::{Profile, ProfileInput};
use trtc_runtime::{DType, Engine, Target, Tensor, TensorType};

/// y = (x + b) * x over f32[N, 4] with a bias b: f32[4] broadcast over the
/// rows; planned at N = 8.
fn plan() -> (Plan, Vec<u8>) {
    let big = TensorType::new(DType::F32, vec![8, 4]);
    let t = |name: &str, ty: &TensorType, storage| TensorDesc { name: name.into(), ty: ty.clone(), storage };
    let plan = Plan {
        tensors: vec![
            t("x", &big, Storage::Arena { offset: 0 }),
            t("b", &TensorType::new(DType::F32, vec![4]), Storage::Weight { offset: 0 }),
            t("s", &big, Storage::Arena { offset: 256 }),
            t("y", &big, Storage::Arena { offset: 512 }),
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

fn profile(min: usize, opt: usize) -> Profile {
    Profile {
        inputs: vec![ProfileInput { name: "x".into(), min: vec![min, 4], opt: vec![opt, 4], max: vec![8, 4] }],
        shared: Vec::new(),
    }
}

fn engine(profiles: &[Profile]) -> Engine {
    let (plan, weights) = plan();
    let bytes = Engine::serialize_with_profiles(Target::Cpu, vec![], &plan, &weights, None, profiles).unwrap();
    Engine::from_bytes(&bytes).unwrap()
}

fn expected(x: &[f32]) -> Vec<f32> {
    x.iter().enumerate().map(|(i, &v)| (v + [1., 2., 3., 4.][i % 4]) * v).collect()
}

#[test]
fn shapes_inside_the_profile_run_and_give_outputs_of_their_shape() {
    let engine = engine(&[profile(1, 4)]);
    assert_eq!(engine.profiles().len(), 1);
    let mut ctx = engine.create_context().unwrap();
    // Shapes in any order, repeated (the last binding is cached).
    for rows in [3usize, 8, 1, 3, 5] {
        let x: Vec<f32> = (0..rows * 4).map(|i| i as f32 * 0.5 - 3.0).collect();
        let out = ctx.run(&[("x", &Tensor::from_vec(vec![rows, 4], x.clone()).unwrap())]).unwrap();
        assert_eq!(out[0].1.shape(), &[rows, 4]);
        assert_eq!(out[0].1.as_slice::<f32>().unwrap(), expected(&x).as_slice(), "{rows} rows");
    }
}

#[test]
fn a_run_takes_the_first_profile_that_admits_its_shapes() {
    // Rows 1 to 2, and 6 to 8 (the plan's max): 3 to 5 lie in neither.
    let low = Profile {
        inputs: vec![ProfileInput { name: "x".into(), min: vec![1, 4], opt: vec![2, 4], max: vec![2, 4] }],
        shared: Vec::new(),
    };
    let high = Profile {
        inputs: vec![ProfileInput { name: "x".into(), min: vec![6, 4], opt: vec![8, 4], max: vec![8, 4] }],
        shared: Vec::new(),
    };
    let engine = engine(&[low, high]);
    assert_eq!(engine.profiles().len(), 2);
    let mut ctx = engine.create_context().unwrap();
    for rows in [1usize, 7, 2, 8, 6] {
        let x: Vec<f32> = (0..rows * 4).map(|i| i as f32 * 0.25 - 1.0).collect();
        let out = ctx.run(&[("x", &Tensor::from_vec(vec![rows, 4], x.clone()).unwrap())]).unwrap();
        assert_eq!(out[0].1.as_slice::<f32>().unwrap(), expected(&x).as_slice(), "{rows} rows");
    }
    let e = ctx.run(&[("x", &Tensor::from_vec(vec![4, 4], vec![0f32; 16]).unwrap())]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "outside each of its 2 profiles (profile 0: input 'x' axis 0 is 4: allowed 1 to 2; \
         profile 1: input 'x' axis 0 is 4: allowed 6 to 8)"
    );
}

#[test]
fn a_context_set_to_one_profile_refuses_shapes_only_another_admits() {
    let range = |lo: usize, hi: usize| Profile {
        inputs: vec![ProfileInput { name: "x".into(), min: vec![lo, 4], opt: vec![hi, 4], max: vec![hi, 4] }],
        shared: Vec::new(),
    };
    let engine = engine(&[range(1, 4), range(2, 8)]);
    let mut ctx = engine.create_context().unwrap();
    let x = |rows: usize| Tensor::from_vec(vec![rows, 4], vec![1f32; rows * 4]).unwrap();
    // The first profile that admits 3 rows is 0; with profile 1 set, 3 rows
    // still run, and 1 row (profile 0's alone) is refused naming profile 1.
    assert!(ctx.run(&[("x", &x(3))]).is_ok());
    ctx.set_profile(Some(1)).unwrap();
    assert_eq!(ctx.profile(), Some(1));
    assert!(ctx.run(&[("x", &x(3))]).is_ok());
    let e = ctx.run(&[("x", &x(1))]).unwrap_err().to_string();
    assert_eq!(e, "outside profile 1, which the context uses: input 'x' axis 0 is 1: allowed 2 to 8");
    ctx.set_profile(None).unwrap();
    assert!(ctx.run(&[("x", &x(1))]).is_ok());
    let e = ctx.set_profile(Some(2)).unwrap_err().to_string();
    assert_eq!(e, "profile 2 does not exist: the engine has 2 profiles");
}

#[test]
fn shapes_outside_the_profile_are_refused_naming_the_axis_and_range() {
    let engine = engine(&[profile(2, 4)]);
    let mut ctx = engine.create_context().unwrap();
    let run = |ctx: &mut trtc_runtime::ExecutionContext, shape: Vec<usize>| {
        let n = shape.iter().product();
        ctx.run(&[("x", &Tensor::from_vec(shape, vec![0f32; n]).unwrap())]).unwrap_err().to_string()
    };
    assert_eq!(run(&mut ctx, vec![9, 4]), "outside its profile: input 'x' axis 0 is 9: allowed 2 to 8");
    assert_eq!(run(&mut ctx, vec![1, 4]), "outside its profile: input 'x' axis 0 is 1: allowed 2 to 8");
    assert_eq!(run(&mut ctx, vec![4, 5]), "outside its profile: input 'x' axis 1 is 5: fixed at 4");
    assert_eq!(run(&mut ctx, vec![4]), "outside its profile: input 'x' has rank 1, the engine's input has rank 2");
    let wrong_dtype = ctx.run(&[("x", &Tensor::from_vec(vec![4, 4], vec![0i64; 16]).unwrap())]).unwrap_err();
    assert_eq!(wrong_dtype.to_string(), "input 'x' must be f32[2..8,4], got i64[4,4]");
}

#[test]
fn profiles_that_do_not_match_the_plan_are_refused() {
    let (plan, weights) = plan();
    let bad =
        |p: Profile| Engine::serialize_with_profiles(Target::Cpu, vec![], &plan, &weights, None, &[p]).unwrap_err().to_string();
    let mut p = profile(1, 4);
    p.inputs[0].max = vec![16, 4];
    assert!(bad(p).contains("max 16x4 exceeds the planned shape 8x4"));
    let mut p = profile(1, 4);
    p.inputs[0].opt = vec![9, 4];
    assert!(bad(p).contains("are not in order"));
    let mut p = profile(1, 4);
    p.inputs[0].name = "z".into();
    assert!(bad(p).contains("a range for 'z'"));
}

#[test]
fn an_engine_without_profiles_is_unchanged() {
    let (plan, weights) = plan();
    let plain = Engine::serialize(Target::Cpu, vec![], &plan, &weights, None).unwrap();
    assert_eq!(plain, Engine::serialize_with_profiles(Target::Cpu, vec![], &plan, &weights, None, &[]).unwrap());
    let engine = Engine::from_bytes(&plain).unwrap();
    assert!(engine.profiles().is_empty());
    let err = engine.create_context().unwrap().run(&[("x", &Tensor::from_vec(vec![3, 4], vec![0f32; 12]).unwrap())]).unwrap_err();
    assert_eq!(err.to_string(), "input 'x' must be f32[8,4], got f32[3,4]");
}
