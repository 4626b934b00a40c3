//! Gemm: Y = alpha · A' · B' + beta · C, where A' and B' are A and B, each
//! optionally transposed, and C broadcasts to Y's `[M, N]`.
//!
//! Transposed operands are read through strides; nothing is copied.

use super::gemm_kernel::{gemm_f32, gemm_f64, GemmArgs};
use super::num::{gemm_naive, narrow_into, widen, WrappingArith};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{input, opt_input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gemm {
    pub alpha: f32,
    pub beta: f32,
    /// A is stored `[K, M]`.
    pub trans_a: bool,
    /// B is stored `[N, K]` (the layout of a fully connected layer's weight).
    pub trans_b: bool,
}

impl Default for Gemm {
    fn default() -> Gemm {
        Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: false }
    }
}

/// The sizes and strides of one call.
struct Plan {
    args: GemmArgs,
    /// Row and column strides reading C broadcast to `[M, N]`, when C is used.
    c_strides: Option<(usize, usize)>,
}

impl Gemm {
    fn plan(&self, a: &[usize], b: &[usize], c: Option<&[usize]>) -> Result<Plan> {
        ensure_op!(a.len() == 2 && b.len() == 2, "Gemm: A {a:?} and B {b:?} must be matrices");
        let (m, k) = if self.trans_a { (a[1], a[0]) } else { (a[0], a[1]) };
        let (k2, n) = if self.trans_b { (b[1], b[0]) } else { (b[0], b[1]) };
        ensure_op!(
            k == k2,
            "Gemm: inner dimensions differ (A {a:?}, B {b:?}, trans_a {}, trans_b {})",
            self.trans_a,
            self.trans_b
        );
        let c_strides = match c {
            None => None,
            Some(c) => {
                ensure_op!(c.len() <= 2, "Gemm: C {c:?} has rank above 2");
                let (cm, cn) = match c {
                    [] => (1, 1),
                    [cn] => (1, *cn),
                    [cm, cn] => (*cm, *cn),
                    _ => unreachable!("rank checked"),
                };
                ensure_op!((cm == 1 || cm == m) && (cn == 1 || cn == n), "Gemm: C {c:?} does not broadcast to [{m}, {n}]");
                Some((if cm == 1 { 0 } else { cn }, if cn == 1 { 0 } else { 1 }))
            }
        };
        let args = GemmArgs {
            m,
            k,
            n,
            alpha: self.alpha,
            beta: 0.0,
            rsa: if self.trans_a { 1 } else { k as isize },
            csa: if self.trans_a { m as isize } else { 1 },
            rsb: if self.trans_b { 1 } else { n as isize },
            csb: if self.trans_b { k as isize } else { 1 },
            rsc: n as isize,
            csc: 1,
        };
        Ok(Plan { args, c_strides })
    }
}

impl OpImpl for Gemm {
    fn name(&self) -> &'static str {
        "Gemm"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let a = input(inputs, 0, "Gemm")?;
        let b = input(inputs, 1, "Gemm")?;
        let c = opt_input(inputs, 2);
        ensure_op!(
            matches!(
                a.dtype,
                DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::I32 | DType::I64 | DType::U32 | DType::U64
            ),
            "Gemm: unsupported dtype {}",
            a.dtype
        );
        ensure_op!(b.dtype == a.dtype, "Gemm: B dtype {} differs from A {}", b.dtype, a.dtype);
        if let Some(c) = c {
            ensure_op!(c.dtype == a.dtype, "Gemm: C dtype {} differs from A {}", c.dtype, a.dtype);
        }
        let p = self.plan(&a.shape, &b.shape, c.map(|c| c.shape.as_slice()))?;
        Ok(vec![TensorType::new(a.dtype, vec![p.args.m, p.args.n])])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let a = input(inputs, 0, "Gemm")?;
        let b = input(inputs, 1, "Gemm")?;
        let c = opt_input(inputs, 2);
        let plan = self.plan(a.shape, b.shape, c.map(|c| c.shape))?;
        let out = &mut outputs[0];
        match a.dtype {
            DType::F32 => {
                let c = c.map(|c| c.as_slice::<f32>()).transpose()?;
                self.float(&plan, a.as_slice()?, b.as_slice()?, c, out.as_mut_slice()?, gemm_f32)
            }
            DType::F64 => {
                let c = c.map(|c| c.as_slice::<f64>()).transpose()?;
                self.float(&plan, a.as_slice()?, b.as_slice()?, c, out.as_mut_slice()?, gemm_f64)
            }
            DType::F16 | DType::BF16 => {
                let (af, bf) = (widen(&a)?, widen(&b)?);
                let cf = c.map(|c| widen(&c)).transpose()?;
                let mut yf = vec![0f32; out.len()];
                self.float(&plan, &af, &bf, cf.as_deref(), &mut yf, gemm_f32);
                narrow_into(out, &yf)?;
            }
            DType::I32 => self.int::<i32>(&plan, &a, &b, c, out)?,
            DType::I64 => self.int::<i64>(&plan, &a, &b, c, out)?,
            DType::U32 => self.int::<u32>(&plan, &a, &b, c, out)?,
            DType::U64 => self.int::<u64>(&plan, &a, &b, c, out)?,
            d => bail_op!("Gemm: unsupported dtype {d}"),
        }
        Ok(())
    }
}

