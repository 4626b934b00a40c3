//! GridSample on 2-D images in nearest and linear mode, every padding mode,
//! with and without `align_corners`: one thread per output element works
//! out its taps in f64 as the CPU reference does and reads them from its
//! channel. Cubic mode and other ranks run on the host.

use super::{idx32, job_candidates, source, Elems, Job};
use crate::elementwise::{ctype, input, is_f32_storage, output};
use crate::{unsupported, LayerIo, Selection, SmLimits};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::movement::{GridPadding, GridSample, GridSampleMode};

const GRID_SAMPLE: &str = include_str!("../../cuda/movement_grid_sample.cu");

pub(super) fn candidates(g: &GridSample, io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let x = input(io, 0)?;
    let grid = input(io, 1)?;
    let out = output(io, 0)?;
    if x.shape.len() != 4 {
        return unsupported(format!("GridSample: {x} (only 2-D images have a kernel)"));
    }
    if !is_f32_storage(x.dtype) || grid.dtype != x.dtype || out.dtype != x.dtype {
        return unsupported(format!("GridSample: X {x}, grid {grid}, output {out}"));
    }
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    if grid.shape.len() != 4 || grid.shape[0] != n || grid.shape[3] != 2 || out.shape != [n, c, grid.shape[1], grid.shape[2]] {
        return unsupported(format!("GridSample: grid {grid} and output {out} do not fit X {x}"));
    }
    if h == 0 || w == 0 {
        return unsupported("GridSample: an empty image");
    }
    let mode = match g.mode {
        GridSampleMode::Nearest => 0,
        GridSampleMode::Linear => 1,
        GridSampleMode::Cubic => return unsupported("GridSample: cubic mode"),
    };
    let padding = match g.padding {
        GridPadding::Zeros => 0,
        GridPadding::Border => 1,
        GridPadding::Reflection => 2,
    };
    let defines = [
        ("T", ctype(x.dtype)?.to_string()),
        ("MODE", mode.to_string()),
        ("PADDING", padding.to_string()),
        ("ALIGN", u8::from(g.align_corners).to_string()),
    ];
    let total = out.len() as u64;
    let biggest = total.max(x.len() as u64).max(grid.len() as u64);
    let kernel = source(GRID_SAMPLE, "trtc_movement_grid_sample", Elems::single(x.dtype.size()), idx32(biggest), &defines);
    let (ho, wo) = (grid.shape[1], grid.shape[2]);
    let mut args = vec![KernelArg::Output(0), KernelArg::Input(0), KernelArg::Input(1), KernelArg::I64(total as i64)];
    args.extend([c, h, w, ho, wo].map(|v| KernelArg::I64(v as i64)));
    Ok(job_candidates("movement_grid_sample", &[Job { kernel, args, n: total, vec: 1 }], limits))
}
