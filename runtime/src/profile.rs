//! Optimization profiles: the shapes each input binding may take, as
//! TensorRT's profiles give them (a minimum, an optimum and a maximum per
//! dimension), and a plan bound to shapes inside one.
//!
//! An engine with profiles is planned at each input's maximum over all its
//! profiles: its memory plan holds every tensor at its largest size. A run
//! takes the first profile whose ranges admit every input's shape. At run time the executor
//! infers every tensor's type again from the inputs' shapes
//! ([`bind`]), layer by layer with the ops' own `infer`, and checks that
//! each fits where the memory plan put it.

use crate::error::{Error, Result};
use crate::plan::{Plan, Storage};
use crate::tensor::TensorType;
use serde::{Deserialize, Serialize};

/// The range of one input binding's shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfileInput {
    pub name: String,
    pub min: Vec<usize>,
    /// The shape tactics are chosen for.
    pub opt: Vec<usize>,
    pub max: Vec<usize>,
}

/// A point of every input's range: each at its minimum, optimum or maximum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfilePoint {
    Min,
    Opt,
    Max,
}

impl ProfilePoint {
    pub fn name(self) -> &'static str {
        match self {
            ProfilePoint::Min => "min",
            ProfilePoint::Opt => "opt",
            ProfilePoint::Max => "max",
        }
    }
}

/// A dimension the model names (an ONNX `dim_param` such as `batch` or
/// `sequence`) on several input axes, which must then agree at run time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedDim {
    pub name: String,
    /// (input binding index, axis), two or more.
    pub axes: Vec<(usize, usize)>,
}

/// One optimization profile: a range for every input binding, and the
/// dimensions input axes share.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    pub inputs: Vec<ProfileInput>,
    pub shared: Vec<SharedDim>,
}

/// A profile as format version 5 wrote it (no shared dimensions).
#[derive(Deserialize)]
struct ProfileV5 {
    inputs: Vec<ProfileInput>,
}

/// Decodes the PROFILES section of an engine of `format_version`.
pub(crate) fn decode(bytes: &[u8], format_version: u32) -> std::result::Result<Vec<Profile>, postcard::Error> {
    if format_version <= 5 {
        let old: Vec<ProfileV5> = postcard::from_bytes(bytes)?;
        return Ok(old.into_iter().map(|p| Profile { inputs: p.inputs, shared: Vec::new() }).collect());
    }
    postcard::from_bytes(bytes)
}

fn dims(d: &[usize]) -> String {
    d.iter().map(|x| x.to_string()).collect::<Vec<_>>().join("x")
}

impl Profile {
    /// Checks the profile against the plan it goes with: one range for each
    /// input binding, of its rank, `min <= opt <= max` on every axis, and the
    /// maximum within the binding's planned shape (which is the largest over
    /// the engine's profiles).
    pub fn validate(&self, plan: &Plan) -> Result<()> {
        let bad = |m: String| Err(Error::invalid(format!("profile: {m}")));
        if self.inputs.len() != plan.inputs.len() {
            return bad(format!("{} ranges for {} input bindings", self.inputs.len(), plan.inputs.len()));
        }
        for (range, &id) in self.inputs.iter().zip(&plan.inputs) {
            let planned = &plan.tensors[id].ty.shape;
            if range.name != plan.tensors[id].name {
                return bad(format!("a range for '{}' where the input binding is '{}'", range.name, plan.tensors[id].name));
            }
            let rank = planned.len();
            if range.min.len() != rank || range.opt.len() != rank || range.max.len() != rank {
                return bad(format!("the range of '{}' is not of rank {rank}", range.name));
            }
            let ordered = (0..rank).all(|a| range.min[a] <= range.opt[a] && range.opt[a] <= range.max[a]);
            if !ordered {
                return bad(format!(
                    "'{}': min {} opt {} max {} are not in order",
                    range.name,
                    dims(&range.min),
                    dims(&range.opt),
                    dims(&range.max)
                ));
            }
            if range.max.iter().zip(planned).any(|(m, p)| m > p) {
                return bad(format!("'{}': max {} exceeds the planned shape {}", range.name, dims(&range.max), dims(planned)));
            }
        }
        for d in &self.shared {
            let valid = d.axes.len() >= 2 && d.axes.iter().all(|&(i, a)| i < self.inputs.len() && a < self.inputs[i].max.len());
            if !valid {
                return bad(format!("dimension '{}' names axes the inputs do not have", d.name));
            }
        }
        Ok(())
    }

