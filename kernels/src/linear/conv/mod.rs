//! The convolution kernels: `Conv` and `ConvTranspose`, plain, fused
//! (`FusedConv`: bias, then residual, then activation in the epilogue) or
//! int8 (`Int8Conv`) or FP8 (`Fp8Conv`), on f32, f16 (`HalfIo`), int8 or
//! E4M3 storage; 1-D, 2-D and 3-D, NCDHW activations, grouped, strided,
//! padded and dilated.
//!
//! # Kernels
//!
//! * `conv_igemm.cu`, the implicit GEMM: GEMM rows are output pixels
//!   (`N·OD·OH·OW`), columns the output channels of a group, `K = C/g·kD·kH·kW`
//!   in the weight's order, so weight tiles are K-contiguous loads; the
//!   im2col gather happens while a tile of x is loaded (zero-filled outside
//!   the image and past every edge, so any size works). One grid serves all
//!   groups (`blockIdx.z`). Variants: `conv_simt` (f32 FMA, exact; int32 for
//!   int8), `conv_tf32` (mma.sync m16n8k8 on f32 storage, inputs rounded to
//!   tf32), `conv_f16` (mma.sync m16n8k16 with f32 accumulators on f16
//!   storage), `conv_i8` (mma.sync m16n8k32, int32 accumulators) and
//!   `conv_e4m3` (mma.sync m16n8k32 on E4M3, f32 accumulators, sm_89 and
//!   newer; before that FP8 layers take `conv_simt` on decoded values). 1x1
//!   convs with unit strides and no padding compile a `POINTWISE` flavour
//!   whose gather is a plain strided read (per image, `out[M, HW] = W[M, C] ·
//!   x[C, HW]`).
//! * `conv_depthwise.cu`, a direct kernel for depthwise convs (`group == C`,
//!   any channel multiplier), memory-bound; f32 and f16 layers accumulate in
//!   the CPU's order without FMA, so they match it bit for bit.
//! * `conv_transpose.cu`, ConvTranspose in gather form, one output element
//!   per thread.
//!
//! Epilogues follow the CPU reference operation by operation (see
//! `conv_common.cuh`): float layers add the bias to the accumulator, then
//! the residual, then apply the activation and round once on an f16 store;
//! int8 layers compute `f32(acc) * (x_scale * w_scale[c])`, add bias and
//! residual, apply the activation and store f32, f16, or
//! `saturate(round_half_even(y / out_scale))`; FP8 layers likewise from an
//! f32 accumulator, storing `e4m3(y / out_scale)` when they requantize.
//!
//! # Tactics
//!
//! Implicit GEMM: `<variant> TMxTNxTK` and `tTHMxTHN` (SIMT: outputs per
//! thread) or `wWMxWN` (mma: warps), e.g. `conv_tf32 128x128x16 w2x4`. Tiles
//! from 32x32 to 256x64 / 128x128 (pixels x channels); TK 8 or 16 (SIMT), 16
//! or 32 (TF32), 32 or 64 (f16), 64 or 128 (int8). A tactic is valid when
//! its thread count divides the tile loads evenly, its warp tiles are whole
//! mma tiles, its two shared buffers fit 48 KiB, and a thread holds at most
//! 64 accumulators and stages at most 16 pixels and 16 channels of a step
//! (each a 32-bit register: one f32, two f16 or four int8 consecutive in
//! k). Tiles are loaded through registers into two shared buffers (the next
//! step's global loads are in flight while the current step computes);
//! cp.async multi-stage pipelines are not used because the gather reads
//! single 1-, 2- or 4-byte elements. There is no split-K: a layer with few
//! output pixels and channels (batch 1 on 7x7 planes) gets few blocks.
//! Depthwise: `conv_dw oOPT bBLOCK` (outputs per thread along a row, threads
//! per block). ConvTranspose: `conv_t bBLOCK`.
//!
//! # Heuristic
//!
//! The variant: tensor cores (TF32 for f32, f16 mma for f16, s8 mma for
//! int8) when the group has at least 16 output channels and K is at least
//! 16 (32 for int8), SIMT otherwise; the other variant's tactics follow.
//! Within a variant, tactics are ordered by an estimated time: an SM's share
//! of the blocks (`ceil(blocks / SMs)`, with the SM count of the target's
//! usual part) times the per-block cost `TM·TN + 16·(TM + TN)` (the mma work
//! and the gather of both tiles per k), divided by an efficiency of
//! `min(1, resident warps / 8)`, where the resident blocks are limited by
//! registers, shared memory and the blocks that SM actually gets. Small
//! layers (batch 1) thus get 64x64 tiles and more blocks; large ones (batch
//! 256) mostly 128x128 tiles. Depthwise: 4 outputs per thread on
//! rows of at least 28, 2 from 8, else 1; 256 threads. ConvTranspose: 256
//! threads.
//!
//! # Unsupported
//!
//! f64 and bf16 storage, activations without a CUDA expression, more than
//! 3 spatial axes, more than 65535 groups (outside depthwise and
//! ConvTranspose), and sizes whose 32-bit index arithmetic could overflow:
//! an image (all channels of x or of the output) or a weight of 2^30
//! elements or more, 2^31 GEMM rows, a spatial extent of 2^27.

