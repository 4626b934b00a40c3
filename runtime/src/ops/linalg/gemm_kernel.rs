//! The one place CPU matrix multiplies happen: C = alpha * A·B + beta * C with
//! arbitrary strides. The exact mode goes through `matrixmultiply`'s
//! cache-blocked SIMD kernels; the fast mode (`crate::math`) through
//! `sgemm`'s packed AVX2 kernel where the CPU has one, and products with few
//! rows or columns through the vector-matrix loops below.

pub use super::gemm_args::GemmArgs;
use super::sgemm::{self, ASource, PackedLayout, PanelsA};
use std::ops::Range;

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
/// reading out of bounds. Large products are split over the current
/// context's threads (see [`split`]).
pub fn gemm_f32(args: &GemmArgs, a: &[f32], b: &[f32], c: &mut [f32]) {
    if !check(args, a.len(), b.len(), c.len()) {
        return;
    }
    if crate::math::mode() == crate::math::Math::Fast {
        use crate::math::FAST_GEMV_ROWS;
        if args.m <= FAST_GEMV_ROWS && gemv_f32(args, a, b, c) {
            return;
        }
        // A product of few columns is one of few rows transposed.
        if args.n <= FAST_GEMV_ROWS && args.n < args.m && gemv_f32(&transposed(args), b, a, c) {
            return;
        }
        if sgemm::tile().is_some() {
            gemm_f32_packed_kernel(args, a, None, b, c);
            return;
        }
    }
    // SAFETY: `check` asserted every addressed element is in bounds, C does
    // not alias A or B (distinct borrows), and `split` hands each call a
    // disjoint block of C.
    split(args, a, b, c, (8, 16), |args, a, b, c| unsafe {
        matrixmultiply::sgemm(
            args.m, args.k, args.n, args.alpha, a, args.rsa, args.csa, b, args.rsb, args.csb, args.beta, c, args.rsc, args.csc,
        )
    });
}

/// A's elements packed ahead in the fast mode's kernel layout (a layer's
/// constant weights, packed once per engine: `crate::prepack`).
#[derive(Clone, Copy)]
pub(crate) struct PackedA<'a> {
    pub layout: PanelsA,
    pub data: &'a [f32],
}

impl PackedA<'_> {
    /// Checks that these are `args`' A (sizes; the caller vouches for the
    /// values).
    fn check(&self, args: &GemmArgs) {
        assert!(self.layout.m == args.m && self.layout.k == args.k, "gemm: packed A does not match");
        assert!(self.data.len() >= self.layout.len(), "gemm: packed A too small");
    }

    /// The kernel's A for the product's rows from `row`.
    fn source(&self, row: usize) -> ASource {
        ASource::Panels { data: self.data.as_ptr(), mpad: self.layout.mpad, row0: row }
    }
}

/// A matrix of `groups` row blocks of `m × k` (a convolution's weights,
/// one block per group) packed for the fast mode's kernel, once per
/// engine (`crate::prepack`).
pub(crate) struct PackedWeightsA {
    copy: std::sync::Arc<crate::prepack::Packed>,
    layout: PanelsA,
}

impl PackedWeightsA {
    /// The packed copy of `w` (row-major, `groups · m` rows of `k`) when
    /// it is an engine constant, the fast mode is on and the CPU has the
    /// packed kernel; else `None`.
    pub fn of(w: &[f32], groups: usize, m: usize, k: usize) -> Option<PackedWeightsA> {
        if crate::math::mode() != crate::math::Math::Fast || w.len() != groups * m * k {
            return None;
        }
        let layout = PanelsA::new(m, k)?;
        let len = layout.len().checked_mul(groups)?;
        let kind = crate::prepack::Layout { kind: "gemm A panels", dims: [groups, m, k, layout.mr] };
        let copy = crate::prepack::packed(w, kind, len, |out| {
            for (g, out) in out.chunks_exact_mut(layout.len().max(1)).enumerate() {
                layout.pack(&w[g * m * k..][..m * k], k, out);
            }
        })?;
        Some(PackedWeightsA { copy, layout })
    }

