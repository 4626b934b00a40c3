//! Errors as Python exceptions: the classes are defined in Python
//! (`trtc/_errors.py`, so that they also derive from the matching builtin,
//! `OSError` or `ValueError`), and raised here with the same one-line
//! messages the CLI prints.

use pyo3::prelude::*;
use pyo3::types::PyType;

/// The exception classes of `trtc._errors`.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// A model that cannot be imported or built, or bad build options.
    Build,
    /// An engine that is corrupted, truncated or of another format version.
    Engine,
    /// Inputs that do not match the engine's bindings.
    Binding,
    /// A layer that failed while running.
    Execution,
    /// A device that is absent or failed (a GPU, CUDA's libraries).
    Device,
    /// A file that cannot be read or written.
    File,
    /// An argument value trtc cannot use.
    Argument,
    /// A bug in trtc (a caught panic).
    Internal,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Build => "BuildError",
            Kind::Engine => "EngineError",
            Kind::Binding => "BindingError",
            Kind::Execution => "ExecutionError",
            Kind::Device => "DeviceError",
            Kind::File => "FileError",
            Kind::Argument => "ArgumentError",
            Kind::Internal => "InternalError",
        }
    }
}

/// A `trtc` exception of `kind` with `message`.
pub fn error(kind: Kind, message: impl Into<String>) -> PyErr {
    let message = message.into();
    Python::attach(|py| {
        let class = py
            .import("trtc._errors")
            .and_then(|m| m.getattr(kind.class_name()))
            .and_then(|c| c.cast_into::<PyType>().map_err(PyErr::from));
        match class {
            Ok(class) => PyErr::from_type(class, (message,)),
            // The package is broken (the module was imported without its
            // Python half): still raise, as a RuntimeError.
            Err(e) => pyo3::exceptions::PyRuntimeError::new_err(format!("{message} (trtc._errors: {e})")),
        }
    })
}

/// The exception for a runtime error.
pub fn runtime(e: trtc_runtime::Error) -> PyErr {
    use trtc_runtime::Error as E;
    let kind = match &e {
        E::InvalidEngine(_) => Kind::Engine,
        E::Binding(_) => Kind::Binding,
        E::Op(_) => Kind::Execution,
        E::Device(_) | E::Cuda(_) => Kind::Device,
        E::Io { .. } => Kind::File,
    };
    error(kind, e.to_string())
}

/// A build error with the whole context chain on one line, as the CLI
/// prints it.
pub fn build(e: anyhow::Error) -> PyErr {
    // A runtime error at the root (an engine that does not load, a device
    // that fails) keeps its own class.
    if let Some(r) = e.downcast_ref::<trtc_runtime::Error>() {
        if matches!(r, trtc_runtime::Error::Device(_) | trtc_runtime::Error::Cuda(_)) {
            return error(Kind::Device, format!("{e:#}"));
        }
    }
    error(Kind::Build, format!("{e:#}"))
}

/// Runs `f`, turning a panic (a trtc bug) into an `InternalError` instead
/// of unwinding into Python.
pub fn no_panic<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => Err(error(
            Kind::Internal,
            format!("internal error (a bug in trtc, please report it): {}", trtc::panic_message(p.as_ref())),
        )),
    }
}
