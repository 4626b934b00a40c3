//! The native half of trtc's Python package (`trtc._trtc`): engines built,
//! loaded and run through the compiler and runtime crates. The package
//! `python/trtc` re-exports it with the calibrator classes and exceptions
//! written in Python.
//!
//! Rust runs with the GIL released (building, calibrating, running), so
//! Python threads with one context each run in parallel.

// Modules are declared lowest layer first (`cargo xtask layers`).
mod errors;
mod convert;
mod gpu;
mod context;
mod engine;
mod builder;

use pyo3::prelude::*;

#[pymodule]
fn _trtc(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", trtc_runtime::engine::TRTC_VERSION)?;
    m.add_class::<engine::Engine>()?;
    m.add_class::<engine::Binding>()?;
    m.add_class::<context::Context>()?;
    m.add_function(wrap_pyfunction!(builder::build, m)?)?;
    Ok(())
}