    /// Group `g`'s block.
    pub fn group(&self, g: usize) -> PackedA<'_> {
        PackedA { layout: self.layout, data: &self.copy.as_slice()[g * self.layout.len()..][..self.layout.len()] }
    }
}

/// The f64 counterpart of [`gemm_f32`].
pub fn gemm_f64(args: &GemmArgs, a: &[f64], b: &[f64], c: &mut [f64]) {
    if !check(args, a.len(), b.len(), c.len()) {
        return;
    }
    // SAFETY: as in `gemm_f32`.
    split(args, a, b, c, (8, 16), |args, a, b, c| unsafe {
        matrixmultiply::dgemm(
            args.m,
            args.k,
            args.n,
            args.alpha as f64,
            a,
            args.rsa,
            args.csa,
            b,
            args.rsb,
            args.csb,
            args.beta as f64,
            c,
            args.rsc,
            args.csc,
        )
    });
}

/// The fast path for products of few rows (`crate::math`): each element of
/// C as a dot product when B's columns run along k (a fully connected
/// layer's `[N, K]` weight), or each row of C as a sum of scaled rows of B
/// when B's rows are contiguous, so B is read once instead of packed.
/// Columns are split over the context's threads. Returns false, computing
/// nothing, for other layouts.
fn gemv_f32(args: &GemmArgs, a: &[f32], b: &[f32], c: &mut [f32]) -> bool {
    let (m, k, n) = (args.m, args.k, args.n);
    let dot = args.csa == 1 && args.rsb == 1;
    if !c_is_injective(args) || !(dot || args.csb == 1) {
        return false;
    }
    let (alpha, beta) = (args.alpha, args.beta);
    let out = Shared(c.as_mut_ptr());
    let store = |i: usize, j: usize, v: f32| {
        let p = out.at(i as isize * args.rsc + j as isize * args.csc);
        // SAFETY: `check` proved (i, j) in bounds, C's strides are
        // injective and each thread owns its columns.
        unsafe { *p = if beta == 0.0 { alpha * v } else { alpha * v + beta * *p } };
    };
    let grain = crate::parallel::grain_macs(m * k);
    crate::parallel::par_ranges(n, grain, |cols| {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (and AVX-512F for the wider copy).
            return unsafe {
                if std::arch::is_x86_feature_detected!("avx512f") {
                    // C's rows written as vectors where `store` would only
                    // copy the sums.
                    let rows = (args.csc == 1 && alpha == 1.0 && beta == 0.0).then(|| out.at(0));
                    gemv_columns_avx512(args, a, b, cols, &store, rows)
                } else {
                    gemv_columns_avx2(args, a, b, cols, &store)
                }
            };
        }
        gemv_columns(args, a, b, cols, &store)
    });
    true
}

/// [`gemv_columns`] vectorized 8 lanes wide.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn gemv_columns_avx2(args: &GemmArgs, a: &[f32], b: &[f32], cols: Range<usize>, store: &impl Fn(usize, usize, f32)) {
    gemv_columns(args, a, b, cols, store)
}

/// [`gemv_columns`] vectorized 16 lanes wide (the same operations: the
/// compiler may not reorder f32 sums, so any width gives the same bits).
/// Rows of C as sums of rows of B run [`gemv_rows_avx512`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2")]
///
/// # Safety
/// AVX-512F; where `rows` is given, C's row i starts at `rows + i · rsc`
/// with contiguous columns, which this call may write at `cols`, and C is
/// `A·B` alone (alpha 1, beta 0).
unsafe fn gemv_columns_avx512(
    args: &GemmArgs,
    a: &[f32],
    b: &[f32],
    cols: Range<usize>,
    store: &impl Fn(usize, usize, f32),
    rows: Option<*mut f32>,
) {
    if args.csa == 1 && args.rsb == 1 {
        return gemv_columns(args, a, b, cols, store);
    }
    let mut j = cols.start;
    while j < cols.end {
        let width = (cols.end - j).min(64);
        // SAFETY: AVX-512F (this function's); columns j..j + width of B's rows.
        unsafe {
            match args.m {
                1 => gemv_rows_width::<1>(args, a, b, (j, width), store, rows),
                2 => gemv_rows_width::<2>(args, a, b, (j, width), store, rows),
                _ => gemv_rows_width::<4>(args, a, b, (j, width), store, rows),
            }
        }
        j += width;
    }
}

