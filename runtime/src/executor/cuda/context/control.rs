//! Control-flow layers on the GPU: an If's branches or a Loop's body run as
//! kernel launches, the control decided on the host, like TensorRT's
//! conditional and loop layers. The If reads its condition back and
//! launches one branch; the Loop reads its trip count and initial condition,
//! then per iteration uploads the iteration number and condition, launches
//! the body, moves the carried values back to the body's inputs and reads
//! the body's condition.
//!
//! A sub-plan's values live in a device buffer of the layer's own, one slot
//! each at its planned type (constants uploaded once), except the values it
//! reads from the outer scope, which are the outer tensors themselves. The
//! kernel table gives a control layer kernels only where its outputs keep
//! their planned sizes ([`crate::kernels::device_bodies`]), and the
//! executor runs it so only at the planned shapes.

use super::{describe_layer, describe_module, prepare_launches, CudaExecutionContext, Prepared, PreparedLaunch};
use crate::error::{Error, Result};
use crate::executor::cuda::driver::{cuda_error, DeviceBuffer};
use crate::executor::cuda::CudaEngine;
use crate::kernels::{device_bodies, BodyKernels, KernelArg};
use crate::ops::control::{ControlOp, MAX_ITERATIONS};
use crate::ops::Op;
use crate::plan::{Layer, Storage, TensorId};
use cudarc::driver::result;

/// Slots in a control layer's buffer start at multiples of this.
const SLOT_ALIGN: u64 = 256;

/// One sub-plan, ready to launch.
struct PreparedBody {
    steps: Vec<Vec<PreparedLaunch>>,
    /// Each input's and output's address and bytes.
    inputs: Vec<(u64, usize)>,
    outputs: Vec<(u64, usize)>,
}

enum Kind {
    If,
    Loop { carried: usize },
}

/// A control layer's sub-plans with their arguments resolved, and the
/// buffer that holds their values.
pub(super) struct PreparedControl {
    kind: Kind,
    bodies: Vec<PreparedBody>,
    /// A Loop's staging slots, one per carried value: the body's carried
    /// outputs go there before they become its inputs again (an output may
    /// be another carried value's input).
    staging: Vec<u64>,
    _memory: DeviceBuffer,
}

