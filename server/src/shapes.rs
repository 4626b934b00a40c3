//! The shapes a served engine accepts: each binding's range on every axis
//! (from the engine's optimization profile, or its one shape), and whether
//! the engine batches along its first axis, which is what a model's
//! `max_batch_size` and the dynamic batcher need.
//!
//! An engine batches when its profile lets every input's first axis run
//! from 1 to some maximum `m` >= 2 (the same for all inputs) and every
//! output's first axis follows it (1 at the profile's minimum, `m` at its
//! maximum), as Triton's auto-complete for TensorRT plans reads a batch
//! profile. Requests are then concatenated along that axis and the outputs
//! split back by rows; the executor checks again that each output has as
//! many rows as the inputs before they are split. Of an engine with several
//! profiles, the server takes the first: requests must fit it.

use trtc_runtime::profile::ProfilePoint;
use trtc_runtime::{BindingInfo, DType, Engine, TensorType};

/// One binding and the range of each of its axes (`lo == hi` when fixed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindingShape {
    pub name: String,
    pub dtype: DType,
    pub axes: Vec<(usize, usize)>,
}

impl BindingShape {
    fn fixed(b: &BindingInfo) -> BindingShape {
        BindingShape { name: b.name.clone(), dtype: b.ty.dtype, axes: b.ty.shape.iter().map(|&d| (d, d)).collect() }
    }

    fn ranged(b: &BindingInfo, lo: &TensorType, hi: &TensorType) -> BindingShape {
        let axes = if lo.shape.len() == hi.shape.len() {
            lo.shape.iter().zip(&hi.shape).map(|(&a, &b)| (a.min(b), a.max(b))).collect()
        } else {
            return BindingShape::fixed(b);
        };
        BindingShape { name: b.name.clone(), dtype: b.ty.dtype, axes }
    }
}

/// Every binding's shape range, and the largest batch when the engine
/// batches along the first axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineShapes {
    pub inputs: Vec<BindingShape>,
    pub outputs: Vec<BindingShape>,
    pub max_batch: Option<usize>,
    /// The outputs whose size depends on the data (their rows do not follow
    /// a batch).
    pub data_sized_outputs: Vec<String>,
}

impl EngineShapes {
    /// The shapes of an engine's bindings, from its first profile.
    pub fn of(engine: &Engine) -> EngineShapes {
        let mut shapes = EngineShapes::of_profile(engine);
        // An output sized by the data (a detector's boxes) may have any
        // size up to its room on every axis: `-1` in the configuration, as
        // Triton reports such outputs.
        // Such an output's rows do not follow the batch (NMS keeps any number
        // of boxes per image), so the engine is not batched.
        let plan = engine.plan();
        let sized = plan.data_sized();
        for (b, (_, id)) in shapes.outputs.iter_mut().zip(&plan.outputs) {
            if sized[*id] {
                b.axes.iter_mut().for_each(|a| a.0 = 0);
                shapes.max_batch = None;
                shapes.data_sized_outputs.push(b.name.clone());
            }
        }
        shapes
    }

    /// [`EngineShapes::of`] before outputs sized by the data are widened.
    fn of_profile(engine: &Engine) -> EngineShapes {
        let plan = engine.plan();
        let profile = engine.profiles().first().filter(|p| p.is_dynamic());
        let bound =
            profile.and_then(|p| Some((p.bind_at(plan, ProfilePoint::Min).ok()?, p.bind_at(plan, ProfilePoint::Max).ok()?)));
        let Some((at_min, at_max)) = bound else {
            return EngineShapes::fixed(engine.inputs(), engine.outputs());
        };
        let shape = |b: &BindingInfo, id: usize| BindingShape::ranged(b, &at_min[id], &at_max[id]);
        let inputs = engine.inputs().iter().zip(&plan.inputs).map(|(b, &id)| shape(b, id)).collect();
        let outputs = engine.outputs().iter().zip(&plan.outputs).map(|(b, (_, id))| shape(b, *id)).collect();
        EngineShapes::with_batch(inputs, outputs)
    }

    /// An engine whose bindings have one shape each.
    pub fn fixed(inputs: &[BindingInfo], outputs: &[BindingInfo]) -> EngineShapes {
        EngineShapes {
            inputs: inputs.iter().map(BindingShape::fixed).collect(),
            outputs: outputs.iter().map(BindingShape::fixed).collect(),
            max_batch: None,
            data_sized_outputs: Vec::new(),
        }
    }

