//! Executors: run an engine's plan on a device.

mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;

pub use cpu::ExecutionContext;