impl PreparedControl {
    /// Lays out and fills the layer's buffer and resolves its launches; the
    /// inner error says why it cannot run on this GPU (it then runs on the
    /// host). `outer` gives the device address of a tensor of the plan.
    pub(super) fn new(
        engine: &CudaEngine<'_>,
        layer: &Layer,
        bodies: &[BodyKernels],
        outer: &dyn Fn(TensorId) -> u64,
    ) -> Result<std::result::Result<PreparedControl, String>> {
        let bad = |m: String| Error::invalid(format!("layer {}: {m}", layer.name));
        let tensors = &engine.engine().plan().tensors;
        let inputs: Vec<_> = layer.inputs.iter().map(|i| i.map(|id| &tensors[id].ty)).collect();
        let outputs: Vec<_> = layer.outputs.iter().map(|&o| &tensors[o].ty).collect();
        let plans = match device_bodies(&layer.op, &inputs, &outputs) {
            Ok(plans) => plans,
            Err(why) => return Ok(Err(why)),
        };
        let kind = match &layer.op {
            Op::Control(ControlOp::Loop(l)) => Kind::Loop { carried: l.carried },
            _ => Kind::If,
        };
        if plans.len() != bodies.len() {
            return Err(bad(format!("kernels for {} sub-plans of {}", bodies.len(), plans.len())));
        }
        // A sub-plan reads its inputs from `outer_from` on from the outer
        // scope (an If all of them, a Loop those after the iteration number,
        // the condition and the carried values), input k being the layer's
        // input `k + shift` (after an If's condition; a Loop's inputs line
        // up with its body's).
        let (outer_from, shift) = match kind {
            Kind::If => (0, 1),
            Kind::Loop { carried } => (2 + carried, 0),
        };
        let outer_input = |k: usize| layer.inputs.get(k + shift).copied().flatten().map(outer);
        // Offsets of every owned slot: per sub-plan, per value (None for
        // outer values), then the staging slots.
        let mut size = 0u64;
        let mut slot = |bytes: usize| {
            let at = size;
            size += (bytes as u64).div_ceil(SLOT_ALIGN) * SLOT_ALIGN;
            at
        };
        let mut offsets: Vec<Vec<Option<u64>>> = Vec::with_capacity(plans.len());
        for plan in &plans {
            let mut own = vec![true; plan.values.len()];
            for (k, &v) in plan.inputs.iter().enumerate() {
                own[v] = k < outer_from;
            }
            offsets.push(plan.values.iter().zip(&own).map(|((_, ty), &own)| own.then(|| slot(ty.bytes()))).collect());
        }
        let staging_offsets: Vec<u64> = match kind {
            Kind::If => Vec::new(),
            Kind::Loop { carried } => (0..carried).map(|k| slot(plans[0].values[plans[0].inputs[2 + k]].1.bytes())).collect(),
        };
        let memory = DeviceBuffer::alloc(engine.context(), size as usize, "the values of a control layer's sub-plans")?;
        let base = memory.ptr();
        let mut prepared = Vec::with_capacity(plans.len());
        for ((plan, kernels), offsets) in plans.iter().zip(bodies).zip(&offsets) {
            let mut values = vec![0u64; plan.values.len()];
            for (k, &v) in plan.inputs.iter().enumerate() {
                values[v] = match (offsets[v], outer_input(k)) {
                    (Some(o), _) => base + o,
                    (None, Some(address)) => address,
                    // The CPU op refuses the layer the same way.
                    (None, None) => return Ok(Err(format!("its input {} is absent", k + shift))),
                };
            }
            for (v, offset) in offsets.iter().enumerate() {
                if let Some(o) = offset {
                    values[v] = base + o;
                }
            }
            for (v, c) in &plan.constants {
                let bytes = c.0.bytes();
                if !bytes.is_empty() {
                    // SAFETY: the slot holds the constant's bytes (its
                    // declared type, checked when the sub-plan was decoded);
                    // the copy is synchronous.
                    unsafe { result::memcpy_htod_sync(values[*v], bytes) }.map_err(|e| {
                        cuda_error(format!("uploading constant '{}' of layer {}", plan.values[*v].0, layer.name), e)
                    })?;
                }
            }
            if plan.steps.len() != kernels.steps.len() {
                return Err(bad(format!("kernels for {} steps of {}", kernels.steps.len(), plan.steps.len())));
            }
            let mut steps = Vec::with_capacity(plan.steps.len());
            for (step, launches) in plan.steps.iter().zip(&kernels.steps) {
                let what = format!("layer {}, step {}", layer.name, step.name);
                let resolved = prepare_launches(engine, launches, &what, |a| match *a {
                    KernelArg::Input(k) => match step.inputs.get(k as usize) {
                        Some(Some(v)) => Ok(values[*v]),
                        Some(None) => Ok(0),
                        None => Err(format!("passes input {k} of {}", step.inputs.len())),
                    },
                    KernelArg::Output(k) => match step.outputs.get(k as usize) {
                        Some(v) => Ok(values[*v]),
                        None => Err(format!("passes output {k} of {}", step.outputs.len())),
                    },
                    _ => Err(format!("passes {a:?}, which no step may")),
                })?;
                match resolved {
                    Ok(s) => steps.push(s),
                    Err(why) => return Ok(Err(format!("step {}: {why}", step.name))),
                }
            }
            let io = |ids: &[usize]| ids.iter().map(|&v| (values[v], plan.values[v].1.bytes())).collect();
            prepared.push(PreparedBody { steps, inputs: io(&plan.inputs), outputs: io(&plan.outputs) });
        }
        let staging = staging_offsets.iter().map(|o| base + o).collect();
        Ok(Ok(PreparedControl { kind, bodies: prepared, staging, _memory: memory }))
    }

