//! MatMul with numpy semantics: batched, batch dimensions broadcast, 1-D
//! operands promoted and the added dimension removed from the result.

use super::gemm_kernel::{gemm_f32, gemm_f64, GemmArgs};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::util::{broadcast_index_map, broadcast_shapes, broadcast_strides};
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MatMul {}

/// Shapes of a MatMul after promoting 1-D operands.
pub(crate) struct Dims {
    pub batch: Vec<usize>,
    pub a_batch: Vec<usize>,
    pub b_batch: Vec<usize>,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub out: Vec<usize>,
}

pub(crate) fn dims(a: &[usize], b: &[usize]) -> Result<Dims> {
    ensure_op!(!a.is_empty() && !b.is_empty(), "MatMul: scalar operands are not allowed");
    let a2: Vec<usize> = if a.len() == 1 { vec![1, a[0]] } else { a.to_vec() };
    let b2: Vec<usize> = if b.len() == 1 { vec![b[0], 1] } else { b.to_vec() };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (k2, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    ensure_op!(k == k2, "MatMul: inner dimensions differ ({a:?} x {b:?})");
    let a_batch = a2[..a2.len() - 2].to_vec();
    let b_batch = b2[..b2.len() - 2].to_vec();
    let batch = broadcast_shapes(&[&a_batch, &b_batch])?;
    let mut out = batch.clone();
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(n);
    }
    Ok(Dims { batch, a_batch, b_batch, m, k, n, out })
}

impl OpImpl for MatMul {
    fn name(&self) -> &'static str {
        "MatMul"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let a = input(inputs, 0, "MatMul")?;
        let b = input(inputs, 1, "MatMul")?;
        ensure_op!(a.dtype == b.dtype, "MatMul: dtypes differ ({} and {})", a.dtype, b.dtype);
        ensure_op!(a.dtype != DType::Bool, "MatMul: bool is not supported");
        let d = dims(&a.shape, &b.shape)?;
        Ok(vec![TensorType::new(a.dtype, d.out)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let a = input(inputs, 0, "MatMul")?;
        let b = input(inputs, 1, "MatMul")?;
        let d = dims(a.shape, b.shape)?;
        let out = &mut outputs[0];
        match a.dtype {
            DType::F32 => batched(&d, a.as_slice()?, b.as_slice()?, out.as_mut_slice()?, gemm_f32),
            DType::F64 => batched(&d, a.as_slice()?, b.as_slice()?, out.as_mut_slice()?, gemm_f64),
            DType::I32 => batched(&d, a.as_slice()?, b.as_slice()?, out.as_mut_slice()?, naive::<i32>),
            DType::I64 => batched(&d, a.as_slice()?, b.as_slice()?, out.as_mut_slice()?, naive::<i64>),
            DType::U32 => batched(&d, a.as_slice()?, b.as_slice()?, out.as_mut_slice()?, naive::<u32>),
            DType::U64 => batched(&d, a.as_slice()?, b.as_slice()?, out.as_mut_slice()?, naive::<u64>),
            DType::F16 => {
                let af: Vec<f32> = a.as_slice::<half::f16>()?.iter().map(|v| v.to_f32()).collect();
                let bf: Vec<f32> = b.as_slice::<half::f16>()?.iter().map(|v| v.to_f32()).collect();
                let mut of = vec![0f32; out.len()];
                batched(&d, &af, &bf, &mut of, gemm_f32);
                for (o, v) in out.as_mut_slice::<half::f16>()?.iter_mut().zip(of) {
                    *o = half::f16::from_f32(v);
                }
            }
            dt => bail_op!("MatMul: unsupported dtype {dt}"),
        }
        Ok(())
    }
}

pub(crate) fn batched<T: Copy>(d: &Dims, a: &[T], b: &[T], c: &mut [T], gemm: fn(&GemmArgs, &[T], &[T], &mut [T])) {
    let args = GemmArgs::row_major(d.m, d.k, d.n);
    let (sa, sb, sc) = (d.m * d.k, d.k * d.n, d.m * d.n);
    let ia = broadcast_index_map(&broadcast_strides(&d.a_batch, &d.batch), &d.batch);
    let ib = broadcast_index_map(&broadcast_strides(&d.b_batch, &d.batch), &d.batch);
    for (bi, (&i, &j)) in ia.iter().zip(&ib).enumerate() {
        gemm(&args, &a[i * sa..(i + 1) * sa], &b[j * sb..(j + 1) * sb], &mut c[bi * sc..(bi + 1) * sc]);
    }
}

trait IntArith: Element + Default {
    fn mul_add(acc: Self, a: Self, b: Self) -> Self;
}
macro_rules! int_arith {
    ($($t:ty),*) => {$(impl IntArith for $t {
        fn mul_add(acc: Self, a: Self, b: Self) -> Self { acc.wrapping_add(a.wrapping_mul(b)) }
    })*};
}
int_arith!(i32, i64, u32, u64);

fn naive<T: IntArith>(args: &GemmArgs, a: &[T], b: &[T], c: &mut [T]) {
    for i in 0..args.m {
        for j in 0..args.n {
            let mut acc = T::default();
            for p in 0..args.k {
                acc = T::mul_add(acc, a[i * args.k + p], b[p * args.n + j]);
            }
            c[i * args.n + j] = acc;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn batched_matmul_broadcasts_and_promotes_vectors() {
        let a = Tensor::from_vec(vec![2, 2, 3], (0..12).map(|v| v as f32).collect()).unwrap();
        let b = Tensor::from_vec(vec![3], vec![1f32, 0., -1.]).unwrap();
        let op: Op = MatMul {}.into();
        let out = op.eval_owned(&[Some(&a), Some(&b)]).unwrap();
        assert_eq!(out[0].shape(), &[2, 2]);
        assert_eq!(out[0].as_slice::<f32>().unwrap(), &[-2., -2., -2., -2.]);
    }
}
