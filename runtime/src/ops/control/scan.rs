//! Scan: runs a body sub-plan once per element of its scan inputs along
//! their scan axes, passing state from one step to the next and stacking
//! each step's scan outputs along their axes. The importer unrolls a Scan
//! whose sequence is short enough; this op runs the others (a sequence
//! longer than the importer unrolls, or one whose length follows a
//! profile's shapes).

use super::subplan::SubPlan;
use crate::error::Result;
use crate::ops::OpImpl;
use crate::tensor::{Tensor, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

/// Inputs: the `states` initial states, the `scan_inputs` sequences, then
/// the outer-scope values the body reads. The body takes the states, one
/// element of each sequence (its scan axis removed) and the outer-scope
/// values, and makes the next states and one value per scan output.
/// Outputs: the final states, then each scan output's values stacked along
/// its axis. A reversed input is read from its last element, a reversed
/// output filled from its last position. The sequence length comes from
/// the inputs' shapes, so `infer` gives every output's type.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scan {
    // Boxed: an op is stored inline in every layer.
    pub body: Box<SubPlan>,
    pub states: usize,
    pub scan_inputs: usize,
    /// Per scan input: its scan axis and whether it is read in reverse.
    pub input_axes: Vec<usize>,
    pub input_reverse: Vec<bool>,
    /// Per scan output: the axis its steps are stacked along, and whether
    /// in reverse.
    pub output_axes: Vec<usize>,
    pub output_reverse: Vec<bool>,
}

/// `[outer, len, inner]`: the sizes before an axis, along it and after it.
fn split(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (shape[..axis].iter().product(), shape[axis], shape[axis + 1..].iter().product())
}

impl Scan {
    fn check(&self) -> Result<()> {
        let (n, m) = (self.states, self.scan_inputs);
        let b = &self.body;
        ensure_op!(
            m >= 1 && self.input_axes.len() == m && self.input_reverse.len() == m,
            "Scan: {m} scan inputs with {} axes",
            self.input_axes.len()
        );
        ensure_op!(
            b.inputs.len() >= n + m && b.outputs.len() >= n,
            "Scan: a body of {} inputs and {} outputs",
            b.inputs.len(),
            b.outputs.len()
        );
        let k = b.outputs.len() - n;
        ensure_op!(
            self.output_axes.len() == k && self.output_reverse.len() == k,
            "Scan: {k} scan outputs with {} axes",
            self.output_axes.len()
        );
        Ok(())
    }

    /// The sequence length, from the scan inputs' types.
    fn length(&self, scans: &[&TensorType]) -> Result<usize> {
        let mut len = None;
        for (j, (t, &a)) in scans.iter().zip(&self.input_axes).enumerate() {
            ensure_op!(a < t.shape.len(), "Scan: scan input {j} ({t}) has no axis {a}");
            let l = t.shape[a];
            ensure_op!(
                len.is_none_or(|len| len == l),
                "Scan: scan input {j} is {l} long along its axis, another {}",
                len.unwrap_or(0)
            );
            len = Some(l);
        }
        Ok(len.unwrap_or(0))
    }

    /// The body's input types: the states, each scan input without its
    /// axis, the outer-scope values.
    fn body_inputs(&self, inputs: &[&TensorType]) -> Vec<TensorType> {
        let (n, m) = (self.states, self.scan_inputs);
        let mut v: Vec<TensorType> = inputs[..n].iter().map(|&t| t.clone()).collect();
        for (t, &a) in inputs[n..n + m].iter().zip(&self.input_axes) {
            let mut shape = t.shape.clone();
            shape.remove(a);
            v.push(TensorType::new(t.dtype, shape));
        }
        v.extend(inputs[n + m..].iter().map(|&t| t.clone()));
        v
    }

