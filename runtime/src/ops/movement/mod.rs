//! Data movement: reshape, transpose, slice, concat, gather, pad, resize,
//! grid sampling...

mod concat;
pub(crate) mod copy;
mod gather;
mod grid_sample;
mod onehot;
mod pad;
// Sizes read from other inputs' shapes (`DimOf`), used by the modules below.
pub(crate) mod reshape;
mod expand;
mod index_grid;
mod nonzero;
mod resize;
mod reverse_sequence;
mod scatter;
mod size_of;
mod slice;
mod transpose;
mod trilu;

pub use concat::{Concat, Split};
pub use expand::{DynamicExpand, DynamicTile, Expand, Tile};
pub use gather::{Gather, GatherElements, GatherND};
pub use grid_sample::{GridPadding, GridSample, GridSampleMode};
pub use index_grid::{GridAxis, GridValue, IndexGrid};
pub use nonzero::NonZero;
pub use onehot::OneHot;
pub use pad::{Pad, PadMode};
pub use reshape::{resolve_reshape, type_shapes, AtShapes, DimOf, DynamicReshape, Reshape, ReshapeDim};
pub use resize::{
    resize_scales_and_sizes, AspectPolicy, CoordinateMode, DynamicResize, NearestMode, Resize, ResizeBy, ResizeMode, ResizeSize,
};
pub use reverse_sequence::ReverseSequence;
pub use scatter::{ScatterElements, ScatterND, ScatterReduction};
pub use size_of::SizeOf;
pub use slice::{resolve_range, AxisRange, DynamicSlice, SignedDim, Slice, SliceLike};
pub use transpose::Transpose;
pub use trilu::Trilu;

crate::op_family!(MovementOp => Movement {
    Reshape(Reshape),
    Transpose(Transpose),
    Slice(Slice),
    Concat(Concat),
    Split(Split),
    Gather(Gather),
    GatherElements(GatherElements),
    GatherND(GatherND),
    ScatterElements(ScatterElements),
    ScatterND(ScatterND),
    Expand(Expand),
    Tile(Tile),
    Pad(Pad),
    Resize(Resize),
    Trilu(Trilu),
    OneHot(OneHot),
    ReverseSequence(ReverseSequence),
    GridSample(GridSample),
    DynamicReshape(DynamicReshape),
    SliceLike(SliceLike),
    DynamicResize(DynamicResize),
    DynamicExpand(DynamicExpand),
    IndexGrid(IndexGrid),
    NonZero(NonZero),
    DynamicSlice(DynamicSlice),
    DynamicTile(DynamicTile),
    SizeOf(SizeOf),
});

impl MovementOp {
    /// Whether the op only gives its input another shape: a Reshape, static
    /// or following the input shapes.
    pub fn is_reshape(&self) -> bool {
        matches!(self, MovementOp::Reshape(_) | MovementOp::DynamicReshape(_))
    }
}
