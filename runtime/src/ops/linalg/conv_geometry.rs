//! The geometry of one convolution call (shared by convolution, pooling
//! and the packed fast path), the epilogue type fused layers pass, and the
//! limits that keep untrusted engines from asking for huge buffers.

use super::num::Scalar;
use super::window::Window;
use crate::ensure_op;
use crate::error::Result;

/// The sizes of one convolution call.
#[derive(Clone, Debug)]
pub(crate) struct ConvGeometry {
    pub n: usize,
    pub c: usize,
    pub m: usize,
    pub group: usize,
    pub in_spatial: Vec<usize>,
    pub out_spatial: Vec<usize>,
    pub win: Window,
    /// Elements of one input channel plane.
    pub in_size: usize,
    /// Elements of one output channel plane.
    pub out_size: usize,
    /// Taps of the kernel.
    pub k_size: usize,
}

impl ConvGeometry {
    pub fn new(
        n: usize,
        c: usize,
        m: usize,
        group: usize,
        in_spatial: Vec<usize>,
        out_spatial: Vec<usize>,
        win: Window,
    ) -> ConvGeometry {
        let in_size = in_spatial.iter().product();
        let out_size = out_spatial.iter().product();
        let k_size = win.kernel_shape.iter().product();
        ConvGeometry { n, c, m, group, in_spatial, out_spatial, win, in_size, out_size, k_size }
    }

    pub fn output_shape(&self) -> Vec<usize> {
        let mut s = vec![self.n, self.m];
        s.extend(&self.out_spatial);
        s
    }

    /// The extent of spatial axis `d` padded so that it holds the input,
    /// its padding and every window of every output position.
    pub fn padded_extent(&self, d: usize) -> usize {
        let win = &self.win;
        let padded = self.in_spatial[d] + win.pad_begin(d) + win.pad_end(d);
        padded.max(self.out_spatial[d].saturating_sub(1) * win.strides[d] + win.span(d))
    }

    /// Whether the input plane already is the im2col matrix: a 1×1 kernel,
    /// unit strides and no padding.
    pub fn is_pointwise(&self) -> bool {
        self.win.kernel_shape.iter().all(|&k| k == 1)
            && self.win.strides.iter().all(|&s| s == 1)
            && self.win.pads.iter().all(|&p| p == 0)
    }

    /// Refuses a window whose `TapRows` would exceed [`MAX_TAP_ROWS`]:
    /// engines are untrusted, and a failed allocation aborts.
    pub fn checked(self, op: &str) -> Result<ConvGeometry> {
        let rows: usize = self.out_spatial[..self.out_spatial.len().saturating_sub(1)].iter().product();
        let tap_rows = self.k_size.checked_mul(rows).filter(|&n| n <= MAX_TAP_ROWS);
        ensure_op!(
            tap_rows.is_some(),
            "{op}: a kernel of {} taps over {rows} output rows exceeds {MAX_TAP_ROWS} (tap, row) pairs",
            self.k_size
        );
        Ok(self)
    }

    /// How many planes one thread's share of a per-plane loop (taps times
    /// outputs each: im2col, depthwise, pooling) should have at least.
    pub fn planes_per_piece(&self) -> usize {
        crate::parallel::grain_elements(self.k_size * self.out_size)
    }

    /// Whether every group sees exactly one input channel.
    pub fn is_depthwise(&self) -> bool {
        self.group > 1 && self.c == self.group
    }
}

/// What a fused layer applies to finished outputs (its epilogue): called
/// with the offset of a run of output elements and the run, on the thread
/// that computed it, while the run is still in cache.
pub(crate) type Finish<'a, T> = &'a (dyn Fn(usize, &mut [T]) + Sync);

/// Fills each output channel plane with its bias (or zero).
/// Planes are split over the context's threads.
pub(super) fn init_with_bias<T: Scalar>(y: &mut [T], bias: Option<&[T]>, plane: usize) {
    let plane = plane.max(1);
    crate::parallel::par_chunks_mut(y, plane, crate::parallel::grain_elements(plane), |first, planes| {
        for (i, yp) in planes.chunks_exact_mut(plane).enumerate() {
            yp.fill(bias.map_or(T::default(), |b| b[first + i]));
        }
    });
}

/// The most (tap, output row) pairs a sliding window may have (640 MiB of
/// `TapRow`s): a global pooling of a 4096x4096 map; real models stay far
/// below (a global pooling of a 224x224 map has 50,176).
pub(crate) const MAX_TAP_ROWS: usize = 1 << 24;

/// The largest im2col matrix one multiply reads, in elements (64 MiB of
/// f32). A larger one (a 3x3 convolution of 64 channels at 1024x1024 would
/// need 2.4 GB) is built and multiplied a block of output positions at a
/// time. Every output element gets the same sum either way: the multiply's
/// order over k does not depend on how many columns it is given (the
/// thread split of `gemm_kernel` relies on the same).
pub(super) const MAX_IM2COL: usize = 1 << 24;
