#!/usr/bin/env python3
"""Exports testdata models with dynamic axes (issue 14's test models).

Each model is exported ONCE with symbolic dimensions (torch's `dynamic_axes`
for the legacy exporter, `dynamic_shapes` for the dynamo one), and
onnxruntime's outputs are recorded at several shapes inside the range the
tests build for (its minimum, its maximum and odd sizes in between):

- resnet18: batch (1 to 8);
- bert: batch and sequence (1x2 to 4x32), the tail of each row padded by
  the attention mask;
- gpt2: batch and sequence (1x2 to 4x32), likewise;
- roberta, t5 (the encoder, relative position buckets), distilbert: batch
  and sequence like bert (t5's dynamo export fails in torch: legacy only);
- efficientnet_b0: batch, height and width (squeeze-and-excitation
  blocks: global pools over sizes that vary);
- unet: batch, height and width, upsampled by `scale_factor` and
  concatenated with the skip connections;
- speech_encoder: batch and frames, a Whisper-style stride-2 Conv1d stem
  and a transformer encoder (dynamo only: the legacy exporter bakes
  nn.TransformerEncoder's shapes, and onnxruntime fails at other lengths);
- detector: batch, height and width, a YOLO-style head (a meshgrid of
  cell offsets, boxes and class scores) ending in NonMaxSuppression, whose
  output size depends on the data (legacy exporter, the NMS node appended);
- ocr_fpn: batch, height and width (1x3x32x32 to 2x3x96x128): a small
  DBNet-style text detector whose feature pyramid upsamples each level to
  the size of the next (`F.interpolate(size=lateral.shape[-2:])`); the
  odd sizes (40x72, 33x47) give levels of odd size, where the stride-2
  convolutions round up.

Output, in `testdata/dynamic/`: `NAME.onnx`, and per shape `NAME.K.npz`
holding the inputs under their names and onnxruntime's outputs under
`out:NAME` (the reference, CPU provider, ORT_DISABLE_ALL, 1 thread).
`manifest.json` lists the models, their symbolic inputs, the profile the
tests build with and the shapes. Same versions as `export_models.py`
(`requirements.txt`); run with
`/tmp/tdvenv/bin/python testdata/export_dynamic.py`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
import export_models as em  # noqa: E402

OUT = Path(__file__).parent / "dynamic"


class OcrFpn(nn.Module):
    """Stride-2 stages, a top-down pyramid resized to each lateral's size,
    concatenated at 1/4 scale and turned into a probability map."""

    def __init__(self):
        super().__init__()
        chans = [3, 8, 16, 24, 32]
        self.stages = nn.ModuleList(
            nn.Sequential(nn.Conv2d(chans[i], chans[i + 1], 3, stride=2, padding=1), nn.BatchNorm2d(chans[i + 1]),
                          nn.ReLU()) for i in range(4))
        self.lateral = nn.ModuleList(nn.Conv2d(c, 8, 1) for c in chans[2:])
        self.head = nn.Sequential(nn.Conv2d(24, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 1), nn.Sigmoid())

    def forward(self, x):
        feats = []
        for i, s in enumerate(self.stages):
            x = s(x)
            if i >= 1:
                feats.append(x)
        lat = [m(f) for m, f in zip(self.lateral, feats)]
        top = lat[-1]
        outs = [top]
        for f in reversed(lat[:-1]):
            top = f + F.interpolate(top, size=f.shape[-2:], mode="nearest")
            outs.append(top)
        size = outs[-1].shape[-2:]
        fused = torch.cat([F.interpolate(o, size=size, mode="nearest") for o in outs], dim=1)
        return self.head(fused)


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.d1 = nn.Conv2d(3, 8, 3, padding=1)
        self.d2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.d3 = nn.Conv2d(16, 16, 3, stride=2, padding=1)
        self.u2 = nn.Conv2d(32, 8, 3, padding=1)
        self.u1 = nn.Conv2d(16, 4, 3, padding=1)

    def forward(self, x):
        a = F.relu(self.d1(x))
        b = F.relu(self.d2(a))
        c = F.interpolate(F.relu(self.d3(b)), scale_factor=2.0, mode="bilinear", align_corners=False)
        b = F.interpolate(F.relu(self.u2(torch.cat([b, c], 1))), scale_factor=2.0, mode="nearest")
        return self.u1(torch.cat([a, b], 1))


class Detector(nn.Module):
    """A YOLO-style single-level head: per cell and anchor, a box decoded
    from a grid of cell offsets and class scores; NonMaxSuppression is
    appended to the exported graph (`append_nms`)."""

    def __init__(self, classes: int = 3, anchors: int = 2):
        super().__init__()
        self.classes, self.anchors = classes, anchors
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 16, 3, 2, 1), nn.ReLU(),
                                  nn.Conv2d(16, 16, 3, 2, 1), nn.ReLU())
        self.head = nn.Conv2d(16, anchors * (5 + classes), 1)

    def forward(self, x):
        p = self.head(self.body(x))
        b, _, h, w = p.shape
        p = p.view(b, self.anchors, 5 + self.classes, h, w).permute(0, 1, 3, 4, 2).sigmoid()
        gy, gx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        grid = torch.stack((gx, gy), -1).view(1, 1, h, w, 2).float()
        xy = (p[..., :2] * 2 - 0.5 + grid) * 8
        wh = (p[..., 2:4] * 2) ** 2 * 16
        boxes = torch.cat([xy - wh / 2, xy + wh / 2], -1).reshape(b, -1, 4)
        scores = (p[..., 5:] * p[..., 4:5]).reshape(b, -1, self.classes).transpose(1, 2)
        return boxes, scores


def append_nms(path: Path) -> None:
    """Adds NonMaxSuppression (at most 5 boxes per class, IoU 0.5, score
    0.2) over the detector's boxes and scores, as exported detectors end."""
    from onnx import TensorProto, helper

    m = onnx.load(str(path))
    m.graph.initializer.extend([
        helper.make_tensor("max_out", TensorProto.INT64, [1], [5]),
        helper.make_tensor("iou", TensorProto.FLOAT, [1], [0.5]),
        helper.make_tensor("score_min", TensorProto.FLOAT, [1], [0.2]),
    ])
    m.graph.node.append(helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "score_min"],
                                         ["selected"], name="nms"))
    m.graph.output.append(helper.make_tensor_value_info("selected", TensorProto.INT64, ["selected", 3]))
    onnx.save_model(m, str(path))


class SpeechEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(16, 32, 3, padding=1)
        self.c2 = nn.Conv1d(32, 32, 3, stride=2, padding=1)
        self.enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 2, 64, batch_first=True), 2)

    def forward(self, x):
        return self.enc(F.gelu(self.c2(F.gelu(self.c1(x)))).transpose(1, 2))


class Hidden(nn.Module):
    """A transformers encoder's last hidden state from ids and mask."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask)["last_hidden_state"]


def text_inputs(seed: int, batch: int, seq: int, vocab: int, types: bool) -> dict:
    rng = np.random.RandomState(seed)
    ids = rng.randint(1, vocab, size=(batch, seq)).astype(np.int64)
    mask = np.ones((batch, seq), dtype=np.int64)
    for row in range(1, batch):
        pad = rng.randint(0, seq // 2 + 1)
        if pad:
            mask[row, seq - pad:] = 0
            ids[row, seq - pad:] = 0
    feeds = {"input_ids": ids, "attention_mask": mask}
    if types:
        tt = np.zeros_like(ids)
        tt[:, seq // 2:] = 1
        tt[mask == 0] = 0
        feeds["token_type_ids"] = tt
    return feeds


def image(seed: int, shape) -> dict:
    return {"input": np.random.RandomState(seed).standard_normal(shape).astype(np.float32)}


def text_encoders():
    from transformers import DistilBertConfig, DistilBertModel, RobertaConfig, RobertaModel, T5Config, T5EncoderModel

    torch.manual_seed(24)
    roberta = RobertaModel(RobertaConfig(vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                         intermediate_size=128, max_position_embeddings=80), add_pooling_layer=False)
    t5 = T5EncoderModel(T5Config(vocab_size=500, d_model=64, d_kv=32, d_ff=128, num_layers=2, num_heads=2))
    distilbert = DistilBertModel(DistilBertConfig(vocab_size=500, dim=64, n_layers=2, n_heads=2, hidden_dim=128,
                                                  max_position_embeddings=80))
    return [("roberta", roberta), ("t5", t5), ("distilbert", distilbert)]


# Exporters that cannot export a model, or export one that only runs at its
# example shape (see the module docstring).
SKIP = {"t5": "dynamo", "speech_encoder": "legacy", "detector": "dynamo"}
# Sizes torch.export must know to be multiples (two stride-2 levels
# upsampled back; a stride-2 stem).
MULTIPLE = {"unet": {"height": 4, "width": 4}, "speech_encoder": {"frames": 2},
            "efficientnet_b0": {"height": 32, "width": 32}}


def models():
    """(name, module, example inputs, output names, symbolic axes per input,
    profile (min, opt, max) per input, the shapes to record)."""
    resnet, _, _ = em.build_resnet18()
    bert, _, bert_outs = em.build_bert()
    gpt2, _, gpt2_outs = em.build_gpt2()
    torch.manual_seed(21)
    ocr = OcrFpn()
    em.randomize_norms(ocr, 21)
    torch.manual_seed(22)
    unet = UNet()
    torch.manual_seed(23)
    speech = SpeechEncoder()
    torch.manual_seed(25)
    detector = Detector()
    effnet, _, _ = em.build_efficientnet_b0()
    em.randomize_norms(effnet, 5)
    text_axes = {0: "batch", 1: "sequence"}
    return [
        ("resnet18", resnet, image(1, (2, 3, 32, 32)), ["logits"], {"input": {0: "batch"}},
         {"input": ([1, 3, 32, 32], [4, 3, 32, 32], [8, 3, 32, 32])},
         [image(10 + b, (b, 3, 32, 32)) for b in (1, 3, 8)]),
        ("bert", bert, text_inputs(2, 2, 16, em.BERT_VOCAB, True), bert_outs,
         {k: text_axes for k in ("input_ids", "attention_mask", "token_type_ids")},
         {k: ([1, 2], [2, 16], [4, 32]) for k in ("input_ids", "attention_mask", "token_type_ids")},
         [text_inputs(20 + i, b, s, em.BERT_VOCAB, True) for i, (b, s) in enumerate([(1, 2), (3, 7), (4, 32), (2, 19)])]),
        ("gpt2", gpt2, text_inputs(3, 2, 16, em.GPT2_VOCAB, False), ["logits"],
         {k: text_axes for k in ("input_ids", "attention_mask")},
         {k: ([1, 2], [2, 16], [4, 32]) for k in ("input_ids", "attention_mask")},
         [text_inputs(30 + i, b, s, em.GPT2_VOCAB, False) for i, (b, s) in enumerate([(1, 2), (3, 7), (4, 32), (2, 19)])]),
        *[(name, Hidden(m), text_inputs(5 + i, 2, 16, 500, False), ["last_hidden_state"],
           {k: text_axes for k in ("input_ids", "attention_mask")},
           {k: ([1, 2], [2, 16], [4, 48]) for k in ("input_ids", "attention_mask")},
           [text_inputs(50 + 10 * i + j, b, q, 500, False) for j, (b, q) in enumerate([(1, 2), (3, 7), (4, 48), (2, 33)])])
          for i, (name, m) in enumerate(text_encoders())],
        ("efficientnet_b0", effnet, image(8, (2, 3, 64, 64)), ["logits"], {"input": {0: "batch", 2: "height", 3: "width"}},
         {"input": ([1, 3, 32, 32], [1, 3, 64, 64], [2, 3, 128, 96])},
         [image(80 + i, s) for i, s in enumerate([(1, 3, 32, 32), (2, 3, 128, 96), (1, 3, 45, 71)])]),
        ("unet", unet, image(6, (2, 3, 64, 64)), ["y"], {"input": {0: "batch", 2: "height", 3: "width"}},
         {"input": ([1, 3, 32, 32], [1, 3, 64, 64], [2, 3, 128, 96])},
         [image(60 + i, s) for i, s in enumerate([(1, 3, 32, 32), (2, 3, 128, 96), (1, 3, 48, 80), (2, 3, 36, 52)])]),
        ("speech_encoder", speech, {"input": np.random.RandomState(7).standard_normal((2, 16, 40)).astype(np.float32)},
         ["hidden"], {"input": {0: "batch", 2: "frames"}}, {"input": ([1, 16, 8], [1, 16, 40], [2, 16, 100])},
         [{"input": np.random.RandomState(70 + i).standard_normal(s).astype(np.float32)}
          for i, s in enumerate([(1, 16, 8), (2, 16, 100), (1, 16, 31), (2, 16, 58)])]),
        ("detector", detector, image(9, (1, 3, 64, 64)), ["boxes", "scores"], {"input": {0: "batch", 2: "height", 3: "width"}},
         {"input": ([1, 3, 32, 32], [1, 3, 64, 64], [2, 3, 128, 96])},
         [image(90 + i, s) for i, s in enumerate([(1, 3, 32, 32), (2, 3, 128, 96), (1, 3, 48, 80), (2, 3, 40, 56)])]),
        ("ocr_fpn", ocr, image(4, (1, 3, 64, 64)), ["probability"], {"input": {0: "batch", 2: "height", 3: "width"}},
         {"input": ([1, 3, 32, 32], [1, 3, 64, 64], [2, 3, 96, 128])},
         [image(40 + i, s) for i, s in enumerate([(1, 3, 32, 32), (2, 3, 96, 128), (1, 3, 48, 80), (2, 3, 40, 72),
                                                   (1, 3, 33, 47)])]),
    ]


def export(name, model, example, outs, axes, exporter, path: Path) -> None:
    args = tuple(torch.from_numpy(v) for v in example.values())
    names = list(example)
    if exporter == "legacy":
        torch.onnx.export(model, args, str(path), dynamo=False, opset_version=em.LEGACY_OPSET, input_names=names,
                          output_names=outs, do_constant_folding=True, dynamic_axes=axes)
    else:
        dims = {}
        shapes = []
        for k in names:
            spec = {}
            for axis, sym in axes.get(k, {}).items():
                # Symbols shared between inputs are one torch Dim; sequences
                # start at 2 (torch specializes sizes 0 and 1).
                k = MULTIPLE.get(name, {}).get(sym)
                if sym not in dims:
                    dims[sym] = (k * torch.export.Dim(f"{sym}_over_{k}", min=1, max=1024) if k else
                                 torch.export.Dim(sym, min=1 if sym == "batch" else 2, max=4096))
                spec[axis] = dims[sym]
            shapes.append(spec)
        # Positional: the wrappers take *args.
        prog = torch.onnx.export(model, args, dynamo=True, input_names=names, output_names=outs,
                                 dynamic_shapes=(tuple(shapes),) if name in ("bert",) else tuple(shapes),
                                 external_data=False)
        prog.save(str(path), external_data=False)
    if name == "detector":
        append_nms(path)
    m = onnx.load(str(path), load_external_data=True)
    em.strip_bulky_metadata(m)
    onnx.save_model(m, str(path), save_as_external_data=False)
    for leftover in path.parent.glob(path.name + ".data"):
        leftover.unlink()


def main() -> int:
    OUT.mkdir(exist_ok=True)
    manifest = {"generator": "testdata/export_dynamic.py", "models": []}
    for name, model, example, outs, axes, profile, shapes in models():
        model.eval()
        for exporter in ("legacy", "dynamo"):
            if SKIP.get(name) == exporter:
                continue
            variant = f"{name}_{exporter}"
            path = OUT / f"{variant}.onnx"
            try:
                with torch.no_grad():
                    export(name, model, example, outs, axes, exporter, path)
            except Exception as e:  # noqa: BLE001 - recorded, not hidden
                print(f"{variant}: export failed: {str(e).splitlines()[0][:200]}", file=sys.stderr)
                manifest["models"].append({"name": variant, "status": "failed", "error": str(e).splitlines()[0][:500]})
                continue
            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            opts.intra_op_num_threads = 1
            sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
            recorded = []
            for k, feeds in enumerate(shapes):
                got = sess.run(None, feeds)
                with torch.no_grad():
                    eager = model(*(torch.from_numpy(v) for v in feeds.values()))
                eager = eager if isinstance(eager, tuple) else (eager,)
                diff = max(float(np.max(np.abs(g - e.numpy()))) for g, e in zip(got, eager))
                arrays = dict(feeds)
                arrays.update({f"out:{o.name}": g for o, g in zip(sess.get_outputs(), got)})
                np.savez(OUT / f"{variant}.{k}.npz", **arrays)
                recorded.append({"file": f"{variant}.{k}.npz", "shapes": {n: list(v.shape) for n, v in feeds.items()},
                                 "max_abs_diff_ort_vs_torch": diff})
            graph = onnx.load(str(path)).graph
            manifest["models"].append({
                "name": variant, "status": "ok", "file": path.name,
                "inputs": {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.input},
                "profile": {k: {"min": v[0], "opt": v[1], "max": v[2]} for k, v in profile.items()},
                "cases": recorded,
            })
            print(f"{variant}: {len(recorded)} shapes, worst ort-vs-torch {max(r['max_abs_diff_ort_vs_torch'] for r in recorded):.2e}")
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
