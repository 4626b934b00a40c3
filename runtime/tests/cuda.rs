//! CUDA executor tests, meaningful on both kinds of machine:
//!
//! - without libcuda or a GPU, creating a `CudaEngine` is an error that says
//!   why (never a panic), and a CPU engine is refused first;
//! - with a GPU, hand-made engines run and match the CPU executor: a host
//!   layer alone (no cubin needed), and, when NVRTC is found, real kernels
//!   compiled for the GPU, with and without a CUDA graph, layer by layer, on
//!   device pointers, and from several threads.
//!
//! Tests that need something absent print what they skipped.

#![cfg(feature = "cuda")]

use std::path::PathBuf;
use trtc_runtime::executor::cuda::{self, CudaEngine};
use trtc_runtime::kernels::{KernelArg, KernelModule, KernelTable, Launch, LayerKernels};
use trtc_runtime::ops::elementwise::{Binary, BinaryKind, Unary, UnaryKind};
use trtc_runtime::plan::{Layer, Plan, Storage, TensorDesc};
use trtc_runtime::{DType, Engine, Target, Tensor, TensorType};

/// y = relu(x) over f32[2,3], one layer.
fn relu_plan() -> Plan {
    relu_plan_of(vec![2, 3])
}

fn relu_plan_of(shape: Vec<usize>) -> Plan {
    let ty = TensorType::new(DType::F32, shape);
    Plan {
        tensors: vec![
            TensorDesc { name: "x".into(), ty: ty.clone(), storage: Storage::Arena { offset: 0 } },
            TensorDesc { name: "y".into(), ty, storage: Storage::Arena { offset: 256 } },
        ],
        inputs: vec![0],
        fixed_inputs: vec![],
        outputs: vec![("y".into(), 1)],
        layers: vec![Layer {
            name: "relu".into(),
            op: Unary::new(UnaryKind::Relu).into(),
            inputs: vec![Some(0)],
            outputs: vec![1],
        }],
        arena_bytes: 512,
        arena_bytes_without_reuse: 512,
    }
}

fn cuda_engine(plan: &Plan, weights: &[u8], sm: u32, modules: Vec<KernelModule>, layers: Vec<LayerKernels>) -> Engine {
    let table = KernelTable { sm, nvrtc_version: "13.0".into(), modules, layers, tactics: Vec::new() };
    let bytes = Engine::serialize(Target::Cuda { sm, gpu_name: None }, vec!["test".into()], plan, weights, Some(&table)).unwrap();
    Engine::from_bytes(&bytes).unwrap()
}

fn host_relu_engine(sm: u32) -> Engine {
    cuda_engine(&relu_plan(), &[], sm, vec![], vec![LayerKernels::Host { reason: "test".into() }])
}

fn libcuda_file_exists() -> bool {
    cuda::libcuda_search_dirs().iter().any(|d| d.join(cuda::LIBCUDA).is_file())
        || std::env::var_os(cuda::LIBCUDA_ENV).is_some()
        // SAFETY: only probes with dlopen.
        || unsafe { cudarc::driver::sys::is_culib_present() }
}

#[test]
fn engines_and_contexts_are_shareable_as_documented() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}
    assert_send_sync::<CudaEngine<'static>>();
    assert_send::<cuda::CudaExecutionContext<'static>>();
}

#[test]
fn a_cpu_engine_is_refused_before_looking_for_a_gpu() {
    let bytes = Engine::serialize(Target::Cpu, vec![], &relu_plan(), &[], None).unwrap();
    let engine = Engine::from_bytes(&bytes).unwrap();
    let e = CudaEngine::new(&engine, 0).unwrap_err().to_string();
    assert!(e.contains("built for the CPU") && e.contains("--target cuda") && e.contains("--device cpu"), "{e}");
    let e = engine.cuda(0).unwrap_err().to_string();
    assert!(e.contains("built for the CPU"), "{e}");
}

