#!/usr/bin/env python3
"""Generate ONNX test models for trtc.

Builds small, randomly initialised (fixed seeds, no downloads) versions of
common vision and language models, exports each one with both torch.onnx
exporters (the default ``dynamo=True`` one and the legacy TorchScript one,
``dynamo=False``), and records onnxruntime's outputs on fixed random inputs.

For every model variant NAME (e.g. ``resnet50_dynamo``) it writes into
``testdata/models/``:

  NAME.onnx          the model, weights embedded (no external data)
  NAME.inputs.npz    graph input name -> numpy array (exact dtype)
  NAME.outputs.npz   graph output name -> onnxruntime output (CPU provider,
                     graph optimizations disabled)

plus ``manifest.json`` describing all variants (and any export failures), and
``example_cnn.onnx`` (+ npz files), a tiny conv net used by the README demo.

Usage:  python testdata/export_models.py [--only NAME[,NAME...]] [--out DIR]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import traceback
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torchvision  # noqa: E402
from torchvision import models as tvm  # noqa: E402
from torchvision.models.googlenet import BasicConv2d as _BasicConv2d  # noqa: E402
from torchvision.models.vgg import make_layers as _vgg_make_layers  # noqa: E402

warnings.filterwarnings("ignore")
torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))

LEGACY_OPSET = 17
HERE = Path(__file__).resolve().parent


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def randomize_norms(model: nn.Module, seed: int) -> None:
    """Give normalisation layers non-trivial parameters/statistics.

    Freshly constructed BatchNorm layers have mean 0 / var 1 / weight 1 /
    bias 0, which makes them (almost) an identity; a compiler bug in BN
    handling would then go unnoticed.  Perturb them deterministically.
    """
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                n = m.num_features
                if m.affine:
                    m.weight.copy_(0.5 + torch.rand(n, generator=g))
                    m.bias.copy_(0.1 * torch.randn(n, generator=g))
                if m.track_running_stats:
                    m.running_mean.copy_(0.1 * torch.randn(n, generator=g))
                    m.running_var.copy_(0.5 + torch.rand(n, generator=g))
            elif isinstance(m, nn.LayerNorm) and m.elementwise_affine:
                m.weight.copy_(0.75 + 0.5 * torch.rand(m.weight.shape, generator=g))
                if m.bias is not None:
                    m.bias.copy_(0.05 * torch.randn(m.bias.shape, generator=g))


def image_input(seed: int, shape) -> dict:
    rng = np.random.RandomState(seed)
    return {"input": rng.standard_normal(shape).astype(np.float32)}


class TupleOutputs(nn.Module):
    """Wrap a HF model so forward() returns a plain tuple of tensors."""

    def __init__(self, model: nn.Module, keys: list[str]):
        super().__init__()
        self.model = model
        self.keys = keys

    def forward(self, *args):
        out = self.model(*args)
        return tuple(out[k] for k in self.keys)


# --------------------------------------------------------------------------
# model builders: each returns (module, ordered input dict, output names)
# --------------------------------------------------------------------------

NUM_CLASSES = 10


class _ScaledResNet(tvm.ResNet):
    """torchvision ResNet with every stage's width divided by ``div``."""

    def __init__(self, block, layers, div, num_classes):
        self._div = div
        super().__init__(block, layers, num_classes=num_classes)
        self.fc = nn.Linear(512 * block.expansion // div, num_classes)

    def _make_layer(self, block, planes, blocks, stride=1, dilate=False):
        return super()._make_layer(block, planes // self._div, blocks, stride, dilate)


def build_resnet50():
    # Full ResNet-50 topology (stem + Bottleneck x [3, 4, 6, 3]), stage widths /16.
    m = _ScaledResNet(tvm.resnet.Bottleneck, [3, 4, 6, 3], div=16, num_classes=NUM_CLASSES)
    return m, image_input(1, (1, 3, 64, 64)), ["logits"]


def build_resnet18():
    # Full ResNet-18 topology (stem + BasicBlock x [2, 2, 2, 2]), stage widths /16.
    m = _ScaledResNet(tvm.resnet.BasicBlock, [2, 2, 2, 2], div=16, num_classes=NUM_CLASSES)
    return m, image_input(2, (2, 3, 32, 32)), ["logits"]


def build_mobilenet_v2():
    # MobileNetV2 at width_mult=0.25.  last_channel is max(1280, 1280*width_mult),
    # so shrink the head conv (1280 -> 128) too.
    m = tvm.mobilenet_v2(weights=None, num_classes=NUM_CLASSES, width_mult=0.25)
    last = m.features[-1]
    in_ch = last[0].in_channels
    m.features[-1] = torchvision.ops.misc.Conv2dNormActivation(
        in_ch, 128, kernel_size=1, norm_layer=nn.BatchNorm2d, activation_layer=nn.ReLU6
    )
    m.classifier[-1] = nn.Linear(128, NUM_CLASSES)
    return m, image_input(3, (1, 3, 64, 64)), ["logits"]


def build_mobilenet_v3_small():
    # MobileNetV3-Small (SE, hardswish, hardsigmoid) at width_mult=0.25.
    m = tvm.mobilenet_v3_small(weights=None, num_classes=NUM_CLASSES, width_mult=0.25)
    for layer in m.classifier:  # torchvision inits these N(0, 0.01): outputs ~1e-3
        if isinstance(layer, nn.Linear):
            layer.reset_parameters()
    return m, image_input(4, (1, 3, 64, 64)), ["logits"]


def build_efficientnet_b0():
    from torchvision.models import efficientnet as E

    # EfficientNet-B0 MBConv design (SiLU, SE, stochastic depth) with
    # width_mult=0.2, depth_mult=0.5 (stages of 1,1,1,2,2,2,1 blocks) and a
    # 128-channel head.
    setting, _ = E._efficientnet_conf("efficientnet_b0", width_mult=0.2, depth_mult=0.5)
    m = E.EfficientNet(setting, dropout=0.2, num_classes=NUM_CLASSES, last_channel=128)
    return m, image_input(5, (1, 3, 64, 64)), ["logits"]


def build_shufflenet_v2():
    # ShuffleNetV2 stage structure ([4, 8, 4] repeats), channels below x0.5
    # ([24, 48, 96, 192, 1024]): [16, 32, 64, 128, 128].
    m = tvm.ShuffleNetV2([4, 8, 4], [16, 32, 64, 128, 128], num_classes=NUM_CLASSES)
    return m, image_input(6, (1, 3, 64, 64)), ["logits"]


def build_squeezenet1_1():
    from torchvision.models.squeezenet import Fire

    # SqueezeNet 1.1 topology with all widths divided by 4.
    m = tvm.squeezenet1_1(weights=None, num_classes=NUM_CLASSES)
    m.features = nn.Sequential(
        nn.Conv2d(3, 16, kernel_size=3, stride=2),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
        Fire(16, 4, 16, 16),
        Fire(32, 4, 16, 16),
        nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
        Fire(32, 8, 32, 32),
        Fire(64, 8, 32, 32),
        nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
        Fire(64, 12, 48, 48),
        Fire(96, 12, 48, 48),
        Fire(96, 16, 64, 64),
        Fire(128, 16, 64, 64),
    )
    final_conv = nn.Conv2d(128, NUM_CLASSES, kernel_size=1)  # default init (not N(0, 0.01))
    m.classifier = nn.Sequential(nn.Dropout(p=0.5), final_conv, nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1)))
    m.num_classes = NUM_CLASSES
    return m, image_input(7, (1, 3, 64, 64)), ["logits"]


