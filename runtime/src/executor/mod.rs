//! Executors: run an engine's plan on a device.

mod cpu;

pub use cpu::ExecutionContext;