/// [`gemv_rows_avx512`] with as many vectors as `width` columns need.
///
/// # Safety
/// As [`gemv_rows_avx512`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2")]
unsafe fn gemv_rows_width<const R: usize>(
    args: &GemmArgs,
    a: &[f32],
    b: &[f32],
    (j, width): (usize, usize),
    store: &impl Fn(usize, usize, f32),
    rows: Option<*mut f32>,
) {
    // SAFETY: the caller's.
    unsafe {
        match width.div_ceil(16) {
            1 => gemv_rows_avx512::<R, 1>(args, a, b, (j, width), store, rows),
            2 => gemv_rows_avx512::<R, 2>(args, a, b, (j, width), store, rows),
            3 => gemv_rows_avx512::<R, 3>(args, a, b, (j, width), store, rows),
            _ => gemv_rows_avx512::<R, 4>(args, a, b, (j, width), store, rows),
        }
    }
}

/// Columns `j..j + width` (at most 16·V) of every row of C as sums of
/// A-scaled rows of B (contiguous), with AVX-512 intrinsics instead of
/// the compiler's vectorization of [`gemv_columns`], which kept the
/// sums in memory: the same operations (each product rounded, then added
/// in k order), so the same bits, with V vectors of sums of each of R
/// rows in registers (independent sums in flight together).
///
/// # Safety
/// AVX-512F; B's rows hold columns `j..j + width`; `rows` as for
/// [`gemv_columns_avx512`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2")]
unsafe fn gemv_rows_avx512<const R: usize, const V: usize>(
    args: &GemmArgs,
    a: &[f32],
    b: &[f32],
    (j, width): (usize, usize),
    store: &impl Fn(usize, usize, f32),
    rows_out: Option<*mut f32>,
) {
    use std::arch::x86_64::*;
    let (rsa, csa, rsb) = (args.rsa as usize, args.csa as usize, args.rsb as usize);
    let masks: [__mmask16; V] = std::array::from_fn(|v| {
        let lanes = width.saturating_sub(16 * v).min(16);
        ((1u32 << lanes) - 1) as __mmask16
    });
    for i0 in (0..args.m).step_by(R) {
        // A short last group repeats its last row, whose sums are dropped.
        let rows: [usize; R] = std::array::from_fn(|r| (i0 + r).min(args.m - 1));
        let mut acc = [[_mm512_setzero_ps(); V]; R];
        for p in 0..args.k {
            let row = b[p * rsb + j..][..width].as_ptr();
            // SAFETY: the masks' lanes are columns of the row's `width`.
            let bv: [__m512; V] = std::array::from_fn(|v| unsafe { _mm512_maskz_loadu_ps(masks[v], row.add(16 * v)) });
            for (acc, &i) in acc.iter_mut().zip(&rows) {
                let av = _mm512_set1_ps(a[i * rsa + p * csa]);
                for (acc, &bv) in acc.iter_mut().zip(&bv) {
                    *acc = _mm512_add_ps(*acc, _mm512_mul_ps(av, bv));
                }
            }
        }
        if let Some(c) = rows_out {
            for (r, acc) in acc.iter().enumerate().take(args.m - i0) {
                // SAFETY: columns j..j + width of C's row i0 + r (the caller's).
                let row = unsafe { c.offset((i0 + r) as isize * args.rsc).add(j) };
                for (v, acc) in acc.iter().enumerate() {
                    unsafe { _mm512_mask_storeu_ps(row.add(16 * v), masks[v], *acc) };
                }
            }
            continue;
        }
        for (r, acc) in acc.iter().enumerate().take(args.m - i0) {
            let mut sums = [0f32; 64];
            for (v, acc) in acc.iter().enumerate() {
                // SAFETY: 16 floats of `sums`.
                unsafe { _mm512_storeu_ps(sums.as_mut_ptr().add(16 * v), *acc) };
            }
            for (l, &v) in sums[..width].iter().enumerate() {
                store(i0 + r, j + l, v);
            }
        }
    }
}

