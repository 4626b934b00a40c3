"""Exports the benchmark networks to ONNX with a dynamic batch axis, built by
the same constructors as ../shared/tools/pytorch_baseline.py (random weights),
so that `trtc build --shape input:BxCxHxW` can pick any batch.

    python3 benches/gpu/export.py --models resnet50,mobilenet_v2,bert_base --out DIR
"""
import argparse, os, sys

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet50,mobilenet_v2,bert_base")
    ap.add_argument("--out", required=True)
    ap.add_argument("--baseline", required=True, help="path of pytorch_baseline.py (for its model constructors)")
    a = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.abspath(a.baseline)))
    import pytorch_baseline  # noqa: E402

    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(0)
    for name in a.models.split(","):
        model, make_input, _ = pytorch_baseline.make(name)
        model = model.eval().float().cpu()
        x = make_input(1).cpu()
        path = os.path.join(a.out, f"{name}.onnx")
        torch.onnx.export(model, (x,), path, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, dynamo=False, opset_version=17)
        print(f"exported {path}", flush=True)


if __name__ == "__main__":
    main()
