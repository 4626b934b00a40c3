//! Shape-only ops: Reshape, Flatten, Squeeze, Unsqueeze (all the runtime's
//! Reshape), Shape and Size (constants), Transpose, Expand, Tile,
//! DepthToSpace and SpaceToDepth (Reshape + Transpose + Reshape).

use super::{axes, axis, dims, ints_attr_or_input, reshape_to};
use crate::frontend::onnx::ctx::Ctx;
use crate::frontend::onnx::ops::Registry;
use crate::ir::Port;
use anyhow::{anyhow, bail, Result};
use trtc_runtime::ops::movement::{Expand, Tile, Transpose};
use trtc_runtime::ops::util::broadcast_shapes;
use trtc_runtime::Tensor;

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

/// The output shape of an ONNX Reshape: 0 copies the input dimension (unless
/// `allowzero`), -1 is inferred from the element count.
pub(super) fn resolve_reshape(input: &[usize], spec: &[i64], allowzero: bool) -> Result<Vec<usize>> {
    let total: usize = input.iter().product();
    let mut out = Vec::with_capacity(spec.len());
    let mut infer_at = None;
    for (i, &s) in spec.iter().enumerate() {
        match s {
            0 if !allowzero => {
                let d =
                    input.get(i).ok_or_else(|| anyhow!("shape {spec:?}: 0 at position {i} has no input dimension to copy"))?;
                out.push(*d);
            }
            -1 => {
                if infer_at.replace(i).is_some() {
                    bail!("shape {spec:?} has more than one -1");
                }
                out.push(1);
            }
            s if s < 0 => bail!("shape {spec:?} has an invalid dimension {s}"),
            s => out.push(s as usize),
        }
    }
    if let Some(i) = infer_at {
        if allowzero && spec.contains(&0) {
            bail!("shape {spec:?} mixes -1 with 0 under allowzero");
        }
        let known: usize = out.iter().product();
        if known == 0 || !total.is_multiple_of(known) {
            bail!("cannot reshape {input:?} to {spec:?}");
        }
        out[i] = total / known;
    }
    if out.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) != Some(total) {
        bail!("cannot reshape {input:?} to {spec:?}");
    }
    Ok(out)
}

fn reshape(ctx: &mut Ctx) -> Result<Vec<Port>> {
    let x = ctx.input(0)?;
    let spec = if ctx.opset < 5 {
        ctx.attrs.ints("shape")?.ok_or_else(|| anyhow!("missing attribute 'shape'"))?
    } else {
        ctx.require_const(1, "shape")?.to_i64_vec()?
    };
    let allowzero = ctx.attrs.int_or("allowzero", 0)? != 0;
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
    Ok(vec![reshape_to(ctx, x, shape)?])
}

/// Refuses to read the shape of a tensor whose size depends on the data:
/// at build time only its largest size is known.
fn static_size(ctx: &Ctx) -> Result<()> {
    let x = ctx.input(0)?;
    if let Some(n) = ctx.graph.data_sized_by(x) {
        let by = ctx.graph.node(n);
        anyhow::bail!(
            "it reads the shape of a tensor whose size depends on the data ({} '{}'), which trtc cannot keep symbolic yet",
            by.op().map_or("?", |o| o.name()),
            by.name
        );
    }
    Ok(())
}

fn shape(ctx: &mut Ctx) -> Result<Vec<Port>> {
    static_size(ctx)?;
    let s = ctx.input_ty(0)?.shape.clone();
    let r = s.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let start = clamp(ctx.attrs.int_or("start", 0)?);
    let end = clamp(ctx.attrs.int_or("end", r)?);
    let values: Vec<i64> = s[start..end.max(start)].iter().map(|&d| d as i64).collect();
    let t = Tensor::from_vec(vec![values.len()], values)?;
    Ok(vec![ctx.constant(t)])
}

fn size(ctx: &mut Ctx) -> Result<Vec<Port>> {
    static_size(ctx)?;
    let n = ctx.input_ty(0)?.shape.iter().product::<usize>() as i64;
    Ok(vec![ctx.constant(Tensor::scalar(n))])
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