mod direct;
pub(crate) mod igemm;

use crate::Tactic;
use crate::{activation, c_type, unsupported, Candidate, LayerIo, Selection, SmLimits, Unsupported, FLOAT8};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::fused::{Epilogue, FusedOp, LinearKind};
use trtc_runtime::ops::linalg::{Conv, ConvTranspose, LinalgOp};
use trtc_runtime::ops::precision::{Fp8Output, Int8Output, PrecisionOp};
use trtc_runtime::{DType, Op, TensorType};

/// The candidates of a Conv, ConvTranspose, FusedConv or Int8Conv layer.
pub fn candidates(io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let layer = ConvLayer::parse(io)?;
    if layer.output_len() == 0 {
        return Ok(vec![Candidate { tactic: Tactic::ConvEmpty, launches: Vec::new() }]);
    }
    if layer.transpose {
        direct::transpose_candidates(&layer, limits)
    } else if layer.is_depthwise() {
        direct::depthwise_candidates(&layer, limits)
    } else {
        igemm::candidates(&layer, limits)
    }
}

/// Largest size of any one spatial quantity (extent, window span, padding),
/// so that the kernels' 32-bit coordinate arithmetic and the `-2^29`
/// marker of rows past the GEMM's end cannot overflow or wrap.
const MAX_AXIS: usize = 1 << 27;
/// Largest element count of one image (all channels of x or of the output).
const MAX_IMAGE: usize = 1 << 30;
/// Largest tile depth of any implicit-GEMM tactic.
const MAX_TILE_K: usize = 128;

/// The parameters of an `Int8Conv` or `Fp8Conv` layer.
#[derive(Clone, Copy, Debug)]
struct Int8Params {
    /// The layer input holding `w_scale`.
    w_scale: u32,
    x_scale: f32,
    /// The requantization scale of an int8 or FP8 output.
    out_scale: Option<f32>,
}

/// What a quantized layer stores: its output dtype and requantization
/// scale.
#[derive(Clone, Copy, Debug)]
struct QuantOutput {
    /// The storage of x and w.
    operands: DType,
    out: DType,
    out_scale: Option<f32>,
}

impl QuantOutput {
    fn int8(o: Int8Output) -> QuantOutput {
        let (out, out_scale) = match o {
            Int8Output::F32 => (DType::F32, None),
            Int8Output::F16 => (DType::F16, None),
            Int8Output::Int8 { scale } => (DType::I8, Some(scale)),
        };
        QuantOutput { operands: DType::I8, out, out_scale }
    }

    fn fp8(o: Fp8Output) -> QuantOutput {
        let (out, out_scale) = match o {
            Fp8Output::F32 => (DType::F32, None),
            Fp8Output::F16 => (DType::F16, None),
            Fp8Output::Fp8 { scale } => (DType::F8E4M3FN, Some(scale)),
        };
        QuantOutput { operands: DType::F8E4M3FN, out, out_scale }
    }
}

/// One convolution layer as the kernels see it. 1-D and 2-D convolutions
/// are padded to 3-D with leading unit axes (extent 1, kernel 1, stride 1,
/// no padding, dilation 1).
#[derive(Clone, Debug)]
struct ConvLayer {
    transpose: bool,
    /// Spatial axes of the layer (1 to 3).
    rank: usize,
    n: usize,
    /// Input channels.
    c: usize,
    /// Output channels.
    m: usize,
    group: usize,
    /// `[D, H, W]` of x and of the output.
    input: [usize; 3],
    output: [usize; 3],
    kernel: [usize; 3],
    stride: [usize; 3],
    /// Begin pads (end pads only shape the output, which is given).
    pad: [usize; 3],
    dilation: [usize; 3],
    /// A 1x1 kernel with unit strides and no padding: the input is the
    /// im2col matrix.
    pointwise: bool,
    /// Storage of x and w, and of the output.
    x: DType,
    out: DType,
    /// The layer input and dtype of the bias and of the residual, if any.
    bias: Option<(u32, DType)>,
    residual: Option<(u32, DType)>,
    int8: Option<Int8Params>,
    /// The CUDA expression of the activation of `v` (`(v)` when none).
    activation: String,
}

