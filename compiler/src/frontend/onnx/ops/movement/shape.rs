//! Shape-only ops: Reshape, Flatten, Squeeze, Unsqueeze (all the runtime's
//! Reshape), Shape and Size (constants), Transpose, Expand, Tile,
//! DepthToSpace and SpaceToDepth (Reshape + Transpose + Reshape).

use super::{axes, axis, dims, ints_attr_or_input, reshape_to, shaped_by_values};
use crate::frontend::onnx::ctx::Ctx;
use crate::frontend::onnx::ops::Registry;
use crate::ir::Port;
use anyhow::{anyhow, bail, Result};
use trtc_runtime::ops::control::ValueShapedOp;
use trtc_runtime::ops::movement::{DimOf, DynamicReshape, Expand, ReshapeDim, SizeOf, Tile, Transpose};
use trtc_runtime::ops::reduce::{Reduce, ReduceKind};
use trtc_runtime::ops::util::broadcast_shapes;
use trtc_runtime::{DType, Tensor};

pub fn register(r: &mut Registry) {
    r.add("Reshape", reshape);
    r.add("Flatten", flatten);
    r.add("Squeeze", squeeze);
    r.add("Unsqueeze", unsqueeze);
    r.add("Shape", shape);
    r.add("Size", size);
    r.add("Transpose", transpose);
    r.add("Expand", expand);
    r.add("Tile", tile);
    r.add("DepthToSpace", depth_to_space);
    r.add("SpaceToDepth", space_to_depth);
}

pub(super) use trtc_runtime::ops::movement::resolve_reshape;

fn reshape(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let allowzero = ctx.attrs.int_or("allowzero", 0)? != 0;
    if ctx.opset >= 5 {
        if let Some(outs) = shaped_by_values(ctx, ValueShapedOp::Reshape { allowzero })? {
            return Ok(outs);
        }
    }
    let spec = if ctx.opset < 5 {
        ctx.attrs.ints("shape")?.ok_or_else(|| anyhow!("missing attribute 'shape'"))?
    } else {
        ctx.require_const(1, "shape")?.to_i64_vec()?
    };
    let shape = resolve_reshape(&ctx.ty(x).shape, &spec, allowzero)?;
    Ok(vec![reshape_to(ctx, x, shape)?])
}

fn flatten(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let s = ctx.ty(x).shape.clone();
    let r = s.len() as i64;
    let a = ctx.attrs.int_or("axis", 1)?;
    let a = if a < 0 { a + r } else { a };
    if a < 0 || a > r {
        bail!("axis {a} out of range for rank {r}");
    }
    let a = a as usize;
    let shape = vec![s[..a].iter().product(), s[a..].iter().product()];
    Ok(vec![reshape_to(ctx, x, shape)?])
}

fn squeeze(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let s = ctx.ty(x).shape.clone();
    // An empty axes list means "not given": squeeze every unit dimension.
    let shape = match ints_attr_or_input(ctx, "axes", 1, 13)?.filter(|a| !a.is_empty()) {
        None => s.iter().copied().filter(|&d| d != 1).collect(),
        Some(a) => {
            let a = axes(&a, s.len())?;
            if let Some(&bad) = a.iter().find(|&&i| s[i] != 1) {
                bail!("cannot squeeze axis {bad} of size {} in {s:?}", s[bad]);
            }
            if ctx.graph.is_data_sized(x) {
                // Sized at run time: the kept axes copied, whatever their sizes.
                let dims = (0..s.len()).filter(|i| !a.contains(i)).map(ReshapeDim::Copy).collect();
                return Ok(vec![ctx.op1(DynamicReshape { dims }, &[Some(x)])?]);
            }
            s.iter().enumerate().filter(|(i, _)| !a.contains(i)).map(|(_, &d)| d).collect()
        }
    };
    Ok(vec![reshape_to(ctx, x, shape)?])
}

