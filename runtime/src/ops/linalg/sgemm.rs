//! The fast mode's f32 matrix multiply (see `crate::math`) on CPUs with AVX2
//! and FMA: BLIS's loop nest around a register tile of fused multiply-adds,
//! 12×32 with AVX-512, else 6×16.
//!
//! C (m×n) is computed in blocks: NC columns of B at a time, KC of the k
//! dimension at a time (that KC×NC block of B packed into panels of NR
//! columns, each 64-byte aligned), and MC rows of A at a time (read in place
//! when A's rows are contiguous, else packed into panels of MR rows; a
//! layer's constant weights come packed ahead, once per engine:
//! [`PanelsA`], `crate::prepack`). The
//! micro-kernel keeps an MR×NR tile of C in registers (24 with AVX-512, 12
//! with AVX2) for a whole KC block: per k step two loads of B, MR
//! broadcasts of A and 2·MR fused multiply-adds, so almost every issued
//! instruction is a load or an FMA. It then adds the tile into C
//! (`alpha · tile + factor · C`, the factor being `beta` for the first k
//! block and 1 after it).
//!
//! Each element of C is therefore the sum of its KC-long partial sums, each
//! fused in k order, added in k order: the same arithmetic whichever block
//! of C a thread computes, so results do not depend on the thread count.
//! They differ from `matrixmultiply`'s (the exact mode's) by the order of
//! the sums, within the bound `runtime/tests/math.rs` checks.

use super::gemm_args::GemmArgs;

/// The k extent of one block: a packed panel of B (KC×NR, 16 or 32 KiB)
/// stays in the L1 cache while the tiles of a row block of A pass over it.
const KC: usize = 256;
/// Rows of A per block (MC×KC, 192 KiB, stays in the L2 cache).
const MC: usize = 192;
/// Columns of B packed at once (KC×NC, 4 MiB, the L3 cache).
const NC: usize = 4096;

/// The register tile this CPU runs: (rows, columns), or `None` when it has
/// no packed kernel (no AVX2 and FMA).
pub(super) fn tile() -> Option<(usize, usize)> {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        use x86::Kernel;
        if has!("avx512f") && has!("avx2") && has!("fma") {
            return Some((x86::Avx512::MR, x86::Avx512::NR));
        }
        if has!("avx2") && has!("fma") {
            return Some((x86::Avx2::MR, x86::Avx2::NR));
        }
    }
    None
}

/// Where element (p, j) of a k×n matrix B lies when packed ahead of the
/// multiply ([`sgemm_prepacked`]): for each block of KC rows (the last may
/// be shorter) its panels of `nr` columns, each `kc × nr` floats row by
/// row. Columns n..npad are zero and must be written so.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PackedLayout {
    pub k: usize,
    pub n: usize,
    pub nr: usize,
    /// n rounded up to whole panels.
    pub npad: usize,
}

impl PackedLayout {
    /// The layout for panels of `nr` columns, a power of two.
    pub fn new(k: usize, n: usize, nr: usize) -> PackedLayout {
        assert!(nr.is_power_of_two(), "panels are a power of two wide");
        PackedLayout { k, n, nr, npad: n.div_ceil(nr) * nr }
    }

    /// Floats the packed matrix takes.
    pub fn len(&self) -> usize {
        self.k * self.npad
    }

    /// The index of element (p, j).
    #[inline]
    pub fn index(&self, p: usize, j: usize) -> usize {
        let pc = p / KC * KC;
        let kc = KC.min(self.k - pc);
        let l = j & (self.nr - 1);
        pc * self.npad + (j - l) * kc + (p - pc) * self.nr + l
    }
}

/// Where element (i, p) of an m×k matrix A lies when packed ahead of the
/// multiply (a layer's constant weights, packed once per engine: see
/// `crate::prepack`): for each block of KC columns (the last may be
/// shorter) its panels of `mr` rows, each `kc × mr` floats column by
/// column. The kernel then reads A as one stream in the order it uses it,
/// instead of `mr` rows a page apart (each a stream of its own, more than
/// the hardware prefetchers follow). Rows m..mpad are zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PanelsA {
    pub m: usize,
    pub k: usize,
    pub mr: usize,
    /// m rounded up to whole panels.
    pub mpad: usize,
}

impl PanelsA {
    /// The layout [`tile`]'s kernel reads, or `None` on a CPU without one.
    pub fn new(m: usize, k: usize) -> Option<PanelsA> {
        tile().map(|(mr, _)| PanelsA { m, k, mr, mpad: m.div_ceil(mr) * mr })
    }

    /// Floats the packed matrix takes.
    pub fn len(&self) -> usize {
        self.mpad * self.k
    }

    /// The index of element (i, p).
    #[inline]
    pub fn index(&self, i: usize, p: usize) -> usize {
        let pc = p / KC * KC;
        let kc = KC.min(self.k - pc);
        let r = i % self.mr;
        pc * self.mpad + (i - r) * kc + (p - pc) * self.mr + r
    }

    /// Packs A (row-major with row stride `rsa`) into `out`, `len()`
    /// floats.
    pub fn pack(&self, a: &[f32], rsa: usize, out: &mut [f32]) {
        assert!(out.len() == self.len(), "packed A has the wrong size");
        assert!(self.m == 0 || self.k == 0 || a.len() >= (self.m - 1) * rsa + self.k, "A too small to pack");
        out.fill(0.0);
        for i in 0..self.m {
            for (p, &v) in a[i * rsa..][..self.k].iter().enumerate() {
                out[self.index(i, p)] = v;
            }
        }
    }
}

