//! ONNX op converters: each maps one ONNX op type to IR ops. One file per
//! family, mirroring `trtc_runtime::ops` (`spectral` makes constants only).

use super::ctx::Ctx;
use crate::ir::Port;
use anyhow::Result;
use std::collections::HashMap;

mod core;
mod elementwise;
mod movement;
mod linalg;
mod quant;
mod recurrent;
mod reduce;
mod spectral;

/// `t` converted to `to` as the Cast op converts (constants built at
/// import time, in any dtype, the storage-only ones included).
pub fn cast(to: trtc_runtime::DType, t: trtc_runtime::Tensor) -> Result<trtc_runtime::Tensor> {
    let op: trtc_runtime::ops::Op = trtc_runtime::ops::elementwise::Cast::new(to).into();
    Ok(op.eval_owned(&[Some(&t)]).map_err(|e| anyhow::anyhow!("{e}"))?.remove(0))
}

/// Converts one ONNX node; returns the IR ports of its outputs in order (it
/// may return fewer than the node declares when trailing optional outputs,
/// like Dropout's mask, are not supported).
pub type Converter = fn(&mut Ctx) -> Result<Vec<Port>>;

#[derive(Default)]
pub struct Registry {
    converters: HashMap<&'static str, Converter>,
}

impl Registry {
    pub fn add(&mut self, op_type: &'static str, c: Converter) {
        self.converters.insert(op_type, c);
    }

    pub fn get(&self, op_type: &str) -> Option<Converter> {
        self.converters.get(op_type).copied()
    }

    pub fn op_types(&self) -> Vec<&'static str> {
        let mut v: Vec<_> = self.converters.keys().copied().collect();
        v.sort();
        v
    }

    /// Every converter trtc has.
    pub fn onnx() -> Registry {
        let mut r = Registry::default();
        core::register(&mut r);
        elementwise::register(&mut r);
        linalg::register(&mut r);
        movement::register(&mut r);
        quant::register(&mut r);
        recurrent::register(&mut r);
        reduce::register(&mut r);
        spectral::register(&mut r);
        r
    }
}
