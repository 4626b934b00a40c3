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

/// A box's sorted corners and its area, computed once per box.
#[derive(Clone, Copy)]
struct Corners {
    x1: f32,
    y1: f32,
    x2: f32,
    y2: f32,
    area: f32,
}

impl Corners {
    /// onnxruntime's reading: `[y1, x1, y2, x2]` with the corners sorted,
    /// or `[x_center, y_center, width, height]`.
    fn of(v: &[f32], center: bool) -> Corners {
        let [x1, y1, x2, y2] = if center {
            let (hw, hh) = (v[2] / 2.0, v[3] / 2.0);
            [v[0] - hw, v[1] - hh, v[0] + hw, v[1] + hh]
        } else {
            [v[1].min(v[3]), v[0].min(v[2]), v[1].max(v[3]), v[0].max(v[2])]
        };
        Corners { x1, y1, x2, y2, area: (x2 - x1) * (y2 - y1) }
    }

    /// Whether the two boxes overlap by more than `threshold` (onnxruntime's
    /// rule: empty boxes never overlap).
    fn overlaps(&self, b: &Corners, threshold: f32) -> bool {
        let (w, h) = (self.x2.min(b.x2) - self.x1.max(b.x1), self.y2.min(b.y2) - self.y1.max(b.y1));
        if w <= 0.0 || h <= 0.0 {
            return false;
        }
        let inter = w * h;
        let union = self.area + b.area - inter;
        if self.area <= 0.0 || b.area <= 0.0 || union <= 0.0 {
            return false;
        }
        inter / union > threshold
    }
}

/// The boxes one class keeps, ordered by their left edge, so that a
/// candidate is compared only with kept boxes whose left edge lies within
/// the widest kept box's width of its own (boxes further left end before it
/// starts; boxes starting after its right edge cannot meet it). Detectors'
/// batched NMS offsets each class's boxes so that classes never meet: there
/// a candidate meets the kept boxes of its own class and near it only.
/// Which boxes are kept is exactly what comparing with all of them gives.
#[derive(Default)]
struct Kept {
    by_left: std::collections::BTreeMap<(u32, usize), Corners>,
    /// The widest kept box's width; not finite: compare with every box.
    widest: f32,
}

/// An order-preserving key of a finite f32 (NaN sorts last).
fn ordered(v: f32) -> u32 {
    let b = v.to_bits();
    if b >> 31 == 1 {
        !b
    } else {
        b | 1 << 31
    }
}

impl Kept {
    fn clear(&mut self) {
        self.by_left.clear();
        self.widest = 0.0;
    }

    fn len(&self) -> usize {
        self.by_left.len()
    }

    fn push(&mut self, b: Corners) {
        self.widest = self.widest.max(b.x2 - b.x1);
        if !(b.x2 - b.x1).is_finite() {
            self.widest = f32::INFINITY;
        }
        let n = self.by_left.len();
        self.by_left.insert((ordered(b.x1), n), b);
    }

    fn any_overlaps(&self, b: &Corners, threshold: f32) -> bool {
        let (lo, hi) = (b.x1 - self.widest, b.x2);
        if !lo.is_finite() || !hi.is_finite() || lo.is_nan() {
            return self.by_left.values().any(|k| k.overlaps(b, threshold));
        }
        // A margin for the rounding of `x2 - x1`: a few ulps of the edges.
        let slack = (lo.abs() + self.widest.abs()) * 1e-6 + f32::MIN_POSITIVE;
        let range = (ordered(lo - slack), 0)..(ordered(hi), 0);
        self.by_left.range(range).any(|(_, k)| k.overlaps(b, threshold))
    }
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
        let mut kept = Kept::default();
        let mut corners: Vec<Corners> = Vec::with_capacity(n);
        for b in 0..batches {
            corners.clear();
            corners.extend(boxes[b * n * 4..(b + 1) * n * 4].chunks_exact(4).map(|v| Corners::of(v, self.center_point_box)));
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
                    let bi = corners[i];
                    if kept.any_overlaps(&bi, iou) {
                        continue;
                    }
                    kept.push(bi);
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

    /// The kept boxes found through the left-edge index are those a
    /// comparison with every kept box finds: random boxes of many sizes, in
    /// both box layouts, some degenerate, offset per class like torchvision's
    /// batched NMS.
    #[test]
    fn the_left_edge_index_keeps_what_comparing_with_every_box_keeps() {
        let mut seed = 12345u64;
        let mut next = move || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 40) as f32 / (1u64 << 24) as f32
        };
        for center in [false, true] {
            for round in 0..20 {
                let n = 50 + round * 20;
                let mut boxes = Vec::with_capacity(n * 4);
                for i in 0..n {
                    let offset = (i % 4) as f32 * 100.0;
                    let (a, b) = (next() * 50.0 + offset, next() * 50.0 + offset);
                    let (w, h) = (next() * 30.0 * next(), if i % 17 == 0 { 0.0 } else { next() * 20.0 });
                    boxes.extend(if center { [a, b, w, h] } else { [b, a, b + h, a + w] });
                }
                let corners: Vec<Corners> = boxes.chunks_exact(4).map(|v| Corners::of(v, center)).collect();
                for iou in [0.0, 0.3, 0.7] {
                    let (mut fast, mut every) = (Kept::default(), Vec::new());
                    for c in &corners {
                        let by_index = fast.any_overlaps(c, iou);
                        let by_all = every.iter().any(|k: &Corners| k.overlaps(c, iou));
                        assert_eq!(by_index, by_all, "center {center}, round {round}, iou {iou}");
                        if !by_all {
                            fast.push(*c);
                            every.push(*c);
                        }
                    }
                }
            }
        }
    }
}
