//! Data movement: transposes, slices, gathers, concatenations, pads, resizes.

use crate::*;

pub(crate) fn movement_cases(b: &mut Builder) {
    use DType::*;
    let fam = "movement";
    for dt in [F32, F16, I8, I64] {
        let wrap = |op: Op| if dt == F16 { half(op) } else { op };
        let add = |b: &mut Builder, name: &str, op: Op, shapes: &[&[usize]], pick: Pick| {
            let inputs = shapes.iter().map(|s| Some(b.data(dt, s))).collect();
            b.add(fam, format!("{name} {dt}"), wrap(op), inputs, pick);
        };
        add(b, "Reshape", Reshape { shape: vec![6, 5] }.into(), &[&[2, 3, 5]], Pick::Sample(2));
        add(b, "Transpose 0213", Transpose { perm: vec![0, 2, 1, 3] }.into(), &[&[2, 5, 3, 8]], Pick::All);
        add(b, "Transpose NCHW-NHWC odd", Transpose { perm: vec![0, 2, 3, 1] }.into(), &[&[2, 7, 3, 5]], Pick::Sample(3));
        add(b, "Transpose large", Transpose { perm: vec![1, 0, 2] }.into(), &[&[33, 41, 3]], Pick::All);
        add(b, "Transpose 201", Transpose { perm: vec![2, 0, 1] }.into(), &[&[4, 3, 16]], Pick::Sample(3));
        add(b, "Slice channels", slice(&[1], &[4], &[12], &[1]).into(), &[&[2, 16, 3, 4]], Pick::Sample(3));
        add(b, "Slice reversed", slice(&[2], &[-1], &[i64::MIN], &[-1]).into(), &[&[3, 5, 7]], Pick::Sample(2));
        add(b, "Slice strided", slice(&[0, 2], &[1, 0], &[100, 7], &[2, 3]).into(), &[&[9, 4, 7]], Pick::Sample(2));
        add(b, "Concat axis 1", Concat { axis: 1 }.into(), &[&[2, 8, 4], &[2, 3, 4], &[2, 0, 4], &[2, 5, 4]], Pick::All);
        add(b, "Concat last axis", Concat { axis: 2 }.into(), &[&[2, 3, 5], &[2, 3, 16]], Pick::Sample(3));
        add(b, "Split", Split { axis: 1, sizes: vec![3, 5, 8] }.into(), &[&[2, 16, 8]], Pick::Sample(3));
        add(b, "Expand", Expand { shape: vec![2, 3, 4, 16] }.into(), &[&[3, 1, 16]], Pick::Sample(3));
        add(b, "Expand column", Expand { shape: vec![4, 5] }.into(), &[&[4, 1]], Pick::Sample(2));
        add(b, "Tile", Tile { repeats: vec![2, 1, 3] }.into(), &[&[3, 4, 5]], Pick::Sample(2));
        // Gathers with negative and repeated indices.
        let x = b.data(dt, &[3, 8, 4]);
        let i = b.indices(I64, &[2, 3], -8, 8);
        b.add(fam, format!("Gather axis 1 {dt}"), wrap(Gather { axis: 1 }.into()), vec![Some(x), Some(i)], Pick::Sample(3));
        let x = b.data(dt, &[5, 12]);
        let i = b.indices(I32, &[4], -5, 5);
        b.add(fam, format!("Gather rows i32 {dt}"), wrap(Gather { axis: 0 }.into()), vec![Some(x), Some(i)], Pick::Sample(3));
        let x = b.data(dt, &[3, 3, 2]);
        let i = b.indices(I64, &[3, 2, 2], -3, 3);
        b.add(
            fam,
            format!("GatherElements {dt}"),
            wrap(GatherElements { axis: 1 }.into()),
            vec![Some(x), Some(i)],
            Pick::Sample(2),
        );
        let x = b.data(dt, &[5, 6, 8]);
        let i = Tensor::from_vec(vec![4, 2], vec![0i32, 1, -1, 5, 4, -6, 2, 2]).unwrap();
        b.add(fam, format!("GatherND {dt}"), wrap(GatherND { batch_dims: 0 }.into()), vec![Some(x), Some(i)], Pick::Sample(2));
        let x = b.data(dt, &[2, 6, 7]);
        let i = Tensor::from_vec(vec![2, 3, 1], vec![1i64, 0, -1, 5, 2, 3]).unwrap();
        b.add(
            fam,
            format!("GatherND batch_dims 1 {dt}"),
            wrap(GatherND { batch_dims: 1 }.into()),
            vec![Some(x), Some(i)],
            Pick::Sample(2),
        );
        let x = b.data(dt, &[5, 4, 8]);
        let lens = Tensor::from_vec(vec![4], vec![1i64, 5, 0, 3]).unwrap();
        b.add(
            fam,
            format!("ReverseSequence {dt}"),
            wrap(ReverseSequence { batch_axis: 1, time_axis: 0 }.into()),
            vec![Some(x), Some(lens)],
            Pick::Sample(2),
        );
        // Pads of every mode, negative pads, a constant value input.
        let x = b.data(dt, &[4, 5]);
        let v = b.data(dt, &[]);
        b.add(
            fam,
            format!("Pad constant value {dt}"),
            wrap(Pad { pads: vec![1, 0, -1, 2], mode: PadMode::Constant }.into()),
            vec![Some(x), Some(v)],
            Pick::Sample(3),
        );
        for mode in [PadMode::Reflect, PadMode::Edge, PadMode::Wrap] {
            let x = b.data(dt, &[2, 5, 3]);
            b.add(
                fam,
                format!("Pad {mode:?} {dt}"),
                wrap(Pad { pads: vec![0, 3, 1, 0, 2, 2], mode }.into()),
                vec![Some(x)],
                Pick::Sample(2),
            );
        }
        let x = b.data(dt, &[2, 4, 5]);
        b.add(
            fam,
            format!("Trilu upper k=1 {dt}"),
            wrap(Trilu { upper: true, k: 1 }.into()),
            vec![Some(x.clone())],
            Pick::Sample(2),
        );
        b.add(fam, format!("Trilu lower k=-1 {dt}"), wrap(Trilu { upper: false, k: -1 }.into()), vec![Some(x)], Pick::Sample(1));
        let idx = Tensor::from_vec(vec![2, 3], vec![0i64, -1, 5, 10, -11, 3]).unwrap();
        let values = b.data(dt, &[2]);
        b.add(fam, format!("OneHot {dt}"), OneHot { depth: 10, axis: 1 }, vec![Some(idx), Some(values)], Pick::Sample(2));
    }
    // Invalid indices trap.
    let x = b.data(F32, &[3, 8]);
    let i = Tensor::from_vec(vec![3], vec![1i64, 8, 0]).unwrap();
    b.add_trap(fam, "Gather index out of range traps", Gather { axis: 1 }, vec![Some(x), Some(i)]);
    let x = b.data(F32, &[3, 4, 2]);
    let i = Tensor::from_vec(vec![3, 1, 2], vec![0i64, 1, -5, 2, 3, 0]).unwrap();
    b.add_trap(fam, "GatherElements index out of range traps", GatherElements { axis: 1 }, vec![Some(x), Some(i)]);
    let x = b.data(F32, &[5, 4, 2]);
    let lens = Tensor::from_vec(vec![4], vec![1i64, 6, 0, 3]).unwrap();
    b.add_trap(
        fam,
        "ReverseSequence length past the end traps",
        ReverseSequence { batch_axis: 1, time_axis: 0 },
        vec![Some(x), Some(lens)],
    );
    // Empty tensors and scalars.
    let x = b.data(F32, &[0, 5]);
    let y = b.data(F32, &[5]);
    b.add(fam, "Add empty", Binary::new(BinaryKind::Add), vec![Some(x), Some(y)], Pick::Sample(1));
    let x = b.data(F32, &[]);
    let y = b.data(F32, &[]);
    b.add(fam, "Add scalars", Binary::new(BinaryKind::Add), vec![Some(x), Some(y)], Pick::Sample(1));
    let x = b.data(F16, &[2, 3, 5]);
    let i = Tensor::from_vec(vec![], vec![-2i32]).unwrap();
    b.add(fam, "Gather scalar index f16", half(Gather { axis: 2 }), vec![Some(x), Some(i)], Pick::Sample(2));
    let x = b.data(F32, &[4, 0, 3]);
    b.add(fam, "Transpose empty", Transpose { perm: vec![2, 0, 1] }, vec![Some(x)], Pick::Sample(1));
    // Resize: nearest modes, linear with every coordinate mode, up and down,
    // crop-and-resize with extrapolation, u8 linear.
    use CoordinateMode::*;
    for dt in [F32, F16] {
        for nearest in [NearestMode::RoundPreferFloor, NearestMode::RoundPreferCeil, NearestMode::Floor, NearestMode::Ceil] {
            let r = resize(ResizeMode::Nearest, HalfPixel, nearest, &[1.0, 1.0, 1.7, 2.0], &[1, 3, 8, 10]);
            let x = b.data(dt, &[1, 3, 5, 5]);
            b.add(fam, format!("Resize nearest {nearest:?} {dt}"), for_dtype(dt, r), vec![Some(x)], Pick::Sample(2));
        }
        for coord in [HalfPixel, HalfPixelSymmetric, PytorchHalfPixel, AlignCorners, Asymmetric] {
            let r = resize(ResizeMode::Linear, coord, NearestMode::Floor, &[1.0, 1.0, 2.0, 2.0], &[2, 2, 10, 10]);
            let x = b.data(dt, &[2, 2, 5, 5]);
            b.add(fam, format!("Resize linear up {coord:?} {dt}"), for_dtype(dt, r), vec![Some(x)], Pick::Sample(2));
            let mut d = resize(ResizeMode::Linear, coord, NearestMode::Floor, &[1.0, 0.5, 0.75], &[3, 5, 9]);
            d.exclude_outside = true;
            let x = b.data(dt, &[3, 10, 12]);
            b.add(fam, format!("Resize linear down {coord:?} {dt}"), for_dtype(dt, d), vec![Some(x)], Pick::Sample(1));
        }
        let mut crop = resize(ResizeMode::Linear, TfCropAndResize, NearestMode::Floor, &[1.0, 1.0, 1.5, 1.5], &[1, 2, 6, 6]);
        crop.roi = vec![0.0, 0.0, 0.1, 0.2, 1.0, 1.0, 0.9, 1.2];
        crop.extrapolation_value = -1.0;
        let x = b.data(dt, &[1, 2, 4, 4]);
        b.add(fam, format!("Resize crop linear {dt}"), for_dtype(dt, crop.clone()), vec![Some(x.clone())], Pick::Sample(1));
        crop.mode = ResizeMode::Nearest;
        b.add(fam, format!("Resize crop nearest {dt}"), for_dtype(dt, crop), vec![Some(x)], Pick::Sample(1));
    }
    // GridSample: nearest and linear, every padding mode, both corner
    // conventions; grid points reach past [-1, 1] so that padding matters.
    for dt in [F32, F16] {
        for mode in [GridSampleMode::Nearest, GridSampleMode::Linear] {
            for padding in [GridPadding::Zeros, GridPadding::Border, GridPadding::Reflection] {
                for align_corners in [false, true] {
                    let op = GridSample { mode, padding, align_corners };
                    let x = b.data(dt, &[2, 3, 5, 7]);
                    let grid = b.uniform(dt, &[2, 4, 6, 2], -1.6, 1.6);
                    let name = format!("GridSample {mode:?} {padding:?} align {align_corners} {dt}");
                    b.add(fam, name, for_dtype(dt, op), vec![Some(x), Some(grid)], Pick::Sample(1));
                }
            }
        }
    }
    let r = resize(ResizeMode::Linear, HalfPixel, NearestMode::Floor, &[2.0, 2.0], &[8, 8]);
    let x = b.indices(U8, &[4, 4], 0, 256);
    b.add(fam, "Resize linear u8", r, vec![Some(x)], Pick::Sample(1));
    shape_reading_cases(b);
}