#[test]
fn a_host_layer_engine_runs_like_the_cpu_or_says_why_it_cannot() {
    let x = Tensor::from_vec(vec![2, 3], vec![1f32, -2., 3.5, -0.25, 0., 7.]).unwrap();
    let info = match cuda::device_info(0) {
        Ok(info) => info,
        Err(e) => {
            // No GPU here: the same error from the engine, never a panic.
            let msg = e.to_string();
            let engine = host_relu_engine(90);
            let err = CudaEngine::new(&engine, 0).unwrap_err().to_string();
            assert_eq!(err, msg);
            if !libcuda_file_exists() {
                assert!(msg.contains("libcuda.so.1") && msg.contains("/usr/lib/x86_64-linux-gnu"), "{msg}");
            }
            assert!(!cuda::available());
            eprintln!("skipped the GPU part: {msg}");
            return;
        }
    };
    eprintln!("GPU 0: {} sm_{} driver {}", info.name, info.sm, info.driver_version);
    let engine = host_relu_engine(info.sm);
    let gpu = engine.cuda(0).unwrap();
    assert_eq!(gpu.gpu_name(), info.name);
    assert_eq!(gpu.driver_version(), info.driver_version);
    assert!(gpu.has_host_layers());
    let mut ctx = gpu.create_context().unwrap();
    assert!(!ctx.cuda_graph(), "host layers run without a graph");
    let want = engine.create_context().unwrap().run(&[("x", &x)]).unwrap();
    for _ in 0..3 {
        assert_eq!(ctx.run(&[("x", &x)]).unwrap(), want);
    }
    let mut seen = vec![];
    let got = ctx
        .run_layers(&[("x", &x)], |i, outs| {
            seen.push((i, outs.to_vec()));
            Ok(())
        })
        .unwrap();
    assert_eq!(got, want);
    assert_eq!(seen, vec![(0, vec![want[0].1.clone()])]);

    // The CPU executor's input checks, with its messages.
    let e = ctx.run(&[]).unwrap_err().to_string();
    assert!(e.contains("missing input 'x'"), "{e}");
    let e = ctx.run(&[("x", &x), ("z", &x)]).unwrap_err().to_string();
    assert!(e.contains("unknown input 'z'"), "{e}");
    let e = ctx.run(&[("x", &x), ("x", &x)]).unwrap_err().to_string();
    assert!(e.contains("given twice"), "{e}");
    let wrong = Tensor::from_vec(vec![6], vec![0f32; 6]).unwrap();
    let e = ctx.run(&[("x", &wrong)]).unwrap_err().to_string();
    assert!(e.contains("must be f32[2,3]"), "{e}");

    // Zero-sized tensors: nothing to copy or compute, and no error.
    let plan = relu_plan_of(vec![0, 3]);
    let empty = cuda_engine(&plan, &[], info.sm, vec![], vec![LayerKernels::Host { reason: "test".into() }]);
    let gpu_empty = empty.cuda(0).unwrap();
    let x0 = Tensor::zeros(TensorType::new(DType::F32, vec![0, 3])).unwrap();
    let got = gpu_empty.create_context().unwrap().run(&[("x", &x0)]).unwrap();
    assert_eq!(got, empty.create_context().unwrap().run(&[("x", &x0)]).unwrap());

    // Cubins do not run across SMs: the mismatch is refused by name.
    let other = host_relu_engine(if info.sm == 90 { 80 } else { 90 });
    let e = CudaEngine::new(&other, 0).unwrap_err().to_string();
    assert!(e.contains(&format!("this GPU ({}) is sm_{}", info.name, info.sm)) && e.contains("rebuild"), "{e}");
    let e = CudaEngine::new(&engine, 1000).unwrap_err().to_string();
    assert!(e.contains("CUDA device 1000 does not exist"), "{e}");
}

