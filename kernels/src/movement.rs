//! The movement family: ops that move elements without computing with them
//! (and the few that also write constants: Pad, Trilu, OneHot, and Resize,
//! whose linear mode interpolates). Kernels are instantiated by element byte
//! width, not dtype, so one module serves every dtype of a size.
//!
//! Most ops are one strided copy ([`copy`]): an iteration space whose one
//! side is contiguous and whose other side is read (or written) through
//! per-dimension strides passed as arguments, after dropping unit dimensions
//! and merging dimensions that stay contiguous. A copy that collapses to one
//! contiguous run becomes a flat byte copy in 16-byte words when the
//! addresses allow; a strided copy whose inner run allows it moves 8- or
//! 16-byte groups of elements (checking the addresses' alignment at run time
//! and falling back to single elements).
//!
//! | Op | Covered | Returns unsupported for |
//! |----|---------|-------------------------|
//! | Reshape | flat copy (the CPU op copies too) | — |
//! | Transpose, Slice (any steps), Expand, Tile | strided copy | more than 8 merged dimensions |
//! | Split | one strided copy per output | as above |
//! | Concat | one strided copy per non-empty input | as above |
//! | Gather | any axis, i32/i64 indices, negative indices | — |
//! | GatherElements | any axis, i32/i64 indices | rank above 8 |
//! | GatherND | any batch_dims, i32/i64 indices | tuples longer than 8 |
//! | ReverseSequence | i32/i64 lengths | — |
//! | Pad | constant, reflect, edge, wrap; negative pads | rank above 8 after merging unpadded dimensions |
//! | Resize | nearest (every nearest mode) and linear, every coordinate transformation mode, exclude_outside | cubic; antialiased linear downsampling; linear on rank above 5; f64/bf16 |
//! | GridSample | 2-D, nearest and linear, every padding mode, align_corners; f32 and f16 | cubic; 1-D and 3-D; f64/bf16 |
//! | Trilu | yes | — |
//! | OneHot | integer, f32 and f16 indices | bool, bf16 and f64 indices |
//! | DynamicReshape, DynamicSlice, DynamicExpand, DynamicTile, SliceLike, DynamicResize | their static op at the shapes bound in a run (sizes read from the later inputs' shapes) | as the static op |
//! | IndexGrid, SizeOf | an index fill, sizes and steps as arguments | rank above 8; more than 8 sizes |
//! | ScatterElements, ScatterND | no | duplicate indices apply in order on the CPU, which a parallel kernel does not reproduce |
//!
//! Index errors: where the CPU op fails on an index out of range (Gather,
//! GatherElements, GatherND, ReverseSequence), the kernel executes `__trap()`
//! on it, so the launch fails and the executor reports an error instead of
//! returning a result, as the CPU does. Indices are never clamped.
//!
//! Tactics: the element group width of strided copies (the widest valid
//! first) and the 1-D launch shapes shared with the elementwise family
//! ([`crate::elementwise::map::Launch1d`]; 256 threads with one element each
//! first).

mod copy;
mod fill;
mod gather;
mod grid_sample;
mod resize;

use crate::elementwise::map::Launch1d;
use crate::Tactic;
use crate::{unsupported, Candidate, KernelLaunch, KernelSource, LayerIo, Selection, SmLimits, Unsupported, COMMON};
use trtc_runtime::kernels::KernelArg;
use trtc_runtime::ops::movement::{type_shapes, AtShapes, MovementOp, Slice};
use trtc_runtime::ops::Op;

const COMMON_CUH: &str = include_str!("../cuda/movement_common.cuh");

