//! A Conv, Gemm or MatMul (+ bias) with a fused epilogue (residual add and
//! activation). Inputs: `[x, weight, bias?, residual?]`; MatMul's bias is
//! broadcast along the last axis like the Add it replaces.

use super::epilogue::Epilogue;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::elementwise::{Binary, BinaryKind};
use crate::ops::linalg::{Conv, Gemm, MatMul};
use crate::ops::{input, opt_input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

/// The product a [`Linear`] layer computes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum LinearKind {
    Conv(Conv),
    Gemm(Gemm),
    MatMul(MatMul),
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Linear {
    pub kind: LinearKind,
    /// Whether input 2 is a bias.
    pub bias: bool,
    pub epilogue: Epilogue,
}

impl Linear {
    fn product(&self) -> &dyn OpImpl {
        match &self.kind {
            LinearKind::Conv(c) => c,
            LinearKind::Gemm(g) => g,
            LinearKind::MatMul(m) => m,
        }
    }

    /// The inputs the product itself reads (Conv and Gemm take the bias).
    fn product_inputs<T: Copy>(&self, inputs: &[Option<T>]) -> Vec<Option<T>> {
        match self.kind {
            LinearKind::Conv(_) | LinearKind::Gemm(_) => {
                vec![
                    inputs.first().copied().flatten(),
                    inputs.get(1).copied().flatten(),
                    if self.bias { opt_input(inputs, 2) } else { None },
                ]
            }
            LinearKind::MatMul(_) => vec![inputs.first().copied().flatten(), inputs.get(1).copied().flatten()],
        }
    }
}

impl OpImpl for Linear {
    fn name(&self) -> &'static str {
        match self.kind {
            LinearKind::Conv(_) => "FusedConv",
            LinearKind::Gemm(_) => "FusedGemm",
            LinearKind::MatMul(_) => "FusedMatMul",
        }
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let out = self.product().infer(&self.product_inputs(inputs))?;
        ensure_op!(out.len() == 1 && out[0].dtype == DType::F32, "{}: only f32 is fused", self.name());
        let out = out.into_iter().next().unwrap();
        if let LinearKind::MatMul(_) = self.kind {
            if self.bias {
                let b = input(inputs, 2, self.name())?;
                // The bias must broadcast into the output without growing it.
                let t = Binary::new(BinaryKind::Add).infer(&[Some(&out), Some(b)])?;
                ensure_op!(t[0] == out, "{}: bias {b} does not broadcast into {out}", self.name());
            }
        }
        if self.epilogue.residual {
            let r = input(inputs, 3, self.name())?;
            ensure_op!(r == &out, "{}: residual {r} must be {out}", self.name());
        }
        ensure_op!(inputs.len() <= 4, "{}: too many inputs", self.name());
        Ok(vec![out])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let residual = if self.epilogue.residual { Some(input(inputs, 3, self.name())?.as_slice::<f32>()?) } else { None };
        if let LinearKind::Conv(conv) = &self.kind {
            // The convolution applies the epilogue to each finished run of
            // outputs while it is in cache. The mode is read here, on the
            // run's thread, not on the workers.
            let math = crate::math::mode();
            let epilogue = &self.epilogue;
            let finish = |start: usize, run: &mut [f32]| {
                epilogue.apply_block(math, run, residual.map(|r| &r[start..start + run.len()]));
            };
            let finish: &(dyn Fn(usize, &mut [f32]) + Sync) = if epilogue.is_empty() { &|_, _| {} } else { &finish };
            return conv.eval_then(&self.product_inputs(inputs), outputs, finish);
        }
        self.product().eval(&self.product_inputs(inputs), outputs)?;
        let out = &mut outputs[0];
        if let (LinearKind::MatMul(_), true) = (&self.kind, self.bias) {
            let b = input(inputs, 2, self.name())?;
            add_broadcast_bias(out, b)?;
        }
        let o = out.as_mut_slice::<f32>()?;
        self.epilogue.apply(o, residual);
        Ok(())
    }
}

/// `out += bias` with numpy broadcasting, as the unfused Add computes it.
fn add_broadcast_bias(out: &mut TensorViewMut<'_>, b: TensorView<'_>) -> Result<()> {
    let shape = out.shape.to_vec();
    let bv = b.as_slice::<f32>()?;
    let o = out.as_mut_slice::<f32>()?;
    let n = *shape.last().unwrap_or(&1);
    if bv.len() == n && b.shape.iter().rev().skip(1).all(|&d| d == 1) && n > 0 {
        for row in o.chunks_mut(n) {
            for (v, &x) in row.iter_mut().zip(bv) {
                *v += x;
            }
        }
        return Ok(());
    }
    if bv.len() == 1 {
        for v in o.iter_mut() {
            *v += bv[0];
        }
        return Ok(());
    }
    let strides = crate::ops::util::broadcast_strides(b.shape, &shape);
    let map = crate::ops::util::broadcast_index_map(&strides, &shape);
    if map.iter().any(|&i| i >= bv.len()) {
        bail_op!("bias does not broadcast");
    }
    for (v, &i) in o.iter_mut().zip(&map) {
        *v += bv[i];
    }
    Ok(())
}
