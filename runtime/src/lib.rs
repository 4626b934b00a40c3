//! trtc's runtime: loads engine files and executes them.
//!
//! ```no_run
//! use trtc_runtime::{Engine, Tensor};
//!
//! # fn main() -> Result<(), trtc_runtime::Error> {
//! let engine = Engine::load("model.engine")?;
//! for b in engine.inputs() {
//!     println!("input {}: {}", b.name, b.ty);
//! }
//! let input = Tensor::zeros(engine.inputs()[0].ty.clone())?;
//! let mut context = engine.create_context()?;
//! let outputs = context.run(&[(engine.inputs()[0].name.as_str(), &input)])?;
//! println!("{:?}", outputs[0].1);
//! # Ok(())
//! # }
//! ```

// Modules are declared lowest layer first, and each uses only modules
// declared above it (checked by `cargo xtask layers`).
pub mod dtype;
pub mod float8;
pub mod file;
pub mod error;
pub mod parallel;
pub mod math;
pub mod prepack;
pub mod tensor;
pub mod ops;
pub mod memory;
pub mod plan;
pub mod profile;
pub mod kernels;
pub mod engine;
pub mod executor;

pub use dtype::DType;
pub use engine::{BindingInfo, Engine, Target};
pub use error::{Error, Result};
#[cfg(feature = "cuda")]
pub use executor::cuda::{ContextKeepAlive, CudaEngine, CudaExecutionContext};
pub use executor::ExecutionContext;
pub use ops::Op;
pub use tensor::{Tensor, TensorType, TensorView, TensorViewMut};