/// The attributes Conv and ConvTranspose share.
struct Attrs<'a> {
    kernel: &'a [usize],
    strides: &'a [usize],
    pads: &'a [usize],
    dilations: &'a [usize],
    group: usize,
}

impl<'a> Attrs<'a> {
    fn of_conv(c: &'a Conv) -> Attrs<'a> {
        Attrs { kernel: &c.kernel_shape, strides: &c.strides, pads: &c.pads, dilations: &c.dilations, group: c.group }
    }

    fn of_transpose(c: &'a ConvTranspose) -> Attrs<'a> {
        Attrs { kernel: &c.kernel_shape, strides: &c.strides, pads: &c.pads, dilations: &c.dilations, group: c.group }
    }
}

/// What an op asks of the epilogue, and where its optional inputs are.
struct Parts<'a> {
    attrs: Attrs<'a>,
    transpose: bool,
    output_padding: Option<&'a [usize]>,
    bias: Option<u32>,
    residual: Option<u32>,
    epilogue: Option<&'a Epilogue>,
    int8: Option<(u32, f32, QuantOutput)>,
}

fn split_op<'a>(io: &LayerIo<'a>) -> Result<Parts<'a>, Unsupported> {
    let present = |k: u32| matches!(io.inputs.get(k as usize), Some(Some(_)));
    let plain = |attrs, transpose, output_padding| Parts {
        attrs,
        transpose,
        output_padding,
        bias: present(2).then_some(2),
        residual: None,
        epilogue: None,
        int8: None,
    };
    // `crate::candidates` removes HalfIo already; the storage dtypes say f16.
    Ok(match io.op.unwrapped() {
        Op::Linalg(LinalgOp::Conv(c)) => plain(Attrs::of_conv(c), false, None),
        Op::Linalg(LinalgOp::ConvTranspose(c)) => plain(Attrs::of_transpose(c), true, Some(&c.output_padding)),
        Op::Fused(FusedOp::Linear(l)) => {
            let LinearKind::Conv(c) = &l.kind else { return unsupported(format!("{} is not a convolution", io.op.name())) };
            Parts {
                attrs: Attrs::of_conv(c),
                transpose: false,
                output_padding: None,
                bias: (l.bias && present(2)).then_some(2),
                residual: l.epilogue.residual.then_some(3),
                epilogue: Some(&l.epilogue),
                int8: None,
            }
        }
        Op::Precision(PrecisionOp::Int8Linear(l)) => {
            quantized(io, &l.kind, l.bias, &l.epilogue, (l.x_scale, QuantOutput::int8(l.output)))?
        }
        Op::Precision(PrecisionOp::Fp8Linear(l)) => {
            quantized(io, &l.kind, l.bias, &l.epilogue, (l.x_scale, QuantOutput::fp8(l.output)))?
        }
        op => return unsupported(format!("{} is not a convolution", op.name())),
    })
}

/// The parts of an Int8Conv or Fp8Conv: inputs `[x, w, w_scale, bias?,
/// residual?]`, the scale of x and what it stores.
fn quantized<'a>(
    io: &LayerIo<'a>,
    kind: &'a LinearKind,
    bias: bool,
    epilogue: &'a Epilogue,
    (x_scale, output): (f32, QuantOutput),
) -> Result<Parts<'a>, Unsupported> {
    let LinearKind::Conv(c) = kind else { return unsupported(format!("{} is not a convolution", io.op.name())) };
    Ok(Parts {
        attrs: Attrs::of_conv(c),
        transpose: false,
        output_padding: None,
        bias: bias.then_some(3),
        residual: epilogue.residual.then_some(4),
        epilogue: Some(epilogue),
        int8: Some((2, x_scale, output)),
    })
}

fn is_float(d: DType) -> bool {
    matches!(d, DType::F32 | DType::F16)
}