    fn run(&self, inputs: &[Option<TensorView<'_>>]) -> Result<Vec<Tensor>> {
        let given: Vec<TensorView> = inputs
            .iter()
            .enumerate()
            .map(|(k, v)| v.ok_or_else(|| crate::Error::op(format!("Scan: input {k} is absent"))))
            .collect::<Result<_>>()?;
        let (n, m) = (self.states, self.scan_inputs);
        let types: Vec<TensorType> = given.iter().map(|v| v.ty()).collect();
        let len = self.length(&types[n..n + m].iter().collect::<Vec<_>>())?;
        let mut states: Vec<Tensor> = given[..n].iter().map(|v| v.to_owned()).collect();
        let k = self.output_axes.len();
        let mut steps: Vec<Vec<Tensor>> = vec![Vec::with_capacity(len); k];
        let mut slices: Vec<Tensor> = Vec::with_capacity(m);
        for t in 0..len {
            slices.clear();
            for (j, x) in given[n..n + m].iter().enumerate() {
                let a = self.input_axes[j];
                let at = if self.input_reverse[j] { len - 1 - t } else { t };
                let (outer, l, inner) = split(x.shape, a);
                let mut shape = x.shape.to_vec();
                shape.remove(a);
                let mut s = Tensor::zeros(TensorType::new(x.dtype, shape))?;
                let e = x.dtype.size();
                let row = inner * e;
                for o in 0..outer {
                    s.bytes_mut()[o * row..][..row].copy_from_slice(&x.bytes[(o * l + at) * row..][..row]);
                }
                slices.push(s);
            }
            let mut body_in: Vec<TensorView> = states.iter().map(Tensor::view).collect();
            body_in.extend(slices.iter().map(Tensor::view));
            body_in.extend(given[n + m..].iter().copied());
            let mut out = self.body.run(&body_in, &format_args!("body, step {t}"))?.into_iter();
            drop(body_in);
            states = out.by_ref().take(n).collect();
            for (s, v) in steps.iter_mut().zip(out) {
                s.push(v);
            }
        }
        let mut outputs = states;
        for (s, each) in steps.iter().enumerate() {
            outputs.push(self.stack(s, each, len)?);
        }
        Ok(outputs)
    }

    /// Scan output `s`'s steps stacked along its axis.
    fn stack(&self, s: usize, steps: &[Tensor], len: usize) -> Result<Tensor> {
        let declared = self.body.output_types().nth(self.states + s).expect("checked");
        stack_steps(steps, declared, len, self.output_axes[s], self.output_reverse[s])
            .map_err(|e| crate::Error::op(format!("Scan: scan output {s}: {e}")))
    }
}

/// One value per step (all of one type; `declared` when there is none)
/// stacked along a new axis `axis` of size `len`, the last step first when
/// `reverse` (a Scan's and a Loop's scan outputs).
pub(super) fn stack_steps(steps: &[Tensor], declared: &TensorType, len: usize, axis: usize, reverse: bool) -> Result<Tensor> {
    let each = steps.first().map_or(declared, |t| t.ty()).clone();
    if let Some((i, t)) = steps.iter().enumerate().find(|(_, t)| t.ty() != &each) {
        bail_op!("it is {each} at step 0 but {} at step {i}", t.ty());
    }
    ensure_op!(axis <= each.shape.len(), "{each} has no axis {axis} to stack along");
    let mut shape = each.shape.clone();
    shape.insert(axis, len);
    let mut out = Tensor::zeros(TensorType::new(each.dtype, shape.clone()))?;
    let (outer, _, inner) = split(&shape, axis);
    let row = inner * each.dtype.size();
    for (t, step) in steps.iter().enumerate() {
        let at = if reverse { len - 1 - t } else { t };
        for o in 0..outer {
            out.bytes_mut()[(o * len + at) * row..][..row].copy_from_slice(&step.bytes()[o * row..][..row]);
        }
    }
    Ok(out)
}

impl OpImpl for Scan {
    fn name(&self) -> &'static str {
        "Scan"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        self.check()?;
        let (n, m) = (self.states, self.scan_inputs);
        let given: Vec<&TensorType> = inputs
            .iter()
            .enumerate()
            .map(|(k, t)| t.ok_or_else(|| crate::Error::op(format!("Scan: input {k} is absent"))))
            .collect::<Result<_>>()?;
        ensure_op!(
            given.len() == self.body.inputs.len(),
            "Scan: its body takes {} inputs, {} given",
            self.body.inputs.len(),
            given.len()
        );
        let len = self.length(&given[n..n + m])?;
        let body_in = self.body_inputs(&given);
        let outs =
            self.body.infer(&body_in.iter().collect::<Vec<_>>()).map_err(|e| crate::Error::op(format!("Scan: body: {e}")))?;
        let mut types: Vec<TensorType> = outs[..n].to_vec();
        for (k, (&a, t)) in self.output_axes.iter().zip(&outs[n..]).enumerate() {
            ensure_op!(a <= t.shape.len(), "Scan: scan output {k} ({t}) has no axis {a} to stack along");
            let mut shape = t.shape.clone();
            shape.insert(a, len);
            types.push(TensorType::new(t.dtype, shape));
        }
        Ok(types)
    }

