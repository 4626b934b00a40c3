"""INT8 accuracy: trtc's default calibrator against onnxruntime's
quantize_static (issue 18's bar), on the same calibration batches.

For each CNN: 8 calibration batches and 8 held-out evaluation batches
(seeded, uniform in [-1, 1)); the FP32 reference is onnxruntime on the
original model. onnxruntime: quant_pre_process (its recommended
pre-processing: shape inference and graph optimization), then quantize_static with QDQ, per-channel
symmetric int8 weights, symmetric int8 activations, MinMax calibration,
run with all graph optimizations. trtc: `trtc.build(int8=True,
calibrator=trtc.EntropyCalibrator(batches))` (the default calibrator), run
exactly on the CPU executor (the table also counts the layers each left in
int8: QuantizeLinear nodes in onnxruntime's model, int8 layers in trtc's
engine). Metric: cosine of the flattened logits per
evaluation batch against FP32, the worst of the 8 batches.

Usage (a venv with the trtc package, numpy, onnx and onnxruntime):
    python benches/int8_vs_onnxruntime.py [--models SUBSTRING ...]
"""

import argparse
import logging
import os
import tempfile
from pathlib import Path

import numpy as np
import onnxruntime as ort
import trtc
from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process

ROOT = Path(__file__).resolve().parent.parent
CNNS = [
    "example_cnn", "resnet18_legacy", "resnet50_legacy", "mobilenet_v2_legacy", "mobilenet_v3_small_legacy",
    "efficientnet_b0_legacy", "regnet_legacy", "shufflenet_v2_legacy", "squeezenet1_1_legacy",
    "densenet_legacy", "googlenet_legacy", "vgg_legacy",
]


class Reader(CalibrationDataReader):
    def __init__(self, name, batches):
        self.items = iter([{name: b} for b in batches])

    def get_next(self):
        return next(self.items, None)


def session(path):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def cosine(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    return float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-300))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", nargs="*", default=None)
    args = ap.parse_args()
    models = [m for m in CNNS if not args.models or any(s in m for s in args.models)]
    print(f"trtc {trtc.__version__}, onnxruntime {ort.__version__}")
    logging.getLogger().setLevel(logging.ERROR)
    print("| model | onnxruntime quantize_static (MinMax, per-channel) | trtc --int8 (entropy) | trtc - ort | ort QuantizeLinear nodes | trtc int8 layers / all |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in models:
            model = ROOT / "testdata" / "models" / f"{name}.onnx"
            fp32 = session(model)
            inp = fp32.get_inputs()[0]
            shape = [d if isinstance(d, int) else 1 for d in inp.shape]
            rng = np.random.default_rng(0)
            calib = [rng.uniform(-1, 1, size=shape).astype(np.float32) for _ in range(8)]
            evals = [rng.uniform(-1, 1, size=shape).astype(np.float32) for _ in range(8)]
            ref = [fp32.run(None, {inp.name: x})[0] for x in evals]

            prep = os.path.join(tmp, f"{name}.prep.onnx")
            quant_pre_process(str(model), prep)
            qpath = os.path.join(tmp, f"{name}.qdq.onnx")
            quantize_static(
                prep, qpath, Reader(inp.name, calib), quant_format=QuantFormat.QDQ, per_channel=True,
                activation_type=QuantType.QInt8, weight_type=QuantType.QInt8, calibrate_method=CalibrationMethod.MinMax,
                extra_options={"ActivationSymmetric": True, "WeightSymmetric": True},
            )
            q = session(qpath)
            import onnx

            q_nodes = sum(1 for n in onnx.load(qpath).graph.node if n.op_type == "QuantizeLinear")
            ort_cos = min(cosine(q.run(None, {inp.name: x})[0], r) for x, r in zip(evals, ref))

            engine = trtc.build(model, int8=True, calibrator=trtc.EntropyCalibrator(calib), progress=False)
            ctx = engine.create_context(device="cpu", exact=True)
            out = engine.outputs[0].name
            trtc_cos = min(cosine(ctx.run({inp.name: x})[out], r) for x, r in zip(evals, ref))
            layers = engine.inspect()["layers"]
            int8 = sum(1 for l in layers if l["precision"] == "int8")
            print(f"| {name} | {ort_cos:.6f} | {trtc_cos:.6f} | {trtc_cos - ort_cos:+.6f} | {q_nodes} | {int8} / {len(layers)} |", flush=True)


if __name__ == "__main__":
    main()
