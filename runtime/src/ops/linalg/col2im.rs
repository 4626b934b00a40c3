//! Col2Im: the adjoint of im2col. Input `[N, C * prod(block), L]` holds, for
//! each of the `L` block positions a sliding window takes over the padded
//! image, the block's `C * prod(block)` values; each is added into the
//! image pixel it covers: `Y [N, C, image...]`. Pixels in the padding are
//! dropped; overlapping blocks sum (in f64, rounded once).

use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use crate::{bail_op, ensure_op};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Col2Im {
    /// The image's spatial shape.
    pub image: Vec<usize>,
    /// The block's spatial shape.
    pub block: Vec<usize>,
    pub strides: Vec<usize>,
    pub dilations: Vec<usize>,
    /// Padding at the start of each axis, then at the end.
    pub pads: Vec<usize>,
}

impl Col2Im {
    /// Block positions along each axis, or None when the window does not fit.
    /// Block positions along each axis, with their product, the block's
    /// size and the image's; None when the window does not fit or a size
    /// overflows (attributes come from untrusted models).
    fn sizes(&self) -> Option<(Vec<usize>, usize, usize, usize)> {
        let r = self.image.len();
        let positions: Vec<usize> = (0..r)
            .map(|a| {
                let padded = self.image[a].checked_add(self.pads[a])?.checked_add(self.pads[r + a])?;
                let span = self.dilations[a].checked_mul(self.block[a].checked_sub(1)?)?.checked_add(1)?;
                (padded >= span && self.strides[a] > 0).then(|| (padded - span) / self.strides[a] + 1)
            })
            .collect::<Option<_>>()?;
        let product = |v: &[usize]| v.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        let (blocks, kernel, plane) = (product(&positions)?, product(&self.block)?, product(&self.image)?);
        Some((positions, blocks, kernel, plane))
    }
}

impl OpImpl for Col2Im {
    fn name(&self) -> &'static str {
        "Col2Im"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let x = input(inputs, 0, "Col2Im")?;
        let r = self.image.len();
        ensure_op!(
            r >= 1 && self.block.len() == r && self.strides.len() == r && self.dilations.len() == r && self.pads.len() == 2 * r,
            "Col2Im: image {:?}, block {:?}, strides, dilations and pads do not agree on the number of axes",
            self.image,
            self.block
        );
        ensure_op!(x.dtype.is_float(), "Col2Im: input is {x}; only float inputs are supported");
        let Some((_, blocks, kernel, _)) = self.sizes() else {
            bail_op!("Col2Im: block {:?} does not fit image {:?} with these pads and dilations", self.block, self.image)
        };
        ensure_op!(
            x.shape.len() == 3 && kernel > 0 && x.shape[1] % kernel == 0 && x.shape[2] == blocks,
            "Col2Im: input is {x}, expected [N, C * {kernel}, {blocks}] for image {:?} and block {:?}",
            self.image,
            self.block
        );
        let mut shape = vec![x.shape[0], x.shape[1] / kernel];
        shape.extend(&self.image);
        Ok(vec![TensorType::new(x.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        let xv = input(inputs, 0, "Col2Im")?;
        let x = xv.to_f64_vec();
        let r = self.image.len();
        let Some((positions, blocks, kernel, plane)) = self.sizes() else { bail_op!("Col2Im: the block does not fit the image") };
        let (n, c) = (xv.shape[0], xv.shape[1] / kernel);
        let mut y = vec![0f64; n * c * plane];
        // For each (kernel offset, block position): the pixel it lands on.
        let mut targets: Vec<Option<usize>> = Vec::with_capacity(kernel * blocks);
        let mut k_idx = vec![0usize; r];
        for _ in 0..kernel {
            let mut l_idx = vec![0usize; r];
            for _ in 0..blocks {
                let mut pixel = Some(0usize);
                for a in 0..r {
                    let pos = (l_idx[a] * self.strides[a] + k_idx[a] * self.dilations[a]) as i64 - self.pads[a] as i64;
                    pixel = match pixel {
                        Some(p) if (0..self.image[a] as i64).contains(&pos) => Some(p * self.image[a] + pos as usize),
                        _ => None,
                    };
                }
                targets.push(pixel);
                step(&mut l_idx, &positions);
            }
            step(&mut k_idx, &self.block);
        }
        for b in 0..n {
            for ch in 0..c {
                let dst = &mut y[(b * c + ch) * plane..][..plane];
                let src = &x[(b * c + ch) * kernel * blocks..][..kernel * blocks];
                for (&v, &t) in src.iter().zip(&targets) {
                    if let Some(p) = t {
                        dst[p] += v;
                    }
                }
            }
        }
        crate::ops::util::store_f64(&mut outputs[0], &y, "Col2Im")
    }
}

/// Advances a row-major multi-index over `dims` by one.
fn step(idx: &mut [usize], dims: &[usize]) {
    for a in (0..idx.len()).rev() {
        idx[a] += 1;
        if idx[a] < dims[a] {
            return;
        }
        idx[a] = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn overlapping_blocks_sum_and_padding_is_dropped() {
        // A 1x3 image, blocks of 1x2 with stride 1: positions 0 and 1; the
        // middle pixel gets both blocks' values.
        let op = Col2Im { image: vec![1, 3], block: vec![1, 2], strides: vec![1, 1], dilations: vec![1, 1], pads: vec![0; 4] };
        // [N=1, C*K=2, L=2]: row k holds kernel offset k for each position.
        let x = Tensor::from_vec(vec![1, 2, 2], vec![1f32, 10.0, 2.0, 20.0]).unwrap();
        let y = Op::from(op).eval_owned(&[Some(&x)]).unwrap().remove(0);
        assert_eq!(y.shape(), [1, 1, 1, 3]);
        assert_eq!(y.as_slice::<f32>().unwrap(), [1.0, 12.0, 20.0]);
        // Padding one pixel on the left: still two positions, and the first
        // block's first value falls in the padding.
        let op =
            Col2Im { image: vec![1, 2], block: vec![1, 2], strides: vec![1, 1], dilations: vec![1, 1], pads: vec![0, 1, 0, 0] };
        let x = Tensor::from_vec(vec![1, 2, 2], vec![1f32, 10.0, 2.0, 20.0]).unwrap();
        let y = Op::from(op).eval_owned(&[Some(&x)]).unwrap().remove(0);
        assert_eq!(y.as_slice::<f32>().unwrap(), [12.0, 20.0]);
    }

    #[test]
    fn inference_checks_the_block_count() {
        let op = Op::from(Col2Im {
            image: vec![5, 5],
            block: vec![2, 2],
            strides: vec![1, 1],
            dilations: vec![1, 1],
            pads: vec![0; 4],
        });
        let t = |s: &[usize]| TensorType::new(DType::F32, s.to_vec());
        assert_eq!(op.infer(&[Some(&t(&[1, 12, 16]))]).unwrap(), [t(&[1, 3, 5, 5])]);
        assert!(op.infer(&[Some(&t(&[1, 12, 15]))]).is_err());
        assert!(op.infer(&[Some(&t(&[1, 10, 16]))]).is_err());
        // Sizes that overflow are errors, not panics.
        let huge = Op::from(Col2Im {
            image: vec![usize::MAX, 2],
            block: vec![2, usize::MAX],
            strides: vec![1, 1],
            dilations: vec![usize::MAX, 1],
            pads: vec![1, 0, 1, 0],
        });
        assert!(huge.infer(&[Some(&t(&[1, 12, 16]))]).is_err());
    }
}