def build_densenet():
    # DenseNet-121 block structure (6, 12, 24, 16), growth rate 4 (instead of
    # 32), bottleneck size 2 (instead of 4), 16 initial features (instead of 64).
    m = tvm.DenseNet(growth_rate=4, block_config=(6, 12, 24, 16), num_init_features=16, bn_size=2,
                     num_classes=NUM_CLASSES)
    return m, image_input(8, (1, 3, 64, 64)), ["logits"]


class _ScaledBasicConv2d(_BasicConv2d):
    DIV = 8

    def __init__(self, in_channels, out_channels, **kwargs):
        if in_channels != 3:
            in_channels //= self.DIV
        super().__init__(in_channels, out_channels // self.DIV, **kwargs)


def build_googlenet():
    from torchvision.models.googlenet import Inception, InceptionAux

    # Full GoogLeNet topology, every conv at 1/8 width.
    m = tvm.GoogLeNet(
        num_classes=NUM_CLASSES,
        aux_logits=False,
        init_weights=True,
        blocks=[_ScaledBasicConv2d, functools.partial(Inception, conv_block=_ScaledBasicConv2d), InceptionAux],
    )
    m.fc = nn.Linear(1024 // _ScaledBasicConv2d.DIV, NUM_CLASSES)  # default init
    return m, image_input(9, (1, 3, 64, 64)), ["logits"]


def build_regnet():
    from torchvision.models.regnet import BlockParams

    # RegNetY-style (SE, group conv) design, smaller than regnet_y_400mf.
    params = BlockParams.from_init_params(depth=8, w_0=16, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25)
    m = tvm.RegNet(params, num_classes=NUM_CLASSES, stem_width=16)
    return m, image_input(10, (1, 3, 64, 64)), ["logits"]


def build_vgg():
    # VGG-11-BN layout ("A" config) at 1/16 width, 224x224 input; classifier
    # hidden size 4096 -> 32.
    cfg = [4, "M", 8, "M", 16, 16, "M", 32, 32, "M", 32, 32, "M"]
    features = _vgg_make_layers(cfg, batch_norm=True)
    m = tvm.VGG(features, num_classes=NUM_CLASSES, init_weights=True)
    m.classifier = nn.Sequential(
        nn.Linear(32 * 7 * 7, 32), nn.ReLU(True), nn.Dropout(), nn.Linear(32, 32), nn.ReLU(True), nn.Dropout(),
        nn.Linear(32, NUM_CLASSES),
    )
    return m, image_input(11, (1, 3, 224, 224)), ["logits"]


def build_vit():
    m = tvm.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=64, mlp_dim=128,
                              num_classes=NUM_CLASSES)
    m.heads.head.reset_parameters()  # torchvision zero-inits the head: outputs would be all 0
    return m, image_input(12, (2, 3, 32, 32)), ["logits"]


SEQ_LEN = 16
BERT_VOCAB = 1000
GPT2_VOCAB = 512


def _text_inputs(seed: int, batch: int, pad: list[int], vocab: int):
    """Random token ids and an attention mask with right-padding.

    ``pad[i]`` = number of padding positions at the end of row i.
    """
    rng = np.random.RandomState(seed)
    ids = rng.randint(1, vocab, size=(batch, SEQ_LEN)).astype(np.int64)
    mask = np.ones((batch, SEQ_LEN), dtype=np.int64)
    for i, p in enumerate(pad):
        if p:
            mask[i, SEQ_LEN - p:] = 0
            ids[i, SEQ_LEN - p:] = 0
    return ids, mask


def build_bert():
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=BERT_VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=128, max_position_embeddings=64, type_vocab_size=2)
    model = BertModel(cfg, add_pooling_layer=True)
    ids, mask = _text_inputs(13, 2, [0, 5], BERT_VOCAB)
    tt = np.zeros_like(ids)
    tt[:, SEQ_LEN // 2:] = 1
    tt[mask == 0] = 0
    m = TupleOutputs(model, ["last_hidden_state", "pooler_output"])
    return m, {"input_ids": ids, "attention_mask": mask, "token_type_ids": tt}, ["last_hidden_state",
                                                                              "pooler_output"]


def build_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=GPT2_VOCAB, n_positions=64, n_embd=64, n_layer=2, n_head=2, use_cache=False,
                     bos_token_id=GPT2_VOCAB - 1, eos_token_id=GPT2_VOCAB - 1)
    model = GPT2LMHeadModel(cfg)

    class Wrap(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
                              return_dict=True)["logits"]

    ids, mask = _text_inputs(14, 2, [0, 4], GPT2_VOCAB)
    return Wrap(model), {"input_ids": ids, "attention_mask": mask}, ["logits"]


