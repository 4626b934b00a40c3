//! The kernels a CUDA engine carries (its KERNELS section): one cubin per
//! distinct kernel instantiation, and for every layer of the plan either the
//! launches that compute it or the reason it runs on the host.
//!
//! Launch arguments name the layer's own inputs and outputs, not device
//! addresses: the CUDA executor resolves them against the activation arena
//! and the uploaded weights when it creates a context. The CPU executor
//! ignores this section, so every engine runs on the CPU from its plan alone.
//!
//! Launches are those of the shapes the plan was built at. An engine whose
//! shapes vary also records each layer's tactic and a digest of every
//! module's source: for the shapes bound in a run, a [`LaunchPlanner`] (the
//! kernel families, crate `trtc_kernels`) computes the same tactic's
//! launches, each of which must use a module the engine carries (the build
//! compiled the sources the tactic needs across the profile).

use crate::error::{Error, Result};
use crate::plan::{Layer, Plan};
use crate::tensor::TensorType;
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
    /// [`source_digest`] of the entry point and the source it was compiled
    /// from (0 in engines of format version 9 and older).
    pub digest: u64,
}

/// A 64-bit FNV-1a digest of a kernel's entry point and source, which
/// identifies the module a launch computed at other shapes needs.
pub fn source_digest(entry: &str, source: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in entry.bytes().chain([0u8]).chain(source.bytes()) {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
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
    /// The device address of `n` u64 counters private to the layer and
    /// shared by its launches (not cleared between runs: the kernels write a
    /// counter before they read it). The first is the number of rows of the
    /// layer's output 0 in this run: a layer whose output size depends on
    /// the data (NonMaxSuppression) runs on the GPU, the executor reads that
    /// count back after its launches, and the layers after it run on the
    /// host at that size.
    Counts(u32),
}

/// The most counters a layer may ask for ([`KernelArg::Counts`]).
pub const MAX_COUNTERS: u32 = 1 << 24;

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
    /// A control-flow layer (If, Loop) whose sub-plans run as kernels with
    /// the control decided on the host, like TensorRT's conditional and
    /// loop layers: one entry per sub-plan (If: then, else; Loop: body).
    Control(Vec<BodyKernels>),
}

impl LayerKernels {
    /// Every launch: the layer's own, or its sub-plans' steps'.
    pub fn launches(&self) -> Vec<&Launch> {
        match self {
            LayerKernels::Device(launches) => launches.iter().collect(),
            LayerKernels::Host { .. } => Vec::new(),
            LayerKernels::Control(bodies) => bodies.iter().flat_map(|b| b.steps.iter().flatten()).collect(),
        }
    }
}

/// The kernels of one sub-plan of a [`LayerKernels::Control`] layer: per
/// step, its launches, whose `Input(k)`/`Output(k)` arguments name the
/// step's own inputs and outputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BodyKernels {
    pub steps: Vec<Vec<Launch>>,
}

/// A layer's sub-plans that [`LayerKernels::Control`] may run on the GPU:
/// an If's branches or a Loop's body, when the op's outputs have their
/// planned sizes in every run (no scan outputs, carried values that keep
/// their shapes, no step sized by the data) and the sub-plans declare the
/// types of the layer's tensors (`inputs`, `outputs`) where they read or
/// become them (their kernels are compiled at those). Otherwise why not.
pub fn device_bodies<'a>(
    op: &'a crate::ops::Op,
    inputs: &[Option<&TensorType>],
    outputs: &[&TensorType],
) -> std::result::Result<Vec<&'a crate::ops::control::SubPlan>, String> {
    use crate::ops::control::ControlOp;
    use crate::ops::Op;
    // Sub-plan input k (from `from` on) reads the layer's input `k +
    // shift`; sub-plan output k (from `out_from` on) becomes the layer's
    // output `k - out_from`.
    let (bodies, from, shift, out_from) = match op {
        Op::Control(ControlOp::If(i)) => (vec![&*i.then_branch, &*i.else_branch], 0, 1, 0),
        Op::Control(ControlOp::Loop(l)) => (vec![&*l.body], 2, 0, 1),
        _ => return Err(format!("{} has no sub-plans the GPU runs", op.name())),
    };
    if op.as_impl().data_dependent() {
        return Err("its output sizes depend on the data".into());
    }
    for body in &bodies {
        for (k, &v) in body.inputs.iter().enumerate().skip(from) {
            let declared = &body.values[v].1;
            if inputs.get(k + shift).copied().flatten() != Some(declared) {
                return Err(format!("its sub-plan input {k} is declared {declared}, not as the layer's input"));
            }
        }
        for (k, &v) in body.outputs.iter().enumerate().skip(out_from) {
            let declared = &body.values[v].1;
            if let Some(&t) = outputs.get(k - out_from) {
                if t != declared {
                    return Err(format!("its sub-plan output {k} is declared {declared}, the layer's output {t}"));
                }
            }
        }
    }
    Ok(bodies)
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
    /// Per layer, the tactic of its launches (e.g. `gemm_tc 128x128x32
    /// w2x2 s3`; empty for host layers, and in engines of format version 9
    /// and older).
    pub tactics: Vec<String>,
}

