#!/usr/bin/env python3
"""Exports more models with dynamic axes (issue 14), found by probing
trtc's profiles with models it had not seen:

- transformers 5's own BERT (both exporters), GPT-2, RoBERTa, DistilBERT,
  T5 encoder and Llama (batch and sequence, the sequence from 1: their
  attention-mask code flattens `[batch, sequence]`, the identity where the
  sequence is 1), ViT (batch) and Wav2Vec2 (batch and samples: a strided
  convolutional feature encoder and a grouped positional convolution);
- seg: a stride-2 convolution resized back to the input's size
  (`F.interpolate(size=x.shape[-2:])`), both exporters: with a square
  profile every point gives height == width;
- aspp: a DeepLabV3-style head on a stride-8 backbone whose pooled branch
  is resized to the feature map's size (square feature maps again, after
  the division by 8).

Same layout and manifest as `export_dynamic.py` (`testdata/dynamic_more/`:
`NAME.onnx`, `NAME.K.npz` with the inputs and onnxruntime's outputs as
`out:NAME`, `manifest.json` with each model's profile and cases); the
tests read both folders. Same versions (`requirements.txt`); run with
`/tmp/tdvenv/bin/python testdata/export_dynamic_more.py`.
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
import transformers

sys.path.insert(0, str(Path(__file__).parent))
import export_models as em  # noqa: E402

OUT = Path(__file__).parent / "dynamic_more"


class Text(nn.Module):
    """A transformers model's last hidden state from ids and a mask."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids, mask):
        return self.m(input_ids=ids, attention_mask=mask).last_hidden_state


class Signal(nn.Module):
    """A transformers vision or audio model's last hidden state."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x).last_hidden_state


class Seg(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 4, 3, stride=2, padding=1)

    def forward(self, x):
        y = F.interpolate(self.c(x), size=x.shape[-2:], mode="bilinear", align_corners=False)
        return y.flatten(2).softmax(-1)


class Aspp(nn.Module):
    """Stride-8 features, a 1x1 branch and a pooled branch resized to the
    features' size, concatenated and projected."""

    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(*[nn.Sequential(nn.Conv2d(c, 8, 3, stride=2, padding=1), nn.ReLU())
                                        for c in (3, 8, 8)])
        self.branch = nn.Conv2d(8, 8, 1)
        self.pooled = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(8, 8, 1), nn.ReLU())
        self.project = nn.Conv2d(16, 3, 1)

    def forward(self, x):
        f = self.backbone(x)
        p = F.interpolate(self.pooled(f), size=f.shape[-2:], mode="bilinear", align_corners=False)
        return self.project(torch.cat([self.branch(f), p], 1))


