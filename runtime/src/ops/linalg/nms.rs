//! NonMaxSuppression: per batch and class, boxes by descending score (ties
//! by index), each kept unless it overlaps a kept one by more than the IoU
//! threshold, at most `max_output_boxes_per_class` of them; the output lists
//! `[batch, class, box]` triples. How many depends on the data: `infer`
//! gives the most there can be (the room the memory plan holds) and
//! `eval_sized` the actual count, as onnxruntime computes it.

use crate::dtype::DType;
use crate::ensure_op;
use crate::error::Result;
use crate::ops::{input, OpImpl};
use crate::tensor::{TensorType, TensorView, TensorViewMut};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NonMaxSuppression {
    /// Boxes as `[x_center, y_center, width, height]` (else `[y1, x1, y2, x2]`
    /// of any two opposite corners).
    pub center_point_box: bool,
    /// The most boxes a class may keep when `max_output_boxes_per_class` is
    /// a constant (the room planned); `None` when it comes at run time.
    pub max_per_class: Option<usize>,
}

/// Inputs: boxes `[B, N, 4]`, scores `[B, C, N]`, then the optional scalars
/// `max_output_boxes_per_class` (i64), `iou_threshold` and
/// `score_threshold` (f32).
impl NonMaxSuppression {
    fn dims(inputs: &[Option<&TensorType>]) -> Result<(usize, usize, usize)> {
        let boxes = input(inputs, 0, "NonMaxSuppression")?;
        let scores = input(inputs, 1, "NonMaxSuppression")?;
        ensure_op!(
            boxes.dtype == DType::F32 && scores.dtype == DType::F32,
            "NonMaxSuppression: boxes and scores must be f32, got {boxes} and {scores}"
        );
        let (b, n) = match boxes.shape.as_slice() {
            [b, n, 4] => (*b, *n),
            _ => crate::bail_op!("NonMaxSuppression: boxes must be [batches, boxes, 4], got {boxes}"),
        };
        ensure_op!(
            scores.shape.len() == 3 && scores.shape[0] == b && scores.shape[2] == n,
            "NonMaxSuppression: scores {scores} do not match boxes {boxes} ([batches, classes, boxes])"
        );
        for (i, want) in [(2, DType::I64), (3, DType::F32), (4, DType::F32)] {
            if let Some(Some(t)) = inputs.get(i) {
                ensure_op!(t.dtype == want && t.len() == 1, "NonMaxSuppression: input {i} must be one {want}, got {t}");
            }
        }
        Ok((b, scores.shape[1], n))
    }
}

/// Whether two boxes overlap by more than `threshold` (onnxruntime's rule:
/// corners sorted, empty boxes never overlap).
fn overlaps(a: &[f32], b: &[f32], center: bool, threshold: f32) -> bool {
    let corners = |v: &[f32]| -> [f32; 4] {
        if center {
            let (hw, hh) = (v[2] / 2.0, v[3] / 2.0);
            [v[0] - hw, v[1] - hh, v[0] + hw, v[1] + hh]
        } else {
            [v[1].min(v[3]), v[0].min(v[2]), v[1].max(v[3]), v[0].max(v[2])]
        }
    };
    let ([ax1, ay1, ax2, ay2], [bx1, by1, bx2, by2]) = (corners(a), corners(b));
    let (w, h) = (ax2.min(bx2) - ax1.max(bx1), ay2.min(by2) - ay1.max(by1));
    if w <= 0.0 || h <= 0.0 {
        return false;
    }
    let inter = w * h;
    let (area_a, area_b) = ((ax2 - ax1) * (ay2 - ay1), (bx2 - bx1) * (by2 - by1));
    let union = area_a + area_b - inter;
    if area_a <= 0.0 || area_b <= 0.0 || union <= 0.0 {
        return false;
    }
    inter / union > threshold
}