class ExampleCNN(nn.Module):
    """conv-bn-relu x2, maxpool, global average pool, linear."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        x = self.pool(x)
        x = torch.flatten(self.gap(x), 1)
        return self.fc(x)


def build_example_cnn():
    return ExampleCNN(), image_input(100, (1, 3, 32, 32)), ["logits"]


class KeywordSpotter(nn.Module):
    """Speech commands: a Conv1d front end over 40 mel bins, a two-layer
    bidirectional LSTM (batch first), per-frame class log-probabilities."""

    def __init__(self, mels: int = 40, classes: int = 12):
        super().__init__()
        self.conv = nn.Conv1d(mels, 32, 3, padding=1)
        self.lstm = nn.LSTM(32, 24, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(48, classes)

    def forward(self, x):
        y = torch.relu(self.conv(x)).transpose(1, 2)
        y, _ = self.lstm(y)
        return torch.log_softmax(self.fc(y), -1)


def build_speech_lstm():
    rng = np.random.RandomState(15)
    return KeywordSpotter(), {"input": rng.standard_normal((2, 40, 50)).astype(np.float32)}, ["logits"]


class Forecaster(nn.Module):
    """Time series: a two-layer GRU (time major) from a given initial state,
    a ReLU RNN over its outputs, a linear head on the last step; returns
    the forecast and the GRU's final state."""

    def __init__(self, features: int = 8):
        super().__init__()
        self.gru = nn.GRU(features, 32, num_layers=2)
        self.rnn = nn.RNN(32, 16, nonlinearity="relu")
        self.head = nn.Linear(16, 3)

    def forward(self, x, h0):
        y, h = self.gru(x, h0)
        z, _ = self.rnn(y)
        return self.head(z[-1]), h


