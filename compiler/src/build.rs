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
    pub passes: crate::passes::PassOptions,
    /// The flags as the user wrote them, recorded in the engine.
    pub flags: Vec<String>,
}

/// The result of a build: the engine bytes and the graph they came from.
pub struct Built {
    /// The graph after optimization.
    pub graph: Graph,
    /// Op nodes right after import.
    pub imported_nodes: usize,
    pub pass_stats: Vec<crate::passes::PassStats>,
    pub engine: Vec<u8>,
}

/// Optimizes an imported graph and compiles it into engine bytes.
pub fn build_graph(mut graph: Graph, opts: &BuildOptions) -> Result<Built> {
    let imported_nodes = graph.op_count();
    let pass_stats = crate::passes::optimize(&mut graph, &opts.passes)?;
    let lowered = lower::lower(&graph, opts.lower)?;
    let engine = Engine::serialize(Target::Cpu, opts.flags.clone(), &lowered.plan, &lowered.weights)?;
    Ok(Built { graph, imported_nodes, pass_stats, engine })
}

/// Compiles an ONNX file into engine bytes.
pub fn build_file(model: &Path, opts: &BuildOptions) -> Result<Built> {
    let graph = onnx::import_file(model, &opts.import)?;
    build_graph(graph, opts)
}
