#!/usr/bin/env python3
"""Exports torchvision's detectors, scaled down, with their whole
post-processing (issues 14 and 17's detection models).

torchvision's Faster R-CNN, RetinaNet, FCOS and SSD end in the graph every
detector exported from PyTorch has: per-class score filters (NonZero), top-k
with `k = min(k, number of candidates)` read from the filtered tensor's shape,
ConstantOfShape / Reshape / Expand / Range sized by those counts, an If that
skips batched NMS when nothing is left, and RoiAlign over the proposals kept
(Faster R-CNN). Here they keep that graph but get a backbone of two small
convolutions and small heads, so each file is small; weights are random
(seeded, spread so that scores differ from box to box), and each score
threshold is chosen so that the recorded images give several detections,
and one image none at all (when one of the candidates does).

Output, in `testdata/detection/`: `NAME.onnx` (legacy exporter, opset 17,
input `images` [3, 64, 64]), and per image `NAME.K.npz` holding the input
and onnxruntime's outputs under `out:NAME` (CPU provider, ORT_DISABLE_ALL,
1 thread). Faster R-CNN and FCOS are also exported as `NAME_dynamic.onnx`
with a symbolic image height and width, recorded at four image sizes, with
the profile to build them with. `manifest.json` lists the models, the count of detections of each
image and how far onnxruntime is from torch. Same versions as
`export_models.py` (`requirements.txt`); run with
`/tmp/tdvenv/bin/python testdata/export_detection.py`.
"""

from __future__ import annotations

import json
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
from torchvision.models.detection import FCOS, FasterRCNN, MaskRCNN, RetinaNet
from torchvision.models.detection.ssd import SSD
from torchvision.models.detection.anchor_utils import AnchorGenerator, DefaultBoxGenerator
from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor
from torchvision.ops import MultiScaleRoIAlign

sys.path.insert(0, str(Path(__file__).parent))
import export_models as em  # noqa: E402

OUT = Path(__file__).parent / "detection"
SIZE = 64
CLASSES = 4


class Backbone(nn.Module):
    """Two stride-2 convolutions: one feature map of stride 4 (or, for SSD,
    that map and one more of stride 8)."""

    def __init__(self, two_levels: bool = False):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 32, 3, 2, 1), nn.ReLU())
        self.extra = nn.Sequential(nn.Conv2d(32, 32, 3, 2, 1), nn.ReLU()) if two_levels else None
        self.out_channels = [32, 32] if two_levels else 32

    def forward(self, x):
        y = self.body(x)
        if self.extra is None:
            return y
        return OrderedDict([("0", y), ("1", self.extra(y))])


def anchors():
    return AnchorGenerator(sizes=((12, 24),), aspect_ratios=((0.5, 1.0, 2.0),))