/// Ops of engines whose shapes vary, which read sizes from their later
/// inputs' shapes (bound in each run): each runs as its static op at those
/// shapes, or as an index fill.
fn shape_reading_cases(b: &mut Builder) {
    use DType::*;
    let fam = "movement";
    let of = |input, axis| DimOf { input, axis };
    // x[:, :n, -m:] with n and m read from the second input's shape.
    let x = b.data(F32, &[2, 9, 7]);
    let like = b.data(I64, &[5, 3]);
    let ds = DynamicSlice {
        slice: slice(&[1, 2], &[0, -7], &[9, 7], &[1, 1]),
        starts: vec![None, Some(SignedDim { dim: of(1, 1), negate: true })],
        ends: vec![Some(SignedDim { dim: of(1, 0), negate: false }), None],
    };
    b.add(fam, "DynamicSlice", ds, vec![Some(x), Some(like)], Pick::Sample(2));
    let x = b.data(F16, &[3, 1, 8]);
    let like = b.data(F32, &[4, 6]);
    let de = DynamicExpand { shape: vec![3, 9, 8], dims: vec![None, Some(of(1, 1)), None] };
    b.add(fam, "DynamicExpand f16", de, vec![Some(x), Some(like)], Pick::Sample(2));
    let x = b.data(I64, &[2, 5]);
    let like = b.data(F32, &[3]);
    let dt = DynamicTile { repeats: vec![8, 1], dims: vec![Some(of(1, 0)), None] };
    b.add(fam, "DynamicTile i64", dt, vec![Some(x), Some(like)], Pick::Sample(1));
    let x = b.data(F32, &[2, 3, 4]);
    let like = b.data(I64, &[6, 1]);
    let dr = DynamicReshape { dims: vec![ReshapeDim::Fixed(2), ReshapeDim::Of(of(1, 0)), ReshapeDim::Infer] };
    b.add(fam, "DynamicReshape", dr, vec![Some(x), Some(like)], Pick::Sample(1));
    let x = b.data(F32, &[1, 2, 4, 5]);
    let like = b.data(F32, &[1, 1, 7, 9]);
    let inner = resize(ResizeMode::Linear, CoordinateMode::HalfPixel, NearestMode::Floor, &[1.0, 1.0, 4.0, 4.0], &[1, 2, 16, 20]);
    let sizes = vec![ResizeSize::Fixed, ResizeSize::Fixed, ResizeSize::Of(of(1, 2)), ResizeSize::Of(of(1, 3))];
    b.add(fam, "DynamicResize linear", DynamicResize { resize: inner, sizes }, vec![Some(x), Some(like)], Pick::Sample(1));
    // A causal mask's leading block, sized by a sequence of 5.
    let mask = b.data(F32, &[1, 1, 16, 16]);
    let like = b.data(I64, &[2, 5]);
    let sl = SliceLike { dims: vec![None, None, Some(of(1, 1)), Some(of(1, 1))] };
    b.add(fam, "SliceLike", sl, vec![Some(mask), Some(like)], Pick::Sample(2));
    // arange(batch) * seq + arange(seq), in both index types, and a
    // negative step that wraps nothing.
    for dtype in [I64, I32] {
        let like = b.data(F32, &[3, 7]);
        let grid = IndexGrid {
            dtype,
            offset: 5,
            axes: vec![
                GridAxis { size: GridValue::Of(of(0, 0)), step: GridValue::Of(of(0, 1)) },
                GridAxis { size: GridValue::Of(of(0, 1)), step: GridValue::Fixed(-1) },
            ],
        };
        b.add(fam, format!("IndexGrid {dtype}"), grid, vec![Some(like)], Pick::Sample(1));
    }
    let like = b.data(F32, &[4, 11, 2]);
    let sizes = SizeOf { dtype: I64, dims: vec![of(0, 1), of(0, 0), of(0, 2)], scalar: false };
    b.add(fam, "SizeOf", sizes, vec![Some(like.clone())], Pick::Sample(1));
    let size = SizeOf { dtype: I32, dims: vec![of(0, 1)], scalar: true };
    b.add(fam, "SizeOf scalar i32", size, vec![Some(like)], Pick::Sample(1));
}