fn unsqueeze(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let s = ctx.ty(x).shape.clone();
    let a = ints_attr_or_input(ctx, "axes", 1, 13)?.ok_or_else(|| anyhow!("Unsqueeze needs axes"))?;
    let rank = s.len() + a.len();
    let a = axes(&a, rank)?;
    let mut rest = s.iter();
    let shape = (0..rank).map(|i| if a.contains(&i) { Some(1) } else { rest.next().copied() }).collect::<Option<Vec<_>>>();
    let shape = shape.ok_or_else(|| anyhow!("bad axes for Unsqueeze"))?;
    if ctx.graph.is_data_sized(x) {
        // Sized at run time: every input axis copied (one of size 1 in the
        // room may be larger in a run), the new ones of size 1.
        let mut next = 0;
        let dims = (0..rank)
            .map(|i| {
                if a.contains(&i) {
                    ReshapeDim::Fixed(1)
                } else {
                    next += 1;
                    ReshapeDim::Copy(next - 1)
                }
            })
            .collect();
        return Ok(vec![ctx.op1(DynamicReshape { dims }, &[Some(x)])?]);
    }
    Ok(vec![reshape_to(ctx, x, shape)?])
}

/// Shape: a constant, but for a tensor whose size depends on the data,
/// whose sizes are read when the engine runs (`SizeOf`); its room value
/// (see [`Ctx::room_value`]) is the shape of the tensor's room.
fn shape(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let s = ctx.ty(x).shape.clone();
    let r = s.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let start = clamp(ctx.attrs.int_or("start", 0)?);
    let end = clamp(ctx.attrs.int_or("end", r)?).max(start);
    let values: Vec<i64> = s[start..end].iter().map(|&d| d as i64).collect();
    let t = Tensor::from_vec(vec![values.len()], values)?;
    if !ctx.graph.is_data_sized(x) {
        return Ok(vec![ctx.constant(t)]);
    }
    let dims = (start..end).map(|axis| DimOf { input: 0, axis }).collect();
    let y = ctx.op1(SizeOf { dtype: DType::I64, dims, scalar: false }, &[Some(x)])?;
    ctx.set_room_value(y, t);
    Ok(vec![y])
}

/// Size: a constant, or for a tensor whose size depends on the data the
/// product of its sizes read when the engine runs.
fn size(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let rank = ctx.ty(x).shape.len();
    let n = ctx.ty(x).shape.iter().product::<usize>() as i64;
    if !ctx.graph.is_data_sized(x) {
        return Ok(vec![ctx.constant(Tensor::scalar(n))]);
    }
    let dims = (0..rank).map(|axis| DimOf { input: 0, axis }).collect();
    let sizes = ctx.op1(SizeOf { dtype: DType::I64, dims, scalar: false }, &[Some(x)])?;
    let room = Tensor::from_vec(vec![rank], ctx.ty(x).shape.iter().map(|&d| d as i64).collect())?;
    ctx.set_room_value(sizes, room);
    let product = Reduce { kind: ReduceKind::Prod, axes: vec![0], keepdims: false };
    Ok(vec![ctx.op1(product, &[Some(sizes)])?])
}

fn transpose(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let rank = ctx.ty(x).shape.len();
    let perm = match ctx.attrs.ints("perm")? {
        Some(p) => axes(&p, rank)?,
        None => (0..rank).rev().collect(),
    };
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return Ok(vec![x]);
    }
    Ok(vec![ctx.op1(Transpose { perm }, &[Some(x)])?])
}

fn expand(ctx: &mut Ctx) -> Result<Vec<Port>> {
    if let Some(outs) = shaped_by_values(ctx, ValueShapedOp::Expand)? {
        return Ok(outs);
    }
    let x = ctx.input(0)?;
    let target = dims(&ctx.require_const(1, "shape")?.to_i64_vec()?, "shape")?;
    let in_shape = ctx.ty(x).shape.clone();
    let shape = broadcast_shapes(&[&in_shape, &target]).map_err(|e| anyhow!("{e}"))?;
    // Kept even when it copies (no-op removal drops it later): an Expand
    // that copies at one input shape may broadcast at another, and a model
    // imported at several shapes must give the same nodes at each.
    Ok(vec![ctx.op1(Expand { shape }, &[Some(x)])?])
}

