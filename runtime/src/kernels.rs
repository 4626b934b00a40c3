//! The kernels a CUDA engine carries (its KERNELS section): one cubin per
//! distinct kernel instantiation, and for every layer of the plan either the
//! launches that compute it or the reason it runs on the host.
//!
//! Launch arguments name the layer's own inputs and outputs, not device
//! addresses: the CUDA executor resolves them against the activation arena
//! and the uploaded weights when it creates a context. The CPU executor
//! ignores this section, so every engine runs on the CPU from its plan alone.

use crate::error::{Error, Result};
use crate::plan::Plan;
use serde::{Deserialize, Serialize};

/// The most threads a block may have on any GPU trtc targets.
pub const MAX_BLOCK_THREADS: u32 = 1024;
/// Dynamic shared memory a launch may ask for (the sm_80 opt-in limit is
/// 163 KiB; larger requests are refused when the engine loads).
pub const MAX_DYNAMIC_SHARED_BYTES: u32 = 163 * 1024;

/// One compiled kernel: a cubin with a single entry point.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelModule {
    /// The `extern "C"` entry point in the cubin.
    pub entry: String,
    /// The tactic it was instantiated with, e.g. `gemm_simt 64x64x8 4x4`.
    pub tactic: String,
    pub cubin: Vec<u8>,
}

/// A kernel parameter, in the kernel's parameter order.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum KernelArg {
    /// The device address of the layer's input `k` (null when absent).
    Input(u32),
    /// The device address of the layer's output `k`.
    Output(u32),
    I32(i32),
    I64(i64),
    F32(f32),
}

/// One kernel launch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    /// Index into [`KernelTable::modules`].
    pub module: u32,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Dynamic shared memory, in bytes.
    pub shared_bytes: u32,
    pub args: Vec<KernelArg>,
}

/// How the CUDA executor computes one layer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum LayerKernels {
    /// These launches, in order, on the engine's stream.
    Device(Vec<Launch>),
    /// The CPU reference op on host copies of the layer's tensors: correct
    /// but slow, and it splits the CUDA graph. `inspect` lists these layers.
    Host { reason: String },
}

/// The KERNELS section of an engine built for a GPU.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelTable {
    /// The compute capability the cubins were compiled for (e.g. 90).
    pub sm: u32,
    /// The NVRTC version that compiled them, e.g. "13.0".
    pub nvrtc_version: String,
    pub modules: Vec<KernelModule>,
    /// One entry per layer of the plan, in the same order.
    pub layers: Vec<LayerKernels>,
}

impl KernelTable {
    /// Checks everything the CUDA executor relies on before it launches
    /// anything: one entry per layer, module and argument indices in range,
    /// launch geometry within the hardware's limits, cubins that are ELF.
    pub fn validate(&self, plan: &Plan) -> Result<()> {
        let bad = |m: String| Err(Error::invalid(format!("kernel table: {m}")));
        if self.layers.len() != plan.layers.len() {
            return bad(format!("{} layer entries for {} layers", self.layers.len(), plan.layers.len()));
        }
        for (i, m) in self.modules.iter().enumerate() {
            if !m.cubin.starts_with(b"\x7fELF") {
                return bad(format!("module {i} ({}) is not a cubin", m.entry));
            }
            if m.entry.is_empty() || m.entry.contains('\0') {
                return bad(format!("module {i} has an invalid entry point name"));
            }
        }
        for (layer, kernels) in plan.layers.iter().zip(&self.layers) {
            let LayerKernels::Device(launches) = kernels else { continue };
            for l in launches {
                if l.module as usize >= self.modules.len() {
                    return bad(format!("layer {} launches module {} of {}", layer.name, l.module, self.modules.len()));
                }
                let threads = l.block.iter().try_fold(1u64, |a, &b| if b == 0 { None } else { Some(a * b as u64) });
                match threads {
                    Some(t) if t <= MAX_BLOCK_THREADS as u64 => {}
                    _ => return bad(format!("layer {} has a block of {:?} threads", layer.name, l.block)),
                }
                if l.grid.contains(&0) || l.grid[1] > 65535 || l.grid[2] > 65535 {
                    return bad(format!("layer {} has a grid of {:?}", layer.name, l.grid));
                }
                if l.shared_bytes > MAX_DYNAMIC_SHARED_BYTES {
                    return bad(format!("layer {} asks for {} bytes of shared memory", layer.name, l.shared_bytes));
                }
                for a in &l.args {
                    let ok = match *a {
                        KernelArg::Input(k) => (k as usize) < layer.inputs.len(),
                        KernelArg::Output(k) => (k as usize) < layer.outputs.len(),
                        _ => true,
                    };
                    if !ok {
                        return bad(format!("layer {} passes a tensor it does not have ({a:?})", layer.name));
                    }
                }
            }
        }
        Ok(())
    }

    /// Layers that run on the host, with the reason.
    pub fn host_layers<'a>(&'a self, plan: &'a Plan) -> impl Iterator<Item = (&'a str, &'a str)> {
        plan.layers.iter().zip(&self.layers).filter_map(|(l, k)| match k {
            LayerKernels::Host { reason } => Some((l.name.as_str(), reason.as_str())),
            LayerKernels::Device(_) => None,
        })
    }
}