def build_timeseries_gru():
    rng = np.random.RandomState(16)
    inputs = {
        "input": rng.standard_normal((30, 4, 8)).astype(np.float32),
        "h0": (0.5 * rng.standard_normal((2, 4, 32))).astype(np.float32),
    }
    return Forecaster(), inputs, ["forecast", "state"]


# name -> (builder, seed, exporters)
BOTH = ("dynamo", "legacy")
MODELS = {
    "resnet50": (build_resnet50, 1, BOTH),
    "resnet18": (build_resnet18, 2, BOTH),
    "mobilenet_v2": (build_mobilenet_v2, 3, BOTH),
    "mobilenet_v3_small": (build_mobilenet_v3_small, 4, BOTH),
    "efficientnet_b0": (build_efficientnet_b0, 5, BOTH),
    "shufflenet_v2": (build_shufflenet_v2, 6, BOTH),
    "squeezenet1_1": (build_squeezenet1_1, 7, BOTH),
    "densenet": (build_densenet, 8, BOTH),
    "googlenet": (build_googlenet, 9, BOTH),
    "regnet": (build_regnet, 10, BOTH),
    "vgg": (build_vgg, 11, BOTH),
    "vit": (build_vit, 12, BOTH),
    "bert": (build_bert, 13, BOTH),
    "gpt2": (build_gpt2, 14, BOTH),
    "speech_lstm": (build_speech_lstm, 15, BOTH),
    "timeseries_gru": (build_timeseries_gru, 16, BOTH),
}
# The README demo model: legacy exporter only, written without a suffix.
EXAMPLE = ("example_cnn", build_example_cnn, 100)


# --------------------------------------------------------------------------
# export + reference outputs
# --------------------------------------------------------------------------


def export(model, inputs: dict, output_names: list[str], exporter: str, path: Path) -> None:
    args = tuple(torch.from_numpy(v) for v in inputs.values())
    input_names = list(inputs.keys())
    if exporter == "legacy":
        torch.onnx.export(model, args, str(path), dynamo=False, opset_version=LEGACY_OPSET,
                          input_names=input_names, output_names=output_names, do_constant_folding=True)
    elif exporter == "dynamo":
        prog = torch.onnx.export(model, args, dynamo=True, input_names=input_names, output_names=output_names,
                                 external_data=False)
        prog.save(str(path), external_data=False)
    else:
        raise ValueError(exporter)
    # Normalise: make sure everything is embedded in a single file.
    m = onnx.load(str(path), load_external_data=True)
    strip_bulky_metadata(m)
    onnx.save_model(m, str(path), save_as_external_data=False)
    for leftover in path.parent.glob(path.name + ".data"):
        leftover.unlink()