    /// The shapes, with `max_batch` found from the first axes.
    pub fn with_batch(inputs: Vec<BindingShape>, outputs: Vec<BindingShape>) -> EngineShapes {
        let first = |b: &BindingShape| b.axes.first().copied();
        let max_batch = match inputs.first().and_then(first) {
            Some((1, m)) if m >= 2 => {
                let all = inputs.iter().chain(&outputs).all(|b| first(b) == Some((1, m)));
                all.then_some(m)
            }
            _ => None,
        };
        EngineShapes { inputs, outputs, max_batch, data_sized_outputs: Vec::new() }
    }
}

/// What a request's input must be: its dtype, the batch range of its first
/// axis when the model batches, and the range of each other axis (the
/// engine's, narrowed to the configuration's dims).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputSpec {
    pub name: String,
    pub dtype: DType,
    /// The model's `max_batch_size`; 0: the model does not batch, and
    /// `axes` covers every axis.
    pub max_batch: usize,
    pub axes: Vec<(usize, usize)>,
}

impl InputSpec {
    /// The shape a request must have, as in messages: `[1..8,3,224,224]`.
    pub fn describe(&self) -> String {
        let axis = |(lo, hi): (usize, usize)| if lo == hi { lo.to_string() } else { format!("{lo}..{hi}") };
        let batch = (self.max_batch > 0).then(|| axis((1, self.max_batch)));
        let dims: Vec<String> = batch.into_iter().chain(self.axes.iter().map(|&a| axis(a))).collect();
        format!("[{}]", dims.join(","))
    }

    /// Whether a request's shape is one this input takes.
    pub fn admits(&self, shape: &[i64]) -> bool {
        let (batch, rest) = if self.max_batch > 0 {
            match shape.split_first() {
                Some((&b, rest)) => (Some(b), rest),
                None => return false,
            }
        } else {
            (None, shape)
        };
        let batch_ok = batch.is_none_or(|b| b >= 1 && b as u64 <= self.max_batch as u64);
        batch_ok
            && rest.len() == self.axes.len()
            && rest.iter().zip(&self.axes).all(|(&d, &(lo, hi))| d >= 0 && d as u64 >= lo as u64 && d as u64 <= hi as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(name: &str, axes: &[(usize, usize)]) -> BindingShape {
        BindingShape { name: name.into(), dtype: DType::F32, axes: axes.to_vec() }
    }

    #[test]
    fn a_batch_profile_batches_when_every_binding_follows_the_first_axis() {
        let s = EngineShapes::with_batch(vec![b("x", &[(1, 8), (3, 3)])], vec![b("y", &[(1, 8), (10, 10)])]);
        assert_eq!(s.max_batch, Some(8));
        for (inputs, outputs) in [
            // The output does not follow the batch.
            (vec![b("x", &[(1, 8), (3, 3)])], vec![b("y", &[(1, 1), (10, 10)])]),
            // The batch starts above 1, or does not vary.
            (vec![b("x", &[(2, 8), (3, 3)])], vec![b("y", &[(2, 8), (10, 10)])]),
            (vec![b("x", &[(1, 1), (3, 3)])], vec![b("y", &[(1, 1), (10, 10)])]),
            // Inputs disagree.
            (vec![b("x", &[(1, 8)]), b("m", &[(1, 4)])], vec![b("y", &[(1, 8)])]),
            // A scalar output.
            (vec![b("x", &[(1, 8)])], vec![b("y", &[])]),
        ] {
            assert_eq!(EngineShapes::with_batch(inputs.clone(), outputs).max_batch, None, "{inputs:?}");
        }
    }

    #[test]
    fn input_specs_admit_shapes_inside_their_ranges() {
        let spec = InputSpec { name: "x".into(), dtype: DType::F32, max_batch: 8, axes: vec![(3, 3), (16, 64)] };
        assert_eq!(spec.describe(), "[1..8,3,16..64]");
        for ok in [[1, 3, 16], [8, 3, 64], [5, 3, 40]] {
            assert!(spec.admits(&ok), "{ok:?}");
        }
        for bad in [&[0, 3, 16][..], &[9, 3, 16], &[1, 4, 16], &[1, 3, 65], &[1, 3], &[1, 3, -1], &[]] {
            assert!(!spec.admits(bad), "{bad:?}");
        }
        let unbatched = InputSpec { max_batch: 0, axes: vec![(2, 2)], ..spec };
        assert_eq!(unbatched.describe(), "[2]");
        assert!(unbatched.admits(&[2]) && !unbatched.admits(&[1, 2]));
    }
}
