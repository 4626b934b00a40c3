//! GridSample (the modes of opset 16, `bilinear` and `bicubic`, and of
//! opset 20, `linear` and `cubic`, both map onto the runtime's modes) and
//! AffineGrid, the grid an affine transform gives, built from existing ops:
//! the base grid is a constant, `theta` is applied with one MatMul.

use super::{check_constant_size, reshape_to, tensor_from_f64};
use crate::frontend::onnx::ctx::Ctx;
use crate::frontend::onnx::ops::Registry;
use crate::ir::Port;
use anyhow::{bail, ensure, Result};
use trtc_runtime::ops::linalg::MatMul;
use trtc_runtime::ops::movement::{GridPadding, GridSample, GridSampleMode, Transpose};

pub fn register(r: &mut Registry) {
    r.add("GridSample", grid_sample);
    r.add("AffineGrid", affine_grid);
}

/// `align_corners`, 0 or 1.
fn align_corners(ctx: &Ctx) -> Result<bool> {
    match ctx.attrs.int_or("align_corners", 0)? {
        0 => Ok(false),
        1 => Ok(true),
        a => bail!("align_corners {a} is not 0 or 1"),
    }
}

/// AffineGrid: `theta [N, r, r + 1]` and a constant `size [N, C, spatial
/// (r axes)]` give `grid [N, spatial, r]`, each point `theta · (x, y[, z], 1)`
/// where (x, y, z) run over [-1, 1] along W, H and D: the pixel centres, or
/// with `align_corners` the corner pixels' centres at -1 and 1 (a one-pixel
/// axis sits at -1 then, as in PyTorch).
fn affine_grid(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let align = align_corners(ctx)?;
    let theta = ctx.input(0)?;
    let tt = ctx.ty(theta).clone();
    ensure!(tt.dtype.is_float(), "theta is {tt}, expected a float tensor");
    let size = ctx.require_const(1, "size")?.to_i64_vec()?;
    let r = size.len().saturating_sub(2);
    ensure!(r == 2 || r == 3, "size {size:?} has {} values; expected 4 (N, C, H, W) or 5 (N, C, D, H, W)", size.len());
    let spatial: Vec<usize> = size[2..]
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| anyhow::anyhow!("size {size:?} has a negative dimension")))
        .collect::<Result<_>>()?;
    ensure!(
        tt.shape.len() == 3 && tt.shape[0] as i64 == size[0] && tt.shape[1] == r && tt.shape[2] == r + 1,
        "theta is {tt}, expected [{}, {r}, {}] for size {size:?}",
        size[0],
        r + 1
    );
    let points = spatial.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let len = points.and_then(|p| p.checked_mul(r + 1)).unwrap_or(usize::MAX);
    check_constant_size(len, tt.dtype)?;
    let points = points.unwrap_or(0);
    let coord = |i: usize, n: usize| -> f64 {
        if align {
            if n <= 1 {
                -1.0
            } else {
                -1.0 + 2.0 * i as f64 / (n - 1) as f64
            }
        } else {
            -1.0 + (2 * i + 1) as f64 / n as f64
        }
    };
    // Rows (x, y[, z], 1) over the spatial positions in row-major order;
    // x runs along the last axis.
    let mut base = Vec::with_capacity(len);
    let mut index = vec![0usize; r];
    for _ in 0..points {
        base.extend((0..r).map(|k| coord(index[r - 1 - k], spatial[r - 1 - k])));
        base.push(1.0);
        for a in (0..r).rev() {
            index[a] += 1;
            if index[a] < spatial[a] {
                break;
            }
            index[a] = 0;
        }
    }
    let base = ctx.constant(tensor_from_f64(tt.dtype, vec![points, r + 1], &base)?);
    // [points, r + 1] x [N, r + 1, r] -> [N, points, r].
    let theta_t = ctx.op1(Transpose { perm: vec![0, 2, 1] }, &[Some(theta)])?;
    let grid = ctx.op1(MatMul {}, &[Some(base), Some(theta_t)])?;
    let mut shape = vec![tt.shape[0]];
    shape.extend(&spatial);
    shape.push(r);
    Ok(vec![reshape_to(ctx, grid, shape)?])
}

fn grid_sample(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let mode = match ctx.attrs.string("mode")?.as_deref().unwrap_or("linear") {
        "nearest" => GridSampleMode::Nearest,
        "linear" | "bilinear" => GridSampleMode::Linear,
        "cubic" | "bicubic" => GridSampleMode::Cubic,
        m => bail!("GridSample mode '{m}' is not nearest, linear (bilinear) or cubic (bicubic)"),
    };
    let padding = match ctx.attrs.string("padding_mode")?.as_deref().unwrap_or("zeros") {
        "zeros" => GridPadding::Zeros,
        "border" => GridPadding::Border,
        "reflection" => GridPadding::Reflection,
        m => bail!("GridSample padding_mode '{m}' is not zeros, border or reflection"),
    };
    let align_corners = align_corners(ctx)?;
    let (x, grid) = (ctx.input(0)?, ctx.input(1)?);
    ctx.op(GridSample { mode, padding, align_corners }, &[Some(x), Some(grid)])
}
