//! The CPU reference executor: runs every layer of any engine, whatever its
//! target, with the ops' reference implementations, in one activation arena
//! laid out by the engine's memory plan.

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::math::Math;
use crate::parallel::Threads;
use crate::plan::{Layer, Plan, Storage, TensorId};
use crate::tensor::{AlignedBytes, Tensor, TensorType, TensorView, TensorViewMut};
use std::borrow::Cow;
use std::sync::Arc;

/// Per-thread execution state of an engine: its activation arena, the
/// threads its layers may use (one unless [`ExecutionContext::set_threads`]
/// says otherwise) and its f32 mode ([`Math::Exact`] unless
/// [`ExecutionContext::set_math`] says otherwise). Create one per thread
/// (`Send`, not `Sync`); the engine itself is shared.
pub struct ExecutionContext<'e> {
    engine: &'e Engine,
    arena: AlignedBytes,
    threads: Threads,
    math: Math,
    /// For an engine with profiles: the last shapes bound.
    bound: Option<BoundShapes>,
    /// The one profile runs must use ([`ExecutionContext::set_profile`]),
    /// else the first that admits their shapes.
    profile: Option<usize>,
}

/// The input shapes of a run and every tensor's type at those shapes.
struct BoundShapes {
    inputs: Vec<Vec<usize>>,
    types: Arc<Vec<TensorType>>,
}

impl<'e> ExecutionContext<'e> {
    pub(crate) fn new(engine: &'e Engine) -> Result<ExecutionContext<'e>> {
        let bytes = usize::try_from(engine.plan().arena_bytes).map_err(|_| Error::invalid("arena too large"))?;
        let arena = AlignedBytes::try_zeroed(bytes)
            .map_err(|_| Error::Device(format!("cannot allocate the engine's {bytes}-byte activation arena")))?;
        Ok(ExecutionContext { engine, arena, threads: Threads::single(), math: Math::Exact, bound: None, profile: None })
    }

    pub fn engine(&self) -> &'e Engine {
        self.engine
    }

    /// Lets each layer use up to `count` threads: the caller's and
    /// `count - 1` workers this context starts. Outputs are bit-identical
    /// whatever the count (work is split over outputs, never over a sum).
    pub fn set_threads(&mut self, count: usize) -> Result<()> {
        if count != self.threads.count() {
            self.threads = Threads::new(count)?;
        }
        Ok(())
    }

    /// The threads each layer may use.
    pub fn threads(&self) -> usize {
        self.threads.count()
    }

    /// Chooses the reference f32 arithmetic or the faster kernels whose
    /// results differ within tested bounds (see [`crate::math`]).
    pub fn set_math(&mut self, math: Math) {
        self.math = math;
    }

    pub fn math(&self) -> Math {
        self.math
    }

    /// Makes every run use profile `index` (TensorRT's
    /// `setOptimizationProfileAsync`): shapes outside it are refused even
    /// when another profile admits them. `None` goes back to the first
    /// profile that admits a run's shapes.
    pub fn set_profile(&mut self, index: Option<usize>) -> Result<()> {
        let count = self.engine.profiles().len();
        if let Some(k) = index {
            if k >= count {
                return Err(Error::Binding(format!("profile {k} does not exist: the engine has {count} profiles")));
            }
        }
        if index != self.profile {
            self.profile = index;
            self.bound = None;
        }
        Ok(())
    }

    /// The profile set with [`ExecutionContext::set_profile`].
    pub fn profile(&self) -> Option<usize> {
        self.profile
    }

    /// Runs the engine on host tensors given by binding name and returns the
    /// outputs by name, in binding order.
    pub fn run(&mut self, inputs: &[(&str, &Tensor)]) -> Result<Vec<(String, Tensor)>> {
        self.run_views(&crate::tensor::views(inputs))
    }

