"""Writes batch_cnn.onnx: a small CNN whose batch dimension is symbolic, for
the server's dynamic-batching tests and the README's serving example.

    x[N,3,16,16] -> Conv(8, 3x3) -> Relu -> GlobalAveragePool -> Flatten
                 -> Gemm(5) -> logits[N,5] -> Softmax -> probs[N,5]

Random weights from a fixed seed; run with onnx (1.23.2 made the committed
file) and numpy installed, e.g. in the venv scripts/test-python.sh makes:
    .cache/python-venv/bin/python testdata/serve/make_batch_cnn.py
"""

import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(7)
inits = [
    numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.5, "conv.weight"),
    numpy_helper.from_array(rng.standard_normal(8).astype(np.float32) * 0.1, "conv.bias"),
    numpy_helper.from_array(rng.standard_normal((5, 8)).astype(np.float32), "fc.weight"),
    numpy_helper.from_array(rng.standard_normal(5).astype(np.float32) * 0.1, "fc.bias"),
]
nodes = [
    helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], name="conv", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c"], ["r"], name="relu"),
    helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
    helper.make_node("Flatten", ["p"], ["f"], name="flatten", axis=1),
    helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
    helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=1),
]
graph = helper.make_graph(
    nodes,
    "batch_cnn",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
    [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 5]),
        helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 5]),
    ],
    inits,
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="make_batch_cnn.py")
model.ir_version = 8
onnx.checker.check_model(model)
out = pathlib.Path(__file__).with_name("batch_cnn.onnx")
onnx.save(model, out)
print(f"wrote {out} ({out.stat().st_size} bytes)")
