//! The fast mode's direct f32 convolution (`crate::math`) for 2-D layers
//! with few output channels per group: no im2col matrix at all.
//!
//! With M output channels, each element of an im2col matrix is written
//! once and read M times, so for small M building it costs as much as the
//! product (VGG's first layer, 3 -> 4 channels at 224x224, spent most of its
//! time writing 27 x 50,176 floats). Here the input planes are copied once
//! into zero-padded planes, each row stored as its `sx` stride phases
//! (`phase_planes`), so that every kernel tap reads a run of output
//! positions as one contiguous vector whatever the stride. A register tile
//! of R output channels times V vectors of output positions (pieces of
//! output rows, flattened over the rows of a work item) then sums over
//! every (input channel, tap): per step V vector loads, R broadcasts of a
//! weight read in place, and R·V fused multiply-adds (8 x 3 or 4 x 4 with
//! AVX-512, 4 x 2 with AVX2). Each output element is the bias plus its terms
//! in (channel, tap) order, fused, whatever the thread count; the exact
//! mode never comes here.

use super::conv_geometry::{ConvGeometry, Finish, MAX_IM2COL};
use super::gemm_kernel::Shared;
use super::num::with_scratch;
use super::phase_planes::{Chunk, PhasePlanes};

/// Pointwise convolutions with up to this many input channels per group
/// run here; longer ones through the packed product. With so short a sum
/// the packed product spends its time packing and writing C, not in
/// FMAs (MobileNetV2's 8 -> 48 expansion on 32 x 32 planes, one thread:
/// 15.4 us there, 9.8 here; 48 -> 8 projections were faster there).
const POINTWISE_INPUTS: usize = 16;

/// Up to this many output channels per group, this path is taken
/// whatever the shape: the im2col matrix would be read by too few rows.
const FEW_CHANNELS: usize = 32;

/// Up to this many, it is taken where output rows fill most of the
/// vectors; above it (and on rows that fill them poorly, 7 of 16 lanes on
/// ResNet-50's last stage) the packed product was faster (full ResNet-50,
/// one thread: 41.5 ms with this path up to 256 channels, 45.5 up to 512,
/// 50.6 for every layer).
const MAX_CHANNELS: usize = 256;

/// Whether the direct path is expected to beat im2col and the packed
/// product (measured on the testdata models and full-size CNNs).
fn pays(g: &ConvGeometry, isa: Isa) -> bool {
    let mg = g.m / g.group;
    let ow = g.out_spatial[1];
    let lanes = isa.lanes();
    let filled = ow as f64 / (ow.div_ceil(lanes) * lanes) as f64;
    mg <= FEW_CHANNELS || (mg <= MAX_CHANNELS && filled >= 0.75)
}

/// Output elements per channel that one work item computes and finishes
/// while they are in cache.
const ITEM_POSITIONS: usize = 2048;

/// Runs the convolution directly and returns true, or returns false,
/// doing nothing, where this path does not apply: the exact mode, a CPU
/// without AVX2 and FMA, depthwise convolutions, pointwise ones of more
/// than [`POINTWISE_INPUTS`] input channels, other than
/// two spatial axes, shapes where it does not pay ([`pays`]), padded
/// planes beyond [`MAX_IM2COL`].
pub(super) fn conv_direct(
    g: &ConvGeometry,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    finish: Finish<'_, f32>,
) -> bool {
    if crate::math::mode() != crate::math::Math::Fast
        || g.is_depthwise()
        || (g.is_pointwise() && g.c / g.group > POINTWISE_INPUTS)
        || g.in_spatial.len() != 2
    {
        return false;
    }
    let (cg, mg) = (g.c / g.group, g.m / g.group);
    if g.n == 0 || cg == 0 || mg == 0 || g.out_size == 0 {
        return false;
    }
    match Isa::detect() {
        Some(isa) if pays(g, isa) => conv_direct_with(isa, g, x, w, bias, y, finish),
        _ => false,
    }
}