    /// Like [`ExecutionContext::run`] on borrowed input bytes (a caller's
    /// arrays, read in place): the only copy is the one into the arena.
    pub fn run_views(&mut self, inputs: &[(&str, TensorView<'_>)]) -> Result<Vec<(String, Tensor)>> {
        self.run_observed_views(inputs, |_, _| {})
    }

    /// Like [`ExecutionContext::run`], and calls `observe` after each layer
    /// with the layer and views of its outputs (for calibration and
    /// per-layer accuracy reports).
    pub fn run_observed(
        &mut self,
        inputs: &[(&str, &Tensor)],
        observe: impl FnMut(&Layer, &[TensorView<'_>]),
    ) -> Result<Vec<(String, Tensor)>> {
        self.run_observed_views(&crate::tensor::views(inputs), observe)
    }

    fn run_observed_views(
        &mut self,
        inputs: &[(&str, TensorView<'_>)],
        mut observe: impl FnMut(&Layer, &[TensorView<'_>]),
    ) -> Result<Vec<(String, Tensor)>> {
        let plan = self.engine.plan();
        let bound = self.bind_inputs(inputs)?;
        // Every tensor's type in this run: the plan's, or for an engine
        // with profiles, the types at the inputs' shapes; after a layer
        // whose output sizes depend on the data, the types it gave and
        // those inferred from them.
        let mut types: Cow<'_, [TensorType]> = match &bound {
            Some(b) => Cow::Borrowed(&b[..]),
            None => Cow::Owned(Vec::new()),
        };
        let mut data_sized = false;
        let mut memory = Memory {
            base: self.arena.as_mut_ptr(),
            arena_len: self.arena.len(),
            weights: self.engine.weights(),
            spilled: Vec::new(),
        };
        fn ty_of<'a>(plan: &'a Plan, types: &'a [TensorType], id: TensorId) -> &'a TensorType {
            types.get(id).unwrap_or(&plan.tensors[id].ty)
        }
        fn tensor_view<'a>(ty: &'a TensorType, bytes: &'a [u8]) -> TensorView<'a> {
            TensorView { dtype: ty.dtype, shape: &ty.shape, bytes }
        }
        /// What a layer sized by the data gave.
        enum Sized {
            /// Its outputs' shapes, written at the start of their room.
            Shapes(Vec<Vec<usize>>),
            /// Its outputs, as tensors of their own.
            Owned(Vec<Tensor>),
        }
        let math = self.math;
        let mut written: Vec<(*mut u8, usize)> = Vec::with_capacity(4);
        let engine = self.engine;
        self.threads.install(|| -> Result<()> {
            // The engine's constants may be read packed (`crate::prepack`).
            crate::prepack::with_weights(engine.packed_weights(), engine.weights(), || {
                crate::math::install(math, || -> Result<()> {
                    for layer in &plan.layers {
                        if data_sized {
                            crate::profile::infer_layer_types(layer, types.to_mut())?;
                            for &id in &layer.outputs {
                                memory.make_room(plan, id, &types[id])?;
                            }
                        }
                        let op = layer.op.as_impl();
                        let failed = |e: Error| Error::op(format!("layer {} ({}): {e}", layer.name, layer.op.name()));
                        // Where each output goes (one buffer for the run: no
                        // allocation per layer).
                        written.clear();
                        written.extend(layer.outputs.iter().map(|&id| memory.room(plan, id, ty_of(plan, &types, id))));
                        let sized = {
                            let tys: &[TensorType] = &types;
                            let ins: Vec<Option<TensorView>> = layer
                                .inputs
                                .iter()
                                .map(|i| {
                                    i.map(|id| {
                                        let ty = ty_of(plan, tys, id);
                                        tensor_view(ty, memory.read(plan, id, ty))
                                    })
                                })
                                .collect();
                            match op.eval_unbounded(&ins) {
                                Some(outputs) => Sized::Owned(outputs.map_err(failed)?),
                                None => {
                                    // SAFETY: `Memory::room` gave each output its
                                    // planned arena range (`Plan::validate`
                                    // checked those lie in the arena and that
                                    // tensors live at the same step never
                                    // overlap; a layer's inputs and outputs are
                                    // all live at its step) or a heap buffer of
                                    // its own, of at least the output's bytes.
                                    let mut outs: Vec<TensorViewMut> = layer
                                        .outputs
                                        .iter()
                                        .zip(&written)
                                        .map(|(&id, &(ptr, len))| {
                                            let ty = ty_of(plan, tys, id);
                                            debug_assert!(ty.bytes() <= len);
                                            let bytes = unsafe { std::slice::from_raw_parts_mut(ptr, ty.bytes()) };
                                            TensorViewMut { dtype: ty.dtype, shape: &ty.shape, bytes }
                                        })
                                        .collect();
                                    if !op.data_dependent() {
                                        op.eval(&ins, &mut outs).map_err(failed)?;
                                        let views: Vec<TensorView> = outs.iter().map(|o| o.as_view()).collect();
                                        observe(layer, &views);
                                        continue;
                                    }
                                    Sized::Shapes(op.eval_sized(&ins, &mut outs).map_err(failed)?)
                                }
                            }
                        };
                        // The outputs' actual types; every later layer's types
                        // are inferred again from them.
                        if types.is_empty() {
                            types = Cow::Owned(plan.tensors.iter().map(|t| t.ty.clone()).collect());
                        }
                        match sized {
                            Sized::Shapes(shapes) => {
                                for ((&id, shape), &(_, room)) in layer.outputs.iter().zip(shapes).zip(&written) {
                                    let actual = TensorType::new(types[id].dtype, shape);
                                    if actual.checked_bytes().is_none_or(|n| n > room) {
                                        return Err(failed(Error::op(format!("output {actual} is larger than its room"))));
                                    }
                                    types.to_mut()[id] = actual;
                                }
                            }
                            Sized::Owned(outputs) => {
                                if outputs.len() != layer.outputs.len() {
                                    return Err(failed(Error::op(format!(
                                        "{} outputs for {}",
                                        outputs.len(),
                                        layer.outputs.len()
                                    ))));
                                }
                                for (&id, t) in layer.outputs.iter().zip(outputs) {
                                    types.to_mut()[id] = t.ty().clone();
                                    memory.keep(plan, id, t);
                                }
                            }
                        }
                        data_sized = true;
                        let tys: &[TensorType] = &types;
                        let views: Vec<TensorView> = layer
                            .outputs
                            .iter()
                            .map(|&id| {
                                let ty = ty_of(plan, tys, id);
                                tensor_view(ty, memory.read(plan, id, ty))
                            })
                            .collect();
                        observe(layer, &views);
                    }
                    Ok(())
                })
            })
        })?;
        let tys: &[TensorType] = &types;
        Ok(plan
            .outputs
            .iter()
            .map(|(name, id)| {
                let ty = ty_of(plan, tys, *id);
                (name.clone(), tensor_view(ty, memory.read(plan, *id, ty)).to_owned())
            })
            .collect())
    }

    /// Checks the inputs and copies them into the arena. For an engine with
    /// profiles, returns every tensor's type at the inputs' shapes (which
    /// must lie inside a profile).
    fn bind_inputs(&mut self, inputs: &[(&str, TensorView<'_>)]) -> Result<Option<Arc<Vec<TensorType>>>> {
        let plan = self.engine.plan();
        for (name, _) in inputs {
            let known =
                plan.inputs.iter().any(|&i| plan.tensors[i].name == *name) || plan.fixed_inputs.iter().any(|f| f.name == *name);
            if !known {
                let names: Vec<&str> = self.engine.inputs().iter().map(|b| b.name.as_str()).collect();
                return Err(Error::Binding(format!("unknown input '{name}'; the engine's inputs are {names:?}")));
            }
        }
        for f in &plan.fixed_inputs {
            if let Some((_, t)) = inputs.iter().find(|(n, _)| *n == f.name) {
                let desc = &plan.tensors[f.value];
                let Storage::Weight { offset } = desc.storage else { unreachable!("validated") };
                let want = &self.engine.weights()[offset as usize..offset as usize + desc.ty.bytes()];
                if t.ty() != desc.ty || t.bytes != want {
                    return Err(Error::Binding(format!(
                        "input '{}' is a shape input fixed when the engine was built; rebuild to change it",
                        f.name
                    )));
                }
            }
        }
        let profiles = self.engine.profiles();
        let mut given = Vec::with_capacity(plan.inputs.len());
        for &id in &plan.inputs {
            let desc = &plan.tensors[id];
            let mut found = inputs.iter().filter(|(n, _)| *n == desc.name);
            let Some((_, t)) = found.next() else {
                return Err(Error::Binding(format!("missing input '{}' ({})", desc.name, desc.ty)));
            };
            if found.next().is_some() {
                return Err(Error::Binding(format!("input '{}' given twice", desc.name)));
            }
            let fits = if profiles.is_empty() { t.ty() == desc.ty } else { t.dtype == desc.ty.dtype };
            if !fits {
                return Err(Error::Binding(format!(
                    "input '{}' must be {}, got {}",
                    desc.name,
                    describe(desc, profiles),
                    t.ty()
                )));
            }
            given.push(*t);
        }
        let bound = if profiles.is_empty() { None } else { Some(self.bind_shapes(&given)?) };
        for (&id, t) in plan.inputs.iter().zip(&given) {
            let Storage::Arena { offset } = plan.tensors[id].storage else { unreachable!("validated") };
            self.arena.as_mut_slice()[offset as usize..offset as usize + t.bytes.len()].copy_from_slice(t.bytes);
        }
        Ok(bound)
    }

    /// Every tensor's type at the shapes of `inputs` (one per input binding,
    /// in order), which must lie inside one of the engine's profiles; the
    /// last shapes' types are kept.
    fn bind_shapes(&mut self, inputs: &[TensorView<'_>]) -> Result<Arc<Vec<TensorType>>> {
        if let Some(b) = &self.bound {
            if b.inputs.len() == inputs.len() && b.inputs.iter().zip(inputs).all(|(s, t)| s.as_slice() == t.shape) {
                return Ok(b.types.clone());
            }
        }
        let plan = self.engine.plan();
        let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape).collect();
        crate::profile::select(self.engine.profiles(), plan, &shapes, self.profile)?;
        let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
        let bound = Arc::new(crate::profile::bind(plan, &types)?);
        self.bound = Some(BoundShapes { inputs: inputs.iter().map(|t| t.shape.to_vec()).collect(), types: bound.clone() });
        Ok(bound)
    }
}

/// An input binding's type as errors state it: with the range of each
/// dimension that varies (`f32[1..32,3,224,224]`).
fn describe(desc: &crate::plan::TensorDesc, profiles: &[crate::profile::Profile]) -> String {
    profiles.first().and_then(|p| p.describe(&desc.name, desc.ty.dtype)).unwrap_or_else(|| desc.ty.to_string())
}

/// Where a run's tensors live: the arena at their planned offsets, the
/// engine's weights, or, for a tensor that outgrew its room after a layer
/// sized by the data, a heap buffer of its own.
struct Memory<'a> {
    base: *mut u8,
    arena_len: usize,
    weights: &'a [u8],
    /// By tensor id; empty until a tensor outgrows its room.
    spilled: Vec<Option<AlignedBytes>>,
}

impl Memory<'_> {
    /// The bytes of tensor `id`, of type `ty`.
    fn read(&self, plan: &Plan, id: TensorId, ty: &TensorType) -> &[u8] {
        let n = ty.bytes();
        if let Some(Some(buf)) = self.spilled.get(id) {
            return &buf.as_slice()[..n];
        }
        match plan.tensors[id].storage {
            // SAFETY: see `room`; reads of a layer's inputs never overlap
            // its outputs, which are all live at its step.
            Storage::Arena { offset } => unsafe {
                debug_assert!(offset as usize + n <= self.arena_len);
                std::slice::from_raw_parts(self.base.add(offset as usize), n)
            },
            Storage::Weight { offset } => &self.weights[offset as usize..offset as usize + n],
        }
    }

    /// Gives tensor `id` a heap buffer when type `ty` is larger than the
    /// room the memory plan made for it.
    fn make_room(&mut self, plan: &Plan, id: TensorId, ty: &TensorType) -> Result<()> {
        let n = ty.checked_bytes().ok_or_else(|| Error::op(format!("tensor '{}' would be too large", plan.tensors[id].name)))?;
        if n > plan.tensors[id].ty.bytes() {
            let buf = AlignedBytes::try_zeroed(n)?;
            self.spill(id, buf);
        }
        Ok(())
    }

    fn spill(&mut self, id: TensorId, buf: AlignedBytes) {
        if self.spilled.len() <= id {
            self.spilled.resize_with(id + 1, || None);
        }
        self.spilled[id] = Some(buf);
    }

    /// Where an output of type `ty` is written, and how many bytes it may
    /// take there (`make_room` ran for it when its type may have grown).
    fn room(&mut self, plan: &Plan, id: TensorId, ty: &TensorType) -> (*mut u8, usize) {
        if let Some(Some(buf)) = self.spilled.get_mut(id) {
            return (buf.as_mut_ptr(), buf.len());
        }
        let Storage::Arena { offset } = plan.tensors[id].storage else { unreachable!("validated: outputs live in the arena") };
        let planned = plan.tensors[id].ty.bytes();
        debug_assert!(ty.bytes() <= planned && offset as usize + planned <= self.arena_len);
        // SAFETY: `Plan::validate` checked the planned range lies in the arena.
        (unsafe { self.base.add(offset as usize) }, planned)
    }

    /// Stores output `t` of tensor `id`: in its room when it fits, else in
    /// a heap buffer.
    fn keep(&mut self, plan: &Plan, id: TensorId, t: Tensor) {
        let planned = plan.tensors[id].ty.bytes();
        match plan.tensors[id].storage {
            Storage::Arena { offset } if t.bytes().len() <= planned => {
                // SAFETY: as in `room`: the planned range of an output of
                // the layer that just ran, which nothing else reads now.
                let room = unsafe { std::slice::from_raw_parts_mut(self.base.add(offset as usize), t.bytes().len()) };
                room.copy_from_slice(t.bytes());
                if let Some(slot) = self.spilled.get_mut(id) {
                    *slot = None;
                }
            }
            _ => self.spill(id, t.into_aligned_bytes()),
        }
    }
}
