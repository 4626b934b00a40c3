//! `trtc serve`: serves trtc engines to the clients of Triton Inference
//! Server (`tritonclient`, `perf_analyzer`, KServe v2 clients) over HTTP and
//! gRPC, from a model repository in Triton's layout, with Triton's metrics.
//!
//! Depends on the runtime only: engines are built by `trtc build`, never
//! here.

// Modules are declared lowest layer first, and each uses only modules
// declared above it (checked by `cargo xtask layers`).
pub mod pbtxt;
pub mod shapes;
pub mod protocol;
pub mod model_config;
pub mod metrics;
pub mod scheduler;
pub mod repository;
pub mod service;
pub mod http;
pub mod grpc;
