//! Launches at the shapes bound in a run, for GPU engines whose shapes vary:
//! the runtime's [`LaunchPlanner`], implemented by the kernel families.
//!
//! The engine records each layer's tactic and a digest of every module's
//! source. At new shapes the layer's candidates are listed again, the one
//! with the recorded tactic is taken, and each of its launches must use a
//! source the engine compiled (the build compiled every source the tactic
//! uses at the shapes it sampled from the profiles); otherwise the layer
//! runs on the host at those shapes, with the reason.

use crate::{candidates, LayerIo, SmLimits};
use trtc_runtime::kernels::{source_digest, KernelTable, Launch, LaunchPlanner};
use trtc_runtime::plan::Layer;
use trtc_runtime::TensorType;

/// The kernel families as a [`LaunchPlanner`]; give it to
/// `CudaEngine::with_planner` to run an engine whose shapes vary.
#[derive(Clone, Copy, Debug, Default)]
pub struct FamilyPlanner;

impl LaunchPlanner for FamilyPlanner {
    fn launches(
        &self,
        table: &KernelTable,
        index: usize,
        layer: &Layer,
        inputs: &[Option<&TensorType>],
        outputs: &[&TensorType],
    ) -> Result<Vec<Launch>, String> {
        let tactic = match table.tactics.get(index) {
            Some(t) if !t.is_empty() => t,
            _ => return Err("the engine records no tactic for it (rebuild it with this trtc)".into()),
        };
        let io = LayerIo { op: &layer.op, inputs: inputs.to_vec(), outputs: outputs.to_vec() };
        let offered = candidates(&io, &SmLimits::for_sm(table.sm)).map_err(|e| e.0)?;
        let Some(candidate) = offered.into_iter().find(|c| c.tactic.to_string() == *tactic) else {
            return Err(format!("its tactic {tactic} does not take these shapes"));
        };
        candidate
            .launches
            .into_iter()
            .map(|l| {
                let digest = source_digest(&l.kernel.entry, &l.kernel.source);
                let module = table
                    .modules
                    .iter()
                    .position(|m| m.digest == digest && m.entry == l.kernel.entry)
                    .ok_or_else(|| format!("its kernel {} ({tactic}) for these shapes was not compiled", l.kernel.entry))?;
                Ok(Launch { module: module as u32, grid: l.grid, block: l.block, shared_bytes: l.shared_bytes, args: l.args })
            })
            .collect()
    }
}
