//! Loop: runs a body sub-plan while a trip count and a condition computed
//! at run time allow, passing loop-carried values from one iteration to
//! the next and stacking the scan outputs of every iteration.

use super::subplan::SubPlan;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{opt_input, OpImpl};
use crate::tensor::{Tensor, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

/// The most iterations a Loop may run: a loop whose trip count and
/// condition never stop it is an error, not a hang.
pub const MAX_ITERATIONS: u64 = 1 << 20;

/// The most bytes a Loop's scan outputs may hold together: a loop that
/// would stack more is an error, not the process killed for its memory.
pub const MAX_SCAN_BYTES: usize = 1 << 32;

/// Inputs: the trip count M (optional, one int64), the condition
/// (optional, one bool), the `carried` initial values, then the
/// outer-scope values the body reads. The body takes the iteration number,
/// the condition, the carried values and the outer-scope values, and makes
/// the next condition, the next carried values and one value per scan
/// output. Outputs: the final carried values, then each scan output's
/// values stacked along a new first axis.
///
/// The loop runs while `i < M` (when M is given) and the condition holds:
/// the input's (true when absent) before the first iteration, then the
/// body's (as onnxruntime does, though the ONNX spec says to ignore the
/// body's when the input is absent). A loop that neither ends is stopped
/// at [`MAX_ITERATIONS`] with an error.
/// With scan outputs, or carried values whose shape the body changes, the
/// outputs are sized by the data: `infer` gives `nominal_trips` iterations'
/// room (the executor keeps larger results on the heap).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Loop {
    // Boxed: an op is stored inline in every layer.
    pub body: Box<SubPlan>,
    /// Loop-carried values.
    pub carried: usize,
    /// The iterations the room of scan outputs is planned for.
    pub nominal_trips: usize,
}

impl Loop {
    pub fn new(body: SubPlan, carried: usize, nominal_trips: usize) -> Result<Loop> {
        let op = Loop { body: Box::new(body), carried, nominal_trips };
        op.check()?;
        Ok(op)
    }

    fn check(&self) -> Result<()> {
        let b = &self.body;
        ensure_op!(
            b.inputs.len() >= 2 + self.carried && b.outputs.len() > self.carried,
            "Loop: a body with {} inputs and {} outputs cannot carry {} values",
            b.inputs.len(),
            b.outputs.len(),
            self.carried
        );
        let ins: Vec<&TensorType> = b.input_types().collect();
        let outs: Vec<&TensorType> = b.output_types().collect();
        ensure_op!(ins[0].dtype == DType::I64 && ins[0].len() == 1, "Loop: the body's iteration number is {}", ins[0]);
        ensure_op!(ins[1].dtype == DType::Bool && ins[1].len() == 1, "Loop: the body's condition input is {}", ins[1]);
        ensure_op!(outs[0].dtype == DType::Bool && outs[0].len() == 1, "Loop: the body's condition output is {}", outs[0]);
        for k in 0..self.carried {
            let (a, b) = (ins[2 + k], outs[1 + k]);
            ensure_op!(a.dtype == b.dtype, "Loop: carried value {k} enters the body as {a} and leaves it as {b}");
        }
        Ok(())
    }

    fn scans(&self) -> usize {
        self.body.outputs.len() - 1 - self.carried
    }