/// Computes a device layer's launches at the tensor types of one run, for
/// an engine whose shapes vary: the kernel families implement it (crate
/// `trtc_kernels`), the CUDA executor calls it once per new set of bound
/// shapes.
pub trait LaunchPlanner: Send + Sync {
    /// The launches of layer `index` of the plan (`layer`) with its tensors
    /// of types `inputs` and `outputs`, computed by the layer's tactic in
    /// `table`, each launching one of the table's modules. An error says why
    /// the layer cannot run as kernels at these shapes (it then runs on the
    /// host).
    fn launches(
        &self,
        table: &KernelTable,
        index: usize,
        layer: &Layer,
        inputs: &[Option<&TensorType>],
        outputs: &[&TensorType],
    ) -> std::result::Result<Vec<Launch>, String>;
}

/// The table as engines of format version 9 and older stored it.
#[derive(Deserialize)]
struct KernelTableV9 {
    sm: u32,
    nvrtc_version: String,
    modules: Vec<KernelModuleV9>,
    layers: Vec<LayerKernels>,
}

#[derive(Deserialize)]
struct KernelModuleV9 {
    entry: String,
    tactic: String,
    cubin: Vec<u8>,
}

impl KernelTable {
    /// Decodes the KERNELS section of an engine of format `format_version`.
    pub(crate) fn decode(bytes: &[u8], format_version: u32) -> std::result::Result<KernelTable, postcard::Error> {
        if format_version >= 10 {
            return postcard::from_bytes(bytes);
        }
        let old: KernelTableV9 = postcard::from_bytes(bytes)?;
        let modules = old
            .modules
            .into_iter()
            .map(|m| KernelModule { entry: m.entry, tactic: m.tactic, cubin: m.cubin, digest: 0 })
            .collect();
        Ok(KernelTable { sm: old.sm, nvrtc_version: old.nvrtc_version, modules, layers: old.layers, tactics: Vec::new() })
    }

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
        if !self.tactics.is_empty() && self.tactics.len() != self.layers.len() {
            return bad(format!("{} tactics for {} layers", self.tactics.len(), self.layers.len()));
        }
        for (layer, kernels) in plan.layers.iter().zip(&self.layers) {
            let checked = match kernels {
                LayerKernels::Host { .. } => Ok(()),
                LayerKernels::Device(launches) => launches
                    .iter()
                    .try_for_each(|l| self.check_launch(layer, l))
                    .and_then(|_| counters(layer, launches).map(|_| ())),
                LayerKernels::Control(bodies) => {
                    let inputs: Vec<Option<&TensorType>> =
                        layer.inputs.iter().map(|i| i.map(|id| &plan.tensors[id].ty)).collect();
                    let outputs: Vec<&TensorType> = layer.outputs.iter().map(|&o| &plan.tensors[o].ty).collect();
                    self.check_bodies(layer, &inputs, &outputs, bodies)
                }
            };
            if let Err(m) = checked {
                return bad(format!("layer {} {m}", layer.name));
            }
        }
        Ok(())
    }

    /// The checks of [`KernelTable::validate`] on a control layer's
    /// sub-plans, its tensors of types `inputs` and `outputs`: an op that may
    /// run them on the GPU ([`device_bodies`]), one entry per sub-plan and
    /// per step, launches checked against each step's own inputs and outputs
    /// (no counters: no step's size depends on the data).
    fn check_bodies(
        &self,
        layer: &Layer,
        inputs: &[Option<&TensorType>],
        outputs: &[&TensorType],
        bodies: &[BodyKernels],
    ) -> std::result::Result<(), String> {
        let plans = device_bodies(&layer.op, inputs, outputs)
            .map_err(|why| format!("runs the sub-plans of a {} on the GPU, which cannot: {why}", layer.op.name()))?;
        if plans.len() != bodies.len() {
            return Err(format!("has kernels for {} sub-plans of {}", bodies.len(), plans.len()));
        }
        for (plan, body) in plans.iter().zip(bodies) {
            if plan.steps.len() != body.steps.len() {
                return Err(format!("has kernels for {} steps of a sub-plan of {}", body.steps.len(), plan.steps.len()));
            }
            for (step, launches) in plan.steps.iter().zip(&body.steps) {
                for l in launches {
                    self.check_launch_io(&step.op, step.inputs.len(), step.outputs.len(), l)
                        .map_err(|m| format!("step {} {m}", step.name))?;
                }
            }
        }
        Ok(())
    }

    /// The checks of [`KernelTable::validate`] on one launch of `layer`.
    pub fn check_launch(&self, layer: &Layer, l: &Launch) -> std::result::Result<(), String> {
        self.check_launch_io(&layer.op, layer.inputs.len(), layer.outputs.len(), l)
    }

    /// [`KernelTable::check_launch`] for a launch of `op` with `inputs`
    /// inputs and `outputs` outputs (a layer's, or a sub-plan step's).
    fn check_launch_io(&self, op: &crate::ops::Op, inputs: usize, outputs: usize, l: &Launch) -> std::result::Result<(), String> {
        if l.module as usize >= self.modules.len() {
            return Err(format!("launches module {} of {}", l.module, self.modules.len()));
        }
        let threads = l.block.iter().try_fold(1u64, |a, &b| if b == 0 { None } else { Some(a * b as u64) });
        match threads {
            Some(t) if t <= MAX_BLOCK_THREADS as u64 => {}
            _ => return Err(format!("has a block of {:?} threads", l.block)),
        }
        if l.grid.contains(&0) || l.grid[1] > 65535 || l.grid[2] > 65535 {
            return Err(format!("has a grid of {:?}", l.grid));
        }
        if l.shared_bytes > MAX_DYNAMIC_SHARED_BYTES {
            return Err(format!("asks for {} bytes of shared memory", l.shared_bytes));
        }
        for a in &l.args {
            let ok = match *a {
                KernelArg::Input(k) => (k as usize) < inputs,
                KernelArg::Output(k) => (k as usize) < outputs,
                KernelArg::Counts(n) => {
                    if !(1..=MAX_COUNTERS).contains(&n) {
                        return Err(format!("asks for {n} counters"));
                    }
                    if !op.as_impl().data_dependent() {
                        return Err("counts rows of an output whose size does not depend on the data".into());
                    }
                    true
                }
                _ => true,
            };
            if !ok {
                return Err(format!("passes a tensor it does not have ({a:?})"));
            }
        }
        Ok(())
    }

    /// Every layer's kernels with the plan's tensors of types `types` (the
    /// shapes bound in a run, [`crate::profile::bind`]): a layer whose
    /// tensors have their planned types keeps its launches, any other
    /// device layer gets the launches `planner` computes, checked like the
    /// table's own; a layer the planner cannot give launches for runs on the
    /// host, with the reason.
    pub fn at_types(&self, plan: &Plan, types: &[TensorType], planner: &dyn LaunchPlanner) -> Vec<LayerKernels> {
        let ty = |id: usize| types.get(id).unwrap_or(&plan.tensors[id].ty);
        plan.layers
            .iter()
            .zip(&self.layers)
            .enumerate()
            .map(|(index, (layer, kernels))| {
                let same = layer.inputs.iter().flatten().chain(&layer.outputs).all(|&id| *ty(id) == plan.tensors[id].ty);
                match kernels {
                    LayerKernels::Host { .. } => return kernels.clone(),
                    _ if same => return kernels.clone(),
                    LayerKernels::Control(_) => {
                        // Sub-plans' kernels are compiled at the planned shapes only.
                        let reason = "its sub-plans' kernels were compiled for other shapes".to_string();
                        return LayerKernels::Host { reason };
                    }
                    LayerKernels::Device(_) => {}
                }
                let inputs: Vec<Option<&TensorType>> = layer.inputs.iter().map(|i| i.map(ty)).collect();
                let outputs: Vec<&TensorType> = layer.outputs.iter().map(|&o| ty(o)).collect();
                let planned = planner.launches(self, index, layer, &inputs, &outputs).and_then(|ls| {
                    ls.iter().try_for_each(|l| self.check_launch(layer, l))?;
                    counters(layer, &ls)?;
                    Ok(ls)
                });
                match planned {
                    Ok(ls) => LayerKernels::Device(ls),
                    Err(why) => LayerKernels::Host { reason: format!("no compiled kernel at these shapes: {why}") },
                }
            })
            .collect()
    }

    /// Layers that run on the host, with the reason.
    pub fn host_layers<'a>(&'a self, plan: &'a Plan) -> impl Iterator<Item = (&'a str, &'a str)> {
        plan.layers.iter().zip(&self.layers).filter_map(|(l, k)| match k {
            LayerKernels::Host { reason } => Some((l.name.as_str(), reason.as_str())),
            LayerKernels::Device(_) | LayerKernels::Control(_) => None,
        })
    }
}