def strip_bulky_metadata(m: onnx.ModelProto) -> None:
    """Drop per-node/per-value ``metadata_props``.

    The dynamo exporter annotates every node with Python stack traces, FX node
    dumps, module namespaces etc.  They carry no semantics, contain local
    file-system paths and make up a third of a small model's size.  Model-level
    metadata is kept.
    """

    def clean(props):
        del props[:]

    def walk(graph):
        for n in graph.node:
            clean(n.metadata_props)
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g)
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for g in a.graphs:
                        walk(g)
        for coll in (graph.initializer, graph.value_info, graph.input, graph.output):
            for item in coll:
                clean(item.metadata_props)

    walk(m.graph)
    for f in m.functions:
        for n in f.node:
            clean(n.metadata_props)


def op_types(graph: onnx.GraphProto, acc: Counter) -> Counter:
    for node in graph.node:
        key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
        acc[key] += 1
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                op_types(attr.g, acc)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    op_types(g, acc)
    return acc


def value_info_desc(vi: onnx.ValueInfoProto) -> dict:
    t = vi.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim]
    return {"name": vi.name, "dtype": onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name, "shape": dims}


def run_ort(path: Path, feeds: dict) -> dict:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    outs = sess.run(names, feeds)
    return dict(zip(names, outs))


def make_variant(out_dir: Path, name: str, model: nn.Module, inputs: dict, output_names: list[str],
                 exporter: str, torch_ref) -> dict:
    path = out_dir / f"{name}.onnx"
    entry = {"name": name, "exporter": exporter, "file": path.name}
    try:
        export(model, inputs, output_names, exporter, path)
        m = onnx.load(str(path))
        onnx.checker.check_model(m, full_check=True)
        graph_inputs = [i for i in m.graph.input]
        feeds = {}
        for gi in graph_inputs:
            if gi.name not in inputs:
                raise RuntimeError(f"graph input {gi.name!r} not among the provided inputs {list(inputs)}")
            want = onnx.helper.tensor_dtype_to_np_dtype(gi.type.tensor_type.elem_type)
            feeds[gi.name] = inputs[gi.name].astype(want, copy=False)
        outs = run_ort(path, feeds)
        np.savez(out_dir / f"{name}.inputs.npz", **feeds)
        np.savez(out_dir / f"{name}.outputs.npz", **outs)

        # Sanity check against PyTorch eager.
        max_diff = None
        if torch_ref is not None:
            ref = torch_ref if isinstance(torch_ref, (tuple, list)) else (torch_ref,)
            ort_list = [outs[o.name] for o in m.graph.output]
            if len(ref) == len(ort_list):
                max_diff = float(max(np.max(np.abs(r.detach().numpy() - o)) for r, o in zip(ref, ort_list)))

        opsets = {(o.domain or "ai.onnx"): o.version for o in m.opset_import}
        ops = op_types(m.graph, Counter())
        entry.update({
            "status": "ok",
            "opset": opsets.get("ai.onnx"),
            "opset_imports": opsets,
            "ir_version": m.ir_version,
            "producer": f"{m.producer_name} {m.producer_version}".strip(),
            "inputs": [value_info_desc(i) for i in m.graph.input],
            "outputs": [value_info_desc(o) for o in m.graph.output],
            "num_nodes": sum(ops.values()),
            "num_initializers": len(m.graph.initializer),
            "num_parameters": int(sum(int(np.prod(t.dims)) for t in m.graph.initializer)),
            "has_local_functions": len(m.functions) > 0,
            "op_types": sorted(ops),
            "op_counts": dict(sorted(ops.items())),
            "max_abs_diff_vs_torch": max_diff,
            "size_bytes": path.stat().st_size,
            "inputs_file": f"{name}.inputs.npz",
            "outputs_file": f"{name}.outputs.npz",
        })
        print(f"  ok   {name:32s} {path.stat().st_size / 1024:8.1f} KiB  opset {entry['opset']}  "
              f"{entry['num_nodes']:4d} nodes  {len(ops):3d} op types  max|ort-torch|={max_diff}", flush=True)
    except Exception as e:  # noqa: BLE001 - record and continue
        for p in (path, out_dir / f"{name}.inputs.npz", out_dir / f"{name}.outputs.npz",
                  out_dir / f"{name}.onnx.data"):
            if p.exists():
                p.unlink()
        msg = f"{type(e).__name__}: {e}"
        entry.update({"status": "failed", "error": msg[:4000]})
        print(f"  FAIL {name}: {msg[:500]}", flush=True)
        traceback.print_exc(limit=3)
    return entry