def models(thresh: dict[str, float]):
    """name -> detector (eval mode, seeded weights)."""
    common = dict(min_size=SIZE, max_size=SIZE)
    torch.manual_seed(0)
    faster = FasterRCNN(
        Backbone(), num_classes=None, rpn_anchor_generator=anchors(),
        box_roi_pool=MultiScaleRoIAlign(["0"], 7, 2), box_head=TwoMLPHead(32 * 49, 32),
        box_predictor=FastRCNNPredictor(32, CLASSES), box_score_thresh=thresh["faster_rcnn"],
        rpn_pre_nms_top_n_test=200, rpn_post_nms_top_n_test=50, box_detections_per_img=40, **common)
    torch.manual_seed(1)
    retina = RetinaNet(Backbone(), CLASSES, anchor_generator=anchors(), score_thresh=thresh["retinanet"],
                       topk_candidates=60, detections_per_img=40, **common)
    torch.manual_seed(2)
    fcos = FCOS(Backbone(), CLASSES, anchor_generator=AnchorGenerator(sizes=((8,),), aspect_ratios=((1.0,),)),
                score_thresh=thresh["fcos"], topk_candidates=60, detections_per_img=40, **common)
    torch.manual_seed(3)
    ssd = SSD(Backbone(two_levels=True), DefaultBoxGenerator([[2], [2, 3]]), (SIZE, SIZE), CLASSES,
              score_thresh=thresh["ssd"], topk_candidates=60, detections_per_img=40)
    torch.manual_seed(4)
    mask = MaskRCNN(
        Backbone(), num_classes=None, rpn_anchor_generator=anchors(),
        box_roi_pool=MultiScaleRoIAlign(["0"], 7, 2), box_head=TwoMLPHead(32 * 49, 32),
        box_predictor=FastRCNNPredictor(32, CLASSES), box_score_thresh=thresh["mask_rcnn"],
        mask_roi_pool=MultiScaleRoIAlign(["0"], 14, 2), mask_head=MaskRCNNHeads(32, [16], 1),
        mask_predictor=MaskRCNNPredictor(16, 8, CLASSES),
        rpn_pre_nms_top_n_test=200, rpn_post_nms_top_n_test=50, box_detections_per_img=20, **common)
    detectors = {"faster_rcnn": faster, "retinanet": retina, "fcos": fcos, "ssd": ssd, "mask_rcnn": mask}
    # torchvision's initialization gives RetinaNet and FCOS one prior score
    # everywhere (ties at every anchor): spread the weights so that scores
    # differ from box to box.
    for seed, model in enumerate(detectors.values()):
        torch.manual_seed(10 + seed)
        with torch.no_grad():
            for p in model.parameters():
                p.normal_(0.0, 1.0 / p[0].numel() ** 0.5 if p.dim() > 1 else 0.1)
    return detectors


def candidate_images() -> list[np.ndarray]:
    """Random images at several brightnesses, then flat grey ones."""
    rng = np.random.default_rng(0)
    noisy = [(rng.random((3, SIZE, SIZE), dtype=np.float32) * f).astype(np.float32) for f in (1.0, 0.3, 0.6, 0.1)]
    return noisy + [np.full((3, SIZE, SIZE), v, np.float32) for v in (0.0, 0.25, 0.5, 0.75, 1.0)]


