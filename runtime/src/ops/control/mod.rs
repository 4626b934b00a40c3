//! Control flow decided at run time: If, Loop and Scan, whose branches and
//! bodies are [`SubPlan`]s run when the layer runs, and the ops whose
//! shapes are decided by values computed at run time (`ShapedByValues`). (An If whose condition
//! is known when the engine is built, and a Loop or Scan whose iterations
//! are known and few enough, never get here: the importer replaces them by
//! the graph they make.)
//!
//! Inputs of both ops are their ONNX inputs followed by the outer-scope
//! values their sub-plans read (ONNX lets a subgraph read any tensor in
//! scope; here each is passed explicitly, in one order for all sub-plans
//! of the op).

mod subplan;
mod conditional;
mod scan;
mod looping;
mod shaped_by_values;

pub use conditional::If;
pub use looping::{Loop, MAX_ITERATIONS, MAX_SCAN_BYTES};
pub use scan::Scan;
pub use shaped_by_values::{range, range_len, ShapedByValues, ValueShapedOp};
pub use subplan::{Constant, Step, SubPlan, ValueId, MAX_DEPTH};

crate::op_family!(ControlOp => Control {
    If(If),
    Loop(Loop),
    Scan(Scan),
    ShapedByValues(ShapedByValues),
});