impl ConvLayer {
    /// Reads and checks a layer; anything the kernels do not handle, or
    /// that does not agree with the op's shape rules, is unsupported.
    fn parse(io: &LayerIo<'_>) -> Result<ConvLayer, Unsupported> {
        let name = io.op.name();
        let parts = split_op(io)?;
        let a = &parts.attrs;
        let r = a.kernel.len();
        if !(1..=3).contains(&r) {
            return unsupported(format!("{name}: {r} spatial axes (1 to 3 have kernels)"));
        }
        if a.strides.len() != r || a.dilations.len() != r || a.pads.len() != 2 * r {
            return unsupported(format!("{name}: attributes disagree in rank"));
        }
        if a.strides.iter().chain(a.dilations).chain(a.kernel).any(|&v| v == 0) || a.group == 0 {
            return unsupported(format!("{name}: zero stride, dilation, kernel or group"));
        }
        let input = |k: u32| io.inputs.get(k as usize).copied().flatten();
        let (Some(x), Some(w)) = (input(0), input(1)) else { return unsupported(format!("{name}: missing x or weight")) };
        let [out] = io.outputs[..] else { return unsupported(format!("{name}: expected one output")) };
        if x.shape.len() != r + 2 || w.shape.len() != r + 2 || out.shape.len() != r + 2 {
            return unsupported(format!("{name}: x {x}, weight {w} and output {out} must have rank {}", r + 2));
        }
        if w.shape[2..] != a.kernel[..] {
            return unsupported(format!("{name}: weight {w} does not match kernel_shape {:?}", a.kernel));
        }
        let g = a.group;
        let (n, c) = (x.shape[0], x.shape[1]);
        // Products of untrusted sizes saturate: a layer too large to index is
        // refused below rather than wrapped.
        let m = if parts.transpose { w.shape[1].saturating_mul(g) } else { w.shape[0] };
        let channels_ok = if parts.transpose {
            w.shape[0] == c && c.is_multiple_of(g)
        } else {
            c == w.shape[1].saturating_mul(g) && m.is_multiple_of(g)
        };
        if !channels_ok {
            return unsupported(format!("{name}: x {x} does not fit weight {w} with group {g}"));
        }
        // The output shape the op's own rules give (the runtime's `infer`,
        // which the IR checked too), against the output: a layer whose
        // declared output disagrees is refused rather than computed. The op
        // here is HalfIo's inner op on f16 layers, so f16 tensors are
        // inferred as the f32 the inner op takes; dtypes are checked below.
        if parts.transpose && parts.output_padding.is_some_and(|p| p.len() != r) {
            return unsupported(format!("{name}: output_padding does not have {r} entries"));
        }
        let widened: Vec<Option<TensorType>> = io
            .inputs
            .iter()
            .map(|t| t.map(|t| if t.dtype == DType::F16 { TensorType::new(DType::F32, t.shape.clone()) } else { t.clone() }))
            .collect();
        let widened: Vec<Option<&TensorType>> = widened.iter().map(Option::as_ref).collect();
        match io.op.infer(&widened) {
            Ok(inferred) if inferred.len() == 1 && inferred[0].shape == out.shape => {}
            Ok(_) => return unsupported(format!("{name}: output {out} does not match x {x} and weight {w}")),
            Err(e) => return unsupported(format!("{name}: {e}")),
        }
        let spatial_in = &x.shape[2..];
        // Dtypes: float storage, or int8 or E4M3 with float scales, bias and
        // residual.
        let dtype_of = |k: Option<u32>| k.and_then(input).map(|t| t.dtype);
        let int8 = match parts.int8 {
            None => {
                if !is_float(x.dtype) || w.dtype != x.dtype || out.dtype != x.dtype {
                    return unsupported(format!("{name}: storage {} / {} / {} (f32 or f16 alike)", x.dtype, w.dtype, out.dtype));
                }
                None
            }
            Some((ws, x_scale, q)) => {
                let scales_ok = input(ws).is_some_and(|t| t.dtype == DType::F32 && t.shape == [m]);
                if x.dtype != q.operands || w.dtype != q.operands || out.dtype != q.out || !scales_ok {
                    return unsupported(format!("{name}: x {x}, weight {w}, output {out} do not match its output {q:?}"));
                }
                Some(Int8Params { w_scale: ws, x_scale, out_scale: q.out_scale })
            }
        };
        if let Some(k) = parts.bias {
            match input(k) {
                Some(b) if b.shape == [m] && (is_float(b.dtype) && (int8.is_none() || b.dtype == DType::F32)) => {}
                _ => return unsupported(format!("{name}: bias input {k} is not a float vector of {m}")),
            }
        }
        if let Some(k) = parts.residual {
            match input(k) {
                Some(t) if t.shape == out.shape && is_float(t.dtype) => {}
                _ => return unsupported(format!("{name}: residual input {k} is not a float tensor of {out}")),
            }
        }
        let activation = match parts.epilogue.and_then(|e| e.activation.as_ref()) {
            None => "(v)".to_string(),
            Some(act) => match activation::epilogue(act, "v") {
                Some(e) => e,
                None => return unsupported(format!("{name}: activation {} has no CUDA expression", act.name())),
            },
        };
        // Normalize to 3-D: the layer's axes are the last `r` of [D, H, W].
        let pad3 = |v: &[usize], fill: usize| {
            let mut o = [fill; 3];
            o[3 - r..].copy_from_slice(v);
            o
        };
        let layer = ConvLayer {
            transpose: parts.transpose,
            rank: r,
            n,
            c,
            m,
            group: g,
            input: pad3(spatial_in, 1),
            output: pad3(&out.shape[2..], 1),
            kernel: pad3(a.kernel, 1),
            stride: pad3(a.strides, 1),
            pad: pad3(&a.pads[..r], 0),
            dilation: pad3(a.dilations, 1),
            pointwise: !parts.transpose && a.kernel.iter().chain(a.strides).all(|&v| v == 1) && a.pads.iter().all(|&p| p == 0),
            x: x.dtype,
            out: out.dtype,
            bias: parts.bias.map(|k| (k, dtype_of(Some(k)).unwrap_or(DType::F32))),
            residual: parts.residual.map(|k| (k, dtype_of(Some(k)).unwrap_or(DType::F32))),
            int8,
            activation,
        };
        layer.check_index_ranges(name)?;
        Ok(layer)
    }

