#!/usr/bin/env python3
"""Exports testdata models whose control flow is decided at run time
(issue 17): If on a graph input or on computed values, Loop with a trip
count or a condition computed at run time.

TorchScript models (`torch.jit.script`, the legacy exporter, which keeps
Python `if`/`for`/`while` as ONNX If/Loop):

- vad: a voice-activity-detector-style front end that branches on the
  sample rate (a graph input, as Silero VAD does): a stride-2 Conv1d for
  16 kHz, a plain one for 8 kHz, so the branches' outputs differ in length;
  then pooling, a linear head and a sigmoid;
- gate: a CNN block that takes one of two convolution paths by the sign of
  its input's mean (a condition computed from the data);
- decoder: a gated recurrent cell stepped `steps` times (a graph input) from an
  encoded state, then a projection (a Loop with a run-time trip count);
- halving: a state halved while its largest magnitude exceeds a
  threshold, at most 64 times (a while loop: condition from the body);
- rnn: an Elman RNN written as a Python loop over the time axis, each
  step's output written into a preallocated tensor (a Loop whose trip
  count is the input's length, carrying the outputs along).

One model built with `onnx.helper`: `scan_loop`, a Loop over a run-time
count whose body holds an If on the iteration number's parity and emits
a scan output per iteration (nested control flow, stacked outputs).

And three with symbolic dimensions, whose manifest entries give the
profile the tests build with: `vad_dynamic` (the sample count),
`rnn_dynamic` (time and batch: the loop's trip count follows the
sequence) and `decoder_dynamic` (the batch).

Output, in `testdata/control_flow/`: `NAME.onnx` and per case `NAME.K.npz`
with the inputs under their names and onnxruntime's outputs under
`out:NAME` (CPU provider, ORT_DISABLE_ALL, 1 thread); `manifest.json`
lists them. Run with `/tmp/tdvenv/bin/python testdata/export_control_flow.py`
(versions in `requirements.txt`).
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
from onnx import TensorProto, helper

OUT = Path(__file__).resolve().parent / "control_flow"
OPSET = 17


class Vad(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv16 = nn.Conv1d(1, 8, 5, stride=2)
        self.conv8 = nn.Conv1d(1, 8, 3)
        self.head = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor, sr: torch.Tensor) -> torch.Tensor:
        if bool(sr == 16000):
            h = torch.relu(self.conv16(x))
        else:
            h = torch.tanh(self.conv8(x))
        return torch.sigmoid(self.head(h.mean(-1)))


class Gate(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(4, 8, 3, padding=1)
        self.b = nn.Conv2d(4, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.mean() > 0):
            y = torch.relu(self.a(x))
        else:
            y = self.b(x) * 0.5
        return y + 1.0


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Linear(6, 16)
        self.update = nn.Linear(32, 16)
        self.candidate = nn.Linear(32, 16)
        self.proj = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.enc(x))
        inp = h
        for _ in range(int(steps)):
            hx = torch.cat([inp, h], 1)
            z = torch.sigmoid(self.update(hx))
            h = (1 - z) * h + z * torch.tanh(self.candidate(hx))
            inp = h
        return self.proj(h)


class Halving(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        i = 0
        while bool(x.abs().max() > 0.5) and i < 64:
            x = x * 0.5 + 0.01
            i += 1
        return x


class Rnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.wx = nn.Linear(3, 8)
        self.wh = nn.Linear(8, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(x.size(1), 8)
        for t in range(x.size(0)):
            h = torch.tanh(self.wx(x[t]) + self.wh(h))
        return h


def scan_loop_model() -> onnx.ModelProto:
    """Loop over `n` (a graph input): y <- y * 0.5 + x on even iterations,
    y <- y - x on odd ones (an If in the body), each iteration's y a row of
    the scan output."""
    f = TensorProto.FLOAT
    then = helper.make_graph(
        [helper.make_node("Mul", ["y_in", "half"], ["y_half"]), helper.make_node("Add", ["y_half", "x"], ["t"])],
        "even", [], [helper.make_tensor_value_info("t", f, [3])])
    els = helper.make_graph([helper.make_node("Sub", ["y_in", "x"], ["e"])], "odd", [],
                            [helper.make_tensor_value_info("e", f, [3])])
    body = helper.make_graph(
        [
            helper.make_node("Mod", ["i", "two"], ["parity"]),
            helper.make_node("Equal", ["parity", "zero"], ["even"]),
            helper.make_node("If", ["even"], ["y_out"], then_branch=then, else_branch=els),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Identity", ["y_out"], ["row"]),
        ],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_in", f, [3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_out", f, [3]),
         helper.make_tensor_value_info("row", f, [3])],
        [helper.make_tensor("two", TensorProto.INT64, [], [2]), helper.make_tensor("zero", TensorProto.INT64, [], [0])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "y0"], ["y", "rows"], body=body)],
        "scan_loop",
        [helper.make_tensor_value_info("x", f, [3]), helper.make_tensor_value_info("n", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", f, [3]), helper.make_tensor_value_info("rows", f, ["n", 3])],
        [helper.make_tensor("y0", f, [3], [1.0, -2.0, 0.5]), helper.make_tensor("half", f, [], [0.5])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def cases():
    """(name, torch module or ONNX model, input names, output names, the
    example the export traces, the inputs recorded)."""
    f32 = np.float32
    i64 = np.int64
    audio = lambda s, n: rng(s).standard_normal((1, 1, n)).astype(f32)  # noqa: E731
    image = lambda s, scale: (rng(s).standard_normal((1, 4, 6, 6)) * 0.5 + scale).astype(f32)  # noqa: E731
    return [
        ("vad", Vad(), ["x", "sr"], ["speech"], {"x": audio(1, 64), "sr": np.array(16000, i64)},
         [{"x": audio(2, 64), "sr": np.array(16000, i64)}, {"x": audio(3, 64), "sr": np.array(8000, i64)}]),
        ("gate", Gate(), ["x"], ["y"], {"x": image(4, 1.0)},
         [{"x": image(5, 1.0)}, {"x": image(6, -1.0)}]),
        ("decoder", Decoder(), ["x", "steps"], ["logits"], {"x": rng(7).standard_normal((2, 6)).astype(f32),
                                                            "steps": np.array(3, i64)},
         [{"x": rng(8 + k).standard_normal((2, 6)).astype(f32), "steps": np.array(k, i64)} for k in (0, 1, 4, 9)]),
        ("halving", Halving(), ["x"], ["y"], {"x": rng(12).standard_normal((2, 4)).astype(f32)},
         [{"x": (rng(13 + k).standard_normal((2, 4)) * s).astype(f32)} for k, s in enumerate((0.1, 3.0, 100.0))]),
        ("rnn", Rnn(), ["x"], ["h"], {"x": rng(20).standard_normal((5, 2, 3)).astype(f32)},
         [{"x": rng(21 + k).standard_normal((5, 2, 3)).astype(f32)} for k in range(2)]),
        ("scan_loop", scan_loop_model(), ["x", "n"], ["y", "rows"], None,
         [{"x": np.array([0.5, 1.0, -1.5], f32), "n": np.array(k, i64)} for k in (0, 1, 2, 5, 12)]),
    ]


def dynamic_cases():
    """Models with symbolic dimensions as well: (name, module, input names,
    output names, example, dynamic axes, profile, inputs recorded)."""
    f32 = np.float32
    i64 = np.int64
    audio = lambda s, n: rng(s).standard_normal((1, 1, n)).astype(f32)  # noqa: E731
    seq = lambda s, t, n: rng(s).standard_normal((t, n, 3)).astype(f32)  # noqa: E731
    return [
        # The sample rate branches and the length varies, as a streaming
        # voice-activity detector's chunks do.
        ("vad_dynamic", Vad(), ["x", "sr"], ["speech"], {"x": audio(30, 64), "sr": np.array(16000, i64)},
         {"x": {2: "samples"}}, {"x": ([1, 1, 32], [1, 1, 64], [1, 1, 192])},
         [{"x": audio(31 + k, n), "sr": np.array(sr, i64)}
          for k, (n, sr) in enumerate([(32, 16000), (64, 8000), (192, 16000), (33, 8000), (101, 16000)])]),
        # A loop over the time axis, whose length (and the batch) varies.
        ("rnn_dynamic", Rnn(), ["x"], ["h"], {"x": seq(40, 5, 2)}, {"x": {0: "time", 1: "batch"}},
         {"x": ([1, 1, 3], [5, 2, 3], [12, 4, 3])},
         [{"x": seq(41 + k, t, n)} for k, (t, n) in enumerate([(1, 1), (5, 2), (12, 4), (7, 3)])]),
        # A run-time step count and a batch that varies.
        ("decoder_dynamic", Decoder(), ["x", "steps"], ["logits"],
         {"x": rng(50).standard_normal((2, 6)).astype(f32), "steps": np.array(3, i64)}, {"x": {0: "batch"}},
         {"x": ([1, 6], [2, 6], [8, 6])},
         [{"x": rng(51 + k).standard_normal((b, 6)).astype(f32), "steps": np.array(st, i64)}
          for k, (b, st) in enumerate([(1, 0), (2, 3), (8, 5), (5, 2)])]),
    ]


def export(model, names, outs, example, path: Path, axes=None) -> None:
    if isinstance(model, onnx.ModelProto):
        onnx.save_model(model, str(path))
        return
    model.eval()
    scripted = torch.jit.script(model)
    args = tuple(torch.from_numpy(example[k]) for k in names)
    torch.onnx.export(scripted, args, str(path), dynamo=False, opset_version=OPSET, input_names=names,
                      output_names=outs, do_constant_folding=True, dynamic_axes=axes)
    m = onnx.load(str(path))
    m.producer_version = ""
    onnx.save_model(m, str(path))


def main() -> int:
    OUT.mkdir(exist_ok=True)
    torch.manual_seed(0)
    manifest = {"generator": "testdata/export_control_flow.py", "models": []}
    every = [(n, m, i, o, e, None, None, f) for n, m, i, o, e, f in cases()]
    every += dynamic_cases()
    for name, model, names, outs, example, axes, profile, feeds_list in every:
        path = OUT / f"{name}.onnx"
        try:
            with torch.no_grad():
                export(model, names, outs, example, path, axes)
        except Exception as e:  # noqa: BLE001 - recorded, not hidden
            print(f"{name}: export failed: {str(e).splitlines()[0][:300]}", file=sys.stderr)
            manifest["models"].append({"name": name, "status": "failed", "error": str(e).splitlines()[0][:500]})
            continue
        ops = sorted({n.op_type for n in onnx.load(str(path)).graph.node})
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        opts.intra_op_num_threads = 1
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        recorded = []
        for k, feeds in enumerate(feeds_list):
            got = sess.run(None, feeds)
            arrays = dict(feeds)
            for o, v in zip(outs, got):
                arrays[f"out:{o}"] = v
            file = f"{name}.{k}.npz"
            np.savez(OUT / file, **arrays)
            case = {"file": file, "outputs": {o: list(v.shape) for o, v in zip(outs, got)}}
            if not isinstance(model, onnx.ModelProto):
                with torch.no_grad():
                    eager = model(*(torch.from_numpy(feeds[n]) for n in names))
                eager = eager if isinstance(eager, tuple) else (eager,)
                case["max_abs_diff_ort_vs_torch"] = max(float(np.max(np.abs(g - e.numpy()), initial=0.0))
                                                        for g, e in zip(got, eager))
            recorded.append(case)
        entry = {"name": name, "status": "ok", "file": path.name, "top_level_ops": ops, "cases": recorded}
        if profile:
            entry["profile"] = {k: {"min": lo, "opt": opt, "max": hi} for k, (lo, opt, hi) in profile.items()}
        manifest["models"].append(entry)
        print(f"{name}: {len(recorded)} cases, ops {ops}")
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