/// The columns `cols` of every row of C for [`gemv_f32`], given to `store`.
#[inline(always)]
fn gemv_columns(args: &GemmArgs, a: &[f32], b: &[f32], cols: Range<usize>, store: &impl Fn(usize, usize, f32)) {
    let (m, k) = (args.m, args.k);
    let (rsa, csa, rsb, csb) = (args.rsa as usize, args.csa as usize, args.rsb as usize, args.csb as usize);
    if csa == 1 && rsb == 1 {
        // Dot products of A's rows with B's columns, 16 running sums each.
        // Up to 4 rows of A share one pass over a column of B (a weight
        // row), which is then read from memory once.
        const ROWS: usize = 4;
        for i0 in (0..m).step_by(ROWS) {
            let rows = ROWS.min(m - i0);
            let whole = k / 16 * 16;
            for j in cols.clone() {
                let col = &b[j * csb..][..k];
                let mut acc = [[0f32; 16]; ROWS];
                for (p, yc) in col[..whole].chunks_exact(16).enumerate() {
                    for (r, acc) in acc.iter_mut().enumerate().take(rows) {
                        let xc = &a[(i0 + r) * rsa + p * 16..][..16];
                        for l in 0..16 {
                            acc[l] += xc[l] * yc[l];
                        }
                    }
                }
                for (r, acc) in acc.iter().enumerate().take(rows) {
                    let row = &a[(i0 + r) * rsa..][..k];
                    let tail: f32 = row[whole..].iter().zip(&col[whole..]).map(|(x, y)| x * y).sum();
                    store(i0 + r, j, acc.iter().sum::<f32>() + tail);
                }
            }
        }
    } else {
        // Each row of C as a sum of A-scaled rows of B (contiguous), over
        // blocks of 32, 8 and 1 columns whose sums stay in registers for
        // all of k (each column sums in k order whatever its block).
        #[inline(always)]
        fn block<const L: usize>(
            a: &[f32],
            b: &[f32],
            (i, j): (usize, usize),
            (rsa, csa, rsb): (usize, usize, usize),
            k: usize,
        ) -> [f32; L] {
            let mut acc = [0f32; L];
            for p in 0..k {
                let (av, brow) = (a[i * rsa + p * csa], &b[p * rsb + j..][..L]);
                for (o, &v) in acc.iter_mut().zip(brow) {
                    *o += av * v;
                }
            }
            acc
        }
        // Column blocks outermost: a block of B is read from memory once
        // and from cache for the other rows of A.
        let strides = (rsa, csa, rsb);
        let mut j = cols.start;
        while j < cols.end {
            let width = match cols.end - j {
                32.. => 32,
                8..=31 => 8,
                _ => 1,
            };
            for i in 0..m {
                let sums: &[f32] = match width {
                    32 => &block::<32>(a, b, (i, j), strides, k),
                    8 => &block::<8>(a, b, (i, j), strides, k),
                    _ => &block::<1>(a, b, (i, j), strides, k),
                };
                for (l, &v) in sums.iter().enumerate() {
                    store(i, j + l, v);
                }
            }
            j += width;
        }
    }
}

/// Whether no two elements (i, j) of C share an address, so that blocks of
/// C given to different threads are disjoint.
fn c_is_injective(args: &GemmArgs) -> bool {
    let (m, n) = (args.m as isize, args.n as isize);
    args.rsc >= 1 && args.csc >= 1 && (args.rsc >= n * args.csc || args.csc >= m * args.rsc)
}

