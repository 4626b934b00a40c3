//! A sub-plan: the graph of an If branch or a Loop body, which the
//! control-flow ops run when their layer runs.
//!
//! Unlike the engine's plan it has no memory plan: it is interpreted step
//! by step on tensors of their own, each step's output types inferred from
//! the actual inputs, so a body may see different shapes in each run (and,
//! where its ops allow, in each iteration). Values are dropped after their
//! last reader.

use crate::error::{Error, Result};
use crate::ops::util::DecodeDepth;
use crate::ops::Op;
use crate::tensor::{Tensor, TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Index of a value in [`SubPlan::values`].
pub type ValueId = usize;

/// How deep sub-plans may nest in an engine (an If in a Loop body in ...).
/// The importer refuses deeper models; a decoded engine is checked too, so
/// a hostile file cannot exhaust the stack.
pub const MAX_DEPTH: usize = crate::ops::util::MAX_NESTING;

/// One op of a sub-plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The ONNX node it came from.
    pub name: String,
    pub op: Op,
    /// `None` is an absent optional input.
    pub inputs: Vec<Option<ValueId>>,
    pub outputs: Vec<ValueId>,
}

/// A constant of a sub-plan (its own initializers, and outer-scope
/// constants it reads).
#[derive(Clone, Debug, PartialEq)]
pub struct Constant(pub Tensor);

#[derive(Serialize, Deserialize)]
#[serde(rename = "Constant")]
struct ConstantBytes {
    ty: TensorType,
    bytes: Vec<u8>,
}

impl Serialize for Constant {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        ConstantBytes { ty: self.0.ty().clone(), bytes: self.0.bytes().to_vec() }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Constant {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Constant, D::Error> {
        let c = ConstantBytes::deserialize(d)?;
        // `from_bytes` checks the byte count against the type.
        Tensor::from_bytes(c.ty, &c.bytes).map(Constant).map_err(serde::de::Error::custom)
    }
}

/// A graph in execution order: values are the inputs, the constants and
/// the steps' outputs, each defined once.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SubPlan {
    /// Each value's name and its type when the engine was built (what the
    /// op's `infer` reports; a run infers the actual types).
    pub values: Vec<(String, TensorType)>,
    pub inputs: Vec<ValueId>,
    pub constants: Vec<(ValueId, Constant)>,
    pub steps: Vec<Step>,
    pub outputs: Vec<ValueId>,
}

/// What a [`SubPlan`] serializes as, decoded before it is checked.
#[derive(Deserialize)]
#[serde(rename = "SubPlan")]
struct SubPlanFields {
    values: Vec<(String, TensorType)>,
    inputs: Vec<ValueId>,
    constants: Vec<(ValueId, Constant)>,
    steps: Vec<Step>,
    outputs: Vec<ValueId>,
}

impl<'de> Deserialize<'de> for SubPlan {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<SubPlan, D::Error> {
        let _depth = DecodeDepth::enter(MAX_DEPTH).map_err(serde::de::Error::custom)?;
        let f = SubPlanFields::deserialize(d)?;
        SubPlan::new(f.values, f.inputs, f.constants, f.steps, f.outputs).map_err(serde::de::Error::custom)
    }
}

/// A value while a sub-plan runs: borrowed from the caller or the
/// constants, or computed.
enum Value<'a> {
    Borrowed(TensorView<'a>),
    Owned(Tensor),
}

impl Value<'_> {
    fn view(&self) -> TensorView<'_> {
        match self {
            Value::Borrowed(v) => *v,
            Value::Owned(t) => t.view(),
        }
    }
}

