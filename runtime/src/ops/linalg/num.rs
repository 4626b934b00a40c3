//! Element arithmetic for the matrix kernels: the scalar trait the generic
//! convolution and einsum code is written against, its matrix multiply, the
//! f16/bf16 widening helpers, and a reusable per-thread scratch buffer.

use super::gemm_kernel::{gemm_f32, gemm_f64, GemmArgs};
use crate::bail_op;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::{Element, TensorView, TensorViewMut};
use std::cell::RefCell;

/// A matrix multiply on strided operands (see [`GemmArgs`]).
pub type GemmFn<T> = fn(&GemmArgs, &[T], &[T], &mut [T]);

/// A number the convolution and einsum kernels can compute with.
pub trait Scalar: Element + Default {
    /// The matrix multiply for this type. Integer types use a plain loop that
    /// supports `alpha == 1` and `beta` in {0, 1} only.
    const GEMM: GemmFn<Self>;
    /// Addition; wrapping for integers, so that it never panics.
    fn sadd(self, o: Self) -> Self;
    /// Multiplication; wrapping for integers.
    fn smul(self, o: Self) -> Self;
}

impl Scalar for f32 {
    const GEMM: GemmFn<f32> = gemm_f32;
    #[inline]
    fn sadd(self, o: Self) -> Self {
        self + o
    }
    #[inline]
    fn smul(self, o: Self) -> Self {
        self * o
    }
}

impl Scalar for f64 {
    const GEMM: GemmFn<f64> = gemm_f64;
    #[inline]
    fn sadd(self, o: Self) -> Self {
        self + o
    }
    #[inline]
    fn smul(self, o: Self) -> Self {
        self * o
    }
}

macro_rules! int_scalar {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            const GEMM: GemmFn<$t> = gemm_naive::<$t>;
            #[inline]
            fn sadd(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline]
            fn smul(self, o: Self) -> Self { self.wrapping_mul(o) }
        }
    )*};
}
int_scalar!(i32, i64, u32, u64);

/// Wrapping integer multiply-add, so that overflow never panics.
pub trait WrappingArith: Copy {
    fn wmul(self, o: Self) -> Self;
    fn wadd(self, o: Self) -> Self;
}
macro_rules! wrapping {
    ($($t:ty),*) => {$(
        impl WrappingArith for $t {
            fn wmul(self, o: Self) -> Self { self.wrapping_mul(o) }
            fn wadd(self, o: Self) -> Self { self.wrapping_add(o) }
        }
    )*};
}
wrapping!(i32, i64, u32, u64);

/// C = A·B (+ C when `beta != 0`) for integer types, on strided operands.
/// Wrapping arithmetic; `alpha` is ignored (always 1 for integer callers).
pub fn gemm_naive<T: Element + Default + WrappingArith>(args: &GemmArgs, a: &[T], b: &[T], c: &mut [T]) {
    let (rsa, csa, rsb, csb, rsc, csc) =
        (args.rsa as usize, args.csa as usize, args.rsb as usize, args.csb as usize, args.rsc as usize, args.csc as usize);
    for i in 0..args.m {
        if args.beta == 0.0 {
            for j in 0..args.n {
                c[i * rsc + j * csc] = T::default();
            }
        }
        for p in 0..args.k {
            let av = a[i * rsa + p * csa];
            for j in 0..args.n {
                let o = &mut c[i * rsc + j * csc];
                *o = o.wadd(av.wmul(b[p * rsb + j * csb]));
            }
        }
    }
}

/// The elements of an f16 or bf16 view widened to f32.
pub fn widen(v: &TensorView<'_>) -> Result<Vec<f32>> {
    Ok(match v.dtype {
        DType::F16 => v.as_slice::<half::f16>()?.iter().map(|x| x.to_f32()).collect(),
        DType::BF16 => v.as_slice::<half::bf16>()?.iter().map(|x| x.to_f32()).collect(),
        DType::F32 => v.as_slice::<f32>()?.to_vec(),
        d => bail_op!("expected a half-precision tensor, got {d}"),
    })
}

/// Writes f32 values into an f16 or bf16 output, rounding to nearest.
pub fn narrow_into(out: &mut TensorViewMut<'_>, values: &[f32]) -> Result<()> {
    match out.dtype {
        DType::F16 => {
            for (o, &v) in out.as_mut_slice::<half::f16>()?.iter_mut().zip(values) {
                *o = half::f16::from_f32(v);
            }
        }
        DType::BF16 => {
            for (o, &v) in out.as_mut_slice::<half::bf16>()?.iter_mut().zip(values) {
                *o = half::bf16::from_f32(v);
            }
        }
        DType::F32 => out.as_mut_slice::<f32>()?.copy_from_slice(values),
        d => bail_op!("expected a half-precision output, got {d}"),
    }
    Ok(())
}

thread_local! {
    static SCRATCH: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on a scratch slice of `len` elements whose contents are
/// unspecified (callers overwrite what they read). The buffer is kept per
/// thread and reused across calls, so large im2col matrices are not
/// reallocated for every layer.
pub fn with_scratch<T: Element + Default, R>(len: usize, f: impl FnOnce(&mut [T]) -> R) -> R {
    debug_assert!(std::mem::align_of::<T>() <= 8 && 8 % std::mem::size_of::<T>() == 0);
    let words = (len * std::mem::size_of::<T>()).div_ceil(8);
    let attempt = SCRATCH.with(|cell| {
        let Ok(mut buf) = cell.try_borrow_mut() else { return Err(f) };
        if buf.len() < words {
            buf.resize(words, 0);
        }
        let slice: &mut [T] = bytemuck::cast_slice_mut(&mut buf[..words]);
        Ok(f(&mut slice[..len]))
    });
    match attempt {
        Ok(r) => r,
        // The buffer is in use further up the stack: use a fresh one.
        Err(f) => {
            let mut v = vec![T::default(); len];
            f(&mut v)
        }
    }
}
