//! Det: the determinant of each square matrix in the last two axes,
//! `[*, M, M] -> [*]`, by LU decomposition with partial pivoting in f64
//! (numpy's `linalg.det` is LAPACK's LU too). An empty matrix (M = 0) has
//! determinant 1.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{Element, TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Det {}

impl OpImpl for Det {
    fn name(&self) -> &'static str {
        "Det"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, self.name())?;
        let r = x.shape.len();
        ensure_op!(r >= 2 && x.shape[r - 1] == x.shape[r - 2], "Det: input {x} is not a batch of square matrices");
        ensure_op!(x.dtype.is_float(), "Det: input {x} is not float");
        Ok(vec![TensorType::new(x.dtype, x.shape[..r - 2].to_vec())])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, self.name())?;
        let m = x.shape[x.shape.len() - 1];
        let out = &mut outputs[0];
        match x.dtype {
            DType::F32 => dets::<f32>(x.as_slice()?, m, out.as_mut_slice()?),
            DType::F64 => dets::<f64>(x.as_slice()?, m, out.as_mut_slice()?),
            DType::F16 => dets::<f16>(x.as_slice()?, m, out.as_mut_slice()?),
            DType::BF16 => dets::<bf16>(x.as_slice()?, m, out.as_mut_slice()?),
            d => bail_op!("Det: unsupported dtype {d}"),
        }
        Ok(())
    }
}

/// The determinant of every `m x m` matrix of `x`, into `out`.
fn dets<T: Element>(x: &[T], m: usize, out: &mut [T]) {
    let mut a = vec![0f64; m * m];
    for (k, o) in out.iter_mut().enumerate() {
        for (d, s) in a.iter_mut().zip(&x[k * m * m..(k + 1) * m * m]) {
            *d = s.to_f64();
        }
        *o = T::from_f64(lu_det(&mut a, m));
    }
}

/// The determinant of the row-major `m x m` matrix `a` (overwritten by its
/// LU factors): the product of the pivots, negated for each row swap.
fn lu_det(a: &mut [f64], m: usize) -> f64 {
    let mut det = 1.0;
    for c in 0..m {
        // The largest pivot in column c, at or below the diagonal (NaN
        // entries never win, so a NaN matrix gives NaN below).
        let p = (c..m).fold(c, |best, r| if a[r * m + c].abs() > a[best * m + c].abs() { r } else { best });
        if p != c {
            for j in 0..m {
                a.swap(c * m + j, p * m + j);
            }
            det = -det;
        }
        let pivot = a[c * m + c];
        det *= pivot;
        if pivot == 0.0 {
            return det;
        }
        for r in c + 1..m {
            let f = a[r * m + c] / pivot;
            if f != 0.0 {
                for j in c..m {
                    a[r * m + j] -= f * a[c * m + j];
                }
            }
        }
    }
    det
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    fn det(shape: &[usize], v: Vec<f32>) -> Vec<f32> {
        let x = Tensor::from_vec(shape.to_vec(), v).unwrap();
        Op::from(Det {}).eval_owned(&[Some(&x)]).unwrap().remove(0).as_slice::<f32>().unwrap().to_vec()
    }

    #[test]
    fn determinants_of_small_matrices() {
        assert_eq!(det(&[2, 2], vec![1.0, 2.0, 3.0, 4.0]), [-2.0]);
        // A row swap is needed (zero first pivot) and changes the sign.
        assert_eq!(det(&[3, 3], vec![0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]), [-1.0]);
        // Singular, and a batch of two.
        assert_eq!(det(&[2, 2, 2], vec![1.0, 2.0, 2.0, 4.0, 2.0, 0.0, 0.0, 3.0]), [0.0, 6.0]);
        let d = det(&[3, 3], vec![2.0, -3.0, 1.0, 2.0, 0.0, -1.0, 1.0, 4.0, 5.0]);
        assert!((d[0] - 49.0).abs() < 1e-4, "{d:?}");
        assert_eq!(det(&[0, 0], vec![]), [1.0]);
        assert!(det(&[1, 1], vec![f32::NAN])[0].is_nan());
    }

    #[test]
    fn inference_wants_square_float_matrices() {
        let infer = |dtype, shape: &[usize]| Op::from(Det {}).infer(&[Some(&TensorType::new(dtype, shape.to_vec()))]);
        assert_eq!(infer(DType::F16, &[5, 3, 3]).unwrap(), [TensorType::new(DType::F16, vec![5])]);
        assert!(infer(DType::F32, &[3, 2]).is_err());
        assert!(infer(DType::F32, &[3]).is_err());
        assert!(infer(DType::I64, &[2, 2]).is_err());
    }
}