/// A pointer the threads of one product share; each writes its own block.
pub(super) struct Shared<T>(pub(super) *mut T);
impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Shared<T> {}
// SAFETY: only used by `split`, whose blocks are disjoint.
unsafe impl<T> Send for Shared<T> {}
unsafe impl<T> Sync for Shared<T> {}
impl<T> Shared<T> {
    pub(super) fn at(self, offset: isize) -> *mut T {
        // SAFETY: callers pass offsets of elements `check` proved in bounds.
        unsafe { self.0.offset(offset) }
    }
}

/// The product Cᵀ = Bᵀ·Aᵀ: the same elements, operands swapped.
fn transposed(args: &GemmArgs) -> GemmArgs {
    GemmArgs {
        m: args.n,
        n: args.m,
        rsa: args.csb,
        csa: args.rsb,
        rsb: args.csa,
        csb: args.rsa,
        rsc: args.csc,
        csc: args.rsc,
        ..*args
    }
}

/// Runs `run` on the whole product, or, when the current context has
/// threads to spare and the product is large, on blocks of whole rows or
/// columns of C (the longer side), one per thread, each a multiple of
/// `align` (the kernel's tile: rows, columns) but the last. Each element of
/// C is computed by the same sum in the same order either way, so the
/// result does not depend on the thread count.
fn split<T>(
    args: &GemmArgs,
    a: &[T],
    b: &[T],
    c: &mut [T],
    align: (usize, usize),
    run: impl Fn(&GemmArgs, *const T, *const T, *mut T) + Sync,
) {
    let (a, b, c) = (Shared(a.as_ptr().cast_mut()), Shared(b.as_ptr().cast_mut()), Shared(c.as_mut_ptr()));
    split_blocks(args, align, |block, i, j| {
        let (i, j) = (i as isize, j as isize);
        run(block, a.at(i * args.rsa), b.at(j * args.csb), c.at(i * args.rsc + j * args.csc))
    });
}

/// The blocks of [`split`]: `run(block, first_row, first_column)`.
fn split_blocks(args: &GemmArgs, (row_align, col_align): (usize, usize), run: impl Fn(&GemmArgs, usize, usize) + Sync) {
    let (m, n) = (args.m, args.n);
    if crate::parallel::threads() == 1 || !c_is_injective(args) {
        run(args, 0, 0);
        return;
    }
    let by_columns = n >= m;
    // Blocks are whole micro-kernel tiles.
    let (len, align, other) = if by_columns { (n, col_align, m) } else { (m, row_align, n) };
    let grain = crate::parallel::grain_macs(align * other * args.k);
    crate::parallel::par_ranges(len.div_ceil(align), grain, |r| {
        let (lo, hi) = (r.start * align, (r.end * align).min(len));
        let mut block = *args;
        if by_columns {
            block.n = hi - lo;
            run(&block, 0, lo);
        } else {
            block.m = hi - lo;
            run(&block, lo, 0);
        }
    });
}

/// The fast mode's packed kernel on strided operands, whatever the shape
/// (never the vector-matrix loops [`gemm_f32`] takes for few rows or
/// columns), on the calling thread alone: for a caller that splits its
/// work over the context's threads in blocks of C, each of which must get
/// the arithmetic of the whole product. Only for a CPU where
/// [`packed_layout`] is `Some`.
///
/// # Safety
/// C's elements (as `args` addresses them from `c`) are inside one
/// allocation and written by no one else meanwhile.
pub(crate) unsafe fn gemm_f32_packed_kernel_here(
    args: &GemmArgs,
    a: &[f32],
    packed_a: Option<PackedA<'_>>,
    b: &[f32],
    c: *mut f32,
) {
    assert!(a.len() >= span(args.m, args.k, args.rsa, args.csa), "gemm: A too small");
    assert!(b.len() >= span(args.k, args.n, args.rsb, args.csb), "gemm: B too small");
    if let Some(p) = &packed_a {
        p.check(args);
    }
    assert!(sgemm::tile().is_some(), "gemm: no packed kernel on this CPU");
    if args.m != 0 && args.n != 0 {
        let a = packed_a.map_or(ASource::Strided(a.as_ptr()), |p| p.source(0));
        // SAFETY: A and B checked above, C by the caller.
        unsafe { sgemm::sgemm(args, a, b.as_ptr(), c) }
    }
}

