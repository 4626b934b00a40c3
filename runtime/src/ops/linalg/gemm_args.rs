//! The operands of a matrix multiply: sizes, scales and strides.

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
