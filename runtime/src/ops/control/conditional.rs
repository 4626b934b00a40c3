//! If: runs one of two sub-plans, chosen by a boolean computed at run time.

use super::subplan::SubPlan;
use crate::dtype::DType;
use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{Tensor, TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

/// Inputs: the condition (one bool), then the outer-scope values both
/// branches read (each branch's inputs, in that order). Outputs: the taken
/// branch's, whose types `infer` gives by inferring both branches at the
/// input types. When the branches' outputs differ in shape (or a branch
/// holds a layer sized by the data) the op's outputs are sized by the
/// data: `infer` gives the larger of each pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct If {
    // Boxed: an op is stored inline in every layer.
    pub then_branch: Box<SubPlan>,
    pub else_branch: Box<SubPlan>,
}

impl If {
    /// Checks that the branches take the same inputs and make outputs of
    /// the same count and element types.
    pub fn new(then_branch: SubPlan, else_branch: SubPlan) -> Result<If> {
        let op = If { then_branch: Box::new(then_branch), else_branch: Box::new(else_branch) };
        op.check()?;
        Ok(op)
    }

    fn check(&self) -> Result<()> {
        let (t, e) = (&self.then_branch, &self.else_branch);
        ensure_op!(t.inputs.len() == e.inputs.len(), "If: its branches take {} and {} inputs", t.inputs.len(), e.inputs.len());
        ensure_op!(
            t.outputs.len() == e.outputs.len(),
            "If: its branches make {} and {} outputs",
            t.outputs.len(),
            e.outputs.len()
        );
        for (k, (a, b)) in t.input_types().zip(e.input_types()).enumerate() {
            ensure_op!(a == b, "If: input {} is {a} in then_branch but {b} in else_branch", k + 1);
        }
        for (k, (a, b)) in t.output_types().zip(e.output_types()).enumerate() {
            ensure_op!(a.dtype == b.dtype, "If: output {k} is {} in then_branch but {} in else_branch", a.dtype, b.dtype);
        }
        Ok(())
    }

    fn condition(&self, cond: TensorView<'_>) -> Result<bool> {
        ensure_op!(cond.dtype == DType::Bool && cond.len() == 1, "If: the condition must be one bool, got {}", cond.ty());
        Ok(cond.bytes[0] != 0)
    }

    fn taken<'a>(&self, inputs: &[Option<TensorView<'a>>]) -> Result<(&SubPlan, &'static str, Vec<TensorView<'a>>)> {
        let taken = self.condition(input(inputs, 0, "If")?)?;
        let captured = inputs[1..].iter().map(|v| v.ok_or_else(|| crate::Error::op("If: an outer-scope input is absent")));
        let captured = captured.collect::<Result<Vec<_>>>()?;
        Ok(if taken { (&self.then_branch, "then_branch", captured) } else { (&self.else_branch, "else_branch", captured) })
    }
}

impl OpImpl for If {
    fn name(&self) -> &'static str {
        "If"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        self.check()?;
        let cond = input(inputs, 0, "If")?;
        ensure_op!(cond.dtype == DType::Bool && cond.len() == 1, "If: the condition must be one bool, got {cond}");
        let captured = &inputs[1..];
        ensure_op!(
            captured.len() == self.then_branch.inputs.len(),
            "If: its branches read {} outer-scope values, {} given",
            self.then_branch.inputs.len(),
            captured.len()
        );
        let captured = captured
            .iter()
            .enumerate()
            .map(|(k, t)| t.ok_or_else(|| crate::Error::op(format!("If: outer-scope input {} is absent", k + 1))))
            .collect::<Result<Vec<_>>>()?;
        // Each branch's outputs at these input types; where they differ
        // (the op is then sized by the data), the larger is the room.
        let then_types = self.then_branch.infer(&captured).map_err(|e| crate::Error::op(format!("If: then_branch: {e}")))?;
        let else_types = self.else_branch.infer(&captured).map_err(|e| crate::Error::op(format!("If: else_branch: {e}")))?;
        Ok(then_types.into_iter().zip(else_types).map(|(a, b)| if b.bytes() > a.bytes() { b } else { a }).collect())
    }

    fn data_dependent(&self) -> bool {
        self.then_branch.output_types().ne(self.else_branch.output_types())
            || self.then_branch.data_sized()
            || self.else_branch.data_sized()
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let (branch, what, captured) = self.taken(inputs)?;
        let results = branch.run(&captured, &what)?;
        super::subplan::copy_results(outputs, &results, &format!("If: {what}"))
    }

    fn eval_unbounded(&self, inputs: &[Option<TensorView<'_>>]) -> Option<Result<Vec<Tensor>>> {
        if !self.data_dependent() {
            return None;
        }
        Some(self.taken(inputs).and_then(|(branch, what, captured)| branch.run(&captured, &what)))
    }
}
