#!/usr/bin/env python3
"""Generate explicitly quantized (QDQ) ONNX test models for trtc.

Takes fp32 models that ``export_models.py`` already wrote to
``testdata/models/`` (it does not modify them) and quantizes each with
onnxruntime's static quantization tool:

  * ``onnxruntime.quantization.quant_pre_process`` first (symbolic + ONNX
    shape inference, ORT basic graph optimizations = constant folding etc.),
  * ``quantize_static(quant_format=QuantFormat.QDQ, activation_type=QInt8,
    weight_type=QInt8, per_channel=True, calibrate_method=MinMax,
    extra_options={ActivationSymmetric: True, WeightSymmetric: True,
    DedicatedQDQPair: True})``: int8 activations with zero_point 0, int8
    weights with per-output-channel scales, int32 biases; every quantized
    consumer gets its own Q/DQ pair.  CNNs: every op type ORT can quantize
    (its default list: Conv, Gemm, Add, Relu, MaxPool, GlobalAveragePool,
    Flatten, ...); transformers: MatMul and Gemm only (see MODELS),
  * calibration on a few deterministic random batches (CalibrationDataReader),
    with the model's own static input shapes (as in testdata/models: standard
    normal images; random token ids with right padding).

Models (default): example_cnn, resnet18 (from resnet18_legacy.onnx), bert (from
bert_legacy.onnx); ``--only`` can also make resnet18_dynamo, bert_dynamo,
gpt2, gpt2_dynamo.

For every model NAME it writes into ``testdata/qdq/``:

  NAME_qdq.onnx                the QDQ model (weights embedded, int8)
  NAME_qdq.inputs.npz          fresh deterministic inputs (seeds disjoint from
                               the calibration batches), key = graph input name
  NAME_qdq.outputs.npz         onnxruntime CPUExecutionProvider outputs of the
                               QDQ model, graph_optimization_level=ORT_ENABLE_ALL
                               (ORT fuses DQ->op->Q into its real int8 kernels:
                               QLinearConv, QGemm, QLinearMatMul, QLinearAdd,
                               ...; except where its CommonSubexpressionElimination
                               re-merges the dedicated Q/DQ pairs: see the
                               manifest's ort_enable_all[_without_cse]_op_counts;
                               the outputs are identical either way)
  NAME_qdq.outputs_noopt.npz   the same with ORT_DISABLE_ALL: every
                               QuantizeLinear/DequantizeLinear runs as written
                               (float "fake quantization"), i.e. the exact
                               ONNX semantics of the QDQ graph
  NAME_qdq.fp32_outputs.npz    the original fp32 model's outputs (ORT_DISABLE_ALL)
                               on the same inputs

plus ``manifest.json`` (inputs/outputs, op counts, Q/DQ and scale summary,
versions, cosine similarity / max abs diff QDQ vs fp32) and it prints each
QDQ graph's op types with counts.  All ``.npz`` files are uncompressed
``np.savez`` archives like the ones in ``testdata/models/``.

Deterministic: fixed seeds, one intra-op thread; two runs wrote byte-identical
files (onnx 1.23.2, onnxruntime 1.32.0, numpy 2.4.6).  Rerun with

    /work/tdvenv/bin/python testdata/export_qdq.py [--only example_cnn,...] [--out DIR]

(needs onnx, onnxruntime and numpy; see testdata/requirements.txt).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from onnxruntime.quantization import (  # noqa: E402
    CalibrationDataReader,
    CalibrationMethod,
    QuantFormat,
    QuantType,
    quantize_static,
)
from onnxruntime.quantization.shape_inference import quant_pre_process  # noqa: E402

HERE = Path(__file__).resolve().parent
SRC_DIR = HERE / "models"

N_CALIB = 8          # calibration batches per model
CALIB_SEED0 = 1000   # calibration batch i uses seed CALIB_SEED0 + 97 * model_seed + i
TEST_SEED0 = 5000    # test inputs use seed TEST_SEED0 + model_seed

SEQ_LEN = 16         # as in export_models.py
# name -> source fp32 model (in testdata/models/), seed, input kind, vocab size
# (text models) and op types to quantize (None = onnxruntime's default list).
#
# The transformers quantize only MatMul/Gemm (TensorRT-style): with ORT's
# default list the attention-mask path (finfo.min constants, Where) is
# quantized too, which gives activation scales of 2.7e36 and even inf.
IMAGE_DEFAULT_OPS = None
TEXT_OPS = ["MatMul", "Gemm"]
MODELS = {
    "example_cnn": {"src": "example_cnn.onnx", "seed": 1, "kind": "image", "op_types": IMAGE_DEFAULT_OPS},
    "resnet18": {"src": "resnet18_legacy.onnx", "seed": 2, "kind": "image", "op_types": IMAGE_DEFAULT_OPS},
    "bert": {"src": "bert_legacy.onnx", "seed": 3, "kind": "text", "vocab": 1000, "op_types": TEXT_OPS},
}
# Not generated by default (``--only NAME`` writes them too); they quantize
# cleanly as well.
EXTRA_MODELS = {
    "resnet18_dynamo": {"src": "resnet18_dynamo.onnx", "seed": 7, "kind": "image", "op_types": IMAGE_DEFAULT_OPS},
    "bert_dynamo": {"src": "bert_dynamo.onnx", "seed": 4, "kind": "text", "vocab": 1000, "op_types": TEXT_OPS},
    "gpt2": {"src": "gpt2_legacy.onnx", "seed": 5, "kind": "text", "vocab": 512, "op_types": TEXT_OPS},
    "gpt2_dynamo": {"src": "gpt2_dynamo.onnx", "seed": 6, "kind": "text", "vocab": 512, "op_types": TEXT_OPS},
}
ALL_MODELS = {**MODELS, **EXTRA_MODELS}

# Passed to quantize_static.  DedicatedQDQPair: every quantized consumer gets
# its own QuantizeLinear/DequantizeLinear pair, and consumers that are not
# quantized (e.g. a residual Add in BERT) keep reading the float tensor.
EXTRA_OPTIONS = {"ActivationSymmetric": True, "WeightSymmetric": True, "DedicatedQDQPair": True}


# --------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------


def graph_inputs(model: onnx.ModelProto) -> list[tuple[str, np.dtype, list[int]]]:
    init = {t.name for t in model.graph.initializer}
    out = []
    for vi in model.graph.input:
        if vi.name in init:
            continue
        t = vi.type.tensor_type
        shape = [d.dim_value for d in t.shape.dim]
        if any(s <= 0 for s in shape):
            raise ValueError(f"input {vi.name!r} has a non-static shape {t.shape}")
        out.append((vi.name, onnx.helper.tensor_dtype_to_np_dtype(t.elem_type), shape))
    return out


def make_feeds(spec: dict, inputs, seed: int) -> dict[str, np.ndarray]:
    """One deterministic random feed with the model's static input shapes."""
    rng = np.random.RandomState(seed)
    kind = spec["kind"]
    if kind == "image":
        return {n: rng.standard_normal(s).astype(dt) for n, dt, s in inputs}
    if kind == "text":
        (batch, seq) = dict((n, s) for n, _, s in inputs)["input_ids"]
        ids = rng.randint(1, spec["vocab"], size=(batch, seq)).astype(np.int64)
        mask = np.ones((batch, seq), dtype=np.int64)
        # right padding: row 0 full, the others 0..seq/2 padding positions
        for i in range(1, batch):
            p = int(rng.randint(0, seq // 2 + 1))
            if p:
                mask[i, seq - p:] = 0
                ids[i, seq - p:] = 0
        tt = np.zeros_like(ids)
        tt[:, seq // 2:] = 1
        tt[mask == 0] = 0
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": tt}
        return {n: feeds[n].astype(dt) for n, dt, _ in inputs}
    raise ValueError(kind)


class RandomReader(CalibrationDataReader):
    def __init__(self, feeds: list[dict]):
        self._feeds = list(feeds)
        self._it = iter(self._feeds)

    def get_next(self):
        return next(self._it, None)

    def rewind(self):
        self._it = iter(self._feeds)


# --------------------------------------------------------------------------
# onnxruntime helpers
# --------------------------------------------------------------------------


def run_ort(path: Path, feeds: dict, level) -> dict[str, np.ndarray]:
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def optimized_run(path: Path, feeds: dict, disabled_optimizers=()) -> tuple[dict[str, int], dict]:
    """Op types ORT actually runs at ORT_ENABLE_ALL (to show its int8 kernels), and the outputs."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3  # no "optimized model may be hardware specific" warning
    with tempfile.TemporaryDirectory() as td:
        so.optimized_model_filepath = str(Path(td) / "opt.onnx")
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"],
                                    disabled_optimizers=list(disabled_optimizers))
        m = onnx.load(so.optimized_model_filepath)
    names = [o.name for o in sess.get_outputs()]
    outs = dict(zip(names, sess.run(names, feeds)))
    return dict(sorted(Counter(n.op_type for n in m.graph.node).items())), outs


# --------------------------------------------------------------------------
# QDQ graph analysis
# --------------------------------------------------------------------------


def value_info_desc(vi: onnx.ValueInfoProto) -> dict:
    t = vi.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim]
    return {"name": vi.name, "dtype": onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name, "shape": dims}


def qdq_summary(model: onnx.ModelProto) -> dict:
    g = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    # Constant nodes (if any) count as constants too.
    for n in g.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    inits[n.output[0]] = numpy_helper.to_array(a.t)

    def axis_of(n) -> int:
        for a in n.attribute:
            if a.name == "axis":
                return a.i
        return 1  # ONNX default

    q_nodes = [n for n in g.node if n.op_type == "QuantizeLinear"]
    dq_nodes = [n for n in g.node if n.op_type == "DequantizeLinear"]

    weights = {"count": 0, "per_channel": 0, "per_tensor": 0, "dtypes": Counter(), "by_consumer": {}}
    biases = {"count": 0, "dtypes": Counter(), "per_channel": 0, "axes": Counter()}
    act_dq = 0
    scales_all = []
    for n in dq_nodes:
        x = n.input[0]
        scale = inits.get(n.input[1])
        zp = inits.get(n.input[2]) if len(n.input) > 2 and n.input[2] else None
        if scale is not None:
            scales_all.append(np.asarray(scale, dtype=np.float64).ravel())
        if x not in inits:
            act_dq += 1
            continue
        data = inits[x]
        users = sorted({c.op_type for c in consumers.get(n.output[0], [])})
        per_ch = scale is not None and scale.ndim == 1 and scale.size > 1
        if data.dtype == np.int32:
            biases["count"] += 1
            biases["dtypes"][data.dtype.name] += 1
            biases["per_channel"] += int(per_ch)
            if per_ch:
                biases["axes"][str(axis_of(n))] += 1
            continue
        weights["count"] += 1
        weights["dtypes"][data.dtype.name] += 1
        weights["per_channel" if per_ch else "per_tensor"] += 1
        key = "+".join(users) or "(graph output)"
        e = weights["by_consumer"].setdefault(key, {"count": 0, "per_channel": 0, "axes": Counter(),
                                                    "zero_points_all_zero": True, "weight_ranks": Counter()})
        e["count"] += 1
        e["weight_ranks"][str(data.ndim)] += 1
        if per_ch:
            e["per_channel"] += 1
            ax = axis_of(n)
            ax = ax + data.ndim if ax < 0 else ax
            e["axes"][str(ax)] += 1
            assert scale.size == data.shape[ax], (n.name, scale.shape, data.shape, ax)
        if zp is not None and np.any(zp != 0):
            e["zero_points_all_zero"] = False

    act_q = {"count": len(q_nodes), "dtypes": Counter(), "zero_points_all_zero": True,
             "scalar_scales": True, "quantizes_initializer": 0}
    for n in q_nodes:
        if n.input[0] in inits:
            act_q["quantizes_initializer"] += 1
        scale = inits.get(n.input[1])
        zp = inits.get(n.input[2]) if len(n.input) > 2 and n.input[2] else None
        if scale is None or scale.size != 1:
            act_q["scalar_scales"] = False
        if zp is None:
            act_q["dtypes"]["uint8 (no zero_point)"] += 1
        else:
            act_q["dtypes"][zp.dtype.name] += 1
            if np.any(zp != 0):
                act_q["zero_points_all_zero"] = False

    # how many QuantizeLinear outputs feed more than one DequantizeLinear
    shared = sum(1 for n in q_nodes if sum(c.op_type == "DequantizeLinear"
                                           for c in consumers.get(n.output[0], [])) > 1)
    allsc = np.concatenate(scales_all) if scales_all else np.zeros(0)
    if not np.all(np.isfinite(allsc)) or np.any(allsc <= 0):
        raise ValueError("a QuantizeLinear/DequantizeLinear scale is not finite and positive")

    def plain(d):
        if isinstance(d, Counter):
            return dict(sorted(d.items()))
        if isinstance(d, dict):
            return {k: plain(v) for k, v in d.items()}
        return d

    return {
        "num_quantize_linear": len(q_nodes),
        "num_dequantize_linear": len(dq_nodes),
        "dequantize_of_activations": act_dq,
        "weights": plain(weights),
        "weights_per_channel": weights["count"] > 0 and weights["per_channel"] == weights["count"],
        "biases_int32": plain(biases),
        "activation_quantize": plain(act_q),
        "quantize_outputs_shared_by_several_dq": shared,
        "scale_min": float(allsc.min()) if allsc.size else None,
        "scale_max": float(allsc.max()) if allsc.size else None,
    }


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    d = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / d) if d > 0 else float("nan")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def export_one(name: str, spec: dict, out_dir: Path) -> dict:
    src = SRC_DIR / spec["src"]
    fp32 = onnx.load(str(src))
    inputs = graph_inputs(fp32)
    seed = spec["seed"]
    calib = [make_feeds(spec, inputs, CALIB_SEED0 + 97 * seed + i) for i in range(N_CALIB)]
    test = make_feeds(spec, inputs, TEST_SEED0 + seed)
    for c in calib:  # inputs disjoint from the calibration data
        assert not all(np.array_equal(c[k], test[k]) for k in test), "test feed equals a calibration batch"

    base = f"{name}_qdq"
    out_model = out_dir / f"{base}.onnx"
    with tempfile.TemporaryDirectory() as td:
        pre = Path(td) / "pre.onnx"
        quant_pre_process(str(src), str(pre), skip_optimization=False, skip_onnx_shape=False,
                          skip_symbolic_shape=False)
        quantize_static(
            str(pre),
            str(out_model),
            calibration_data_reader=RandomReader(calib),
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=spec["op_types"],
            per_channel=True,
            reduce_range=False,
            activation_type=QuantType.QInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
            extra_options=dict(EXTRA_OPTIONS),
        )
    qdq = onnx.load(str(out_model))
    # Drop what the quantizer leaves that depends on the environment, and the
    # opset imports quant_pre_process's ORT optimization pass adds for every
    # domain ORT knows (com.microsoft, com.microsoft.nchwc, ai.onnx.ml,
    # org.pytorch.aten, ...) although no node uses them.
    qdq.doc_string = ""
    del qdq.metadata_props[:]
    used = {n.domain or "" for n in qdq.graph.node} | {""}
    keep = [o for o in qdq.opset_import if (o.domain or "") in used]
    del qdq.opset_import[:]
    qdq.opset_import.extend(keep)
    onnx.checker.check_model(qdq, full_check=True)
    onnx.save(qdq, str(out_model))

    outs = run_ort(out_model, test, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    opt_ops, outs2 = optimized_run(out_model, test)
    nocse_ops, outs_nocse = optimized_run(out_model, test, ["CommonSubexpressionElimination"])
    for k in outs:  # the session that saved its optimized graph computes the same
        assert np.array_equal(outs[k], outs2[k]), k
    nocse_diff = max(float(np.max(np.abs(outs[k].astype(np.float64) - outs_nocse[k]))) for k in outs)
    outs_noopt = run_ort(out_model, test, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    ref = run_ort(src, test, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    np.savez(out_dir / f"{base}.inputs.npz", **test)
    np.savez(out_dir / f"{base}.outputs.npz", **outs)
    np.savez(out_dir / f"{base}.outputs_noopt.npz", **outs_noopt)
    np.savez(out_dir / f"{base}.fp32_outputs.npz", **ref)

    compare = {}
    for k in outs:
        c = {
            "cosine_qdq_vs_fp32": cosine(outs[k], ref[k]),
            "max_abs_diff_qdq_vs_fp32": float(np.max(np.abs(outs[k].astype(np.float64) - ref[k]))),
            "max_abs_fp32": float(np.max(np.abs(ref[k]))),
            "cosine_noopt_vs_fp32": cosine(outs_noopt[k], ref[k]),
            "max_abs_diff_qdq_vs_noopt": float(np.max(np.abs(outs[k].astype(np.float64) - outs_noopt[k]))),
        }
        if k == "logits" and outs[k].ndim == 2:
            c["top1_agreement_qdq_vs_fp32"] = float(np.mean(outs[k].argmax(-1) == ref[k].argmax(-1)))
        compare[k] = c

    ops = Counter(n.op_type for n in qdq.graph.node)
    opsets = {(o.domain or "ai.onnx"): o.version for o in qdq.opset_import}
    entry = {
        "name": base,
        "source_model": f"models/{spec['src']}",
        "source_sha256": sha256(src),
        "file": out_model.name,
        "inputs_file": f"{base}.inputs.npz",
        "outputs_file": f"{base}.outputs.npz",
        "outputs_noopt_file": f"{base}.outputs_noopt.npz",
        "fp32_outputs_file": f"{base}.fp32_outputs.npz",
        "opset": opsets.get("ai.onnx"),
        "opset_imports": opsets,
        "ir_version": qdq.ir_version,
        "inputs": [value_info_desc(i) for i in qdq.graph.input],
        "outputs": [value_info_desc(o) for o in qdq.graph.output],
        "num_nodes": len(qdq.graph.node),
        "op_counts": dict(sorted(ops.items())),
        "ort_enable_all_op_counts": opt_ops,
        # ORT's CommonSubexpressionElimination merges the dedicated Q/DQ pairs
        # of a tensor with several quantized consumers back into one shared
        # DQ, and its CPU QDQ fusions skip a DQ with several consumers, so
        # some Conv/Add/MatMul stay "DQ -> float op -> Q".  Without CSE every
        # one becomes an int8 kernel; the outputs are compared here.
        "ort_enable_all_without_cse_op_counts": nocse_ops,
        "max_abs_diff_outputs_vs_without_cse": nocse_diff,
        "quantization": qdq_summary(qdq),
        "op_types_to_quantize": spec["op_types"] or "onnxruntime default",
        "calibration": {"method": "MinMax", "batches": N_CALIB,
                        "seeds": [CALIB_SEED0 + 97 * seed + i for i in range(N_CALIB)],
                        "input_kind": spec["kind"]},
        "test_input_seed": TEST_SEED0 + seed,
        "compare": compare,
        "cosine_qdq_vs_fp32": min(c["cosine_qdq_vs_fp32"] for c in compare.values()),
        "size_bytes": out_model.stat().st_size,
    }
    print(f"== {base}  ({entry['size_bytes'] / 1024:.1f} KiB, opset {entry['opset']}, "
          f"{entry['num_nodes']} nodes) from {entry['source_model']}")
    print("   QDQ graph ops:     " + ", ".join(f"{k} {v}" for k, v in entry["op_counts"].items()))
    print("   ORT ENABLE_ALL:    " + ", ".join(f"{k} {v}" for k, v in entry["ort_enable_all_op_counts"].items()))
    print("   same, without CSE: " + ", ".join(f"{k} {v}" for k, v in nocse_ops.items())
          + f"  (outputs max diff {nocse_diff:.3g})")
    q = entry["quantization"]
    print(f"   Q {q['num_quantize_linear']}, DQ {q['num_dequantize_linear']} "
          f"(weights {q['weights']['count']}: per-channel {q['weights']['per_channel']}, "
          f"biases int32 {q['biases_int32']['count']}, activations {q['dequantize_of_activations']})")
    for k, c in compare.items():
        extra = f", top1 agree {c['top1_agreement_qdq_vs_fp32']:.2f}" if "top1_agreement_qdq_vs_fp32" in c else ""
        print(f"   {k}: cos(qdq, fp32) = {c['cosine_qdq_vs_fp32']:.7f}, max|qdq-fp32| = "
              f"{c['max_abs_diff_qdq_vs_fp32']:.4g} (max|fp32| {c['max_abs_fp32']:.4g}), "
              f"max|ENABLE_ALL-DISABLE_ALL| = {c['max_abs_diff_qdq_vs_noopt']:.4g}{extra}")
    return entry


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated names (default: " + ",".join(MODELS) + "; also: "
                    + ",".join(EXTRA_MODELS) + ")")
    ap.add_argument("--out", type=Path, default=HERE / "qdq")
    args = ap.parse_args()
    names = list(MODELS)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        bad = [n for n in names if n not in ALL_MODELS]
        if bad:
            ap.error(f"unknown model(s) {bad}; known: {list(ALL_MODELS)}")
    args.out.mkdir(parents=True, exist_ok=True)

    manifest_path = args.out / "manifest.json"
    old = {}
    if args.only and manifest_path.exists():
        old = {e["name"]: e for e in json.loads(manifest_path.read_text()).get("models", [])}

    entries = dict(old)
    for n in names:
        entries[f"{n}_qdq"] = export_one(n, ALL_MODELS[n], args.out)

    order = [f"{n}_qdq" for n in ALL_MODELS]

    manifest = {
        "generator": "testdata/export_qdq.py",
        "versions": {
            "python": platform.python_version(),
            "onnx": onnx.__version__,
            "onnxruntime": ort.__version__,
            "numpy": np.__version__,
        },
        "quantization": {
            "tool": "onnxruntime.quantization.quantize_static after quant_pre_process",
            "quant_format": "QDQ",
            "activation_type": "QInt8",
            "weight_type": "QInt8",
            "per_channel": True,
            "reduce_range": False,
            "calibrate_method": "MinMax",
            "extra_options": EXTRA_OPTIONS,
            "op_types_to_quantize": {n: (ALL_MODELS[n]["op_types"] or "onnxruntime default (all it supports)")
                                     for n in ALL_MODELS},
        },
        "reference": {
            "outputs_file": "onnxruntime CPUExecutionProvider on the QDQ model, ORT_ENABLE_ALL (int8 kernels), "
                            "1 intra-op thread",
            "outputs_noopt_file": "onnxruntime CPUExecutionProvider on the QDQ model, ORT_DISABLE_ALL "
                                  "(Q/DQ executed as written)",
            "fp32_outputs_file": "onnxruntime CPUExecutionProvider on the source fp32 model, ORT_DISABLE_ALL",
        },
        "models": [entries[k] for k in order if k in entries],
    }
    manifest_path.write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(p.stat().st_size for p in args.out.iterdir() if p.is_file())
    print(f"wrote {manifest_path} ({len(manifest['models'])} models); {args.out} holds {total / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