/// [`gemm_f32_packed_kernel_here`] on the whole product, split over the
/// context's threads like [`gemm_f32`].
pub(crate) fn gemm_f32_packed_kernel(args: &GemmArgs, a: &[f32], packed_a: Option<PackedA<'_>>, b: &[f32], c: &mut [f32]) {
    if !check(args, a.len(), b.len(), c.len()) {
        return;
    }
    if let Some(p) = &packed_a {
        p.check(args);
    }
    let Some(tile) = sgemm::tile() else { panic!("gemm: no packed kernel on this CPU") };
    let (a, b, c) = (Shared(a.as_ptr().cast_mut()), Shared(b.as_ptr().cast_mut()), Shared(c.as_mut_ptr()));
    split_blocks(args, tile, |block, i, j| {
        let (ii, jj) = (i as isize, j as isize);
        let a = packed_a.map_or(ASource::Strided(a.at(ii * args.rsa)), |p| p.source(i));
        // SAFETY: `check` covered every element; blocks of C are disjoint
        // and start on whole tiles.
        unsafe { sgemm::sgemm(block, a, b.at(jj * args.csb), c.at(ii * args.rsc + jj * args.csc)) }
    });
}

/// The fast mode's C = alpha·A·B + beta·C with B already in the packed
/// kernel's layout (a convolution's im2col written there directly, saving
/// the copy [`gemm_f32`] would make). Only for a CPU where
/// [`packed_layout`] is `Some`; `args.rsb`/`csb` are ignored.
pub(crate) fn gemm_f32_packed(
    args: &GemmArgs,
    a: &[f32],
    packed_a: Option<PackedA<'_>>,
    b: &[f32],
    layout: &PackedLayout,
    c: &mut [f32],
) {
    assert!(a.len() >= span(args.m, args.k, args.rsa, args.csa), "gemm: A too small");
    if let Some(p) = &packed_a {
        p.check(args);
    }
    assert!(c.len() >= span(args.m, args.n, args.rsc, args.csc), "gemm: C too small");
    assert!(layout.k == args.k && layout.n == args.n && b.len() >= layout.len(), "gemm: packed B does not match");
    let Some(tile) = sgemm::tile() else { panic!("gemm: no packed kernel on this CPU") };
    if args.m == 0 || args.n == 0 {
        return;
    }
    let (a, b, c) = (Shared(a.as_ptr().cast_mut()), Shared(b.as_ptr().cast_mut()), Shared(c.as_mut_ptr()));
    split_blocks(args, tile, |block, i, j| {
        let (ii, jj) = (i as isize, j as isize);
        // SAFETY: the asserts above cover every element the blocks address;
        // blocks of C are disjoint and start on whole tiles (j a multiple of NR).
        let a = packed_a.map_or(ASource::Strided(a.at(ii * args.rsa)), |p| p.source(i));
        unsafe { sgemm::sgemm_prepacked(block, a, b.at(0), layout, j, c.at(ii * args.rsc + jj * args.csc)) }
    });
}

/// [`gemm_f32_packed`] on the calling thread alone, for a caller that
/// already split its work over the context's threads.
///
/// # Safety
/// C's elements (as `args` addresses them from `c`) are inside one
/// allocation and written by no one else meanwhile.
pub(crate) unsafe fn gemm_f32_packed_here(
    args: &GemmArgs,
    a: &[f32],
    packed_a: Option<PackedA<'_>>,
    b: &[f32],
    layout: &PackedLayout,
    c: *mut f32,
) {
    assert!(a.len() >= span(args.m, args.k, args.rsa, args.csa), "gemm: A too small");
    if let Some(p) = &packed_a {
        p.check(args);
    }
    assert!(layout.k == args.k && layout.n == args.n && b.len() >= layout.len(), "gemm: packed B does not match");
    assert!(sgemm::tile().is_some(), "gemm: no packed kernel on this CPU");
    if args.m != 0 && args.n != 0 {
        // SAFETY: A and B checked above, C by the caller.
        let a = packed_a.map_or(ASource::Strided(a.as_ptr()), |p| p.source(0));
        unsafe { sgemm::sgemm_prepacked(args, a, b.as_ptr(), layout, 0, c) }
    }
}

