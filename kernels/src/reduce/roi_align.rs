//! RoiAlign: one thread per output element samples its bin as the CPU
//! reference does (`pool_roi_align.cu`), f32 and f16 storage, i32 or i64
//! batch indices; a batch index out of range or a region needing more than
//! 2^24 samples traps, so the launch fails as the CPU op fails.

use super::{float_type, input, output};
use crate::elementwise::map::Launch1d;
use crate::{unsupported, KernelSource, LayerIo, Selection, SmLimits, COMMON};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::linalg::RoiAlign;
use trtc_runtime::DType;

const ROI_ALIGN: &str = include_str!("../../cuda/pool_roi_align.cu");

pub fn roi_align(op: &RoiAlign, io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let x = input(io, 0)?;
    let rois = input(io, 1)?;
    let idx = input(io, 2)?;
    let y = output(io, 0)?;
    let t = float_type(x)?;
    if rois.dtype != x.dtype || y.dtype != x.dtype || x.shape.len() != 4 {
        return unsupported(format!("X {x}, rois {rois}, output {y}"));
    }
    let ti = match idx.dtype {
        DType::I32 => "int",
        DType::I64 => "long long",
        d => return unsupported(format!("{d} batch indices")),
    };
    if op.sampling_ratio > 4096 {
        return unsupported(format!("sampling_ratio {}", op.sampling_ratio));
    }
    let defines = format!(
        "#define T {t}\n#define TI {ti}\n#define MAX {}\n#define HALF_PIXEL {}\n",
        u8::from(op.max),
        u8::from(op.half_pixel)
    );
    let kernel = KernelSource { entry: "trtc_pool_roi_align".into(), source: format!("{COMMON}\n{defines}\n{ROI_ALIGN}") };
    let total = y.len() as u64;
    let mut args = vec![KernelArg::Output(0), KernelArg::Input(0), KernelArg::Input(1), KernelArg::Input(2)];
    args.push(KernelArg::I64(total as i64));
    args.extend(
        [x.shape[0], x.shape[1], x.shape[2], x.shape[3], op.output_height, op.output_width, op.sampling_ratio]
            .map(|v| KernelArg::I64(v as i64)),
    );
    // f64 arguments travel as their bits.
    args.push(KernelArg::I64((op.spatial_scale as f64).to_bits() as i64));
    Ok(Launch1d::candidates("pool_roi_align", &kernel, &args, total, limits))
}