fn tile(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let rank = ctx.ty(x).shape.len();
    let repeats = if ctx.opset < 6 {
        // Tile-1: `tiles` copies along one `axis`.
        let tiles = ctx.require_const(1, "tiles")?.to_i64_vec()?;
        let a = ctx.require_const(2, "axis")?.to_i64_vec()?;
        let (Some(&t), Some(&a)) = (tiles.first(), a.first()) else { bail!("Tile-1 needs scalar tiles and axis") };
        let mut r = vec![1i64; rank];
        r[axis(a, rank)?] = t;
        r
    } else {
        // Repeats computed at run time (a class token tiled per batch row).
        if ctx.const_input(1).is_none() {
            if let Some(outs) = shaped_by_values(ctx, ValueShapedOp::Tile)? {
                return Ok(outs);
            }
        }
        ctx.require_const(1, "repeats")?.to_i64_vec()?
    };
    let repeats = dims(&repeats, "repeats")?;
    if repeats.len() != rank {
        bail!("{} repeats for an input of rank {rank}", repeats.len());
    }
    // Kept even when it copies, as Expand is (no-op removal drops it).
    Ok(vec![ctx.op1(Tile { repeats }, &[Some(x)])?])
}

/// Reshape, then Transpose, then Reshape.
fn shuffle(ctx: &mut Ctx, x: Port, split: Vec<usize>, perm: Vec<usize>, out: Vec<usize>) -> Result<Vec<Port>> {
    let y = reshape_to(ctx, x, split)?;
    let y = ctx.op1(Transpose { perm }, &[Some(y)])?;
    Ok(vec![reshape_to(ctx, y, out)?])
}

fn nchw_and_block(ctx: &Ctx) -> Result<([usize; 4], usize)> {
    let s = &ctx.input_ty(0)?.shape;
    let &[n, c, h, w] = s.as_slice() else { bail!("expected a 4-D input, got {s:?}") };
    let b = ctx.attrs.int("blocksize")?.ok_or_else(|| anyhow!("missing attribute 'blocksize'"))?;
    if b <= 0 {
        bail!("blocksize must be positive, got {b}");
    }
    Ok(([n, c, h, w], b as usize))
}

fn depth_to_space(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let ([n, c, h, w], b) = nchw_and_block(ctx)?;
    if c % (b * b) != 0 {
        bail!("channels {c} are not divisible by blocksize² {}", b * b);
    }
    let x = ctx.input(0)?;
    let c2 = c / (b * b);
    let out = vec![n, c2, h * b, w * b];
    match ctx.attrs.string("mode")?.as_deref().unwrap_or("DCR") {
        "DCR" => shuffle(ctx, x, vec![n, b, b, c2, h, w], vec![0, 3, 4, 1, 5, 2], out),
        "CRD" => shuffle(ctx, x, vec![n, c2, b, b, h, w], vec![0, 1, 4, 2, 5, 3], out),
        m => bail!("unknown DepthToSpace mode '{m}'"),
    }
}

fn space_to_depth(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let ([n, c, h, w], b) = nchw_and_block(ctx)?;
    if h % b != 0 || w % b != 0 {
        bail!("spatial size {h}x{w} is not divisible by blocksize {b}");
    }
    let x = ctx.input(0)?;
    let out = vec![n, c * b * b, h / b, w / b];
    shuffle(ctx, x, vec![n, c, h / b, b, w / b, b], vec![0, 3, 5, 1, 2, 4], out)
}

#[cfg(test)]
mod tests {
    use super::resolve_reshape;

    #[test]
    fn reshape_zero_and_minus_one() {
        assert_eq!(resolve_reshape(&[2, 3, 4], &[0, -1], false).unwrap(), vec![2, 12]);
        assert_eq!(resolve_reshape(&[2, 3, 4], &[-1], false).unwrap(), vec![24]);
        assert_eq!(resolve_reshape(&[0, 3], &[3, 0], true).unwrap(), vec![3, 0]);
        assert!(resolve_reshape(&[2, 3], &[4, -1], false).is_err());
        assert!(resolve_reshape(&[2, 3], &[-1, -1], false).is_err());
    }
}
