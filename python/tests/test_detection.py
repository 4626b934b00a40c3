"""A detector whose outputs are sized by the data (testdata/detection's
scaled-down torchvision Faster R-CNN): its output bindings say so, and each
run returns as many detections as onnxruntime recorded, none included."""

import json

import numpy as np
import trtc
from conftest import REPO, recorded

DETECTION = REPO / "testdata" / "detection"


def test_a_detectors_outputs_follow_each_runs_count():
    engine = trtc.build(DETECTION / "faster_rcnn.onnx")
    shapes = {b.name: (b.shape, b.min_shape) for b in engine.outputs}
    assert shapes["boxes"] == ((-1, -1), (0, 0))
    assert shapes["scores"] == ((-1,), (0,))
    ctx = engine.create_context(device="cpu")
    cases = json.loads((DETECTION / "manifest.json").read_text())["models"][0]["cases"]
    counts = []
    for case in cases:
        arrays = recorded(DETECTION / case["file"])
        out = ctx.run({"images": arrays["images"]})
        assert out["boxes"].shape == arrays["out:boxes"].shape
        # Rows of scores tied to the last bits may swap: compare sorted.
        np.testing.assert_allclose(np.sort(out["scores"]), np.sort(arrays["out:scores"]), rtol=0, atol=1e-4)
        counts.append(out["boxes"].shape[0])
    assert counts == [c["detections"] for c in cases] and 0 in counts