/// How many counters the launches of a device layer share
/// ([`KernelArg::Counts`]; 0 for none): every launch that passes them asks
/// for the same number, and the layer has an output whose first axis they
/// count.
pub fn counters(layer: &Layer, launches: &[Launch]) -> std::result::Result<u32, String> {
    let mut n = 0;
    for a in launches.iter().flat_map(|l| &l.args) {
        if let KernelArg::Counts(k) = *a {
            if n != 0 && k != n {
                return Err(format!("asks for {n} and {k} counters"));
            }
            n = k;
        }
    }
    if n != 0 && layer.outputs.is_empty() {
        return Err("counts the rows of an output it does not have".into());
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table's fields as format version 9 encoded them.
    #[derive(Serialize)]
    struct OldTable {
        sm: u32,
        nvrtc_version: String,
        modules: Vec<(String, String, Vec<u8>)>,
        layers: Vec<LayerKernels>,
    }

    #[test]
    fn tables_of_format_9_decode_without_digests_or_tactics() {
        let launch = Launch { module: 0, grid: [1, 1, 1], block: [32, 1, 1], shared_bytes: 0, args: vec![KernelArg::I32(7)] };
        let old = OldTable {
            sm: 90,
            nvrtc_version: "13.0".into(),
            modules: vec![("relu".into(), "t".into(), b"\x7fELF".to_vec())],
            layers: vec![LayerKernels::Device(vec![launch.clone()]), LayerKernels::Host { reason: "r".into() }],
        };
        let bytes = postcard::to_stdvec(&old).unwrap();
        let table = KernelTable::decode(&bytes, 9).unwrap();
        assert_eq!(table.modules[0].entry, "relu");
        assert_eq!(table.modules[0].digest, 0);
        assert!(table.tactics.is_empty());
        assert_eq!(table.layers[0], LayerKernels::Device(vec![launch]));
    }

    /// Counters go only to a layer whose output size depends on the data,
    /// and its launches share one number of them.
    #[test]
    fn counters_belong_to_layers_that_size_their_output() {
        use crate::ops::elementwise::{Unary, UnaryKind};
        use crate::ops::linalg::NonMaxSuppression;
        let launch = |args: Vec<KernelArg>| Launch { module: 0, grid: [1, 1, 1], block: [32, 1, 1], shared_bytes: 0, args };
        let layer = |op: crate::ops::Op| Layer { name: "l".into(), op, inputs: vec![Some(0), Some(1)], outputs: vec![2] };
        let nms = layer(NonMaxSuppression { center_point_box: false, max_per_class: None }.into());
        let relu = layer(Unary::new(UnaryKind::Relu).into());
        let table = KernelTable {
            modules: vec![KernelModule { entry: "k".into(), tactic: String::new(), cubin: vec![], digest: 0 }],
            ..Default::default()
        };
        let counted = [launch(vec![KernelArg::Output(0), KernelArg::Counts(3)]), launch(vec![KernelArg::Counts(3)])];
        assert!(counted.iter().all(|l| table.check_launch(&nms, l).is_ok()));
        assert_eq!(counters(&nms, &counted), Ok(3));
        assert_eq!(counters(&nms, &[launch(vec![KernelArg::Output(0)])]), Ok(0));
        let err = table.check_launch(&relu, &counted[0]).unwrap_err();
        assert!(err.contains("does not depend on the data"), "{err}");
        for bad in [0, MAX_COUNTERS + 1] {
            let err = table.check_launch(&nms, &launch(vec![KernelArg::Counts(bad)])).unwrap_err();
            assert!(err.contains("counters"), "{err}");
        }
        let mixed = [launch(vec![KernelArg::Counts(3)]), launch(vec![KernelArg::Counts(4)])];
        assert_eq!(counters(&nms, &mixed), Err("asks for 3 and 4 counters".to_string()));
    }

    /// A control layer's kernels follow its sub-plans: one entry per
    /// sub-plan and per step, arguments within each step's own tensors, no
    /// counters, and only on an op whose outputs keep their sizes.
    #[test]
    fn control_kernels_follow_their_sub_plans() {
        use crate::ops::control::{If, Step, SubPlan};
        use crate::ops::elementwise::{Unary, UnaryKind};
        use KernelArg::*;
        let f32s = TensorType::new(crate::DType::F32, vec![2]);
        let negation = || {
            let values = vec![("x".to_string(), f32s.clone()), ("y".to_string(), f32s.clone())];
            let step =
                Step { name: "neg".into(), op: Unary::new(UnaryKind::Neg).into(), inputs: vec![Some(0)], outputs: vec![1] };
            SubPlan::new(values, vec![0], vec![], vec![step], vec![1]).unwrap()
        };
        let layer = Layer {
            name: "if".into(),
            op: If::new(negation(), negation()).unwrap().into(),
            inputs: vec![Some(0), Some(1)],
            outputs: vec![2],
        };
        let module = KernelModule { entry: "k".into(), tactic: String::new(), cubin: vec![], digest: 0 };
        let table = KernelTable { modules: vec![module], ..Default::default() };
        let launch = |args: Vec<KernelArg>| Launch { module: 0, grid: [1, 1, 1], block: [32, 1, 1], shared_bytes: 0, args };
        let body = |args: Vec<KernelArg>| BodyKernels { steps: vec![vec![launch(args)]] };
        let ok = vec![body(vec![Input(0), Output(0), I64(2)]); 2];
        let bool1 = TensorType::new(crate::DType::Bool, vec![]);
        let (inputs, outputs) = ([Some(&bool1), Some(&f32s)], [&f32s]);
        assert_eq!(table.check_bodies(&layer, &inputs, &outputs, &ok), Ok(()));
        let cases = [
            (vec![body(vec![Input(0), Output(0)])], "1 sub-plans of 2"),
            (vec![body(vec![Input(1), Output(0)]), ok[1].clone()], "step neg passes a tensor it does not have"),
            (vec![ok[0].clone(), BodyKernels { steps: vec![] }], "0 steps of a sub-plan of 1"),
            (vec![ok[0].clone(), body(vec![Output(0), Counts(1)])], "step neg counts rows of an output whose size does not"),
        ];
        for (bodies, needle) in cases {
            let err = table.check_bodies(&layer, &inputs, &outputs, &bodies).unwrap_err();
            assert!(err.contains(needle), "{err}");
        }
        let relu = Layer { op: Unary::new(UnaryKind::Relu).into(), ..layer.clone() };
        let err = table.check_bodies(&relu, &inputs, &outputs, &ok).unwrap_err();
        assert!(err.contains("cannot"), "{err}");
        // Branches compiled for f32[2] on an f32[3] input.
        let f32x3 = TensorType::new(crate::DType::F32, vec![3]);
        let err = table.check_bodies(&layer, &[Some(&bool1), Some(&f32x3)], &outputs, &ok).unwrap_err();
        assert!(err.contains("sub-plan input 0 is declared f32[2]"), "{err}");
    }

    #[test]
    fn digests_tell_entry_points_and_sources_apart() {
        let d = source_digest("k", "src");
        assert_eq!(d, source_digest("k", "src"));
        assert_ne!(d, source_digest("k", "src "));
        assert_ne!(d, source_digest("ks", "rc"));
    }
}