def print_table(out_dir: Path) -> None:
    manifest = json.loads((out_dir / "manifest.json").read_text())
    print("| variant | exporter | opset | inputs | .onnx KiB | params | nodes | op types (count) |")
    print("|---|---|---|---|---:|---:|---:|---|")
    for e in manifest["models"]:
        if e.get("status") != "ok":
            print(f"| {e['name']} | {e['exporter']} | FAILED | | | | | {e['error'][:80]} |")
            continue
        ins = ", ".join(f"{i['name']} {i['dtype']}{i['shape']}" for i in e["inputs"])
        ops = ", ".join(f"{k} {v}" for k, v in e["op_counts"].items())
        print(f"| {e['name']} | {e['exporter']} | {e['opset']} | {ins} | {e['size_bytes'] / 1024:.0f} | "
              f"{e['num_parameters']} | {e['num_nodes']} | {ops} |")
    print()
    print("| op type | # variants using it |")
    print("|---|---:|")
    for k, v in manifest["op_type_model_counts"].items():
        print(f"| {k} | {v} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(HERE / "models"))
    ap.add_argument("--only", default="", help="comma separated model names (default: all)")
    ap.add_argument("--print-table", action="store_true",
                    help="print a markdown summary table of an existing manifest.json and exit")
    ns = ap.parse_args()
    out_dir = Path(ns.out)
    if ns.print_table:
        print_table(out_dir)
        return 0
    out_dir.mkdir(parents=True, exist_ok=True)
    only = {s for s in ns.only.split(",") if s}

    jobs = [(n, b, s, ex) for n, (b, s, ex) in MODELS.items()]
    ex_name, ex_builder, ex_seed = EXAMPLE
    jobs.append((ex_name, ex_builder, ex_seed, ("legacy",)))

    manifest_path = out_dir / "manifest.json"
    old = {}
    if only and manifest_path.exists():
        old = {e["name"]: e for e in json.loads(manifest_path.read_text())["models"]}

    entries = []
    for base, builder, seed, exporters in jobs:
        if only and base not in only:
            continue
        print(f"[{base}]", flush=True)
        for exporter in exporters:
            torch.manual_seed(seed)
            np.random.seed(seed)
            model, inputs, output_names = builder()
            randomize_norms(model, seed)
            model.eval()
            with torch.no_grad():
                torch_ref = model(*[torch.from_numpy(v) for v in inputs.values()])
            name = base if base == ex_name else f"{base}_{exporter}"
            entry = make_variant(out_dir, name, model, inputs, output_names, exporter, torch_ref)
            entry["model"] = base
            entries.append(entry)

    if old:
        new_names = {e["name"] for e in entries}
        entries = [e for e in old.values() if e["name"] not in new_names] + entries
        order = {n: i for i, n in enumerate(list(MODELS) + [ex_name])}
        entries.sort(key=lambda e: (order.get(e.get("model", ""), 999), e["name"]))

    union = Counter()
    for e in entries:
        if e.get("status") == "ok":
            union.update(set(e["op_types"]))
    manifest = {
        "generator": "testdata/export_models.py",
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "torchvision": torchvision.__version__,
            "onnx": onnx.__version__,
            "onnxruntime": ort.__version__,
            "numpy": np.__version__,
            "transformers": __import__("transformers").__version__,
            "onnxscript": __import__("onnxscript").__version__,
        },
        "reference": "onnxruntime CPUExecutionProvider, graph_optimization_level=ORT_DISABLE_ALL",
        "models": entries,
        "op_type_model_counts": dict(sorted(union.items(), key=lambda kv: (-kv[1], kv[0]))),
        "failed": [{"name": e["name"], "error": e["error"]} for e in entries if e.get("status") != "ok"],
    }
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")

    failed = manifest["failed"]
    ok = [e for e in entries if e.get("status") == "ok"]
    total = sum(p.stat().st_size for p in out_dir.iterdir() if p.is_file())
    print(f"\n{len(ok)} variants ok, {len(failed)} failed; {out_dir} = {total / 1e6:.2f} MB")
    for f in failed:
        print(f"  failed: {f['name']}: {f['error'][:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