/// Writes `scale · C` broadcast into `y` (`[M, N]`).
fn fill_broadcast<T: Copy>(y: &mut [T], n: usize, c: &[T], (rs, cs): (usize, usize), scale: impl Fn(T) -> T) {
    for (i, row) in y.chunks_exact_mut(n.max(1)).enumerate() {
        for (j, o) in row.iter_mut().enumerate() {
            *o = scale(c[i * rs + j * cs]);
        }
    }
}

impl Gemm {
    fn float<T: Element + std::ops::Mul<Output = T>>(
        &self,
        plan: &Plan,
        a: &[T],
        b: &[T],
        c: Option<&[T]>,
        y: &mut [T],
        gemm: fn(&GemmArgs, &[T], &[T], &mut [T]),
    ) {
        let mut args = plan.args;
        if let (Some(c), Some(cs)) = (c, plan.c_strides) {
            if self.beta != 0.0 {
                let beta = T::from_f64(self.beta as f64);
                fill_broadcast(y, args.n, c, cs, |v| v * beta);
                args.beta = 1.0;
            }
        }
        gemm(&args, a, b, y);
    }

    fn int<T: Element + Default + WrappingArith>(
        &self,
        plan: &Plan,
        a: &TensorView<'_>,
        b: &TensorView<'_>,
        c: Option<TensorView<'_>>,
        out: &mut TensorViewMut<'_>,
    ) -> Result<()> {
        let y = out.as_mut_slice::<T>()?;
        gemm_naive(&plan.args, a.as_slice::<T>()?, b.as_slice::<T>()?, y);
        if self.alpha != 1.0 {
            let alpha = T::from_f64(self.alpha as f64);
            y.iter_mut().for_each(|v| *v = v.wmul(alpha));
        }
        if let (Some(c), Some(cs)) = (c, plan.c_strides) {
            let beta = T::from_f64(self.beta as f64);
            let c = c.as_slice::<T>()?;
            for (i, row) in y.chunks_exact_mut(plan.args.n.max(1)).enumerate() {
                for (j, o) in row.iter_mut().enumerate() {
                    *o = o.wadd(c[i * cs.0 + j * cs.1].wmul(beta));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn transposed_b_with_row_bias() {
        // A [2,3], B stored [N=2, K=3].
        let a = Tensor::from_vec(vec![2, 3], vec![1f32, 2., 3., 4., 5., 6.]).unwrap();
        let b = Tensor::from_vec(vec![2, 3], vec![1f32, 0., 0., 0., 1., 1.]).unwrap();
        let c = Tensor::from_vec(vec![2], vec![10f32, 20.]).unwrap();
        let op: Op = Gemm { alpha: 2.0, beta: 0.5, trans_a: false, trans_b: true }.into();
        let y = op.eval_owned(&[Some(&a), Some(&b), Some(&c)]).unwrap().remove(0);
        assert_eq!(y.shape(), &[2, 2]);
        assert_eq!(y.as_slice::<f32>().unwrap(), &[7., 20., 13., 32.]);
    }

    #[test]
    fn transposed_a_integer_with_column_bias() {
        // A stored [K=2, M=2].
        let a = Tensor::from_vec(vec![2, 2], vec![1i64, 2, 3, 4]).unwrap();
        let b = Tensor::from_vec(vec![2, 1], vec![1i64, 1]).unwrap();
        let c = Tensor::from_vec(vec![2, 1], vec![100i64, 200]).unwrap();
        let op: Op = Gemm { trans_a: true, ..Gemm::default() }.into();
        let y = op.eval_owned(&[Some(&a), Some(&b), Some(&c)]).unwrap().remove(0);
        assert_eq!(y.as_slice::<i64>().unwrap(), &[104, 206]);
    }
}
