"""Exports a full-size torchvision ResNet-50 (random weights, fixed seed) to
ONNX with both exporters, for the CPU benchmark in benches/RESULTS.md.
Usage: python benches/export_resnet50.py OUT_DIR  (needs testdata/requirements.txt)"""
import sys, os
import torch, torchvision

out = sys.argv[1] if len(sys.argv) > 1 else ".cache/bench"
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
model = torchvision.models.resnet50(weights=None).eval()
x = torch.randn(1, 3, 224, 224)
with torch.no_grad():
    torch.onnx.export(model, (x,), f"{out}/resnet50_legacy.onnx", dynamo=False, opset_version=17,
                      input_names=["input"], output_names=["logits"])
    try:
        torch.onnx.export(model, (x,), f"{out}/resnet50_dynamo.onnx", dynamo=True,
                          input_names=["input"], output_names=["logits"], external_data=False)
    except Exception as e:  # the dynamo exporter is optional for the benchmark
        print("dynamo export failed:", e)
print("exported to", out)