def text_feeds(rng, b, s):
    mask = np.ones((b, s), np.int64)
    mask[0, s - s // 3:] = 0
    return {"ids": rng.integers(1, 100, (b, s)).astype(np.int64), "mask": mask}


def image_feeds(rng, shape):
    return {"x": rng.standard_normal(shape).astype(np.float32)}


def models(rng):
    """(name, model, example args, input names, {input: {axis: symbol}}, profile, cases, exporters)."""
    torch.manual_seed(0)
    tiny = dict(num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
    text_axes = {"ids": {0: "batch", 1: "sequence"}, "mask": {0: "batch", 1: "sequence"}}
    text_profile = {n: ([1, 1], [2, 16], [4, 48]) for n in ("ids", "mask")}
    text_cases = [text_feeds(rng, 1, 1), text_feeds(rng, 3, 7), text_feeds(rng, 4, 48), text_feeds(rng, 2, 29)]
    example = (torch.randint(1, 100, (2, 8)), torch.ones(2, 8, dtype=torch.long))
    text = {
        "hf_bert": transformers.BertModel(transformers.BertConfig(vocab_size=100, hidden_size=32,
                                                                  max_position_embeddings=64, **tiny)),
        "hf_gpt2": transformers.GPT2Model(transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2,
                                                                  n_positions=64)),
        "hf_roberta": transformers.RobertaModel(transformers.RobertaConfig(vocab_size=100, hidden_size=32,
                                                                           max_position_embeddings=80, **tiny)),
        "hf_distilbert": transformers.DistilBertModel(transformers.DistilBertConfig(
            vocab_size=100, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=64)),
        "hf_t5_encoder": transformers.T5EncoderModel(transformers.T5Config(vocab_size=100, d_model=32, d_kv=16,
                                                                           d_ff=64, num_layers=2, num_heads=2)),
        "hf_llama": transformers.LlamaModel(transformers.LlamaConfig(vocab_size=100, hidden_size=32,
                                                                     num_key_value_heads=1, use_cache=False,
                                                                     max_position_embeddings=64, **tiny)),
    }
    for name, m in text.items():
        exporters = ("legacy", "dynamo") if name == "hf_bert" else ("legacy",)
        yield name, Text(m), example, ["ids", "mask"], text_axes, text_profile, text_cases, exporters
    vit = transformers.ViTModel(transformers.ViTConfig(image_size=32, patch_size=8, hidden_size=32, **tiny))
    yield ("hf_vit", Signal(vit), (torch.randn(2, 3, 32, 32),), ["x"], {"x": {0: "batch"}},
           {"x": ([1, 3, 32, 32], [2, 3, 32, 32], [4, 3, 32, 32])},
           [image_feeds(rng, (1, 3, 32, 32)), image_feeds(rng, (3, 3, 32, 32))], ("legacy",))
    w2v = transformers.Wav2Vec2Model(transformers.Wav2Vec2Config(
        hidden_size=32, conv_dim=(16, 16, 16), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, **tiny))
    yield ("hf_wav2vec2", Signal(w2v), (torch.randn(1, 4000),), ["x"], {"x": {0: "batch", 1: "samples"}},
           {"x": ([1, 2000], [1, 4000], [2, 8000])},
           [image_feeds(rng, (1, 2000)), image_feeds(rng, (2, 3201)), image_feeds(rng, (2, 8000))], ("legacy",))
    image_axes = {"x": {0: "batch", 2: "height", 3: "width"}}
    yield ("seg", Seg(), (torch.randn(1, 3, 16, 16),), ["x"], image_axes,
           {"x": ([1, 3, 8, 8], [1, 3, 16, 16], [2, 3, 48, 48])},
           [image_feeds(rng, s) for s in ((1, 3, 8, 8), (2, 3, 24, 40), (1, 3, 17, 9), (2, 3, 48, 48))],
           ("legacy", "dynamo"))
    yield ("aspp", Aspp(), (torch.randn(1, 3, 64, 64),), ["x"], image_axes,
           {"x": ([1, 3, 32, 32], [1, 3, 64, 64], [2, 3, 128, 128])},
           [image_feeds(rng, s) for s in ((1, 3, 32, 32), (2, 3, 96, 64), (1, 3, 40, 120), (2, 3, 128, 128))],
           ("legacy",))


def export(model, example, names, axes, profile, exporter, path):
    if exporter == "legacy":
        torch.onnx.export(model, example, str(path), input_names=names, output_names=["out"], dynamic_axes=axes,
                          opset_version=17, dynamo=False)
    else:
        dims = {}
        shapes = {}
        for n in names:
            spec = {}
            for axis, sym in axes[n].items():
                if sym not in dims:
                    lo, hi = profile[n][0][axis], profile[n][2][axis]
                    dims[sym] = torch.export.Dim(sym, min=lo, max=max(hi, 64))
                spec[axis] = dims[sym]
            shapes[n] = spec
        prog = torch.onnx.export(model, example, dynamo=True, input_names=names, output_names=["out"],
                                 dynamic_shapes=shapes, external_data=False)
        prog.save(str(path), external_data=False)
    m = onnx.load(str(path), load_external_data=True)
    em.strip_bulky_metadata(m)
    onnx.save_model(m, str(path), save_as_external_data=False)
    for leftover in path.parent.glob(path.name + ".data"):
        leftover.unlink()


def main() -> int:
    OUT.mkdir(exist_ok=True)
    rng = np.random.default_rng(14)
    manifest = {"generator": "testdata/export_dynamic_more.py", "models": []}
    for name, model, example, names, axes, profile, cases, exporters in models(rng):
        model.eval()
        for exporter in exporters:
            variant = f"{name}_{exporter}"
            path = OUT / f"{variant}.onnx"
            try:
                with torch.no_grad():
                    export(model, example, names, axes, profile, exporter, path)
            except Exception as e:  # noqa: BLE001 - recorded, not hidden
                print(f"{variant}: export failed: {str(e).splitlines()[0][:200]}", file=sys.stderr)
                manifest["models"].append({"name": variant, "status": "failed", "error": str(e).splitlines()[0][:500]})
                continue
            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            opts.intra_op_num_threads = 1
            sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
            recorded = []
            for k, feeds in enumerate(cases):
                got = sess.run(None, feeds)
                with torch.no_grad():
                    eager = model(*(torch.from_numpy(v) for v in feeds.values()))
                diff = float(np.max(np.abs(got[0] - eager.numpy())))
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
            print(f"{variant}: {len(recorded)} shapes, worst ort-vs-torch "
                  f"{max(r['max_abs_diff_ort_vs_torch'] for r in recorded):.2e}")
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