/// [`conv_direct`] with the tile of `isa`, past the checks on the mode
/// and the layer's kind.
fn conv_direct_with(
    isa: Isa,
    g: &ConvGeometry,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    finish: Finish<'_, f32>,
) -> bool {
    let (cg, mg) = (g.c / g.group, g.m / g.group);
    let planes = PhasePlanes::new(g);
    let planes_len = cg * planes.plane;
    let kofs = planes.offsets(g, cg);
    let chunks = planes.chunks(g, isa.lanes());
    let reach = kofs.iter().max().copied().unwrap_or(0) + chunks.iter().map(|c| c.input + c.lanes - 1).max().unwrap_or(0);
    if planes_len > MAX_IM2COL || reach >= planes_len {
        return false;
    }
    let blocks = channel_blocks(mg, isa.max_rows());
    let (oh, ow) = (g.out_spatial[0], g.out_spatial[1]);
    let per_row = ow.div_ceil(isa.lanes());
    let kdim = cg * g.k_size;
    // How the threads share the work, so that what they both read is the
    // smaller operand (as the packed product chooses between its rows and
    // columns): where the input planes outweigh the weights, items are
    // bands of rows of every channel (at least one band per thread), and
    // each thread reads its band of the input, the rows the next layer's
    // same thread mostly reads; else blocks of channels, each thread
    // reading its channels' weights.
    let threads = crate::parallel::threads();
    let by_rows = threads > 1 && cg * planes.plane >= mg * kdim;
    let band = if by_rows { oh.div_ceil(threads) } else { oh };
    let rows_per_item = (ITEM_POSITIONS / ow).min(band).clamp(1, oh);
    let row_groups = oh.div_ceil(rows_per_item);
    let item_grain = crate::parallel::grain_macs(rows_per_item * ow * kdim * blocks[0].rows);
    let out = Shared(y.as_mut_ptr());
    with_scratch::<f32, _>(planes_len, |scratch| {
        for n in 0..g.n {
            for grp in 0..g.group {
                let x_g = &x[(n * g.c + grp * cg) * g.in_size..][..cg * g.in_size];
                crate::parallel::par_chunks_mut(
                    scratch,
                    planes.plane,
                    crate::parallel::grain_elements(planes.plane),
                    |c0, chunk| planes.fill(g, &x_g[c0 * g.in_size..], chunk),
                );
                let planes_g: &[f32] = scratch;
                let w_g = &w[grp * mg * kdim..][..mg * kdim];
                let bias_g = bias.map(|b| &b[grp * mg..][..mg]);
                let first_channel = n * g.m + grp * mg;
                crate::parallel::par_ranges(blocks.len() * row_groups, item_grain, |range| {
                    for item in range {
                        let (rg, bi) = if by_rows {
                            (item / blocks.len(), item % blocks.len())
                        } else {
                            (item % row_groups, item / row_groups)
                        };
                        let b = &blocks[bi];
                        // A tile's spare rows repeat its last real one.
                        let w_rows: [*const f32; MAX_ROWS] =
                            std::array::from_fn(|r| w_g[(b.first + r.min(b.rows - 1)) * kdim..].as_ptr());
                        let mut biases = [0f32; MAX_ROWS];
                        if let Some(bias) = bias_g {
                            biases[..b.rows].copy_from_slice(&bias[b.first..][..b.rows]);
                        }
                        let (r0, r1) = (rg * rows_per_item, ((rg + 1) * rows_per_item).min(oh));
                        let y0 = (first_channel + b.first) * g.out_size;
                        let item_chunks = &chunks[r0 * per_row..r1 * per_row];
                        // Fewer vectors where the item has fewer chunks than the tile.
                        let vectors = isa.vectors(b.width).min(item_chunks.len());
                        for group in item_chunks.chunks(vectors) {
                            // A short last group is made up with empty chunks.
                            let call = Call {
                                kofs: &kofs,
                                x: planes_g.as_ptr(),
                                w: &w_rows,
                                bias: &biases,
                                chunks: std::array::from_fn(|v| group.get(v).copied().unwrap_or(Chunk { lanes: 0, ..group[0] })),
                                y: out.at(y0 as isize),
                                plane: g.out_size,
                                rows: b.rows,
                            };
                            // SAFETY: every element the call reads is inside
                            // the padded planes (`reach` was checked) or a
                            // masked-off lane; it writes its block's real
                            // channels at its chunks' positions, which no
                            // other item owns.
                            unsafe { isa.run(b.width, vectors, &call) };
                        }
                        for r in 0..b.rows {
                            let start = y0 + r * g.out_size + r0 * ow;
                            // SAFETY: rows r0..r1 of this channel's plane, this item's alone.
                            let run = unsafe { std::slice::from_raw_parts_mut(out.at(start as isize), (r1 - r0) * ow) };
                            finish(start, run);
                        }
                    }
                });
            }
        }
    });
    true
}

/// The most output channels one register tile holds.
const MAX_ROWS: usize = 8;
/// The most vectors of output positions one register tile holds.
const MAX_VECTORS: usize = 4;

/// A block of output channels computed together: `rows` real ones from
/// `first`, in a tile `width` rows wide (4 or 8).
struct ChannelBlock {
    first: usize,
    rows: usize,
    width: usize,
}

