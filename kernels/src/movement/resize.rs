//! Resize in nearest and linear mode. The kernel recomputes the CPU's
//! per-axis source coordinates and taps on the device, in f64 with the same
//! operations, from the sizes, scales and region of interest passed as
//! arguments (f64 values travel as their bits in I64 arguments).

use super::{idx32, job_candidates, source, Elems, Job};
use crate::elementwise::map::MAX_RANK;
use crate::elementwise::ops::cast_bits;
use crate::elementwise::{ctype, input, is_f32_storage, output};
use crate::{unsupported, LayerIo, Selection, SmLimits};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::movement::{CoordinateMode, NearestMode, Resize, ResizeMode};
use trtc_runtime::DType;

const RESIZE: &str = include_str!("../../cuda/movement_resize.cu");

/// Linear interpolation visits 2^rank taps per output element.
const MAX_LINEAR_RANK: usize = 5;

pub(super) fn candidates(r: &Resize, io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let x = input(io, 0)?;
    let out = output(io, 0)?;
    let rank = x.shape.len();
    if r.scales.len() != rank || r.sizes.len() != rank || out.shape != r.sizes || out.dtype != x.dtype {
        return unsupported(format!("Resize: {x} to {out} with sizes {:?}", r.sizes));
    }
    if r.scales.iter().any(|&s| !(s > 0.0 && s.is_finite())) || x.shape.iter().zip(&r.sizes).any(|(&i, &o)| i == 0 && o > 0) {
        return unsupported("Resize: invalid scales or an empty axis to resize");
    }
    if r.coordinate_mode == CoordinateMode::TfCropAndResize && r.roi.len() != 2 * rank {
        return unsupported("Resize: tf_crop_and_resize without a full-rank roi");
    }
    if rank > MAX_RANK {
        return unsupported(format!("Resize: rank {rank} (at most {MAX_RANK})"));
    }
    let coord = match r.coordinate_mode {
        CoordinateMode::HalfPixel => 0,
        CoordinateMode::HalfPixelSymmetric => 1,
        CoordinateMode::PytorchHalfPixel => 2,
        CoordinateMode::AlignCorners => 3,
        CoordinateMode::Asymmetric => 4,
        CoordinateMode::TfCropAndResize => 5,
    };
    let nearest = match r.nearest_mode {
        NearestMode::RoundPreferFloor => 0,
        NearestMode::RoundPreferCeil => 1,
        NearestMode::Floor => 2,
        NearestMode::Ceil => 3,
    };
    let mut defines = vec![
        ("RANK", rank.to_string()),
        ("COORD", coord.to_string()),
        ("NEAREST", nearest.to_string()),
        ("EXCLUDE_OUTSIDE", (r.exclude_outside as u8).to_string()),
    ];
    let (entry, fill) = match r.mode {
        ResizeMode::Nearest => {
            defines.push(("LINEAR", "0".into()));
            // The CPU's fill is the extrapolation value converted like a Cast.
            ("trtc_movement_resize_nearest", cast_bits(r.extrapolation_value, x.dtype)? as i64)
        }
        ResizeMode::Linear => {
            if r.antialias && r.scales.iter().any(|&s| s < 1.0) {
                return unsupported("Resize: antialiased linear downsampling");
            }
            if rank > MAX_LINEAR_RANK {
                return unsupported(format!("Resize: linear on rank {rank} (at most {MAX_LINEAR_RANK})"));
            }
            if x.dtype == DType::Bool {
                return unsupported("Resize: linear on bool");
            }
            let t = ctype(x.dtype)?;
            // Floats interpolate their f32 value and round once on store
            // (f16: through f32, as the HalfIo wrapper does); integers round
            // half away from zero and saturate, as `v.round() as T`.
            let (load, store) = if is_f32_storage(x.dtype) {
                ("((double)ld(p))", "st(p, (float)(v))".to_string())
            } else {
                ("((double)*(p))", format!("(*(p) = trtc_f2i<{t}>(round(v)))"))
            };
            defines.extend([
                ("LINEAR", "1".to_string()),
                ("T", t.to_string()),
                ("LOAD(p)", load.to_string()),
                ("STORE(p, v)", store),
            ]);
            ("trtc_movement_resize_linear", r.extrapolation_value.to_bits() as i64)
        }
        ResizeMode::Cubic => return unsupported("Resize: cubic mode"),
    };
    let n = out.len() as u64;
    let kernel = source(RESIZE, entry, Elems::single(x.dtype.size()), idx32(n.max(x.len() as u64)), &defines);
    let strides = super::copy::strides(&x.shape);
    let mut args = vec![KernelArg::Output(0), KernelArg::Input(0), KernelArg::I64(n as i64), KernelArg::I64(fill)];
    let crop = r.coordinate_mode == CoordinateMode::TfCropAndResize;
    for (d, &stride) in strides.iter().enumerate() {
        let (s, e) = if crop { (r.roi[d], r.roi[rank + d]) } else { (0.0, 0.0) };
        let dim =
            [x.shape[d] as i64, r.sizes[d] as i64, r.scales[d].to_bits() as i64, s.to_bits() as i64, e.to_bits() as i64, stride];
        args.extend(dim.map(KernelArg::I64));
    }
    // Unused dimensions: size 1, scale 1.
    for _ in rank..MAX_RANK {
        args.extend([1, 1, 1f64.to_bits() as i64, 0, 0, 0].map(KernelArg::I64));
    }
    Ok(job_candidates("movement_resize", &[Job { kernel, args, n, vec: 1 }], limits))
}
