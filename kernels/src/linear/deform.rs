//! DeformConv (2-D): one thread per output element sums its group's
//! channels and taps, each sample bilinear at the learned offset, in f64
//! (`conv_deform.cu`), f32 and f16 storage, with or without bias and mask.
//! A direct kernel (no im2col or tensor cores): correct on the device, so
//! the layer stays in the engine's CUDA graph, but not tuned.

use crate::elementwise::map::Launch1d;
use crate::reduce::float_type;
use crate::{unsupported, KernelSource, LayerIo, Selection, SmLimits, COMMON};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::linalg::DeformConv;

const DEFORM: &str = include_str!("../../cuda/conv_deform.cu");

pub fn candidates(op: &DeformConv, io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let ins: Vec<_> = (0..5).map(|k| io.inputs.get(k).copied().flatten()).collect();
    let (Some(x), Some(w), Some(offset)) = (ins[0], ins[1], ins[2]) else {
        return unsupported("DeformConv: missing X, W or offset");
    };
    let Some(y) = io.outputs.first() else { return unsupported("DeformConv: no output") };
    let t = float_type(x)?;
    if ins.iter().flatten().any(|i| i.dtype != x.dtype) || y.dtype != x.dtype {
        return unsupported("DeformConv: inputs of different types");
    }
    let c = &op.conv;
    if x.shape.len() != 4 || c.kernel_shape.len() != 2 || y.shape.len() != 4 || w.shape.len() != 4 || offset.shape.len() != 4 {
        return unsupported(format!("DeformConv: X {x} (only 2-D)"));
    }
    let (channels, h, wd) = (x.shape[1], x.shape[2], x.shape[3]);
    let (m, oh, ow) = (y.shape[1], y.shape[2], y.shape[3]);
    if c.group == 0 || op.offset_group == 0 || channels % c.group != 0 || m % c.group != 0 || channels % op.offset_group != 0 {
        return unsupported("DeformConv: channels do not divide into the groups");
    }
    // The kernel takes a pointer for each input the layer has (an absent
    // one in the middle is null), none past them.
    let given = io.inputs.len().min(5);
    let defines = format!(
        "#define T {t}\n#define HAS_BIAS {}\n#define HAS_MASK {}\n#define BIAS_ARG {}\n#define MASK_ARG {}\n",
        u8::from(ins[3].is_some()),
        u8::from(ins[4].is_some()),
        u8::from(given > 3),
        u8::from(given > 4)
    );
    let kernel = KernelSource { entry: "trtc_conv_deform".into(), source: format!("{COMMON}\n{defines}\n{DEFORM}") };
    let total = y.len() as u64;
    let mut args: Vec<KernelArg> = vec![KernelArg::Output(0)];
    args.extend((0..given as u32).map(KernelArg::Input));
    args.push(KernelArg::I64(total as i64));
    let geometry = [
        channels,
        h,
        wd,
        m,
        oh,
        ow,
        c.kernel_shape[0],
        c.kernel_shape[1],
        c.strides[0],
        c.strides[1],
        c.dilations[0],
        c.dilations[1],
        c.pads[0],
        c.pads[1],
        c.group,
        op.offset_group,
    ];
    args.extend(geometry.map(|v| KernelArg::I64(v as i64)));
    Ok(Launch1d::candidates("conv_deform", &kernel, &args, total, limits))
}