/// The layout [`gemm_f32_packed`] takes B in, for a k×n matrix, when the
/// fast mode's packed kernel runs on this CPU.
pub(crate) fn packed_layout(k: usize, n: usize) -> Option<PackedLayout> {
    sgemm::tile().map(|(_, nr)| PackedLayout::new(k, n, nr))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX-512 rows kernel against the portable loop it replaces, bit
    /// for bit: 1 to 9 rows (groups of 1, 2 and 4 with a short last one),
    /// widths that end inside a vector and past 64 columns, A read through
    /// strides, alpha and beta.
    #[test]
    fn avx512_row_products_give_the_portable_loops_bits() {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx2") {
            let mut s = 0x853c_49e6_748f_ea9bu64;
            let mut value = move || {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s % 20_001) as f32 / 3_000.0 - 3.3
            };
            for (m, k, n) in [(1, 24, 96), (2, 24, 96), (3, 7, 130), (4, 33, 17), (9, 5, 64), (5, 1, 1), (2, 16, 200)] {
                let a: Vec<f32> = (0..m * k * 2).map(|_| value()).collect();
                let b: Vec<f32> = (0..k * n).map(|_| value()).collect();
                // A read with a column stride of 2, B row-major, C with beta.
                let args = GemmArgs { csa: 2, rsa: 2 * k as isize, alpha: 0.75, beta: 0.5, ..GemmArgs::row_major(m, k, n) };
                let c0: Vec<f32> = (0..m * n).map(|_| value()).collect();
                let run = |vector: bool| {
                    let mut c = c0.clone();
                    let out = Shared(c.as_mut_ptr());
                    let store = |i: usize, j: usize, v: f32| {
                        // SAFETY: (i, j) is inside C.
                        let p = unsafe { &mut *out.at(i as isize * args.rsc + j as isize * args.csc) };
                        *p = args.alpha * v + args.beta * *p;
                    };
                    if vector {
                        // SAFETY: AVX-512F and AVX2 were detected.
                        unsafe { gemv_columns_avx512(&args, &a, &b, 0..n, &store, None) };
                    } else {
                        gemv_columns(&args, &a, &b, 0..n, &store);
                    }
                    c.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                };
                assert_eq!(run(true), run(false), "{m}x{k}x{n}");
                // C = A·B alone, its rows written as vectors, in a C whose
                // rows are 3 columns longer than n.
                let plain = GemmArgs { alpha: 1.0, beta: 0.0, rsc: n as isize + 3, ..args };
                let direct = |vector: bool| {
                    let mut c = vec![-7f32; m * (n + 3)];
                    let out = Shared(c.as_mut_ptr());
                    let store = |i: usize, j: usize, v: f32| {
                        // SAFETY: (i, j) is inside C.
                        unsafe { *out.at(i as isize * plain.rsc + j as isize) = v };
                    };
                    if vector {
                        // SAFETY: AVX-512F and AVX2 were detected; C's rows
                        // are contiguous, alpha 1 and beta 0.
                        unsafe { gemv_columns_avx512(&plain, &a, &b, 0..n, &store, Some(out.0)) };
                    } else {
                        gemv_columns(&plain, &a, &b, 0..n, &store);
                    }
                    c.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                };
                assert_eq!(direct(true), direct(false), "{m}x{k}x{n}, rows written directly");
            }
            return;
        }
        eprintln!("skipped: 1 test (this CPU has no AVX-512, so there is no vector rows kernel)");
    }
}