/// Where the kernel reads A.
#[derive(Clone, Copy)]
pub(crate) enum ASource {
    /// In place with `GemmArgs`' strides (packed block by block into a
    /// buffer when its columns are strided).
    Strided(*const f32),
    /// Packed ahead in a [`PanelsA`] layout of `mpad` rows, of which the
    /// product's are those from `row0` on (a multiple of the panel height).
    Panels { data: *const f32, mpad: usize, row0: usize },
}

/// Sixteen floats on one cache line: the unit packed buffers are allocated
/// in, so that every packed panel starts on a line.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([f32; 16]);

thread_local! {
    /// The buffer of [`with_packed_buffer`].
    static BLOCK: std::cell::RefCell<Vec<Line>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` on a 64-byte aligned buffer of `len` floats (contents
/// unspecified) kept per thread across calls: where a caller packs a block
/// of B for [`sgemm_prepacked`].
pub(crate) fn with_packed_buffer<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    fn floats(buf: &mut Vec<Line>, len: usize) -> &mut [f32] {
        let lines = len.div_ceil(16);
        if buf.len() < lines {
            buf.resize(lines, Line([0.0; 16]));
        }
        // SAFETY: `lines` lines of 16 floats hold at least `len` floats.
        unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<f32>(), len) }
    }
    BLOCK.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buf) => f(floats(&mut buf, len)),
        // In use further up the stack: a fresh buffer.
        Err(_) => f(floats(&mut Vec::new(), len)),
    })
}

/// C = alpha·A·B + beta·C on strided operands (C is not read when beta is
/// 0), with the kernel of [`tile`]. Only called when that is `Some`.
///
/// # Safety
/// The pointers address every element `args`' sizes and strides reach
/// (packed A: its layout's rows `row0..row0 + m`); C overlaps neither A
/// nor B, and its strides are injective.
pub(super) unsafe fn sgemm(args: &GemmArgs, a: ASource, b: *const f32, c: *mut f32) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract, and `tile` checked the CPU.
    unsafe {
        if std::arch::is_x86_feature_detected!("avx512f") {
            x86::sgemm::<x86::Avx512>(args, a, b, c)
        } else {
            x86::sgemm::<x86::Avx2>(args, a, b, c)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (args, a, b, c);
        unreachable!("sgemm is only called where tile() is Some");
    }
}

/// [`sgemm`] with B packed in `layout` (its rows and columns strides in
/// `args` unused): C's columns are B's columns `j0..j0 + args.n`, `j0` a
/// multiple of the layout's panel width, which is [`tile`]'s.
///
/// # Safety
/// As [`sgemm`]; `b` holds `layout.len()` floats.
pub(super) unsafe fn sgemm_prepacked(args: &GemmArgs, a: ASource, b: *const f32, layout: &PackedLayout, j0: usize, c: *mut f32) {
    debug_assert!(j0.is_multiple_of(layout.nr) && j0 + args.n <= layout.n && args.k == layout.k);
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract, and `tile` checked the CPU.
    unsafe {
        let b = x86::BSource::Packed { data: b, npad: layout.npad, j0 };
        if std::arch::is_x86_feature_detected!("avx512f") {
            x86::sgemm_from::<x86::Avx512>(args, a, b, c)
        } else {
            x86::sgemm_from::<x86::Avx2>(args, a, b, c)
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (args, a, b, layout, j0, c);
        unreachable!("sgemm is only called where tile() is Some");
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{ASource, GemmArgs, Line, KC, MC, NC};
    use std::arch::x86_64::*;
    use std::cell::RefCell;

    const ZERO: Line = Line([0.0; 16]);

    /// How far ahead (in k) the AVX-512 kernel prefetches the rows of A it
    /// reads in place, in the first panel of a block only (the later panels
    /// find the block in the L2 cache). Each row's KC-long stretch is 16
    /// lines in its own page, too short for the hardware prefetchers, so a
    /// product whose weights come from memory (ResNet-50's last stage: 9.4
    /// MB for 49 positions) waited on every line. With A cycled through 24
    /// copies (the loop of `examples/gemm_speed.rs --cold 24`), medians, one
    /// thread, AVX-512 Xeon: 512 x 4608 x 49 2.61-2.65 -> 2.04-2.12 ms,
    /// 2048 x 512 x 49 1.31-1.34 -> 1.05-1.12 ms (48 to 64 ahead best).
    /// A packed ahead ([`super::PanelsA`]) is one stream per panel, which
    /// the kernel prefetches as far ahead.
    const PREFETCH_A: usize = 64;

    /// Products with at most this many rows read B's rows in place where
    /// the kernel can ([`Kernel::READS_B_ROWS`]) instead of packing B.
    /// Measured with `examples/gemm_speed.rs` on an AVX-512 Xeon, one thread:
    /// 32 x 64 x 256 142 -> 188 GF/s, 32 x 768 x 768 125 -> 134 (testdata
    /// gpt2: 0.135 -> 0.108 ms); with the next
    /// panel prefetched, ResNet-50's 256 -> 64 1x1 layers on 56 x 56 planes
    /// 1.13-1.49 -> 0.78-0.82 ms in the network. Above it packing wins where
    /// the caches hold B (256 x 64 x 3136 160 -> 150, 384 x 768 x 768 158 ->
    /// 135 in place).
    const ROWS_OF_B_IN_PLACE: usize = 64;

    thread_local! {
        /// Packed blocks of B and of A, kept per thread across calls.
        static PACKED: RefCell<(Vec<Line>, Vec<Line>)> = const { RefCell::new((Vec::new(), Vec::new())) };
    }

    /// A micro-kernel: its register tile, and the code that runs one.
    pub(super) trait Kernel {
        const MR: usize;
        const NR: usize;
        /// Whether the kernel can read B's rows in place (masked loads at
        /// the right edge) instead of a packed panel.
        const READS_B_ROWS: bool;
        /// Runs `tile` over its first `rows` (1 to MR) rows, reading A from
        /// a packed panel when `packed_a`.
        unsafe fn run(tile: &Tile, rows: usize, packed_a: bool);
    }

    /// The 6×16 tile of twelve 8-lane registers.
    pub(super) struct Avx2;
    /// The 12×32 tile of twenty-four 16-lane registers.
    pub(super) struct Avx512;

    /// Calls `$f::<R, PACKED>` for the run-time row count and A layout.
    macro_rules! dispatch {
        ($f:ident, $tile:expr, $rows:expr, $packed:expr, [$($r:literal)*]) => {
            match ($rows, $packed) {
                $(($r, false) => $f::<$r, false>($tile), ($r, true) => $f::<$r, true>($tile),)*
                _ => unreachable!("a tile has 1 to MR rows"),
            }
        };
    }

    impl Kernel for Avx2 {
        const MR: usize = 6;
        const NR: usize = 16;
        const READS_B_ROWS: bool = false;
        unsafe fn run(tile: &Tile, rows: usize, packed_a: bool) {
            // SAFETY: the caller's contract on the tile; the CPU has AVX2 and FMA.
            unsafe { dispatch!(rows_avx2, tile, rows, packed_a, [1 2 3 4 5 6]) }
        }
    }

    impl Kernel for Avx512 {
        const MR: usize = 12;
        const NR: usize = 32;
        const READS_B_ROWS: bool = true;
        unsafe fn run(tile: &Tile, rows: usize, packed_a: bool) {
            // SAFETY: the caller's contract on the tile; the CPU has AVX-512F.
            unsafe { dispatch!(rows_avx512, tile, rows, packed_a, [1 2 3 4 5 6 7 8 9 10 11 12]) }
        }
    }

    /// Where the kernel reads B: strided (packed block by block into a
    /// buffer), in place where its rows are contiguous and the kernel reads
    /// rows ([`Kernel::READS_B_ROWS`]), or packed ahead of time in a
    /// [`super::PackedLayout`] whose columns from `j0` on are this product's.
    #[derive(Clone, Copy)]
    pub(super) enum BSource {
        Strided(*const f32),
        Rows(*const f32),
        Packed { data: *const f32, npad: usize, j0: usize },
    }

    /// See [`super::sgemm`].
    pub(super) unsafe fn sgemm<K: Kernel>(args: &GemmArgs, a: ASource, b: *const f32, c: *mut f32) {
        // SAFETY: the caller's contract.
        unsafe { sgemm_from::<K>(args, a, BSource::Strided(b), c) }
    }

    /// [`sgemm`] from either source of B.
    pub(super) unsafe fn sgemm_from<K: Kernel>(args: &GemmArgs, a: ASource, b: BSource, c: *mut f32) {
        if args.m == 0 || args.n == 0 {
            return;
        }
        if args.k == 0 {
            // SAFETY: the caller's contract.
            unsafe { scale(args, c) };
            return;
        }
        let kc = KC.min(args.k);
        // B read in place where A has few rows: packing B costs a pass over
        // it for every MR rows of A it is then used for.
        let b = match b {
            BSource::Strided(data) if K::READS_B_ROWS && args.csb == 1 && args.m <= ROWS_OF_B_IN_PLACE => BSource::Rows(data),
            b => b,
        };
        let b_lines = if matches!(b, BSource::Strided(_)) { NC * kc / 16 } else { 0 };
        let a_lines = if matches!(a, ASource::Strided(_)) && args.csa != 1 { MC * kc / 16 } else { 0 };
        PACKED.with(|cell| match cell.try_borrow_mut() {
            Ok(mut bufs) => {
                let (pb, pa) = &mut *bufs;
                if pb.len() < b_lines {
                    pb.resize(b_lines, ZERO);
                }
                if pa.len() < a_lines {
                    pa.resize(a_lines, ZERO);
                }
                // SAFETY: the caller's contract; the buffers are large enough.
                unsafe { blocks::<K>(args, a, b, c, pb.as_mut_ptr().cast(), pa.as_mut_ptr().cast()) }
            }
            // Only reachable through reentrancy, which no caller does; stay correct anyway.
            Err(_) => {
                let (mut pb, mut pa) = (vec![ZERO; b_lines], vec![ZERO; a_lines]);
                // SAFETY: as above.
                unsafe { blocks::<K>(args, a, b, c, pb.as_mut_ptr().cast(), pa.as_mut_ptr().cast()) }
            }
        });
    }

    /// C = beta·C, for an empty k.
    unsafe fn scale(args: &GemmArgs, c: *mut f32) {
        for i in 0..args.m {
            for j in 0..args.n {
                // SAFETY: (i, j) is inside C.
                unsafe {
                    let p = c.offset(i as isize * args.rsc + j as isize * args.csc);
                    *p = if args.beta == 0.0 { 0.0 } else { args.beta * *p };
                }
            }
        }
    }

    /// The loop nest: column blocks, k blocks, row blocks, then tiles, one
    /// packed panel of B against every row tile of the block in turn. `pb`
    /// holds NC·KC floats, `pa` MC·KC (when A is packed).
    #[target_feature(enable = "avx2,fma")]
    unsafe fn blocks<K: Kernel>(args: &GemmArgs, a: ASource, b: BSource, c: *mut f32, pb: *mut f32, pa: *mut f32) {
        let (m, k, n) = (args.m, args.k, args.n);
        // A packed block by block into `pa`.
        let pack_per_block = matches!(a, ASource::Strided(_)) && args.csa != 1;
        let packed_a = !matches!(a, ASource::Strided(_)) || pack_per_block;
        for jc in (0..n).step_by(NC) {
            let nc = NC.min(n - jc);
            for pc in (0..k).step_by(KC) {
                let kc = KC.min(k - pc);
                // The block's first panel, the step between panels and the
                // step between a panel's lines.
                let (panels, panel_step, line_step): (*const f32, isize, isize) = match b {
                    BSource::Strided(b) => {
                        // SAFETY: the block lies inside B and fits `pb`.
                        unsafe { pack_b(args, b, (pc, kc), (jc, nc), K::NR, pb) };
                        (pb, (K::NR * kc) as isize, K::NR as isize)
                    }
                    // SAFETY: element (pc, jc) of B.
                    BSource::Rows(b) => (unsafe { b.offset(pc as isize * args.rsb + jc as isize) }, K::NR as isize, args.rsb),
                    // SAFETY: panel (j0 + jc) / NR of the packed block pc.
                    BSource::Packed { data, npad, j0 } => {
                        (unsafe { data.add(pc * npad + (j0 + jc) * kc) }, (K::NR * kc) as isize, K::NR as isize)
                    }
                };
                let factor = if pc == 0 { args.beta } else { 1.0 };
                let b_in_place = matches!(b, BSource::Rows(_));
                for ic in (0..m).step_by(MC) {
                    let mc = MC.min(m - ic);
                    if let (ASource::Strided(a), true) = (a, pack_per_block) {
                        // SAFETY: the block lies inside A and fits `pa`.
                        unsafe { pack_a(args, a, (ic, mc), (pc, kc), K::MR, pa) };
                    }
                    for q in 0..nc.div_ceil(K::NR) {
                        let j = jc + q * K::NR;
                        for ir in (0..mc).step_by(K::MR) {
                            let i = ic + ir;
                            // SAFETY: every pointer is inside its operand or buffer.
                            let tile = unsafe {
                                Tile {
                                    kc,
                                    a: match a {
                                        ASource::Panels { data, mpad, row0 } => data.add(pc * mpad + (row0 + i) * kc),
                                        ASource::Strided(_) if pack_per_block => pa.add(ir * kc),
                                        ASource::Strided(a) => a.offset(i as isize * args.rsa + pc as isize),
                                    },
                                    rsa: args.rsa,
                                    b: panels.offset(q as isize * panel_step),
                                    rsb: line_step,
                                    c: c.offset(i as isize * args.rsc + j as isize * args.csc),
                                    rsc: args.rsc,
                                    csc: args.csc,
                                    cols: K::NR.min(n - j),
                                    prefetch_a: q == 0 && !pack_per_block,
                                    prefetch_b: ir == 0 && b_in_place,
                                    alpha: args.alpha,
                                    factor,
                                }
                            };
                            // SAFETY: the tile's rows and columns lie inside A, the panel and C.
                            unsafe { K::run(&tile, K::MR.min(m - i), packed_a) };
                        }
                    }
                }
            }
        }
    }

    /// Packs rows `pc..pc+kc`, columns `jc..jc+nc` of B into panels of `nr`
    /// columns (zero beyond n): element (p, l) of panel q at
    /// `out[q·nr·kc + p·nr + l]`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn pack_b(
        args: &GemmArgs,
        b: *const f32,
        (pc, kc): (usize, usize),
        (jc, nc): (usize, usize),
        nr: usize,
        out: *mut f32,
    ) {
        let (rsb, csb) = (args.rsb, args.csb);
        for q in 0..nc.div_ceil(nr) {
            let j0 = jc + q * nr;
            let width = nr.min(jc + nc - j0);
            // SAFETY: panel q of the buffer.
            let panel = unsafe { std::slice::from_raw_parts_mut(out.add(q * nr * kc), nr * kc) };
            if csb == 1 {
                for (p, line) in panel.chunks_exact_mut(nr).enumerate() {
                    // SAFETY: row pc + p, columns j0..j0 + width of B.
                    let src = unsafe { std::slice::from_raw_parts(b.offset((pc + p) as isize * rsb + j0 as isize), width) };
                    line[..width].copy_from_slice(src);
                    line[width..].fill(0.0);
                }
            } else {
                // Column by column: contiguous reads when B is stored transposed.
                for l in 0..nr {
                    for p in 0..kc {
                        panel[p * nr + l] = if l < width {
                            // SAFETY: element (pc + p, j0 + l) of B.
                            unsafe { *b.offset((pc + p) as isize * rsb + (j0 + l) as isize * csb) }
                        } else {
                            0.0
                        };
                    }
                }
            }
        }
    }

    /// Packs rows `ic..ic+mc`, columns `pc..pc+kc` of A into panels of `mr`
    /// rows: element (r, p) of the panel starting at row `t·mr` at
    /// `out[t·mr·kc + p·mr + r]`.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn pack_a(
        args: &GemmArgs,
        a: *const f32,
        (ic, mc): (usize, usize),
        (pc, kc): (usize, usize),
        mr: usize,
        out: *mut f32,
    ) {
        for ir in (0..mc).step_by(mr) {
            let rows = mr.min(mc - ir);
            // SAFETY: panel ir/mr of the buffer.
            let panel = unsafe { std::slice::from_raw_parts_mut(out.add(ir * kc), mr * kc) };
            for p in 0..kc {
                let col = (pc + p) as isize * args.csa;
                for r in 0..rows {
                    // SAFETY: element (ic + ir + r, pc + p) of A.
                    panel[p * mr + r] = unsafe { *a.offset((ic + ir + r) as isize * args.rsa + col) };
                }
            }
        }
    }

    /// One register tile: rows of A (in place or a packed panel), one packed
    /// panel of B, and where its sums go in C.
    pub(super) struct Tile {
        kc: usize,
        a: *const f32,
        /// A's row stride when read in place.
        rsa: isize,
        b: *const f32,
        /// The step between consecutive k of B: a packed panel's width, or
        /// B's row stride when read in place (then only the tile's `cols`
        /// columns of each row are read).
        rsb: isize,
        c: *mut f32,
        rsc: isize,
        csc: isize,
        /// Columns of C the tile covers (NR but at the right edge).
        cols: usize,
        /// Prefetch A ahead ([`PREFETCH_A`]): the block's first panel, where
        /// A comes from its operand (not packed into `pa` just before).
        prefetch_a: bool,
        /// Prefetch the next panel's part of each row of B read in place:
        /// the first row tile of a panel (the rows are a page or more
        /// apart, one stream each, more than the hardware prefetchers
        /// follow).
        prefetch_b: bool,
        alpha: f32,
        /// C's scale before the tile is added: beta, then 1.
        factor: f32,
    }

    impl Tile {
        /// Where row `r` of the tile's A starts, and the step between its
        /// consecutive k (1 in place; MR in a packed panel).
        #[inline(always)]
        unsafe fn a_row<const PACKED: bool>(&self, r: usize) -> *const f32 {
            // SAFETY: row r of the tile's A.
            unsafe {
                if PACKED {
                    self.a.add(r)
                } else {
                    self.a.offset(r as isize * self.rsa)
                }
            }
        }

        /// `alpha · v + factor · old` with the roundings of the vector stores.
        #[inline(always)]
        fn combine(&self, v: f32, old: impl FnOnce() -> f32) -> f32 {
            let v = if self.alpha == 1.0 { v } else { v * self.alpha };
            if self.factor == 0.0 {
                v
            } else if self.factor == 1.0 {
                old() + v
            } else {
                old().mul_add(self.factor, v)
            }
        }

        /// Adds a finished tile (rows of NR values) into C element by
        /// element: for right-edge tiles and C with strided columns.
        #[inline(always)]
        unsafe fn store_scalar(&self, rows: &[[f32; 32]]) {
            for (r, row) in rows.iter().enumerate() {
                for (j, &v) in row[..self.cols].iter().enumerate() {
                    // SAFETY: element (r, j) of the tile in C.
                    unsafe {
                        let p = self.c.offset(r as isize * self.rsc + j as isize * self.csc);
                        *p = self.combine(v, || *p);
                    }
                }
            }
        }
    }

    /// The 6×16 micro-kernel for `R` rows.
    #[target_feature(enable = "avx2,fma")]
    unsafe fn rows_avx2<const R: usize, const PACKED: bool>(t: &Tile) {
        let step = if PACKED { Avx2::MR } else { 1 };
        let mut acc = [[_mm256_setzero_ps(); 2]; R];
        // SAFETY: rows of the tile's A.
        let rows: [*const f32; R] = std::array::from_fn(|r| unsafe { t.a_row::<PACKED>(r) });
        let mut bp = t.b;
        for p in 0..t.kc {
            // SAFETY: line p of the panel (64-byte aligned), and column p of
            // the tile's rows of A.
            unsafe {
                let b0 = _mm256_load_ps(bp);
                let b1 = _mm256_load_ps(bp.add(8));
                for r in 0..R {
                    let av = _mm256_set1_ps(*rows[r].add(p * step));
                    acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
                }
                bp = bp.wrapping_offset(t.rsb);
            }
        }
        if t.cols == Avx2::NR && t.csc == 1 {
            let (va, vf) = (_mm256_set1_ps(t.alpha), _mm256_set1_ps(t.factor));
            for (r, acc) in acc.iter().enumerate() {
                for (h, &v) in acc.iter().enumerate() {
                    // SAFETY: row r, columns 8h..8h+8 of the tile in C.
                    unsafe {
                        let p = t.c.offset(r as isize * t.rsc).add(8 * h);
                        let v = if t.alpha == 1.0 { v } else { _mm256_mul_ps(v, va) };
                        let v = if t.factor == 0.0 {
                            v
                        } else if t.factor == 1.0 {
                            _mm256_add_ps(_mm256_loadu_ps(p), v)
                        } else {
                            _mm256_fmadd_ps(_mm256_loadu_ps(p), vf, v)
                        };
                        _mm256_storeu_ps(p, v);
                    }
                }
            }
        } else {
            let mut tmp = [[0f32; 32]; R];
            for (row, acc) in tmp.iter_mut().zip(&acc) {
                // SAFETY: 16 floats of `row`.
                unsafe {
                    _mm256_storeu_ps(row.as_mut_ptr(), acc[0]);
                    _mm256_storeu_ps(row.as_mut_ptr().add(8), acc[1]);
                }
            }
            // SAFETY: the tile's part of C.
            unsafe { t.store_scalar(&tmp) };
        }
    }

    /// The 12×32 micro-kernel for `R` rows.
    #[target_feature(enable = "avx512f,avx2,fma")]
    unsafe fn rows_avx512<const R: usize, const PACKED: bool>(t: &Tile) {
        let mut acc = [[_mm512_setzero_ps(); 2]; R];
        // SAFETY: rows of the tile's A.
        let rows: [*const f32; R] = std::array::from_fn(|r| unsafe { t.a_row::<PACKED>(r) });
        // B's columns past the tile's: zero in a packed panel, not read
        // (and loaded as zero) in B's rows.
        let lanes = |h: usize| t.cols.saturating_sub(16 * h).min(16);
        let masks: [__mmask16; 2] = std::array::from_fn(|h| ((1u32 << lanes(h)) - 1) as __mmask16);
        // The prefetches are decided once per tile, so that the loop over k
        // has no test in it.
        // SAFETY: the caller's contract on the tile.
        unsafe {
            match (t.prefetch_a, t.prefetch_b) {
                (false, false) => k_steps_avx512::<R, PACKED, false, false>(t, &rows, masks, &mut acc),
                (true, false) => k_steps_avx512::<R, PACKED, true, false>(t, &rows, masks, &mut acc),
                (false, true) => k_steps_avx512::<R, PACKED, false, true>(t, &rows, masks, &mut acc),
                (true, true) => k_steps_avx512::<R, PACKED, true, true>(t, &rows, masks, &mut acc),
            }
        }
        if t.csc == 1 {
            // Masked loads and stores cover the right edge.
            let (va, vf) = (_mm512_set1_ps(t.alpha), _mm512_set1_ps(t.factor));
            for (r, acc) in acc.iter().enumerate() {
                for (h, &v) in acc.iter().enumerate() {
                    if masks[h] == 0 {
                        continue;
                    }
                    // SAFETY: row r, the mask's columns of 16h..16h+16 of the tile in C.
                    unsafe {
                        let p = t.c.offset(r as isize * t.rsc).add(16 * h);
                        let v = if t.alpha == 1.0 { v } else { _mm512_mul_ps(v, va) };
                        let v = if t.factor == 0.0 {
                            v
                        } else if t.factor == 1.0 {
                            _mm512_add_ps(_mm512_maskz_loadu_ps(masks[h], p), v)
                        } else {
                            _mm512_fmadd_ps(_mm512_maskz_loadu_ps(masks[h], p), vf, v)
                        };
                        _mm512_mask_storeu_ps(p, masks[h], v);
                    }
                }
            }
        } else {
            let mut tmp = [[0f32; 32]; R];
            for (row, acc) in tmp.iter_mut().zip(&acc) {
                // SAFETY: 32 floats of `row`.
                unsafe {
                    _mm512_storeu_ps(row.as_mut_ptr(), acc[0]);
                    _mm512_storeu_ps(row.as_mut_ptr().add(16), acc[1]);
                }
            }
            // SAFETY: the tile's part of C.
            unsafe { t.store_scalar(&tmp) };
        }
    }

    /// The k loop of [`rows_avx512`]: `acc += A[rows, k] · B[k, tile]` over
    /// the tile's k, prefetching A ahead (`PF_A`) and the next panel of B
    /// read in place (`PF_B`).
    #[inline(always)]
    unsafe fn k_steps_avx512<const R: usize, const PACKED: bool, const PF_A: bool, const PF_B: bool>(
        t: &Tile,
        rows: &[*const f32; R],
        masks: [__mmask16; 2],
        acc: &mut [[__m512; 2]; R],
    ) {
        let step = if PACKED { Avx512::MR } else { 1 };
        let mut bp = t.b;
        // A read in place: rows 3j, 3j + 1 and 3j + 2 at `bases[j]` plus 0,
        // 1 and 2 row strides, so that the loop steps four pointers instead
        // of computing twelve addresses.
        let mut bases: [*const f32; 4] = std::array::from_fn(|j| t.a.wrapping_offset(3 * j as isize * t.rsa));
        for p in 0..t.kc {
            // SAFETY: line p of the panel, or the tile's columns of row p
            // of B; column p of the tile's rows of A.
            unsafe {
                if PF_B {
                    // The next panel's two lines of this row of B.
                    _mm_prefetch::<_MM_HINT_T0>(bp.wrapping_add(Avx512::NR).cast());
                    _mm_prefetch::<_MM_HINT_T0>(bp.wrapping_add(Avx512::NR + 16).cast());
                }
                if PF_A && PACKED && p % 4 == 0 {
                    // A panel's next three lines (four k of twelve rows).
                    let at = rows[0].wrapping_add((p + PREFETCH_A) * Avx512::MR);
                    for l in 0..3 {
                        _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(16 * l).cast());
                    }
                }
                if PF_A && !PACKED && p % 16 == 0 {
                    for row in rows {
                        _mm_prefetch::<_MM_HINT_T0>(row.wrapping_add(p + PREFETCH_A).cast());
                    }
                }
                let b0 = _mm512_maskz_loadu_ps(masks[0], bp);
                // Past the end of B's last row when the mask is empty:
                // computed without a bound (masked lanes are not read).
                let b1 = _mm512_maskz_loadu_ps(masks[1], bp.wrapping_add(16));
                for r in 0..R {
                    let a = if PACKED { *rows[r].add(p * step) } else { *bases[r / 3].offset((r % 3) as isize * t.rsa) };
                    let av = _mm512_set1_ps(a);
                    acc[r][0] = _mm512_fmadd_ps(av, b0, acc[r][0]);
                    acc[r][1] = _mm512_fmadd_ps(av, b1, acc[r][1]);
                }
                bp = bp.wrapping_offset(t.rsb);
                bases = bases.map(|b| b.wrapping_add(1));
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::x86;
    use super::*;

    /// A xorshift64 generator of values in [-1, 1).
    fn values(seed: u64, len: usize) -> Vec<f32> {
        let mut s = seed.max(1);
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect()
    }

    /// A kernel's entry point.
    type Entry = unsafe fn(&GemmArgs, ASource, *const f32, *mut f32);

    /// The kernels this CPU has: name, entry point, tile rows.
    fn kernels_and_rows() -> Vec<(&'static str, Entry, usize)> {
        use x86::Kernel;
        let mut out: Vec<(&'static str, Entry, usize)> = Vec::new();
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            out.push(("avx2", x86::sgemm::<x86::Avx2>, x86::Avx2::MR));
        } else {
            eprintln!("skipped: the AVX2 kernel (this CPU has no AVX2 and FMA)");
        }
        if std::arch::is_x86_feature_detected!("avx512f") && !out.is_empty() {
            out.push(("avx512", x86::sgemm::<x86::Avx512>, x86::Avx512::MR));
        } else {
            eprintln!("skipped: the AVX-512 kernel (this CPU has no AVX-512F)");
        }
        out
    }

    /// The kernels this CPU has, by name.
    fn kernels() -> Vec<(&'static str, Entry)> {
        kernels_and_rows().into_iter().map(|(name, entry, _)| (name, entry)).collect()
    }

    /// Row-major m×k A (or its transpose stored k×m), k×n B (or transposed),
    /// C with a row stride of n + 3.
    fn case(
        m: usize,
        k: usize,
        n: usize,
        trans_a: bool,
        trans_b: bool,
        alpha: f32,
        beta: f32,
    ) -> (GemmArgs, Vec<f32>, Vec<f32>, Vec<f32>) {
        let (a, b) = (values(m as u64 * 31 + k as u64, m * k), values(n as u64 * 17 + 5, k * n));
        let c = if beta == 0.0 { vec![f32::NAN; m * (n + 3)] } else { values(7, m * (n + 3)) };
        let (rsa, csa) = if trans_a { (1, m as isize) } else { (k as isize, 1) };
        let (rsb, csb) = if trans_b { (1, k as isize) } else { (n as isize, 1) };
        let args = GemmArgs { m, k, n, alpha, beta, rsa, csa, rsb, csb, rsc: n as isize + 3, csc: 1 };
        (args, a, b, c)
    }

    #[test]
    fn kernels_are_within_the_rounding_bound_of_f64() {
        let kernels = kernels();
        for &(m, k, n) in
            &[(1, 1, 1), (5, 3, 7), (13, 300, 33), (12, 256, 32), (25, 513, 70), (7, 5, 4200), (40, 1, 65), (64, 300, 100)]
        {
            for (trans_a, trans_b, alpha, beta) in
                [(false, false, 1.0, 0.0), (true, false, 0.5, 1.0), (false, true, 1.0, 2.0), (true, true, -1.5, 0.0)]
            {
                for (name, kernel) in &kernels {
                    let (args, a, b, mut c) = case(m, k, n, trans_a, trans_b, alpha, beta);
                    let c0 = c.clone();
                    // SAFETY: the operands cover every element the strides address.
                    unsafe { kernel(&args, ASource::Strided(a.as_ptr()), b.as_ptr(), c.as_mut_ptr()) };
                    for i in 0..m {
                        for j in 0..n {
                            let (mut sum, mut mag) = (0f64, 0f64);
                            for p in 0..k {
                                let x = a[i * args.rsa as usize + p * args.csa as usize] as f64;
                                let y = b[p * args.rsb as usize + j * args.csb as usize] as f64;
                                sum += x * y;
                                mag += (x * y).abs();
                            }
                            let old = c0[i * (n + 3) + j] as f64;
                            let want = alpha as f64 * sum + if beta == 0.0 { 0.0 } else { beta as f64 * old };
                            let scaled_old = if beta == 0.0 { 0.0 } else { (beta as f64 * old).abs() };
                            let bound =
                                (2.0 * (k + 2) as f64 * f32::EPSILON as f64) * (alpha.abs() as f64 * mag + scaled_old) + 1e-30;
                            let got = c[i * (n + 3) + j] as f64;
                            assert!(
                                (got - want).abs() <= bound,
                                "{name} {m}x{k}x{n} ({trans_a}, {trans_b}, {alpha}, {beta}) at ({i}, {j}): {got} vs {want}"
                            );
                        }
                        // The row stride's gap is never written.
                        assert!(c[i * (n + 3) + n..][..3]
                            .iter()
                            .zip(&c0[i * (n + 3) + n..][..3])
                            .all(|(x, y)| x.to_bits() == y.to_bits()));
                    }
                }
            }
        }
    }

    #[test]
    fn an_empty_k_scales_c() {
        for (name, kernel) in kernels() {
            let (args, a, b, mut c) = case(3, 0, 5, false, false, 1.0, 2.0);
            let c0 = c.clone();
            // SAFETY: as above (A and B are empty).
            unsafe { kernel(&args, ASource::Strided(a.as_ptr()), b.as_ptr(), c.as_mut_ptr()) };
            assert!(c.iter().zip(&c0).enumerate().all(|(i, (x, y))| i % 8 >= 5 || *x == 2.0 * y), "{name}");
        }
    }

    /// B packed by [`PackedLayout`] gives the same bits as B packed by the
    /// kernel, over column blocks starting at any whole panel.
    #[test]
    fn prepacked_b_matches_strided_b_bit_for_bit() {
        let Some((_, nr)) = tile() else {
            eprintln!("skipped: no packed kernel on this CPU");
            return;
        };
        let (m, k, n) = (14, 600, 100);
        let (args, a, b, c) = case(m, k, n, false, false, 1.0, 1.0);
        let mut want = c.clone();
        // SAFETY: as above.
        unsafe { sgemm(&args, ASource::Strided(a.as_ptr()), b.as_ptr(), want.as_mut_ptr()) };
        let layout = PackedLayout::new(k, n, nr);
        let mut packed = vec![f32::NAN; layout.len() + 64];
        let start = packed.as_ptr().align_offset(64);
        let packed = &mut packed[start..][..layout.len()];
        for p in 0..k {
            for j in 0..layout.npad {
                packed[layout.index(p, j)] = if j < n { b[p * n + j] } else { 0.0 };
            }
        }
        let mut got = c.clone();
        for j0 in (0..n).step_by(2 * nr) {
            let block = GemmArgs { n: (2 * nr).min(n - j0), ..args };
            // SAFETY: columns j0.. of C; the packed matrix covers them.
            unsafe {
                sgemm_prepacked(&block, ASource::Strided(a.as_ptr()), packed.as_ptr(), &layout, j0, got.as_mut_ptr().add(j0))
            };
        }
        assert!(got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()));
    }

    /// A packed ahead ([`PanelsA`]) gives the same bits as A read in place
    /// or packed block by block, for products over any whole panels of its
    /// rows (as the thread split hands them out), k across several blocks,
    /// m not a whole number of panels, alpha and beta.
    #[test]
    fn prepacked_a_matches_a_in_place_bit_for_bit() {
        for (name, kernel, mr) in kernels_and_rows() {
            for (m, k, n, trans_a) in [(29, 600, 70, false), (12, 256, 32, false), (7, 5, 100, true), (40, 300, 33, true)] {
                let (args, a, b, c) = case(m, k, n, trans_a, false, 0.5, 1.0);
                let mut want = c.clone();
                // SAFETY: the operands cover every element the strides address.
                unsafe { kernel(&args, ASource::Strided(a.as_ptr()), b.as_ptr(), want.as_mut_ptr()) };
                let layout = PanelsA { m, k, mr, mpad: m.div_ceil(mr) * mr };
                let mut packed = vec![f32::NAN; layout.len()];
                if trans_a {
                    // Row-major copy first: `pack` reads rows.
                    let rows: Vec<f32> = (0..m * k).map(|e| a[(e % k) * m + e / k]).collect();
                    layout.pack(&rows, k, &mut packed);
                } else {
                    layout.pack(&a, k, &mut packed);
                }
                for split in [m, mr, 2 * mr] {
                    let mut got = c.clone();
                    for row0 in (0..m).step_by(split) {
                        let block = GemmArgs { m: split.min(m - row0), ..args };
                        let a = ASource::Panels { data: packed.as_ptr(), mpad: layout.mpad, row0 };
                        // SAFETY: rows row0.. of C; the packed matrix covers them.
                        unsafe { kernel(&block, a, b.as_ptr(), got.as_mut_ptr().add(row0 * (n + 3))) };
                    }
                    let same = got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(same, "{name} {m}x{k}x{n} (A transposed: {trans_a}) in blocks of {split} rows");
                }
            }
        }
    }
}