    /// Runs the loop; returns the final carried values and the stacked
    /// scan outputs.
    fn run(&self, inputs: &[Option<TensorView<'_>>]) -> Result<Vec<Tensor>> {
        let trips = match opt_input(inputs, 0) {
            Some(m) => {
                ensure_op!(m.dtype == DType::I64 && m.len() == 1, "Loop: the trip count must be one int64, got {}", m.ty());
                Some(m.as_slice::<i64>()?[0].max(0) as u64)
            }
            None => None,
        };
        let mut cond = match opt_input(inputs, 1) {
            Some(c) => {
                ensure_op!(c.dtype == DType::Bool && c.len() == 1, "Loop: the condition must be one bool, got {}", c.ty());
                c.bytes[0] != 0
            }
            None => true,
        };
        let given =
            |k: usize| inputs.get(k).copied().flatten().ok_or_else(|| crate::Error::op(format!("Loop: input {k} is absent")));
        let mut carried: Vec<Tensor> = (0..self.carried).map(|k| given(2 + k).map(|v| v.to_owned())).collect::<Result<_>>()?;
        let captured: Vec<TensorView> = (2 + self.carried..inputs.len()).map(given).collect::<Result<_>>()?;
        let declared: Vec<&TensorType> = self.body.input_types().collect();
        let mut scanned: Vec<Vec<Tensor>> = vec![Vec::new(); self.scans()];
        let mut scan_bytes = 0usize;
        let mut i: u64 = 0;
        while trips.is_none_or(|m| i < m) && cond {
            if i >= MAX_ITERATIONS {
                bail_op!("Loop: {MAX_ITERATIONS} iterations without its trip count or condition ending it");
            }
            let iteration = Tensor::from_vec(declared[0].shape.clone(), vec![i as i64])?;
            let cond_in = Tensor::from_bools(declared[1].shape.clone(), &[cond])?;
            let mut body_in: Vec<TensorView> = vec![iteration.view(), cond_in.view()];
            body_in.extend(carried.iter().map(Tensor::view));
            body_in.extend(captured.iter().copied());
            let mut out = self.body.run(&body_in, &format_args!("body, iteration {i}"))?.into_iter();
            drop(body_in);
            let next_cond = out.next().expect("validated: the body makes a condition");
            ensure_op!(
                next_cond.dtype() == DType::Bool && next_cond.len() == 1,
                "Loop: the body's condition is {}",
                next_cond.ty()
            );
            cond = next_cond.bytes()[0] != 0;
            carried = out.by_ref().take(self.carried).collect();
            for (s, t) in scanned.iter_mut().zip(out) {
                scan_bytes = scan_bytes.saturating_add(t.bytes().len());
                s.push(t);
            }
            if scan_bytes > MAX_SCAN_BYTES {
                bail_op!("Loop: its scan outputs would hold more than {MAX_SCAN_BYTES} bytes (after {} iterations)", i + 1);
            }
            i += 1;
        }
        let mut outputs = carried;
        for (k, steps) in scanned.into_iter().enumerate() {
            outputs.push(self.stack(k, &steps)?);
        }
        Ok(outputs)
    }

    /// Scan output `k`'s values of every iteration along a new first axis.
    fn stack(&self, k: usize, steps: &[Tensor]) -> Result<Tensor> {
        let declared = self.body.output_types().nth(1 + self.carried + k).expect("validated");
        super::scan::stack_steps(steps, declared, steps.len(), 0, false)
            .map_err(|e| crate::Error::op(format!("Loop: scan output {k}: {e}")))
    }
}

impl OpImpl for Loop {
    fn name(&self) -> &'static str {
        "Loop"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        self.check()?;
        if let Some(m) = opt_input(inputs, 0) {
            ensure_op!(m.dtype == DType::I64 && m.len() == 1, "Loop: the trip count must be one int64, got {m}");
        }
        if let Some(c) = opt_input(inputs, 1) {
            ensure_op!(c.dtype == DType::Bool && c.len() == 1, "Loop: the condition must be one bool, got {c}");
        }
        let declared = self.body.inputs.len();
        ensure_op!(
            inputs.len() == declared,
            "Loop: its body takes {} values after the trip count and condition, {} given",
            declared - 2,
            inputs.len().saturating_sub(2)
        );
        // The body at these types: the iteration number and condition as
        // it declares them, then the carried and outer-scope values given.
        let mut body_in: Vec<&TensorType> = self.body.input_types().take(2).collect();
        for (k, t) in inputs.iter().enumerate().skip(2) {
            body_in.push(t.ok_or_else(|| crate::Error::op(format!("Loop: input {k} is absent")))?);
        }
        let outs = self.body.infer(&body_in).map_err(|e| crate::Error::op(format!("Loop: body: {e}")))?;
        let mut types = Vec::with_capacity(outs.len() - 1);
        for k in 0..self.carried {
            let (first, later) = (body_in[2 + k], &outs[1 + k]);
            types.push(if later.bytes() > first.bytes() { later.clone() } else { first.clone() });
        }
        for each in &outs[1 + self.carried..] {
            let mut shape = vec![self.nominal_trips];
            shape.extend_from_slice(&each.shape);
            types.push(TensorType::new(each.dtype, shape));
        }
        Ok(types)
    }

    fn data_dependent(&self) -> bool {
        let ins = self.body.input_types().skip(2).take(self.carried);
        let outs = self.body.output_types().skip(1).take(self.carried);
        self.scans() > 0 || ins.ne(outs) || self.body.data_sized()
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let results = self.run(inputs)?;
        super::subplan::copy_results(outputs, &results, "Loop")
    }

    fn eval_unbounded(&self, inputs: &[Option<TensorView<'_>>]) -> Option<Result<Vec<Tensor>>> {
        self.data_dependent().then(|| self.run(inputs))
    }
}
