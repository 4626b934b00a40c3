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
        let base = self.arena.as_mut_ptr();
        let arena_len = self.arena.len();
        let weights = self.engine.weights();
        fn ty_of<'a>(plan: &'a Plan, types: &'a [TensorType], id: TensorId) -> &'a TensorType {
            types.get(id).unwrap_or(&plan.tensors[id].ty)
        }
        // SAFETY (both views): `Plan::validate` checked that every tensor's
        // planned range lies in the arena, `profile::fits` that no type is
        // larger than planned, and that tensors live at the same step never
        // overlap; a layer's inputs and outputs are all live at its step, so
        // an output slice aliases nothing else handed out for the layer.
        let view = |id: TensorId, ty: &'_ TensorType| -> &[u8] {
            let n = ty.bytes();
            match plan.tensors[id].storage {
                Storage::Arena { offset } => unsafe {
                    debug_assert!(offset as usize + n <= arena_len);
                    std::slice::from_raw_parts(base.add(offset as usize), n)
                },
                Storage::Weight { offset } => &weights[offset as usize..offset as usize + n],
            }
        };
        fn tensor_view<'a>(ty: &'a TensorType, bytes: &'a [u8]) -> TensorView<'a> {
            TensorView { dtype: ty.dtype, shape: &ty.shape, bytes }
        }
        let math = self.math;
        self.threads.install(|| -> Result<()> {
            crate::math::install(math, || -> Result<()> {
                for layer in &plan.layers {
                    if data_sized {
                        crate::profile::infer_layer(plan, layer, types.to_mut())?;
                    }
                    let op = layer.op.as_impl();
                    let failed = |e: Error| Error::op(format!("layer {} ({}): {e}", layer.name, layer.op.name()));
                    let sized = {
                        let tys: &[TensorType] = &types;
                        let ins: Vec<Option<TensorView>> = layer
                            .inputs
                            .iter()
                            .map(|i| {
                                i.map(|id| {
                                    let ty = ty_of(plan, tys, id);
                                    tensor_view(ty, view(id, ty))
                                })
                            })
                            .collect();
                        let mut outs: Vec<TensorViewMut> = layer
                            .outputs
                            .iter()
                            .map(|&id| {
                                let ty = ty_of(plan, tys, id);
                                let Storage::Arena { offset } = plan.tensors[id].storage else {
                                    unreachable!("validated: outputs live in the arena")
                                };
                                let bytes = unsafe { std::slice::from_raw_parts_mut(base.add(offset as usize), ty.bytes()) };
                                TensorViewMut { dtype: ty.dtype, shape: &ty.shape, bytes }
                            })
                            .collect();
                        if op.data_dependent() {
                            Some(op.eval_sized(&ins, &mut outs).map_err(failed)?)
                        } else {
                            op.eval(&ins, &mut outs).map_err(failed)?;
                            let views: Vec<TensorView> = outs.iter().map(|o| o.as_view()).collect();
                            observe(layer, &views);
                            None
                        }
                    };
                    let Some(shapes) = sized else { continue };
                    // The outputs' actual sizes; every later layer's types
                    // are inferred again from them.
                    if types.is_empty() {
                        types = Cow::Owned(plan.tensors.iter().map(|t| t.ty.clone()).collect());
                    }
                    for (&id, shape) in layer.outputs.iter().zip(shapes) {
                        let actual = TensorType::new(types[id].dtype, shape);
                        crate::profile::fits(plan, id, &actual).map_err(failed)?;
                        types.to_mut()[id] = actual;
                    }
                    data_sized = true;
                    let tys: &[TensorType] = &types;
                    let views: Vec<TensorView> = layer
                        .outputs
                        .iter()
                        .map(|&id| {
                            let ty = ty_of(plan, tys, id);
                            tensor_view(ty, view(id, ty))
                        })
                        .collect();
                    observe(layer, &views);
                }
                Ok(())
            })
        })?;
        let tys: &[TensorType] = &types;
        Ok(plan
            .outputs
            .iter()
            .map(|(name, id)| {
                let ty = ty_of(plan, tys, *id);
                (name.clone(), tensor_view(ty, view(*id, ty)).to_owned())
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
        let mut refusals = Vec::new();
        let chosen = self.profile;
        for (k, profile) in self.engine.profiles().iter().enumerate() {
            if chosen.is_some_and(|c| c != k) {
                continue;
            }
            let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape).collect();
            let outside = plan
                .inputs
                .iter()
                .zip(inputs)
                .find_map(|(&id, t)| profile.admits(&plan.tensors[id].name, t.shape).err())
                .or_else(|| profile.consistent(&shapes).err());
            match outside {
                None => {
                    let types: Vec<TensorType> = inputs.iter().map(|t| t.ty()).collect();
                    let bound = Arc::new(crate::profile::bind(plan, &types)?);
                    self.bound =
                        Some(BoundShapes { inputs: inputs.iter().map(|t| t.shape.to_vec()).collect(), types: bound.clone() });
                    return Ok(bound);
                }
                Some(why) => refusals.push(why),
            }
        }
        Err(Error::Binding(match refusals.as_slice() {
            [] => "the engine has no profile".to_string(),
            [why] if let Some(k) = chosen => format!("outside profile {k}, which the context uses: {why}"),
            [why] => format!("outside its profile: {why}"),
            many => {
                let each: Vec<String> = many.iter().enumerate().map(|(i, why)| format!("profile {i}: {why}")).collect();
                format!("outside each of its {} profiles ({})", many.len(), each.join("; "))
            }
        }))
    }
}

/// An input binding's type as errors state it: with the range of each
/// dimension that varies (`f32[1..32,3,224,224]`).
fn describe(desc: &crate::plan::TensorDesc, profiles: &[crate::profile::Profile]) -> String {
    profiles.first().and_then(|p| p.describe(&desc.name, desc.ty.dtype)).unwrap_or_else(|| desc.ty.to_string())
}