impl SubPlan {
    /// Checks everything [`SubPlan::run`] relies on: ids in range, every
    /// value defined once before it is read, constants of their declared
    /// types, and every step's declared output types equal to what its op
    /// infers from the declared input types.
    pub fn new(
        values: Vec<(String, TensorType)>,
        inputs: Vec<ValueId>,
        constants: Vec<(ValueId, Constant)>,
        steps: Vec<Step>,
        outputs: Vec<ValueId>,
    ) -> Result<SubPlan> {
        let n = values.len();
        fn bad<T>(m: String) -> Result<T> {
            Err(Error::invalid(format!("sub-plan: {m}")))
        }
        let mut defined = vec![false; n];
        let define = |id: ValueId, defined: &mut Vec<bool>| -> Result<()> {
            match defined.get_mut(id) {
                Some(d) if !*d => {
                    *d = true;
                    Ok(())
                }
                Some(_) => bad(format!("value {id} is defined twice")),
                None => bad(format!("value {id} is out of range")),
            }
        };
        for &i in &inputs {
            define(i, &mut defined)?;
        }
        for (id, c) in &constants {
            define(*id, &mut defined)?;
            if c.0.ty() != &values[*id].1 {
                return bad(format!("constant {} is {}, declared {}", values[*id].0, c.0.ty(), values[*id].1));
            }
        }
        for step in &steps {
            let mut types = Vec::with_capacity(step.inputs.len());
            for i in &step.inputs {
                match i {
                    Some(id) if defined.get(*id) == Some(&true) => types.push(Some(&values[*id].1)),
                    Some(id) => return bad(format!("step {} reads value {id} before it is defined", step.name)),
                    None => types.push(None),
                }
            }
            let inferred = step.op.infer(&types).map_err(|e| Error::invalid(format!("sub-plan step {}: {e}", step.name)))?;
            if inferred.len() != step.outputs.len() {
                return bad(format!("step {} has {} outputs, its op makes {}", step.name, step.outputs.len(), inferred.len()));
            }
            for (&o, ty) in step.outputs.iter().zip(&inferred) {
                define(o, &mut defined)?;
                if &values[o].1 != ty {
                    return bad(format!(
                        "step {}: output {} declared {} but the op makes {ty}",
                        step.name, values[o].0, values[o].1
                    ));
                }
            }
        }
        if let Some(&o) = outputs.iter().find(|&&o| defined.get(o) != Some(&true)) {
            return bad(format!("output value {o} is not defined"));
        }
        Ok(SubPlan { values, inputs, constants, steps, outputs })
    }

    /// The declared types of the inputs.
    pub fn input_types(&self) -> impl Iterator<Item = &TensorType> + '_ {
        self.inputs.iter().map(|&i| &self.values[i].1)
    }

    /// The declared types of the outputs.
    pub fn output_types(&self) -> impl Iterator<Item = &TensorType> + '_ {
        self.outputs.iter().map(|&o| &self.values[o].1)
    }

    /// The output types at input types `inputs`, each step's inferred from
    /// its inputs' (for a step sized by the data, the room it gives). At
    /// the declared input types these are the declared output types; at
    /// others (an engine whose shapes vary) the ops' rules give them.
    pub fn infer(&self, inputs: &[&TensorType]) -> Result<Vec<TensorType>> {
        if inputs.len() != self.inputs.len() {
            crate::bail_op!("a sub-plan of {} inputs given {}", self.inputs.len(), inputs.len());
        }
        let mut types: Vec<Option<TensorType>> = vec![None; self.values.len()];
        for (&id, &t) in self.inputs.iter().zip(inputs) {
            types[id] = Some(t.clone());
        }
        for (id, c) in &self.constants {
            types[*id] = Some(c.0.ty().clone());
        }
        for step in &self.steps {
            let ins: Vec<Option<&TensorType>> =
                step.inputs.iter().map(|i| i.map(|id| types[id].as_ref().expect("validated: defined before read"))).collect();
            let outs = step.op.infer(&ins).map_err(|e| Error::op(format!("step {} ({}): {e}", step.name, step.op.name())))?;
            for (&o, t) in step.outputs.iter().zip(outs) {
                types[o] = Some(t);
            }
        }
        Ok(self.outputs.iter().map(|&o| types[o].clone().expect("validated: outputs are defined")).collect())
    }

    /// Whether a run may give outputs of other types than declared: some
    /// step's output sizes depend on the data.
    pub fn data_sized(&self) -> bool {
        self.steps.iter().any(|s| s.op.as_impl().data_dependent())
    }

    /// Runs the steps on `inputs` (one per input, in order) and returns the
    /// outputs. `what` names the sub-plan in errors ("then_branch"); it is
    /// formatted only then (a loop runs its body many times).
    pub fn run(&self, inputs: &[TensorView<'_>], what: &dyn std::fmt::Display) -> Result<Vec<Tensor>> {
        if inputs.len() != self.inputs.len() {
            crate::bail_op!("{what} takes {} inputs, got {}", self.inputs.len(), inputs.len());
        }
        // The last step that reads each value; outputs are read after all.
        let end = self.steps.len();
        let mut last_read = vec![0usize; self.values.len()];
        for (k, step) in self.steps.iter().enumerate() {
            for id in step.inputs.iter().flatten() {
                last_read[*id] = k;
            }
        }
        for &o in &self.outputs {
            last_read[o] = end;
        }
        let mut values: Vec<Option<Value>> = (0..self.values.len()).map(|_| None).collect();
        for (&id, t) in self.inputs.iter().zip(inputs) {
            values[id] = Some(Value::Borrowed(*t));
        }
        for (id, c) in &self.constants {
            values[*id] = Some(Value::Borrowed(c.0.view()));
        }
        for (k, step) in self.steps.iter().enumerate() {
            let ins: Vec<Option<TensorView>> = step
                .inputs
                .iter()
                .map(|i| i.map(|id| values[id].as_ref().expect("validated: defined before read").view()))
                .collect();
            let outs = step
                .op
                .eval_views(&ins)
                .map_err(|e| Error::op(format!("{what}: step {} ({}): {e}", step.name, step.op.name())))?;
            drop(ins);
            for (&o, t) in step.outputs.iter().zip(outs) {
                values[o] = Some(Value::Owned(t));
            }
            for id in step.inputs.iter().flatten() {
                if last_read[*id] == k {
                    values[*id] = None;
                }
            }
        }
        // Each computed output is moved out at its last place in the list.
        let mut outputs = Vec::with_capacity(self.outputs.len());
        for (k, &o) in self.outputs.iter().enumerate() {
            let again = self.outputs[k + 1..].contains(&o);
            let value = if again { None } else { values[o].take() };
            outputs.push(match value {
                Some(Value::Owned(t)) => t,
                Some(Value::Borrowed(v)) => v.to_owned(),
                None => values[o].as_ref().expect("validated: outputs are defined").view().to_owned(),
            });
        }
        Ok(outputs)
    }
}

