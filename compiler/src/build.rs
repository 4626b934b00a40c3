//! The build pipeline: ONNX file → engine bytes.

use crate::frontend::onnx::{self, ImportOptions};
use crate::ir::Graph;
use crate::lower::{self, LowerOptions};
use anyhow::Result;
use std::path::Path;
use trtc_runtime::{Engine, Target};

/// Everything `trtc build` can be asked.
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    pub import: ImportOptions,
    pub lower: LowerOptions,
    /// The flags as the user wrote them, recorded in the engine.
    pub flags: Vec<String>,
}

/// The result of a build: the engine bytes and the graph they came from.
pub struct Built {
    pub graph: Graph,
    pub engine: Vec<u8>,
}

/// Compiles an imported graph into engine bytes.
pub fn build_graph(graph: Graph, opts: &BuildOptions) -> Result<Built> {
    let lowered = lower::lower(&graph, opts.lower)?;
    let engine = Engine::serialize(Target::Cpu, opts.flags.clone(), &lowered.plan, &lowered.weights)?;
    Ok(Built { graph, engine })
}

/// Compiles an ONNX file into engine bytes.
pub fn build_file(model: &Path, opts: &BuildOptions) -> Result<Built> {
    let graph = onnx::import_file(model, &opts.import)?;
    build_graph(graph, opts)
}
