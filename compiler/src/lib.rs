//! trtc: compiles ONNX models into engine files.
//!
//! The pipeline (see `doc/pipeline.md`): [`frontend`] (ONNX → IR) →
//! [`passes`] (optimizations) → [`lower`] (IR → plan, memory plan, weights) →
//! `trtc_runtime::Engine::serialize` (engine file).

// Modules are declared lowest layer first, and each uses only modules
// declared above it (`cargo xtask layers` checks this in every crate and at
// every level; see doc/architecture.md).

// Utilities.
pub mod text;
pub mod host;
pub mod stats;
pub mod random;
pub mod npz;
pub mod compare;
// The pipeline: ONNX to IR, optimized, reduced precision, lowered to a plan.
pub mod ir;
pub mod frontend;
pub mod passes;
pub mod precision;
pub mod lower;
// One graph for a model imported at several input shapes (profiles).
pub mod generalize;
// GPU code generation: tactic choice (and the timing cache), then kernels.
pub mod tuning;
pub mod cuda;
// Reduced-precision engines against FP32, and the calibrator that chooses
// per tensor by that measure.
pub mod accuracy;
pub mod auto_calibration;
// The build that drives all of the above, calibration included.
pub mod build;
// Tools on engines and models.
pub mod inspect;
pub mod accuracy_target;
pub mod conformance;
pub mod gpu_check;

/// The message of a caught panic (for reporting a bug as one error line).
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}
