//! trtc: compiles ONNX models into engine files.
//!
//! The pipeline (see `doc/pipeline.md`): [`frontend`] (ONNX → IR) →
//! [`passes`] (optimizations) → [`lower`] (IR → plan, memory plan, weights) →
//! `trtc_runtime::Engine::serialize` (engine file).

pub mod accuracy;
pub mod build;
pub mod compare;
pub mod conformance;
pub mod cuda;
pub mod frontend;
pub mod gpu_check;
pub mod host;
pub mod ir;
pub mod lower;
pub mod inspect;
pub mod npz;
pub mod passes;
pub mod precision;
pub mod random;
pub mod stats;
pub mod text;
pub mod tuning;

/// The message of a caught panic (for reporting a bug as one error line).
pub fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}