impl OpImpl for NonMaxSuppression {
    fn name(&self) -> &'static str {
        "NonMaxSuppression"
    }

    fn infer(&self, inputs: &[Option<&TensorType>]) -> Result<Vec<TensorType>> {
        let (b, c, n) = Self::dims(inputs)?;
        let per_class = self.max_per_class.map_or(n, |m| m.min(n));
        let most = b.checked_mul(c).and_then(|x| x.checked_mul(per_class));
        let most = most.ok_or_else(|| crate::Error::op("NonMaxSuppression: output too large"))?;
        Ok(vec![TensorType::new(DType::I64, vec![most, 3])])
    }

    fn data_dependent(&self) -> bool {
        true
    }

    fn eval(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<()> {
        self.eval_sized(inputs, outputs).map(|_| ())
    }

    fn eval_sized(&self, inputs: &[Option<TensorView<'_>>], outputs: &mut [TensorViewMut<'_>]) -> Result<Vec<Vec<usize>>> {
        let types: Vec<Option<TensorType>> = inputs.iter().map(|t| t.as_ref().map(|t| t.ty())).collect();
        let refs: Vec<Option<&TensorType>> = types.iter().map(Option::as_ref).collect();
        let (batches, classes, n) = Self::dims(&refs)?;
        let boxes = input(inputs, 0, "NonMaxSuppression")?.as_slice::<f32>()?;
        let scores = input(inputs, 1, "NonMaxSuppression")?.as_slice::<f32>()?;
        let scalar_i64 = |i: usize| -> Result<Option<i64>> {
            Ok(match inputs.get(i) {
                Some(Some(t)) => Some(t.as_slice::<i64>()?[0]),
                _ => None,
            })
        };
        let scalar_f32 = |i: usize| -> Result<Option<f32>> {
            Ok(match inputs.get(i) {
                Some(Some(t)) => Some(t.as_slice::<f32>()?[0]),
                _ => None,
            })
        };
        let wanted = scalar_i64(2)?.unwrap_or(0).max(0) as usize;
        let per_class = self.max_per_class.map_or(wanted, |m| m.min(wanted)).min(n);
        let iou = scalar_f32(3)?.unwrap_or(0.0);
        let score_min = scalar_f32(4)?;
        let out = outputs[0].as_mut_slice::<i64>()?;
        let mut count = 0;
        let mut order: Vec<usize> = Vec::with_capacity(n);
        let mut kept: Vec<usize> = Vec::with_capacity(per_class);
        for b in 0..batches {
            for c in 0..classes {
                if per_class == 0 {
                    continue;
                }
                let s = &scores[(b * classes + c) * n..][..n];
                order.clear();
                order.extend((0..n).filter(|&i| score_min.is_none_or(|t| s[i] > t)));
                order.sort_by(|&x, &y| s[y].total_cmp(&s[x]).then(x.cmp(&y)));
                kept.clear();
                for &i in &order {
                    let bi = &boxes[(b * n + i) * 4..][..4];
                    if kept.iter().any(|&k| overlaps(&boxes[(b * n + k) * 4..][..4], bi, self.center_point_box, iou)) {
                        continue;
                    }
                    kept.push(i);
                    ensure_op!((count + 1) * 3 <= out.len(), "NonMaxSuppression: more boxes than the planned room");
                    out[count * 3..count * 3 + 3].copy_from_slice(&[b as i64, c as i64, i as i64]);
                    count += 1;
                    if kept.len() == per_class {
                        break;
                    }
                }
            }
        }
        Ok(vec![vec![count, 3]])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Op;
    use crate::tensor::Tensor;

    #[test]
    fn keeps_the_best_of_overlapping_boxes_per_class() {
        // Three boxes: 0 and 1 overlap heavily, 2 is apart.
        let boxes = Tensor::from_vec(vec![1, 3, 4], vec![0f32, 0., 1., 1., 0., 0.1, 1., 1.1, 0., 10., 1., 11.]).unwrap();
        let scores = Tensor::from_vec(vec![1, 2, 3], vec![0.9f32, 0.95, 0.3, 0.1, 0.2, 0.8]).unwrap();
        let max = Tensor::from_vec(vec![1], vec![3i64]).unwrap();
        let iou = Tensor::from_vec(vec![1], vec![0.5f32]).unwrap();
        let min = Tensor::from_vec(vec![1], vec![0.15f32]).unwrap();
        let op: Op = NonMaxSuppression { center_point_box: false, max_per_class: Some(3) }.into();
        let out = op.eval_owned(&[Some(&boxes), Some(&scores), Some(&max), Some(&iou), Some(&min)]).unwrap().remove(0);
        // Class 0: box 1 (0.95) suppresses box 0, then box 2. Class 1: box 2,
        // then box 1 (box 0's 0.1 is under the score threshold).
        assert_eq!(out.shape(), &[4, 3]);
        assert_eq!(out.as_slice::<i64>().unwrap(), &[0, 0, 1, 0, 0, 2, 0, 1, 2, 0, 1, 1]);
        // No max_output_boxes_per_class: nothing is selected.
        let none = op.eval_owned(&[Some(&boxes), Some(&scores)]).unwrap().remove(0);
        assert_eq!(none.shape(), &[0, 3]);
    }
}