    fn data_dependent(&self) -> bool {
        self.body.data_sized()
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let results = self.run(inputs)?;
        super::subplan::copy_results(outputs, &results, "Scan")
    }

    fn eval_unbounded(&self, inputs: &[Option<TensorView<'_>>]) -> Option<Result<Vec<Tensor>>> {
        self.data_dependent().then(|| self.run(inputs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::ops::control::Step;
    use crate::ops::elementwise::{Binary, BinaryKind};
    use crate::ops::Op;

    /// `s' = s + x_t`, scanning `x` along `axis`; the scan output is `s'`.
    fn running_sum(axis: usize, reverse_in: bool, reverse_out: bool, out_axis: usize) -> Scan {
        let row = TensorType::new(DType::F32, vec![2]);
        let values = vec![("s".into(), row.clone()), ("x".into(), row.clone()), ("s2".into(), row)];
        let add: Op = Binary::new(BinaryKind::Add).into();
        let steps = vec![Step { name: "add".into(), op: add, inputs: vec![Some(0), Some(1)], outputs: vec![2] }];
        let body = SubPlan::new(values, vec![0, 1], vec![], steps, vec![2, 2]).unwrap();
        Scan {
            body: Box::new(body),
            states: 1,
            scan_inputs: 1,
            input_axes: vec![axis],
            input_reverse: vec![reverse_in],
            output_axes: vec![out_axis],
            output_reverse: vec![reverse_out],
        }
    }

    #[test]
    fn scans_along_any_axis_in_either_direction() {
        let s0 = Tensor::from_vec(vec![2], vec![0.5f32, 0.5]).unwrap();
        // x[3, 2]: rows 1 2, 3 4, 5 6.
        let x = Tensor::from_vec(vec![3, 2], vec![1f32, 2., 3., 4., 5., 6.]).unwrap();
        let op: Op = running_sum(0, false, false, 0).into();
        let out = op.eval_owned(&[Some(&s0), Some(&x)]).unwrap();
        assert_eq!(out[0].as_slice::<f32>().unwrap(), [9.5, 12.5]);
        assert_eq!(out[1].shape(), [3, 2]);
        assert_eq!(out[1].as_slice::<f32>().unwrap(), [1.5, 2.5, 4.5, 6.5, 9.5, 12.5]);
        // Read in reverse, stacked in reverse, along axis 1.
        let op: Op = running_sum(0, true, true, 1).into();
        let out = op.eval_owned(&[Some(&s0), Some(&x)]).unwrap();
        assert_eq!(out[1].shape(), [2, 3]);
        // Steps: 5.5 6.5, 8.5 10.5, 9.5 12.5; reversed along axis 1.
        assert_eq!(out[1].as_slice::<f32>().unwrap(), [9.5, 8.5, 5.5, 12.5, 10.5, 6.5]);
        // The transposed sequence scanned along axis 1 gives the same.
        let xt = Tensor::from_vec(vec![2, 3], vec![1f32, 3., 5., 2., 4., 6.]).unwrap();
        let op: Op = running_sum(1, false, false, 0).into();
        let out = op.eval_owned(&[Some(&s0), Some(&xt)]).unwrap();
        assert_eq!(out[0].as_slice::<f32>().unwrap(), [9.5, 12.5]);
        // A sequence of length 0 keeps the state and stacks nothing.
        let empty = Tensor::zeros(TensorType::new(DType::F32, vec![0, 2])).unwrap();
        let op: Op = running_sum(0, false, false, 0).into();
        let out = op.eval_owned(&[Some(&s0), Some(&empty)]).unwrap();
        assert_eq!((out[0].as_slice::<f32>().unwrap(), out[1].shape()), (&[0.5f32, 0.5][..], &[0usize, 2][..]));
        // Sequences of different lengths are refused.
        let op = running_sum(0, false, false, 0);
        let mut two = op.clone();
        two.scan_inputs = 2;
        assert!(two.infer(&[Some(s0.ty()), Some(x.ty()), Some(xt.ty())]).is_err());
    }
}