/// Copies a sub-plan's results into a layer's outputs, which must have
/// their types (a control-flow op not sized by the data); `what` names the
/// op in errors.
pub(super) fn copy_results(outputs: &mut [TensorViewMut<'_>], results: &[Tensor], what: &str) -> Result<()> {
    for (out, t) in outputs.iter_mut().zip(results) {
        if out.shape != t.shape() || out.dtype != t.dtype() {
            crate::bail_op!("{what} made {}, the layer has room for {}", t.ty(), out.ty());
        }
        out.bytes.copy_from_slice(t.bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::ops::control::If;
    use crate::ops::elementwise::{Unary, UnaryKind};

    fn f32s(n: usize) -> TensorType {
        TensorType::new(DType::F32, vec![n])
    }

    fn neg() -> Op {
        Unary { kind: UnaryKind::Neg }.into()
    }

    /// `y = -x` on `f32[2]`.
    fn negation() -> SubPlan {
        let values = vec![("x".into(), f32s(2)), ("y".into(), f32s(2))];
        let steps = vec![Step { name: "neg".into(), op: neg(), inputs: vec![Some(0)], outputs: vec![1] }];
        SubPlan::new(values, vec![0], vec![], steps, vec![1]).unwrap()
    }

    #[test]
    fn a_sub_plan_runs_its_steps_and_returns_outputs_in_order() {
        let values = vec![("x".into(), f32s(2)), ("k".into(), f32s(2)), ("y".into(), f32s(2))];
        let k = Constant(Tensor::from_vec(vec![2], vec![1f32, 2.0]).unwrap());
        let steps = vec![Step { name: "neg".into(), op: neg(), inputs: vec![Some(1)], outputs: vec![2] }];
        // Outputs: the step's, an input, the same step's again, a constant.
        let sub = SubPlan::new(values, vec![0], vec![(1, k)], steps, vec![2, 0, 2, 1]).unwrap();
        let x = Tensor::from_vec(vec![2], vec![5f32, 6.0]).unwrap();
        let out = sub.run(&[x.view()], &"test").unwrap();
        let got: Vec<Vec<f32>> = out.iter().map(|t| t.as_slice::<f32>().unwrap().to_vec()).collect();
        assert_eq!(got, [vec![-1.0, -2.0], vec![5.0, 6.0], vec![-1.0, -2.0], vec![1.0, 2.0]]);
        let err = sub.run(&[], &"test").unwrap_err().to_string();
        assert!(err.contains("test takes 1 inputs, got 0"), "{err}");
    }

    #[test]
    fn inconsistent_sub_plans_are_refused() {
        let two = || vec![("x".to_string(), f32s(2)), ("y".to_string(), f32s(2))];
        let step = |inputs: Vec<Option<ValueId>>, outputs: Vec<ValueId>| Step { name: "neg".into(), op: neg(), inputs, outputs };
        let cases = [
            (SubPlan::new(two(), vec![0, 0], vec![], vec![], vec![0]), "value 0 is defined twice"),
            (SubPlan::new(two(), vec![0], vec![], vec![step(vec![Some(1)], vec![1])], vec![1]), "reads value 1 before"),
            (SubPlan::new(two(), vec![0], vec![], vec![step(vec![Some(0)], vec![7])], vec![0]), "value 7 is out of range"),
            (SubPlan::new(two(), vec![0], vec![], vec![], vec![1]), "output value 1 is not defined"),
            (
                SubPlan::new(
                    vec![("x".into(), f32s(2)), ("y".into(), f32s(3))],
                    vec![0],
                    vec![],
                    vec![step(vec![Some(0)], vec![1])],
                    vec![1],
                ),
                "declared f32[3] but the op makes f32[2]",
            ),
            (
                SubPlan::new(two(), vec![0], vec![(1, Constant(Tensor::scalar(1f32)))], vec![], vec![1]),
                "constant y is f32[], declared f32[2]",
            ),
        ];
        for (result, needle) in cases {
            let err = result.unwrap_err().to_string();
            assert!(err.contains(needle), "{err}");
        }
    }

    /// An If nested `depth` deep in the then-branches of Ifs, on `f32[2]`.
    fn nested(depth: usize) -> SubPlan {
        if depth == 0 {
            return negation();
        }
        let bool1 = TensorType::new(DType::Bool, vec![]);
        let op = If::new(nested(depth - 1), negation()).unwrap();
        let values = vec![("c".into(), bool1.clone()), ("x".into(), f32s(2)), ("y".into(), f32s(2))];
        let c = Constant(Tensor::from_bools(Vec::<usize>::new(), &[true]).unwrap());
        // The inner branches read x as their input; c is a constant here.
        let steps = vec![Step { name: format!("if{depth}"), op: op.into(), inputs: vec![Some(0), Some(1)], outputs: vec![2] }];
        SubPlan::new(values, vec![1], vec![(0, c)], steps, vec![2]).unwrap()
    }

    #[test]
    fn decoding_stops_at_the_nesting_bound_instead_of_the_stack() {
        let x = Tensor::from_vec(vec![2], vec![1f32, -3.0]).unwrap();
        let ok = nested(MAX_DEPTH - 1);
        let bytes = postcard::to_stdvec(&ok).unwrap();
        let decoded: SubPlan = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(decoded, ok);
        assert_eq!(decoded.run(&[x.view()], &"test").unwrap()[0].as_slice::<f32>().unwrap(), [-1.0, 3.0]);
        // One level more is refused (postcard keeps no message).
        let deep = postcard::to_stdvec(&nested(MAX_DEPTH)).unwrap();
        assert!(postcard::from_bytes::<SubPlan>(&deep).is_err());
        // The guard is released after a failed decode.
        assert_eq!(postcard::from_bytes::<SubPlan>(&bytes).unwrap(), ok);
    }

    #[test]
    fn a_constant_of_the_wrong_size_is_refused_when_decoded() {
        let bytes = postcard::to_stdvec(&ConstantBytes { ty: f32s(2), bytes: vec![0; 7] }).unwrap();
        assert!(postcard::from_bytes::<Constant>(&bytes).is_err());
    }
}
