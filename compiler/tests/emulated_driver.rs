//! The CUDA executor itself, run without a GPU: `trtc gpu-check` (the CUDA
//! executor against the CPU executor, see `trtc::gpu_check`) on a selection
//! of cases, with the emulated CUDA driver of `kernels/emu/libcuda.cpp` in
//! place of libcuda. Every launch runs the real kernels on the CPU through
//! the emulator, so what this checks is the executor's side of the GPU
//! path: launches at the bound shapes, a CUDA graph per shape set (its
//! replay must give the first run's bits), row counts read back after a
//! NonMaxSuppression that runs on the GPU, If branches and Loop bodies
//! launched from the host, host layers between device layers, and tensors
//! that outgrow their planned room. The cases:
//! - every model of `testdata/control_flow`, each at all its recorded
//!   inputs (the Loop trip counts 0, 1, 4 and 9);
//! - testdata's dynamic detector (NMS counted on the GPU) and two more
//!   profile engines at every recorded shape;
//! - the example CNN in FP32, FP16 and FP8, and a BERT in FP16 (tensor-core
//!   GEMMs).
//!
//! Needs libnvrtc (`scripts/test.sh` installs it from PyPI) and g++ (as the
//! kernel emulator test does). Modules compiled for the emulator are kept
//! in the target directory, named by their program's digest.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

fn work_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("emulated-driver")
}

/// Builds the emulated driver once.
fn driver() -> &'static PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| trtc_kernels::emu::build_driver(&work_dir()).unwrap_or_else(|e| panic!("{e}")))
}

/// Runs `trtc gpu-check --opt-level 0 --filter FILTER` on the emulated
/// driver and expects `cases` cases, every one passing.
fn gpu_check(filter: &str, cases: usize) {
    let out = Command::new(env!("CARGO_BIN_EXE_trtc"))
        .args(["gpu-check", "--opt-level", "0", "--filter", filter])
        .env("TRTC_LIBCUDA", driver())
        .env(trtc_kernels::emu::MODULES_ENV, work_dir().join("modules"))
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let report = format!("filter '{filter}':\n{stdout}\n{stderr}");
    assert!(stdout.starts_with("GPU: trtc emulated GPU"), "not the emulated driver: {report}");
    assert!(out.status.success(), "exit {:?}: {report}", out.status.code());
    let summary = format!("gpu-check: {cases} passed, 0 failed, 0 skipped");
    assert!(stdout.contains(&summary), "expected '{summary}': {report}");
}

#[test]
fn control_flow_models_run_on_the_cuda_executor() {
    gpu_check("control_flow/", 9);
}

#[test]
fn a_detector_whose_nms_counts_its_rows_on_the_gpu() {
    gpu_check("dynamic/detector_legacy.onnx dyn", 1);
}

#[test]
fn profile_engines_at_every_recorded_shape() {
    gpu_check("seg_legacy.onnx dyn", 1);
    gpu_check("hf_gpt2_legacy.onnx dyn", 1);
}

#[test]
fn a_static_cnn_in_fp32_fp16_and_fp8() {
    gpu_check("models/example_cnn.onnx fp", 3);
}

#[test]
fn a_transformer_in_fp16() {
    gpu_check("models/bert_legacy.onnx fp16", 1);
}
