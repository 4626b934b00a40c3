"""Exports full-size torchvision CNNs (random weights, fixed seed, batch 1,
224x224, the legacy exporter, opset 17) for the CPU benchmark against
onnxruntime (`benches/cpu_vs_onnxruntime.py` picks them up).
Usage: python benches/export_full_models.py [OUT_DIR]  (needs testdata/requirements.txt)"""
import os
import sys

import torch
import torchvision

out = sys.argv[1] if len(sys.argv) > 1 else ".cache/bench/full"
os.makedirs(out, exist_ok=True)
for name in ["resnet50", "mobilenet_v3_small", "efficientnet_b0", "regnet_y_400mf"]:
    path = f"{out}/{name}.onnx"
    if os.path.exists(path):
        continue
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        torch.onnx.export(model, (x,), path, dynamo=False, opset_version=17, input_names=["input"], output_names=["logits"])
    print("exported", path)