    /// Checks that input axes sharing a dimension agree (`shapes` in binding
    /// order); the error names both axes and the dimension.
    pub fn consistent(&self, shapes: &[&[usize]]) -> std::result::Result<(), String> {
        for d in &self.shared {
            let size = |&(i, a): &(usize, usize)| shapes.get(i).and_then(|s| s.get(a)).copied();
            let first = d.axes[0];
            for other in &d.axes[1..] {
                if size(other) != size(&first) {
                    let show = |(i, a): (usize, usize)| {
                        format!(
                            "input '{}' axis {a} is {}",
                            self.inputs[i].name,
                            size(&(i, a)).map_or("missing".into(), |n| n.to_string())
                        )
                    };
                    return Err(format!("{} but {}: both are the model's dimension '{}'", show(first), show(*other), d.name));
                }
            }
        }
        Ok(())
    }

    /// Whether the shape of input `name` lies inside this profile; the error
    /// names the axis and its range.
    pub fn admits(&self, name: &str, shape: &[usize]) -> std::result::Result<(), String> {
        let Some(range) = self.inputs.iter().find(|r| r.name == name) else {
            return Err(format!("no range for input '{name}'"));
        };
        if shape.len() != range.max.len() {
            return Err(format!("input '{name}' has rank {}, the engine's input has rank {}", shape.len(), range.max.len()));
        }
        for (axis, &d) in shape.iter().enumerate() {
            let (lo, hi) = (range.min[axis], range.max[axis]);
            if d < lo || d > hi {
                let allowed = if lo == hi { format!("fixed at {lo}") } else { format!("allowed {lo} to {hi}") };
                return Err(format!("input '{name}' axis {axis} is {d}: {allowed}"));
            }
        }
        Ok(())
    }

    /// Input `name`'s type with each varying dimension as its range:
    /// `f32[1..32,3,224,224]`.
    pub fn describe(&self, name: &str, dtype: crate::DType) -> Option<String> {
        let range = self.inputs.iter().find(|r| r.name == name)?;
        let dims: Vec<String> = (0..range.max.len())
            .map(|a| {
                if range.min[a] == range.max[a] {
                    range.max[a].to_string()
                } else {
                    format!("{}..{}", range.min[a], range.max[a])
                }
            })
            .collect();
        Some(format!("{dtype}[{}]", dims.join(",")))
    }

    /// Whether any dimension varies.
    pub fn is_dynamic(&self) -> bool {
        self.inputs.iter().any(|r| r.min != r.max)
    }

    /// The input bindings' types with every input at `at`, in binding order
    /// (the profile's ranges are in binding order, see [`Profile::validate`]).
    pub fn input_types(&self, plan: &Plan, at: ProfilePoint) -> Vec<TensorType> {
        self.inputs
            .iter()
            .zip(&plan.inputs)
            .map(|(r, &id)| {
                let shape = match at {
                    ProfilePoint::Min => &r.min,
                    ProfilePoint::Opt => &r.opt,
                    ProfilePoint::Max => &r.max,
                };
                TensorType::new(plan.tensors[id].ty.dtype, shape.clone())
            })
            .collect()
    }

    /// Every tensor's type with the inputs at `at` ([`bind`] at that point).
    pub fn bind_at(&self, plan: &Plan, at: ProfilePoint) -> Result<Vec<TensorType>> {
        bind(plan, &self.input_types(plan, at))
    }
}