#[test]
fn elf_bounds_are_checked_before_the_driver_sees_a_cubin() {
    let mut h = vec![0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2;
    h[5] = 1;
    assert!(cuda::check_elf_bounds(&h).is_ok());
    // One section header, far past the end of the image.
    h[0x28..0x30].copy_from_slice(&(1u64 << 40).to_le_bytes());
    h[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
    h[0x3c..0x3e].copy_from_slice(&1u16.to_le_bytes());
    let e = cuda::check_elf_bounds(&h).unwrap_err();
    assert!(e.contains("section headers outside"), "{e}");
    assert!(cuda::check_elf_bounds(b"\x7fELF").is_err());
    let mut be = vec![0u8; 64];
    be[..4].copy_from_slice(b"\x7fELF");
    be[4] = 1;
    assert!(cuda::check_elf_bounds(&be).unwrap_err().contains("64-bit"));
}

// ---------------------------------------------------------------------------
// Real kernels, compiled by NVRTC (which needs no GPU).

const N: usize = 1000;
const BLOCK: u32 = 256;

const RELU: &str = r#"
extern "C" __global__ void relu_f32(const float* x, float* y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"#;

const ADD: &str = r#"
extern "C" __global__ void add_f32(const float* a, const float* b, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a[i] + b[i];
}
"#;

/// `scale` is 1 in the tests: exercises a float argument without changing
/// the product.
const MUL: &str = r#"
extern "C" __global__ void mul_f32(const float* a, const float* b, float* y, int n, float scale) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a[i] * b[i] * scale;
}
"#;

/// Finds libnvrtc like the kernels crate does and preloads it; None when it
/// is nowhere.
fn nvrtc_loaded() -> bool {
    use std::sync::OnceLock;
    static LOADED: OnceLock<bool> = OnceLock::new();
    *LOADED.get_or_init(|| {
        let mut dirs: Vec<PathBuf> = vec![];
        if let Some(p) = std::env::var_os("TRTC_NVRTC_PATH") {
            let p = PathBuf::from(p);
            dirs.push(if p.is_file() { p.parent().map(PathBuf::from).unwrap_or_default() } else { p });
        }
        dirs.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.cache/nvrtc/nvidia/cu13/lib"));
        dirs.push(PathBuf::from(".cache/nvrtc/nvidia/cu13/lib"));
        for cuda in ["/usr/local/cuda", "/usr/local/cuda-13.0"] {
            dirs.push(PathBuf::from(cuda).join("targets/x86_64-linux/lib"));
            dirs.push(PathBuf::from(cuda).join("lib64"));
        }
        for dir in dirs {
            if dir.join("libnvrtc.so.13").is_file() {
                for lib in ["libnvrtc-builtins.so.13.0", "libnvrtc.so.13"] {
                    // SAFETY: NVIDIA's NVRTC libraries; kept loaded for the
                    // process so cudarc's dlopen by soname finds them.
                    if let Ok(l) = unsafe { libloading::Library::new(dir.join(lib)) } {
                        std::mem::forget(l);
                    }
                }
                break;
            }
        }
        // SAFETY: only probes with dlopen.
        unsafe { cudarc::nvrtc::sys::is_culib_present() }
    })
}

/// Compiles one kernel to a cubin for `sm`.
fn compile(source: &str, name: &str, sm: u32) -> Vec<u8> {
    use cudarc::nvrtc::sys::{self, nvrtcResult::NVRTC_SUCCESS};
    use std::ffi::CString;
    let src = CString::new(source).unwrap();
    let cname = CString::new(name).unwrap();
    let opts: Vec<CString> = [format!("--gpu-architecture=sm_{sm}")].into_iter().map(|o| CString::new(o).unwrap()).collect();
    let opt_ptrs: Vec<*const std::ffi::c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    let mut prog: sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the calls; the program is destroyed.
    unsafe {
        assert_eq!(
            sys::nvrtcCreateProgram(&mut prog, src.as_ptr(), cname.as_ptr(), 0, std::ptr::null(), std::ptr::null()),
            NVRTC_SUCCESS
        );
        let r = sys::nvrtcCompileProgram(prog, opt_ptrs.len() as i32, opt_ptrs.as_ptr());
        if r != NVRTC_SUCCESS {
            let mut n = 0usize;
            sys::nvrtcGetProgramLogSize(prog, &mut n);
            let mut log = vec![0u8; n.max(1)];
            sys::nvrtcGetProgramLog(prog, log.as_mut_ptr() as *mut std::ffi::c_char);
            panic!("NVRTC: {r:?}\n{}", String::from_utf8_lossy(&log));
        }
        let mut size = 0usize;
        assert_eq!(sys::nvrtcGetCUBINSize(prog, &mut size), NVRTC_SUCCESS);
        let mut cubin = vec![0u8; size];
        assert_eq!(sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr() as *mut std::ffi::c_char), NVRTC_SUCCESS);
        sys::nvrtcDestroyProgram(&mut prog);
        cubin
    }
}

/// y = (relu(x) + w) * w over f32[N], w a weight; layer 1 (the add) on the
/// host or on the device.
fn kernel_plan() -> (Plan, Vec<u8>) {
    let ty = TensorType::new(DType::F32, vec![N]);
    let t = |name: &str, storage| TensorDesc { name: name.into(), ty: ty.clone(), storage };
    let plan = Plan {
        tensors: vec![
            t("x", Storage::Arena { offset: 0 }),
            t("w", Storage::Weight { offset: 0 }),
            t("r", Storage::Arena { offset: 4096 }),
            t("s", Storage::Arena { offset: 8192 }),
            t("y", Storage::Arena { offset: 12288 }),
        ],
        inputs: vec![0],
        fixed_inputs: vec![],
        outputs: vec![("y".into(), 4)],
        layers: vec![
            Layer { name: "relu".into(), op: Unary::new(UnaryKind::Relu).into(), inputs: vec![Some(0)], outputs: vec![2] },
            Layer {
                name: "add".into(),
                op: Binary::new(BinaryKind::Add).into(),
                inputs: vec![Some(2), Some(1)],
                outputs: vec![3],
            },
            Layer {
                name: "mul".into(),
                op: Binary::new(BinaryKind::Mul).into(),
                inputs: vec![Some(3), Some(1)],
                outputs: vec![4],
            },
        ],
        arena_bytes: 16384,
        arena_bytes_without_reuse: 16384,
    };
    let weights: Vec<u8> = (0..N).flat_map(|i| (0.5 + (i % 7) as f32 * 0.25).to_le_bytes()).collect();
    (plan, weights)
}

fn kernel_engine(sm: u32, add_on_host: bool) -> Engine {
    let (plan, weights) = kernel_plan();
    let module = |src: &str, entry: &str| KernelModule {
        entry: entry.into(),
        tactic: "test".into(),
        cubin: compile(src, entry, sm),
        digest: 0,
    };
    let modules = vec![module(RELU, "relu_f32"), module(ADD, "add_f32"), module(MUL, "mul_f32")];
    for m in &modules {
        cuda::check_elf_bounds(&m.cubin).unwrap_or_else(|e| panic!("NVRTC's cubin for {}: {e}", m.entry));
    }
    let launch = |module: u32, args: Vec<KernelArg>| Launch {
        module,
        grid: [(N as u32).div_ceil(BLOCK), 1, 1],
        block: [BLOCK, 1, 1],
        shared_bytes: 0,
        args,
    };
    use KernelArg::*;
    let layers = vec![
        LayerKernels::Device(vec![launch(0, vec![Input(0), Output(0), I64(N as i64)])]),
        if add_on_host {
            LayerKernels::Host { reason: "test".into() }
        } else {
            LayerKernels::Device(vec![launch(1, vec![Input(0), Input(1), Output(0), I32(N as i32)])])
        },
        LayerKernels::Device(vec![launch(2, vec![Input(0), Input(1), Output(0), I32(N as i32), F32(1.0)])]),
    ];
    cuda_engine(&plan, &weights, sm, modules, layers)
}

fn input(seed: f32) -> Tensor {
    Tensor::from_vec(vec![N], (0..N).map(|i| ((i as f32 * 0.37 + seed).sin() * 4.0) + 0.001).collect::<Vec<f32>>()).unwrap()
}

#[test]
fn compiled_kernels_run_like_the_cpu() {
    if !nvrtc_loaded() {
        eprintln!("skipped: libnvrtc.so.13 not found (set TRTC_NVRTC_PATH)");
        return;
    }
    let info = match cuda::device_info(0) {
        Ok(info) => info,
        Err(e) => {
            // NVRTC alone: the engine with real cubins loads and validates,
            // and the CUDA executor explains why it cannot run it.
            let engine = kernel_engine(90, false);
            assert_eq!(engine.kernels().unwrap().modules.len(), 3);
            let err = CudaEngine::new(&engine, 0).unwrap_err().to_string();
            assert_eq!(err, e.to_string());
            let mut truncated = engine.kernels().unwrap().modules[0].cubin.clone();
            truncated.truncate(truncated.len() / 2);
            assert!(cuda::check_elf_bounds(&truncated).is_err());
            eprintln!("skipped the GPU part: {e}");
            return;
        }
    };
    let x1 = input(0.0);
    let x2 = input(1.5);
    for add_on_host in [false, true] {
        let engine = kernel_engine(info.sm, add_on_host);
        let gpu = engine.cuda(0).unwrap();
        assert_eq!(gpu.launch_count(), if add_on_host { 2 } else { 3 });
        let mut cpu = engine.create_context().unwrap();
        let want1 = cpu.run(&[("x", &x1)]).unwrap();
        let want2 = cpu.run(&[("x", &x2)]).unwrap();
        let mut ctx = gpu.create_context().unwrap();
        assert_eq!(ctx.cuda_graph(), !add_on_host);
        // First run captures the graph, the next ones replay it.
        for _ in 0..3 {
            assert_eq!(ctx.run(&[("x", &x1)]).unwrap(), want1, "add_on_host={add_on_host}");
            assert_eq!(ctx.run(&[("x", &x2)]).unwrap(), want2, "add_on_host={add_on_host}");
        }
        ctx.set_cuda_graph(false);
        assert!(!ctx.cuda_graph());
        assert_eq!(ctx.run(&[("x", &x1)]).unwrap(), want1);
        ctx.set_cuda_graph(true);
        assert_eq!(ctx.run(&[("x", &x2)]).unwrap(), want2);

        // Layer by layer, against the CPU's per-layer outputs.
        let mut cpu_layers = vec![];
        cpu.run_observed(&[("x", &x1)], |_, outs| cpu_layers.push(outs.iter().map(|o| o.to_owned()).collect::<Vec<_>>()))
            .unwrap();
        let mut n = 0;
        let got = ctx
            .run_layers(&[("x", &x1)], |i, outs| {
                assert_eq!(outs, cpu_layers[i].as_slice(), "layer {i}");
                n += 1;
                Ok(())
            })
            .unwrap();
        assert_eq!((got, n), (want1.clone(), 3));
        let e =
            ctx.run_layers(&[("x", &x1)], |i, _| if i == 1 { Err(trtc_runtime::Error::op("stop")) } else { Ok(()) }).unwrap_err();
        assert_eq!(e.to_string(), "stop");

        // Timing: enqueue on the inputs in the arena.
        let ms = ctx.time_enqueues(10).unwrap();
        assert!(ms > 0.0 && ms.is_finite(), "{ms}");

        // Device pointers in and out.
        device_pointer_run(&mut ctx, &x2, &want2[0].1);

        // Several threads, one context each, on one CudaEngine.
        std::thread::scope(|s| {
            for k in 0..3 {
                let (gpu, engine) = (&gpu, &engine);
                s.spawn(move || {
                    let mut ctx = gpu.create_context().unwrap();
                    let mut cpu = engine.create_context().unwrap();
                    for i in 0..10 {
                        let x = input((k * 10 + i) as f32);
                        assert_eq!(ctx.run(&[("x", &x)]).unwrap(), cpu.run(&[("x", &x)]).unwrap());
                    }
                });
            }
        });
    }
}

fn device_pointer_run(ctx: &mut cuda::CudaExecutionContext<'_>, x: &Tensor, want: &Tensor) {
    use cudarc::driver::{result, CudaContext};
    let bytes = x.bytes().len();
    // Retains (and makes current) the same primary context the engine uses.
    let cu = CudaContext::new(0).unwrap();
    // SAFETY: plain allocations and synchronous copies of `bytes` bytes in
    // the current context, freed at the end.
    unsafe {
        let d_x = result::malloc_sync(bytes).unwrap();
        let d_y = result::malloc_sync(bytes).unwrap();
        result::memcpy_htod_sync(d_x, x.bytes()).unwrap();
        let e = ctx.enqueue_device(&[("x", d_x)], &[("nope", d_y)]).unwrap_err().to_string();
        assert!(e.contains("unknown output 'nope'"), "{e}");
        let e = ctx.enqueue_device(&[("x", 0)], &[("y", d_y)]).unwrap_err().to_string();
        assert!(e.contains("null device pointer"), "{e}");
        ctx.enqueue_device(&[("x", d_x)], &[("y", d_y)]).unwrap();
        ctx.synchronize().unwrap();
        let mut y = Tensor::zeros(want.ty().clone()).unwrap();
        result::memcpy_dtoh_sync(y.bytes_mut(), d_y).unwrap();
        assert_eq!(&y, want);
        result::free_sync(d_x).unwrap();
        result::free_sync(d_y).unwrap();
    }
    drop(cu);
}