def scores(model, image: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model([torch.from_numpy(image)])[0]["scores"].numpy()


def threshold(model) -> tuple[float, list[np.ndarray]]:
    """A score threshold and the images to record: the threshold sits in the
    widest gap between the first image's 4th to 20th best scores (clear of
    every score, so that last-bit differences between implementations do not
    move a box across it); the images are the first two and, when one exists,
    a candidate that keeps nothing at that threshold."""
    cands = candidate_images()
    s = np.sort(scores(model, cands[0]))[::-1]
    gaps = [(s[i - 1] - s[i], i) for i in range(4, min(20, len(s)))]
    _, i = max(gaps)
    t = float((s[i - 1] + s[i]) / 2)
    chosen = cands[:2]
    for image in cands[2:]:
        if scores(model, image).max(initial=0.0) < t * 0.98:
            chosen.append(image)
            break
    return t, chosen


def export(model, path: Path, example: np.ndarray, dynamic_axes):
    """Exports `model` (legacy exporter, opset 17) to `path` without bulky
    metadata; the ONNX model and an onnxruntime session of it (CPU,
    ORT_DISABLE_ALL, 1 thread)."""
    with torch.no_grad():
        names = list(model([torch.from_numpy(example)])[0].keys())
        torch.onnx.export(model, ([torch.from_numpy(example)],), str(path), opset_version=17, dynamo=False,
                          input_names=["images"], output_names=names, dynamic_axes=dynamic_axes)
    m = onnx.load(str(path))
    em.strip_bulky_metadata(m)
    onnx.save_model(m, str(path))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    return m, ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def record(sess, model, image: np.ndarray, file: str) -> dict | None:
    """Runs `image` through onnxruntime and torch and, when both keep the
    same detections, saves the image and onnxruntime's outputs to `file`
    (`out:NAME`); the manifest's case. `None` when the counts differ."""
    got = sess.run(None, {"images": image})
    with torch.no_grad():
        eager = model([torch.from_numpy(image)])[0]
    if any(g.shape != eager[o.name].shape for o, g in zip(sess.get_outputs(), got)):
        return None
    diff = max((float(np.max(np.abs(g - eager[o.name].numpy()))) if g.size else 0.0)
               for o, g in zip(sess.get_outputs(), got))
    arrays = {"images": image}
    arrays.update({f"out:{o.name}": g for o, g in zip(sess.get_outputs(), got)})
    np.savez(OUT / file, **arrays)
    return {"file": file, "shape": list(image.shape), "detections": int(got[0].shape[0]),
            "max_abs_diff_ort_vs_torch": diff}


def main() -> int:
    OUT.mkdir(exist_ok=True)
    manifest = {"generator": "testdata/export_detection.py", "models": []}
    zero = {name: 0.0 for name in ("faster_rcnn", "retinanet", "fcos", "ssd", "mask_rcnn")}
    thresh, recorded_images = {}, {}
    for name, model in models(zero).items():
        model.eval()
        thresh[name], recorded_images[name] = threshold(model)
    for name, model in models(thresh).items():
        model.eval()
        path = OUT / f"{name}.onnx"
        m, sess = export(model, path, recorded_images[name][0], dynamic_axes=None)
        cases = []
        for k, image in enumerate(recorded_images[name]):
            case = record(sess, model, image, f"{name}.{k}.npz")
            if case is None:
                raise SystemExit(f"{name}: onnxruntime and torch keep different counts for image {k}")
            cases.append(case)
        ops = sorted({n.op_type for n in m.graph.node})
        manifest["models"].append({"name": name, "file": path.name, "score_thresh": thresh[name],
                                   "ops": ops, "cases": cases})
        print(f"{name}: detections {[c['detections'] for c in cases]}, "
              f"worst ort-vs-torch {max(c['max_abs_diff_ort_vs_torch'] for c in cases):.2e}, "
              f"{path.stat().st_size // 1024} KiB")
    for name, model in models(thresh).items():
        if name in DYNAMIC:
            model.eval()
            manifest["models"].append(export_dynamic(name, model, thresh[name]))
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


# The detectors also exported with the image's height and width symbolic:
# their transform resizes by a scale computed from the image's sizes and
# pads to a multiple of 32 (a pad that vanishes at some sizes), which trtc
# computes at run time. SSD resizes to a fixed size and is left out.
DYNAMIC = ("faster_rcnn", "fcos")
DYNAMIC_PROFILE = {"images": {"min": [3, 32, 32], "opt": [3, 64, 64], "max": [3, 96, 96]}}
DYNAMIC_SIZES = [(48, 64), (96, 96), (57, 83), (32, 40)]


def export_dynamic(name: str, model, thresh: float) -> dict:
    path = OUT / f"{name}_dynamic.onnx"
    rng = np.random.default_rng(1)
    example = rng.random((3, *DYNAMIC_SIZES[0]), dtype=np.float32)
    m, sess = export(model, path, example, dynamic_axes={"images": {1: "height", 2: "width"}})
    cases = []
    for k, (h, w) in enumerate(DYNAMIC_SIZES):
        # An image where onnxruntime and torch keep the same boxes (a score
        # at the threshold's last bits may fall on either side).
        for _ in range(20):
            case = record(sess, model, rng.random((3, h, w), dtype=np.float32), f"{name}_dynamic.{k}.npz")
            if case is not None:
                cases.append(case)
                break
        else:
            raise SystemExit(f"{name}_dynamic: onnxruntime and torch keep different counts at {h}x{w}")
    print(f"{name}_dynamic: detections {[c['detections'] for c in cases]} at {DYNAMIC_SIZES}, "
          f"{path.stat().st_size // 1024} KiB")
    return {"name": f"{name}_dynamic", "file": path.name, "score_thresh": thresh, "profile": DYNAMIC_PROFILE,
            "ops": sorted({n.op_type for n in m.graph.node}), "cases": cases}


if __name__ == "__main__":
    sys.exit(main())