    /// Refuses sizes the kernels' 32-bit index arithmetic cannot hold.
    fn check_index_ranges(&self, name: &str) -> Result<(), Unsupported> {
        for d in 0..3 {
            let span = (self.kernel[d] - 1).saturating_mul(self.dilation[d]).saturating_add(1);
            let reach = self.output[d].saturating_mul(self.stride[d]).saturating_add(span).saturating_add(self.pad[d]);
            if self.input[d] >= MAX_AXIS || self.output[d] >= MAX_AXIS || reach >= MAX_AXIS {
                return unsupported(format!("{name}: spatial axis {d} is too large for 32-bit indexing"));
            }
        }
        let in_plane = self.input.iter().fold(1usize, |a, &b| a.saturating_mul(b));
        let out_plane = self.output.iter().fold(1usize, |a, &b| a.saturating_mul(b));
        // The gather computes offsets of channels up to one tile past the
        // group's last one before it masks them: leave room for them.
        let channels = self.c + MAX_TILE_K;
        if in_plane.saturating_mul(channels) >= MAX_IMAGE || out_plane.saturating_mul(self.m) >= MAX_IMAGE {
            return unsupported(format!("{name}: one image has more than 2^30 elements"));
        }
        if self.n >= i32::MAX as usize || self.weight_len() >= MAX_IMAGE {
            return unsupported(format!("{name}: batch or weight too large for 32-bit indexing"));
        }
        Ok(())
    }

    /// Exact for the layers `check_index_ranges` accepts (saturating for an
    /// empty output whose other sizes it could not bound).
    fn output_len(&self) -> usize {
        [self.n, self.m].iter().chain(&self.output).fold(1usize, |a, &b| a.saturating_mul(b))
    }

    fn input_len(&self) -> usize {
        self.n * self.c * self.input.iter().product::<usize>()
    }

    /// Saturating: `check_index_ranges` bounds it before anything else
    /// multiplies sizes.
    fn weight_len(&self) -> usize {
        let taps = self.kernel.iter().fold(1usize, |a, &b| a.saturating_mul(b));
        let channels =
            if self.transpose { self.c.saturating_mul(self.m / self.group) } else { self.m.saturating_mul(self.c / self.group) };
        channels.saturating_mul(taps)
    }

    /// Every group reads one input channel (the CPU's depthwise path).
    fn is_depthwise(&self) -> bool {
        !self.transpose && self.group > 1 && self.c == self.group
    }