/// The candidates of a movement layer.
pub fn candidates(io: &LayerIo<'_>, limits: &SmLimits) -> Selection {
    let Op::Movement(op) = io.op else {
        return unsupported(format!("{} is not a movement op", io.op.name()));
    };
    match op {
        MovementOp::Reshape(_)
        | MovementOp::Transpose(_)
        | MovementOp::Slice(_)
        | MovementOp::Concat(_)
        | MovementOp::Split(_)
        | MovementOp::Expand(_)
        | MovementOp::Tile(_) => copy::candidates(op, io, limits),
        MovementOp::DynamicReshape(_) => copy::candidates(op, &data_only(io), limits),
        MovementOp::Gather(_) | MovementOp::GatherElements(_) | MovementOp::GatherND(_) | MovementOp::ReverseSequence(_) => {
            gather::candidates(op, io, limits)
        }
        MovementOp::Pad(_) | MovementOp::Trilu(_) | MovementOp::OneHot(_) => fill::candidates(op, io, limits),
        MovementOp::Resize(r) => resize::candidates(r, io, limits),
        MovementOp::ScatterElements(_) | MovementOp::ScatterND(_) => {
            unsupported(format!("{}: duplicate indices apply in order on the CPU", op.as_impl().name()))
        }
        MovementOp::GridSample(g) => grid_sample::candidates(g, io, limits),
        MovementOp::IndexGrid(_) | MovementOp::SizeOf(_) => fill::candidates(op, io, limits),
        // Ops that read sizes from the shapes bound in a run are their
        // static op at those shapes, on the data input alone.
        MovementOp::DynamicSlice(d) => at_shapes(d, io, limits, MovementOp::Slice),
        MovementOp::DynamicExpand(d) => at_shapes(d, io, limits, MovementOp::Expand),
        MovementOp::DynamicTile(d) => at_shapes(d, io, limits, MovementOp::Tile),
        MovementOp::DynamicResize(d) => {
            let r = d.at(&type_shapes(&io.inputs)).map_err(|e| Unsupported(e.to_string()))?;
            resize::candidates(&r, &data_only(io), limits)
        }
        MovementOp::SliceLike(s) => {
            let x = crate::elementwise::input(io, 0)?;
            let shape = s.shape(&type_shapes(&io.inputs)).map_err(|e| Unsupported(e.to_string()))?;
            let r = shape.len();
            let slice = Slice {
                axes: (0..r).collect(),
                starts: vec![0; r],
                ends: shape.iter().map(|&n| n as i64).collect(),
                steps: vec![1; r],
            };
            if x.shape.len() != r {
                return unsupported(format!("SliceLike: {x} for {r} sizes"));
            }
            copy::candidates(&MovementOp::Slice(slice), &data_only(io), limits)
        }
        MovementOp::NonZero(_) => unsupported("NonZero: no kernel counts its output"),
    }
}

/// The layer without the inputs read for their shapes only (those after
/// the first).
fn data_only<'a>(io: &LayerIo<'a>) -> LayerIo<'a> {
    LayerIo { op: io.op, inputs: io.inputs.iter().take(1).copied().collect(), outputs: io.outputs.clone() }
}

/// The candidates of an [`AtShapes`] op: its static op at the layer's input
/// shapes, on the data input.
fn at_shapes<A: AtShapes>(op: &A, io: &LayerIo<'_>, limits: &SmLimits, wrap: fn(A::Static) -> MovementOp) -> Selection {
    let st = op.at(&type_shapes(&io.inputs)).map_err(|e| Unsupported(e.to_string()))?;
    copy::candidates(&wrap(st), &data_only(io), limits)
}

/// How a movement kernel moves elements: `narrow` is the tensors' element
/// size in bytes, `vec` how many adjacent elements one thread moves at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Elems {
    pub narrow: usize,
    pub vec: usize,
}

impl Elems {
    pub fn single(narrow: usize) -> Elems {
        Elems { narrow, vec: 1 }
    }

    fn bytes(&self) -> usize {
        self.narrow * self.vec
    }
}

/// The unsigned C type of an element size (or `trtc_v16` for 16 bytes).
fn width_type(bytes: usize) -> &'static str {
    match bytes {
        1 => "unsigned char",
        2 => "unsigned short",
        4 => "unsigned int",
        8 => "unsigned long long",
        _ => "trtc_v16",
    }
}

/// A movement kernel source: the common helpers, the element and index
/// types, further defines, and the kernel file.
fn source(file: &str, entry: &str, elems: Elems, idx32: bool, defines: &[(&str, String)]) -> KernelSource {
    let mut s = format!("{COMMON}\n{}\n", crate::elementwise::map::MATH);
    let types = [
        ("NARROW", width_type(elems.narrow).to_string()),
        ("ELEM", width_type(elems.bytes()).to_string()),
        ("VEC", elems.vec.to_string()),
        ("IDX", if idx32 { "int" } else { "long long" }.to_string()),
    ];
    for (k, v) in types.iter().map(|(k, v)| (*k, v)).chain(defines.iter().map(|(k, v)| (*k, v))) {
        s.push_str(&format!("#define {k} {v}\n"));
    }
    s.push_str(COMMON_CUH);
    s.push('\n');
    s.push_str(file);
    KernelSource { entry: entry.into(), source: s }
}

/// Whether 32-bit signed indices hold every element index and offset of a
/// kernel touching at most `elems` elements (grid-stride steps included).
fn idx32(elems: u64) -> bool {
    elems < (1u64 << 30)
}

/// One kernel launched over `n` elements of its grid-stride loop.
#[derive(Clone, Debug)]
struct Job {
    kernel: KernelSource,
    args: Vec<KernelArg>,
    n: u64,
    /// Elements one thread moves at a time.
    vec: usize,
}

/// The candidates of a layer computed by `jobs` in order: one per launch
/// tactic, named `family <tactic>`.
fn job_candidates(family: &str, jobs: &[Job], limits: &SmLimits) -> Vec<Candidate> {
    Launch1d::all(limits)
        .into_iter()
        .map(|l| Candidate {
            tactic: Tactic::Launch { family: family.to_string(), launch: l },
            launches: jobs.iter().map(|j| l.launch(&j.kernel, j.args.clone(), j.n)).collect::<Vec<KernelLaunch>>(),
        })
        .collect()
}
