//! Reshape to a static shape (also what Flatten, Squeeze, Unsqueeze and
//! Identity become). The data is copied unchanged.

use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reshape {
    pub shape: Vec<usize>,
}

impl OpImpl for Reshape {
    fn name(&self) -> &'static str {
        "Reshape"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "Reshape")?;
        let out = TensorType::new(x.dtype, self.shape.clone());
        ensure_op!(out.checked_len() == x.checked_len(), "Reshape: cannot reshape {x} to {:?}", self.shape);
        Ok(vec![out])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let x = input(inputs, 0, "Reshape")?;
        outputs[0].bytes.copy_from_slice(x.bytes);
        Ok(())
    }
}