    fn is_3d(&self) -> bool {
        self.rank == 3
    }

    fn storage(&self) -> String {
        // Types are validated by `parse`, so every one has a C name (E4M3
        // is float8.cuh's struct).
        let ty = |d: DType| if d == DType::F8E4M3FN { "f8e4m3" } else { c_type(d).unwrap_or("float") };
        let bias = self.bias.map_or("float", |(_, d)| ty(d));
        let residual = self.residual.map_or("float", |(_, d)| ty(d));
        format!("#define XT {}\n#define BT {bias}\n#define RT {residual}\n#define OT {}\n", ty(self.x), ty(self.out))
    }

    /// The defines `conv_common.cuh` needs (after `float8.cuh` when the
    /// layer is FP8).
    fn common_defines(&self) -> String {
        let fp8 = self.x == DType::F8E4M3FN;
        format!(
            "{}{}#define ACC_INT {}\n#define ACC_FP8 {}\n#define OUT_INT8 {}\n#define OUT_FP8 {}\n#define CONV_ACT(v) ({})\n\
             #define CONV3D {}\n",
            if fp8 { FLOAT8 } else { "" },
            self.storage(),
            (self.x == DType::I8) as u32,
            fp8 as u32,
            (self.out == DType::I8) as u32,
            (self.out == DType::F8E4M3FN) as u32,
            self.activation,
            self.is_3d() as u32,
        )
    }

    /// The leading kernel arguments of the igemm and depthwise kernels:
    /// `x, w, bias, residual, w_scale, out, has_bias, has_res, x_scale,
    /// out_scale`. An absent pointer is passed as x, never read.
    fn epilogue_args(&self) -> Vec<KernelArg> {
        let ptr = |k: Option<u32>| KernelArg::Input(k.unwrap_or(0));
        let q = self.int8;
        vec![
            KernelArg::Input(0),
            KernelArg::Input(1),
            ptr(self.bias.map(|b| b.0)),
            ptr(self.residual.map(|r| r.0)),
            ptr(q.map(|q| q.w_scale)),
            KernelArg::Output(0),
            KernelArg::I32(self.bias.is_some() as i32),
            KernelArg::I32(self.residual.is_some() as i32),
            KernelArg::F32(q.map_or(1.0, |q| q.x_scale)),
            KernelArg::F32(q.and_then(|q| q.out_scale).unwrap_or(1.0)),
        ]
    }

    /// `N, C, D, H, W, M, OD, OH, OW, KD, KH, KW, strides, pads, dilations`
    /// (each `d, h, w`), as the kernels take them.
    fn geometry_args(&self) -> Vec<KernelArg> {
        let i = |v: usize| KernelArg::I32(v as i32);
        let mut a = vec![i(self.n), i(self.c)];
        a.extend(self.input.map(i));
        a.push(i(self.m));
        for v in [self.output, self.kernel, self.stride, self.pad, self.dilation] {
            a.extend(v.map(i));
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trtc_runtime::TensorType;

    fn conv(kernel: [usize; 2], stride: usize, pad: usize, group: usize) -> Op {
        Conv::new_2d(kernel, [stride; 2], [pad; 4], [1, 1], group).into()
    }

    #[test]
    fn parses_geometry_and_pads_to_3d() {
        let op = conv([3, 3], 2, 1, 1);
        let x = TensorType::new(DType::F32, vec![2, 8, 15, 17]);
        let w = TensorType::new(DType::F32, vec![16, 8, 3, 3]);
        let y = TensorType::new(DType::F32, vec![2, 16, 8, 9]);
        let io = LayerIo { op: &op, inputs: vec![Some(&x), Some(&w)], outputs: vec![&y] };
        let l = ConvLayer::parse(&io).unwrap();
        assert_eq!((l.input, l.output, l.kernel, l.stride, l.pad), ([1, 15, 17], [1, 8, 9], [1, 3, 3], [1, 2, 2], [0, 1, 1]));
        assert!(!l.pointwise && !l.is_depthwise() && l.bias.is_none());
        assert_eq!(l.geometry_args().len(), 21);
        // A wrong output shape is refused rather than computed.
        let bad = TensorType::new(DType::F32, vec![2, 16, 8, 8]);
        let io = LayerIo { op: &op, inputs: vec![Some(&x), Some(&w)], outputs: vec![&bad] };
        assert!(ConvLayer::parse(&io).is_err());
    }
}