/// The profile a run with input shapes `shapes` (binding order) uses: the
/// first of `profiles` that admits them, or `chosen` (a context's
/// `set_profile`) if it does. The error gives each profile's reason.
pub fn select(profiles: &[Profile], plan: &Plan, shapes: &[&[usize]], chosen: Option<usize>) -> Result<usize> {
    let mut refusals = Vec::new();
    for (k, profile) in profiles.iter().enumerate() {
        if chosen.is_some_and(|c| c != k) {
            continue;
        }
        let outside = plan
            .inputs
            .iter()
            .zip(shapes)
            .find_map(|(&id, s)| profile.admits(&plan.tensors[id].name, s).err())
            .or_else(|| profile.consistent(shapes).err());
        match outside {
            None => return Ok(k),
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

/// The type of every tensor of `plan` when its input bindings have the
/// types `inputs` (in binding order): weights keep theirs, every layer's
/// outputs are inferred again from its inputs. A layer sized by the data
/// (or by values computed at run time) and every layer after it get their
/// rooms at these shapes where those infer, else keep their planned types:
/// the executors infer their actual types as they run (and keep a tensor
/// that outgrows its room on the heap). Fails when any other layer does
/// not infer, or when its output would be larger than the memory plan made
/// room for.
pub fn bind(plan: &Plan, inputs: &[TensorType]) -> Result<Vec<TensorType>> {
    let mut types: Vec<TensorType> = plan.tensors.iter().map(|t| t.ty.clone()).collect();
    if inputs.len() != plan.inputs.len() {
        return Err(Error::Binding(format!("{} input types for {} input bindings", inputs.len(), plan.inputs.len())));
    }
    for (&id, ty) in plan.inputs.iter().zip(inputs) {
        if ty.dtype != plan.tensors[id].ty.dtype {
            return Err(Error::Binding(format!(
                "input '{}' must be {}, got {}",
                plan.tensors[id].name, plan.tensors[id].ty.dtype, ty.dtype
            )));
        }
        fits(plan, id, ty)?;
        types[id] = ty.clone();
    }
    let sized = plan.data_sized();
    for layer in &plan.layers {
        if layer.outputs.iter().any(|&o| sized[o]) {
            // A room that does not infer (a room-sized value meeting a
            // tensor of the bound size) keeps the planned one.
            let _ = infer_layer_types(layer, &mut types);
        } else {
            infer_layer(plan, layer, &mut types)?;
        }
    }
    Ok(types)
}

/// Infers `layer`'s output types from its inputs' in `types` and records
/// them, checking that each fits where the memory plan put it.
pub fn infer_layer(plan: &Plan, layer: &crate::plan::Layer, types: &mut [TensorType]) -> Result<()> {
    infer_layer_types(layer, types)?;
    layer.outputs.iter().try_for_each(|&o| fits(plan, o, &types[o]))
}

/// Infers `layer`'s output types from its inputs' in `types` and records
/// them, wherever they may have to live (after a layer sized by the data,
/// the CPU executor keeps tensors that outgrow their room on the heap).
pub fn infer_layer_types(layer: &crate::plan::Layer, types: &mut [TensorType]) -> Result<()> {
    let ins: Vec<Option<&TensorType>> = layer.inputs.iter().map(|i| i.map(|id| &types[id])).collect();
    let outs = layer.op.infer(&ins).map_err(|e| {
        Error::Binding(format!("layer {} ({}) does not take these input shapes: {e}", layer.name, layer.op.name()))
    })?;
    for (&o, ty) in layer.outputs.iter().zip(outs) {
        types[o] = ty;
    }
    Ok(())
}

/// Checks that tensor `id` of type `ty` fits in the room the plan made.
pub fn fits(plan: &Plan, id: usize, ty: &TensorType) -> Result<()> {
    let planned = plan.tensors[id].ty.bytes();
    match ty.checked_bytes() {
        Some(n) if n <= planned || matches!(plan.tensors[id].storage, Storage::Weight { .. }) => Ok(()),
        _ => Err(Error::Binding(format!(
            "tensor '{}' would be {ty}, larger than the {} the engine was planned for",
            plan.tensors[id].name, plan.tensors[id].ty
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_5_profiles_decode_without_shared_dimensions() {
        #[derive(Serialize)]
        struct Written {
            inputs: Vec<ProfileInput>,
        }
        let input = ProfileInput { name: "x".into(), min: vec![1, 3], opt: vec![2, 3], max: vec![4, 3] };
        let bytes = postcard::to_stdvec(&vec![Written { inputs: vec![input.clone()] }]).unwrap();
        let decoded = decode(&bytes, 5).unwrap();
        assert_eq!(decoded, vec![Profile { inputs: vec![input.clone()], shared: Vec::new() }]);
        // Version 6 carries the shared dimensions.
        let now = vec![Profile { inputs: vec![input], shared: vec![SharedDim { name: "n".into(), axes: vec![(0, 0), (0, 1)] }] }];
        assert_eq!(decode(&postcard::to_stdvec(&now).unwrap(), 6).unwrap(), now);
    }
}
