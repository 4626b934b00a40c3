//! The runtime's error type. Every failure on bad input is an `Error`, never a panic.

/// Errors of loading or executing an engine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The engine file is not one this runtime can read (magic, version,
    /// truncation, checksum, inconsistent plan).
    #[error("invalid engine: {0}")]
    InvalidEngine(String),
    /// Inputs given to `run` do not match the engine's bindings.
    #[error("{0}")]
    Binding(String),
    /// An op could not execute (unsupported dtype, inconsistent shapes).
    #[error("{0}")]
    Op(String),
    /// A device was asked for that is not available.
    #[error("{0}")]
    Device(String),
    /// A CUDA driver call failed; the message names the call, the layer
    /// when there is one, and the driver's error.
    #[error("{0}")]
    Cuda(String),
    /// A file could not be read (the I/O error is part of the message).
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
}

impl From<crate::file::FileError> for Error {
    fn from(e: crate::file::FileError) -> Error {
        Error::Io { path: e.path, error: e.error }
    }
}

impl Error {
    pub fn op(msg: impl Into<String>) -> Error {
        Error::Op(msg.into())
    }

    pub fn invalid(msg: impl Into<String>) -> Error {
        Error::InvalidEngine(msg.into())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Returns early with an [`Error::Op`] built from a format string.
#[macro_export]
macro_rules! bail_op {
    ($($arg:tt)*) => { return Err($crate::error::Error::Op(format!($($arg)*))) };
}

/// Returns an [`Error::Op`] unless the condition holds.
#[macro_export]
macro_rules! ensure_op {
    ($cond:expr, $($arg:tt)*) => { if !$cond { $crate::bail_op!($($arg)*) } };
}
