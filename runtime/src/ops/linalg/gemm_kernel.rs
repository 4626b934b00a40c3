//! The one place CPU matrix multiplies happen: C = alpha * A·B + beta * C with
//! arbitrary strides, through `matrixmultiply`'s cache-blocked SIMD kernels.

/// A strided matrix operand: `ptr[i * rs + j * cs]`.
#[derive(Clone, Copy, Debug)]
pub struct GemmArgs {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub alpha: f32,
    pub beta: f32,
    pub rsa: isize,
    pub csa: isize,
    pub rsb: isize,
    pub csb: isize,
    pub rsc: isize,
    pub csc: isize,
}

impl GemmArgs {
    /// Row-major, contiguous A (m×k), B (k×n), C (m×n); C is overwritten.
    pub fn row_major(m: usize, k: usize, n: usize) -> GemmArgs {
        GemmArgs { m, k, n, alpha: 1.0, beta: 0.0, rsa: k as isize, csa: 1, rsb: n as isize, csb: 1, rsc: n as isize, csc: 1 }
    }
}

/// Elements a strided `rows × cols` operand spans.
fn span(rows: usize, cols: usize, rs: isize, cs: isize) -> usize {
    assert!(rs >= 0 && cs >= 0, "gemm: negative strides");
    if rows == 0 || cols == 0 {
        0
    } else {
        (rows - 1) * rs as usize + (cols - 1) * cs as usize + 1
    }
}

/// Checks that the slices cover every element the strides address; returns
/// whether there is anything to compute.
fn check(args: &GemmArgs, a_len: usize, b_len: usize, c_len: usize) -> bool {
    assert!(a_len >= span(args.m, args.k, args.rsa, args.csa), "gemm: A too small");
    assert!(b_len >= span(args.k, args.n, args.rsb, args.csb), "gemm: B too small");
    assert!(c_len >= span(args.m, args.n, args.rsc, args.csc), "gemm: C too small");
    args.m != 0 && args.n != 0
}

/// Computes C = alpha·A·B + beta·C. The slices must cover every element the
/// strides address; this is checked, so a bad call fails loudly instead of
/// reading out of bounds.
pub fn gemm_f32(args: &GemmArgs, a: &[f32], b: &[f32], c: &mut [f32]) {
    if !check(args, a.len(), b.len(), c.len()) {
        return;
    }
    // SAFETY: `check` asserted every addressed element is in bounds,
    // and C does not alias A or B (distinct borrows).
    unsafe {
        matrixmultiply::sgemm(
            args.m,
            args.k,
            args.n,
            args.alpha,
            a.as_ptr(),
            args.rsa,
            args.csa,
            b.as_ptr(),
            args.rsb,
            args.csb,
            args.beta,
            c.as_mut_ptr(),
            args.rsc,
            args.csc,
        );
    }
}

/// The f64 counterpart of [`gemm_f32`].
pub fn gemm_f64(args: &GemmArgs, a: &[f64], b: &[f64], c: &mut [f64]) {
    if !check(args, a.len(), b.len(), c.len()) {
        return;
    }
    // SAFETY: as in `gemm_f32`.
    unsafe {
        matrixmultiply::dgemm(
            args.m,
            args.k,
            args.n,
            args.alpha as f64,
            a.as_ptr(),
            args.rsa,
            args.csa,
            b.as_ptr(),
            args.rsb,
            args.csb,
            args.beta as f64,
            c.as_mut_ptr(),
            args.rsc,
            args.csc,
        );
    }
}