    /// Launches in one pass over every sub-plan.
    pub(super) fn launch_count(&self) -> usize {
        self.bodies.iter().flat_map(|b| &b.steps).map(Vec::len).sum()
    }
}

impl CudaExecutionContext<'_> {
    /// Runs a control layer whose sub-plans are launches (nothing for other
    /// layers). Waits on the stream for every decision.
    pub(super) fn run_control(&mut self, li: usize) -> Result<()> {
        // Taken out while it runs, so that the context's own methods stay
        // usable; always put back.
        let mut control = match std::mem::replace(&mut self.bound[0].layers[li], Prepared::Host) {
            Prepared::Control(c) => c,
            other => {
                self.bound[0].layers[li] = other;
                return Ok(());
            }
        };
        let ran = match control.kind {
            Kind::If => self.run_if(li, &mut control),
            Kind::Loop { carried } => self.run_loop(li, &mut control, carried),
        };
        self.bound[0].layers[li] = Prepared::Control(control);
        ran
    }

    fn run_if(&mut self, li: usize, control: &mut PreparedControl) -> Result<()> {
        let layer = &self.engine.engine().plan().layers[li];
        let cond = self.read_input::<1>(layer, 0)?;
        let (index, name) = if cond[0] != 0 { (0, "then_branch") } else { (1, "else_branch") };
        let body = &mut control.bodies[index];
        self.launch_body(layer, body, name)?;
        for (k, (&(src, n), &o)) in body.outputs.iter().zip(&layer.outputs).enumerate() {
            self.copy(self.address(o), src, n, || format!("output {k} of layer {}", describe_layer(layer)))?;
        }
        Ok(())
    }

    fn run_loop(&mut self, li: usize, control: &mut PreparedControl, carried: usize) -> Result<()> {
        let layer = &self.engine.engine().plan().layers[li];
        let trips = match layer.inputs.first().copied().flatten() {
            Some(_) => Some(i64::from_le_bytes(self.read_input(layer, 0)?).max(0) as u64),
            None => None,
        };
        let mut cond = match layer.inputs.get(1).copied().flatten() {
            Some(_) => self.read_input::<1>(layer, 1)?[0] != 0,
            None => true,
        };
        let body = &mut control.bodies[0];
        let what = |k: usize| move || format!("carried value {k} of layer {}", describe_layer(layer));
        for k in 0..carried {
            let (dst, n) = body.inputs[2 + k];
            let id = layer.inputs[2 + k].ok_or_else(|| Error::op(format!("Loop: input {} is absent", 2 + k)))?;
            self.copy(dst, self.address(id), n, what(k))?;
        }
        let mut i: u64 = 0;
        while trips.is_none_or(|m| i < m) && cond {
            if i >= MAX_ITERATIONS {
                return Err(Error::op(format!(
                    "layer {}: Loop: {MAX_ITERATIONS} iterations without its trip count or condition ending it",
                    describe_layer(layer)
                )));
            }
            // Both live until the wait at the end of the iteration.
            let host_in = ((i as i64).to_le_bytes(), [u8::from(cond)]);
            self.upload_to(body.inputs[0].0, &host_in.0)?;
            self.upload_to(body.inputs[1].0, &host_in.1)?;
            self.launch_body(layer, body, &format!("body, iteration {i}"))?;
            for k in 0..carried {
                let (src, n) = body.outputs[1 + k];
                self.copy(control.staging[k], src, n, what(k))?;
            }
            for k in 0..carried {
                let (dst, n) = body.inputs[2 + k];
                self.copy(dst, control.staging[k], n, what(k))?;
            }
            let mut next = [0u8; 1];
            // SAFETY: the body's condition output holds one byte (`Loop`
            // checks its body's types); `next` outlives the wait below.
            let copied = unsafe { result::memcpy_dtoh_async(&mut next[..], body.outputs[0].0, self.stream.cu_stream()) };
            let waited = self.sync(|| format!("layer {}, iteration {i}", describe_layer(layer)));
            copied.map_err(|e| cuda_error(format!("reading the condition of layer {}", describe_layer(layer)), e))?;
            waited?;
            cond = next[0] != 0;
            i += 1;
        }
        for (k, &o) in layer.outputs.iter().enumerate().take(carried) {
            let (src, n) = body.inputs[2 + k];
            self.copy(self.address(o), src, n, what(k))?;
        }
        Ok(())
    }

    /// Queues every step of `body`.
    fn launch_body(&self, layer: &Layer, body: &mut PreparedBody, name: &str) -> Result<()> {
        let stream = self.stream.cu_stream();
        let engine = self.engine;
        for (s, launches) in body.steps.iter_mut().enumerate() {
            for l in launches.iter_mut() {
                let module = l.module;
                l.launch(stream, || {
                    format!("layer {}: {name}, step {s}: {}", describe_layer(layer), describe_module(engine, module))
                })?;
            }
        }
        Ok(())
    }

    /// The `N` bytes of the layer's one-value input `k` (a weight read from
    /// the host copy; an arena tensor copied back, after waiting for the
    /// stream).
    fn read_input<const N: usize>(&self, layer: &Layer, k: usize) -> Result<[u8; N]> {
        let plan = self.engine.engine().plan();
        let id = layer
            .inputs
            .get(k)
            .copied()
            .flatten()
            .ok_or_else(|| Error::op(format!("layer {}: input {k} is absent", layer.name)))?;
        let t = &plan.tensors[id];
        if t.ty.bytes() != N {
            return Err(Error::op(format!("layer {}: input {k} is {}, not one value", describe_layer(layer), t.ty)));
        }
        let mut bytes = [0u8; N];
        if let Storage::Weight { offset } = t.storage {
            bytes.copy_from_slice(&self.engine.engine().weights()[offset as usize..][..N]);
            return Ok(bytes);
        }
        // SAFETY: the tensor's device range holds `N` bytes
        // (checked above against its type, validated at load); `bytes`
        // outlives the wait below.
        let copied = unsafe { result::memcpy_dtoh_async(&mut bytes[..], self.address(id), self.stream.cu_stream()) };
        let waited = self.sync(|| format!("the GPU work before layer {}", describe_layer(layer)));
        copied.map_err(|e| cuda_error(format!("reading input {k} of layer {}", describe_layer(layer)), e))?;
        waited?;
        Ok(bytes)
    }

    /// Queues a device-to-device copy of `n` bytes.
    fn copy(&self, dst: u64, src: u64, n: usize, what: impl FnOnce() -> String) -> Result<()> {
        if n == 0 || dst == src {
            return Ok(());
        }
        // SAFETY: both ranges hold `n` bytes: slots laid out for their
        // values' types, or plan tensors of those types (`device_bodies`).
        unsafe { result::memcpy_dtod_async(dst, src, n, self.stream.cu_stream()) }
            .map_err(|e| cuda_error(format!("copying {}", what()), e))
    }

    /// Queues the copy of `bytes` to device address `dst`; the caller keeps
    /// `bytes` alive until the stream is synchronized.
    fn upload_to(&self, dst: u64, bytes: &[u8]) -> Result<()> {
        // SAFETY: `dst` is the slot of the body's iteration number (8
        // bytes) or condition (1 byte), as `Loop` checks its body's types.
        unsafe { result::memcpy_htod_async(dst, bytes, self.stream.cu_stream()) }
            .map_err(|e| cuda_error("copying a loop's iteration number and condition to the GPU", e))
    }
}