/// Blocks of up to `max` channels (8 with AVX-512, 4 with AVX2); a block
/// of at most 4 channels takes a 4-wide tile.
fn channel_blocks(m: usize, max: usize) -> Vec<ChannelBlock> {
    let mut blocks = Vec::new();
    let mut first = 0;
    while first < m {
        let rows = (m - first).min(max);
        blocks.push(ChannelBlock { first, rows, width: if rows <= 4 { 4 } else { max } });
        first += rows;
    }
    blocks
}

/// One register tile's work: `rows` output channels (of a tile `width`
/// wide) at the positions of two chunks.
struct Call<'a> {
    /// Offset of each term k from `x`, for output position (0, 0).
    kofs: &'a [usize],
    x: *const f32,
    /// Each tile row's weights, one per term k.
    w: &'a [*const f32; MAX_ROWS],
    bias: &'a [f32; MAX_ROWS],
    /// The tile's vectors of positions (as many as it has; the rest unused).
    chunks: [Chunk; MAX_VECTORS],
    /// The block's first output channel plane.
    y: *mut f32,
    /// Elements of one output plane.
    plane: usize,
    rows: usize,
}

/// The vector instructions this CPU has for the tile.
#[derive(Clone, Copy, Debug)]
enum Isa {
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Isa {
    fn detect() -> Option<Isa> {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx512f") && has!("avx2") && has!("fma") {
                return Some(Isa::Avx512);
            }
            if has!("avx2") && has!("fma") {
                return Some(Isa::Avx2);
            }
        }
        None
    }

    /// Output positions per vector.
    fn lanes(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => 16,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => 8,
        }
    }

    /// Vectors of positions per tile of `width` channels: 8 x 3 or 4 x 4
    /// accumulators with AVX-512 (of 32 registers), 4 x 2 with AVX2 (of 16).
    fn vectors(self, width: usize) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                if width == 8 {
                    3
                } else {
                    4
                }
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => 2,
        }
    }

    /// Output channels per tile.
    fn max_rows(self) -> usize {
        match self {
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => 8,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => 4,
        }
    }

    /// # Safety
    /// `call`'s pointers and offsets must be as [`Call`] describes.
    unsafe fn run(self, width: usize, vectors: usize, call: &Call<'_>) {
        // SAFETY (each arm): detected by `detect`; the call's bounds are the caller's.
        match (self, width, vectors) {
            #[cfg(target_arch = "x86_64")]
            (Isa::Avx512, 8, 1) => unsafe { x86::avx512::<8, 1>(call) },
            #[cfg(target_arch = "x86_64")]
            (Isa::Avx512, 8, 2) => unsafe { x86::avx512::<8, 2>(call) },
            #[cfg(target_arch = "x86_64")]
            (Isa::Avx512, 8, _) => unsafe { x86::avx512::<8, 3>(call) },
            #[cfg(target_arch = "x86_64")]
            (Isa::Avx512, _, 1) => unsafe { x86::avx512::<4, 1>(call) },
            #[cfg(target_arch = "x86_64")]
            (Isa::Avx512, _, 2) => unsafe { x86::avx512::<4, 2>(call) },
            #[cfg(target_arch = "x86_64")]
            (Isa::Avx512, _, _) => unsafe { x86::avx512::<4, 4>(call) },
            #[cfg(target_arch = "x86_64")]
            (Isa::Avx2, _, _) => unsafe { x86::avx2(call) },
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::Call;
    use std::arch::x86_64::*;

    /// The tile with 16-lane vectors: `R` channels x `V` vectors of
    /// accumulators, masked loads and stores at the chunks' ends.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn avx512<const R: usize, const V: usize>(c: &Call<'_>) {
        let masks: [__mmask16; V] = std::array::from_fn(|v| ((1u32 << c.chunks[v].lanes) - 1) as __mmask16);
        let mut acc = [[_mm512_setzero_ps(); V]; R];
        for (r, acc) in acc.iter_mut().enumerate() {
            *acc = [_mm512_set1_ps(c.bias[r]); V];
        }
        // SAFETY (every access below): the caller's; masked-off lanes are
        // neither read nor written.
        unsafe {
            let xs: [*const f32; V] = std::array::from_fn(|v| c.x.add(c.chunks[v].input));
            for (k, &o) in c.kofs.iter().enumerate() {
                let xv: [__m512; V] = std::array::from_fn(|v| _mm512_maskz_loadu_ps(masks[v], xs[v].add(o)));
                for (acc, w) in acc.iter_mut().zip(c.w) {
                    let wv = _mm512_set1_ps(*w.add(k));
                    for v in 0..V {
                        acc[v] = _mm512_fmadd_ps(wv, xv[v], acc[v]);
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate().take(c.rows) {
                let row = c.y.add(r * c.plane);
                for v in 0..V {
                    _mm512_mask_storeu_ps(row.add(c.chunks[v].output), masks[v], acc[v]);
                }
            }
        }
    }

    /// The tile with 8-lane vectors: 4 channels x 2 vectors.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2(c: &Call<'_>) {
        let mask = |lanes: usize| _mm256_cmpgt_epi32(_mm256_set1_epi32(lanes as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        let masks = [mask(c.chunks[0].lanes), mask(c.chunks[1].lanes)];
        let mut acc = [[_mm256_setzero_ps(); 2]; 4];
        debug_assert!(c.chunks[2..].iter().all(|ch| ch.lanes == 0), "the AVX2 tile has two vectors");
        for (r, acc) in acc.iter_mut().enumerate() {
            let b = _mm256_set1_ps(c.bias[r]);
            *acc = [b, b];
        }
        // SAFETY (every access below): the caller's; masked-off lanes are
        // neither read nor written.
        unsafe {
            let (x0, x1) = (c.x.add(c.chunks[0].input), c.x.add(c.chunks[1].input));
            for (k, &o) in c.kofs.iter().enumerate() {
                let v0 = _mm256_maskload_ps(x0.add(o), masks[0]);
                let v1 = _mm256_maskload_ps(x1.add(o), masks[1]);
                for (acc, w) in acc.iter_mut().zip(c.w) {
                    let wv = _mm256_set1_ps(*w.add(k));
                    acc[0] = _mm256_fmadd_ps(wv, v0, acc[0]);
                    acc[1] = _mm256_fmadd_ps(wv, v1, acc[1]);
                }
            }
            for (r, acc) in acc.iter().enumerate().take(c.rows) {
                let row = c.y.add(r * c.plane);
                _mm256_maskstore_ps(row.add(c.chunks[0].output), masks[0], acc[0]);
                _mm256_maskstore_ps(row.add(c.chunks[1].output), masks[1], acc[1]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::conv_reference::{assert_matches_reference, case};
    use super::*;

    fn isas() -> Vec<Isa> {
        let mut out = Vec::new();
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx512f") && has!("avx2") && has!("fma") {
                out.push(Isa::Avx512);
            }
            if has!("avx2") && has!("fma") {
                out.push(Isa::Avx2);
            }
        }
        out
    }

    /// Every tile shape (4 and 8 channels, 1 to 4 vectors, short blocks),
    /// strides 1 to 3, dilation, uneven padding, groups, rows narrower and
    /// wider than a tile, on 1 and 3 threads: the convolution within the
    /// bound of reordered f32 sums, each output finished exactly once.
    #[test]
    fn direct_convolutions_match_the_reference_and_finish_each_output_once() {
        let isas = isas();
        if isas.is_empty() {
            eprintln!("skipped: 1 test (this CPU has no AVX2 and FMA, so there is no direct kernel)");
            return;
        }
        let cases = [
            case([2, 3, 20, 70], 4, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),
            case([1, 8, 10, 33], 48, [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1),
            case([1, 3, 23, 37], 16, [7, 7], [2, 2], [3, 3, 3, 3], [1, 1], 1),
            case([1, 5, 9, 11], 1, [3, 2], [3, 2], [2, 0, 1, 3], [1, 1], 1),
            case([2, 6, 12, 12], 12, [3, 3], [1, 1], [2, 2, 2, 2], [2, 2], 2),
            case([1, 8, 1, 1], 32, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1),
            case([1, 4, 6, 40], 9, [1, 3], [1, 3], [0, 1, 0, 1], [1, 1], 1),
            case([1, 2, 30, 5], 64, [3, 1], [2, 1], [1, 0, 1, 0], [1, 1], 1),
            case([1, 3, 17, 17], 5, [2, 2], [2, 2], [0, 0, 0, 0], [1, 1], 1),
            case([3, 4, 7, 33], 17, [3, 3], [1, 2], [1, 1, 0, 2], [1, 1], 1),
        ];
        for (i, t) in cases.iter().enumerate() {
            let g = t.geometry();
            for &isa in &isas {
                assert_matches_reference(&format!("case {i}, {isa:?}"), &g, i as u64, |x, w, b, y, finish| {
                    conv_direct_with(isa, &g, x, w, Some(b), y, finish)
                });
            }
        }
    }
}
