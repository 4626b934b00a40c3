//! `trtc serve` with GPU instances, on a machine without a GPU: the server
//! runs on the emulated CUDA driver (`kernels/emu/libcuda.cpp`), which
//! executes the real kernels on the CPU, so its GPU path (KIND_GPU
//! instances, each a CUDA execution context, fed by the dynamic batcher
//! with batches of every size in the profile) is checked end to end with
//! the real `tritonclient`: `gpu_instances_check.py` sends concurrent
//! requests of 1 to 4 rows over HTTP and gRPC to the GPU model and to a CPU
//! instance of the same engine, and compares every answer.
//!
//! Needs libnvrtc and the tritonclient venv (`scripts/test.sh` installs
//! both) and g++.

use std::path::PathBuf;
use std::process::Command;

use trtc::build::{build_file, BuildOptions, ShapeProfile};
use trtc_runtime::Target;

mod support;
use support::{python, workspace};

#[test]
fn gpu_instances_answer_as_the_cpu_instance_does() {
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("emulated-driver");
    let modules = work.join("modules");
    // The build below writes each module's emulator program there (this
    // test binary's only test, so no other compilation races it).
    std::env::set_var(trtc_kernels::emu::MODULES_ENV, &modules);
    let driver = trtc_kernels::emu::build_driver(&work).unwrap_or_else(|e| panic!("{e}"));

    let root = std::env::temp_dir().join(format!("trtc-serve-gpu-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dims = |b: usize| vec![("x".to_string(), vec![b, 3, 16, 16])];
    let opts = BuildOptions {
        target: Target::Cuda { sm: 90, gpu_name: None },
        profiles: vec![ShapeProfile::from_flags(&dims(1), &dims(8), &dims(32)).unwrap()],
        ..Default::default()
    };
    let built = build_file(&workspace().join("testdata/serve/batch_cnn.onnx"), &opts).unwrap();
    for (model, config) in [
        ("gpu", "instance_group { count: 2 kind: KIND_GPU }\ndynamic_batching { max_queue_delay_microseconds: 2000 }\n"),
        ("cpu", "instance_group { count: 1 kind: KIND_CPU }\n"),
    ] {
        std::fs::create_dir_all(root.join(model).join("1")).unwrap();
        std::fs::write(root.join(model).join("1/model.engine"), &built.engine).unwrap();
        std::fs::write(root.join(model).join("config.pbtxt"), config).unwrap();
    }

    let mut server = support::start(
        &["--model-repository".as_ref(), root.as_os_str()],
        &[("TRTC_LIBCUDA", driver.as_os_str()), (trtc_kernels::emu::MODULES_ENV, modules.as_os_str())],
    );
    let ready = "trtc serve: model 'gpu' version 1 ready (2x gpu)";
    assert!(server.startup.iter().any(|l| l == ready), "GPU instances: {:?}", server.startup);
    let status = Command::new(python())
        .arg(workspace().join("server/tests/gpu_instances_check.py"))
        .args(["--http", &server.http, "--grpc", &server.grpc, "--metrics", &server.metrics])
        .status()
        .expect("the tritonclient venv's python runs");
    server.signal(libc::SIGTERM);
    assert!(status.success(), "gpu_instances_check.py failed ({status}); its output is above");
    let code = server.child.wait().unwrap();
    assert!(code.success(), "trtc-serve exited with {code} after SIGTERM");
    let _ = std::fs::remove_dir_all(&root);
}
