//! Converters for the runtime's `movement` op family.

use super::Registry;
#[allow(unused_imports)]
use crate::frontend::onnx::ctx::Ctx;
#[allow(unused_imports)]
use crate::ir::Port;
#[allow(unused_imports)]
use anyhow::{anyhow, bail, Result};

pub fn register(r: &mut Registry) {
    let _ = r;
}
