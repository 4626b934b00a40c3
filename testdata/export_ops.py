#!/usr/bin/env python3
"""Generate single-op ONNX test models, with onnxruntime's outputs, for ops
whose attributes the ONNX conformance suite covers only in part.

The conformance suite has 12 recurrent cases, all forward, without clip,
custom activations, layout 1 with two directions or linear_before_reset,
GridSample cases on tiny inputs with grids inside [-1, 1], few DFT, STFT,
Col2Im and RoiAlign cases, one Scan and one DeformConv case, and few on the 8-bit floats and
4-bit integers (round trips through them here, numpy holding neither). This script writes one small model per attribute combination, random
weights from a fixed seed, and records what onnxruntime computes on fixed
inputs, so trtc is checked against an independent implementation on every
attribute the spec defines.

For every case NAME it writes into ``testdata/ops/``:

  NAME.onnx          one node (opset 22; RoiAlign 16), weights and the inputs that
                     decide shapes as initializers
  NAME.inputs.npz    the graph inputs, key = input name
  NAME.outputs.npz   onnxruntime CPUExecutionProvider outputs,
                     graph_optimization_level = ORT_DISABLE_ALL, 1 thread
                     (for the 8-bit float and 4-bit integer cases, onnx's
                     reference evaluator's, with onnxruntime's disagreements
                     listed in the manifest)

plus ``manifest.json`` (the cases with their attributes and the versions).
The ``.npz`` files are uncompressed ``np.savez`` archives. Deterministic:
fixed seeds; two runs write byte-identical files. Rerun with

    python3 -m venv /tmp/ortvenv && /tmp/ortvenv/bin/pip install onnx==1.23.2 onnxruntime==1.32.0 numpy==2.4.6
    /tmp/ortvenv/bin/python testdata/export_ops.py
"""

from __future__ import annotations

import json
import pathlib
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

OUT = pathlib.Path(__file__).resolve().parent / "ops"
OPSET = 22

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def recurrent_case(
    name: str,
    op: str,
    *,
    seed: int,
    steps: int = 5,
    batch: int = 3,
    input_size: int = 4,
    hidden: int = 5,
    direction: str = "forward",
    layout: int = 0,
    bias: bool = True,
    seq_lens: list[int] | None = None,
    initial: bool = False,
    peepholes: bool = False,
    outputs: tuple[str, ...] = ("Y", "Y_h", "Y_c"),
    dtype=np.float32,
    weights_as_inputs: bool = False,
    **attrs,
):
    """One LSTM/GRU/RNN node. Weights are initializers (as exporters write
    them) unless ``weights_as_inputs``; X, the sequence lengths and the
    initial states are graph inputs."""
    rng = np.random.default_rng(seed)
    dirs = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))

    def rand(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(dtype)

    x_shape = [batch, steps, input_size] if layout else [steps, batch, input_size]
    state_shape = [batch, dirs, hidden] if layout else [dirs, batch, hidden]
    feeds = {"X": rand(*x_shape)}
    inits = {
        "W": rand(dirs, g * hidden, input_size, scale=0.5),
        "R": rand(dirs, g * hidden, hidden, scale=0.5),
    }
    if bias:
        inits["B"] = rand(dirs, 2 * g * hidden, scale=0.5)
    if seq_lens is not None:
        feeds["sequence_lens"] = np.array(seq_lens, dtype=np.int32)
    if initial:
        feeds["initial_h"] = rand(*state_shape)
        if op == "LSTM":
            feeds["initial_c"] = rand(*state_shape)
    if peepholes:
        inits["P"] = rand(dirs, 3 * hidden, scale=0.5)
    if weights_as_inputs:
        feeds.update(inits)
        inits = {}

    order = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]
    if op != "LSTM":
        order = order[:6]
    present = set(feeds) | set(inits)
    node_inputs = [n if n in present else "" for n in order]
    while node_inputs and node_inputs[-1] == "":
        node_inputs.pop()

    out_names = ["Y", "Y_h", "Y_c"] if op == "LSTM" else ["Y", "Y_h"]
    node_outputs = [n if n in outputs else "" for n in out_names]
    while node_outputs and node_outputs[-1] == "":
        node_outputs.pop()

    node = helper.make_node(
        op, node_inputs, node_outputs, name=f"{name}_node", hidden_size=hidden, direction=direction, layout=layout, **attrs
    )
    y_shape = [batch, steps, dirs, hidden] if layout else [steps, dirs, batch, hidden]
    shapes = {"Y": y_shape, "Y_h": state_shape, "Y_c": state_shape}
    graph = helper.make_graph(
        [node],
        name,
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for k, v in feeds.items()],
        [helper.make_tensor_value_info(n, elem, shapes[n]) for n in node_outputs if n],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    meta = {
        "op": op,
        "direction": direction,
        "layout": layout,
        "bias": bias,
        "sequence_lens": seq_lens,
        "initial_states": initial,
        "peepholes": peepholes,
        "outputs": [n for n in node_outputs if n],
        "dtype": np.dtype(dtype).name,
        "attributes": {k: v for k, v in attrs.items()},
    }
    twin = None
    if layout:
        # onnxruntime refuses layout 1; its reference is onnxruntime on the
        # time-major twin of the model, with inputs and outputs transposed.
        twin = recurrent_case(
            name, op, seed=seed, steps=steps, batch=batch, input_size=input_size, hidden=hidden, direction=direction,
            layout=0, bias=bias, seq_lens=seq_lens, initial=initial, peepholes=peepholes, outputs=outputs, dtype=dtype,
            weights_as_inputs=weights_as_inputs, **attrs,
        )[1]
        meta["reference"] = "onnxruntime on the layout-0 twin, transposed"
    return name, graph, feeds, meta, twin


def to_time_major(feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """X [N, T, I] -> [T, N, I] and states [N, D, H] -> [D, N, H]."""
    return {k: (v.transpose(1, 0, 2) if k in ("X", "initial_h", "initial_c") else v) for k, v in feeds.items()}


def to_batch_major(outs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Y [T, D, N, H] -> [N, T, D, H] and states [D, N, H] -> [N, D, H]."""
    return {k: (v.transpose(2, 0, 1, 3) if k == "Y" else v.transpose(1, 0, 2)) for k, v in outs.items()}


def recurrent_cases():
    c = recurrent_case
    yield c("rnn_forward", "RNN", seed=1, initial=True)
    yield c("rnn_reverse_relu_clip", "RNN", seed=2, direction="reverse", activations=["Relu"], clip=0.7)
    yield c("rnn_bidirectional_seq_lens", "RNN", seed=3, direction="bidirectional", seq_lens=[5, 2, 1], initial=True)
    yield c(
        "rnn_bidirectional_activations",
        "RNN",
        seed=4,
        direction="bidirectional",
        activations=["LeakyRelu", "ScaledTanh"],
        activation_alpha=[0.2, 0.8],
        activation_beta=[1.3],
    )
    yield c("rnn_layout1_bidirectional", "RNN", seed=5, direction="bidirectional", layout=1, initial=True, seq_lens=[3, 5, 4])
    yield c("rnn_no_bias_y_h_only", "RNN", seed=6, bias=False, outputs=("Y_h",))
    yield c("gru_forward", "GRU", seed=11, initial=True)
    yield c("gru_linear_before_reset", "GRU", seed=12, linear_before_reset=1, initial=True)
    yield c("gru_reverse_lbr_clip", "GRU", seed=13, direction="reverse", linear_before_reset=1, clip=0.5)
    yield c("gru_bidirectional_seq_lens", "GRU", seed=14, direction="bidirectional", seq_lens=[1, 5, 3], initial=True)
    yield c(
        "gru_activations",
        "GRU",
        seed=15,
        direction="bidirectional",
        activations=["HardSigmoid", "Elu", "Sigmoid", "Softsign"],
        activation_alpha=[0.3, 0.9],
        activation_beta=[0.4],
    )
    yield c("gru_layout1_lbr", "GRU", seed=16, layout=1, linear_before_reset=1, direction="bidirectional", seq_lens=[2, 5, 4])
    yield c("gru_weights_as_inputs", "GRU", seed=17, weights_as_inputs=True, outputs=("Y",))
    yield c("lstm_forward", "LSTM", seed=21, initial=True)
    yield c("lstm_reverse_clip", "LSTM", seed=22, direction="reverse", clip=0.6, initial=True)
    yield c(
        "lstm_bidirectional_peepholes_seq_lens",
        "LSTM",
        seed=23,
        direction="bidirectional",
        peepholes=True,
        seq_lens=[4, 5, 2],
        initial=True,
    )
    yield c("lstm_input_forget", "LSTM", seed=24, input_forget=1, peepholes=True)
    yield c(
        "lstm_activations",
        "LSTM",
        seed=25,
        activations=["HardSigmoid", "Softplus", "Affine"],
        activation_alpha=[0.25, 0.7],
        activation_beta=[0.45, 0.1],
    )
    yield c("lstm_layout1_bidirectional", "LSTM", seed=26, direction="bidirectional", layout=1, initial=True, peepholes=True)
    yield c("lstm_y_c_only_no_bias", "LSTM", seed=27, bias=False, outputs=("Y_c",), steps=7, hidden=8, input_size=6)
    yield c("lstm_larger", "LSTM", seed=28, steps=16, batch=4, input_size=24, hidden=32, direction="bidirectional")


def grid_sample_case(name: str, *, seed: int, spatial: tuple[int, ...], out: tuple[int, ...], opset_mode: str, **attrs):
    """One GridSample node over X [2, 3, spatial...] and a grid reaching
    past [-1, 1] on every side, so every padding mode is exercised."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, *spatial)).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (2, *out, len(spatial))).astype(np.float32)
    node = helper.make_node("GridSample", ["X", "grid"], ["Y"], name=f"{name}_node", mode=opset_mode, **attrs)
    graph = helper.make_graph(
        [node],
        name,
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, list(x.shape)),
            helper.make_tensor_value_info("grid", TensorProto.FLOAT, list(grid.shape)),
        ],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3, *out])],
    )
    meta = {"op": "GridSample", "spatial": list(spatial), "out": list(out), "mode": opset_mode, "attributes": attrs}
    return name, graph, {"X": x, "grid": grid}, meta, None


def grid_sample_cases():
    seed = 40
    for mode in ("nearest", "linear", "cubic"):
        for padding in ("zeros", "border", "reflection"):
            for align in (0, 1):
                seed += 1
                name = f"gridsample_2d_{mode}_{padding}_align{align}"
                yield grid_sample_case(
                    name, seed=seed, spatial=(5, 7), out=(4, 6), opset_mode=mode, padding_mode=padding, align_corners=align
                )
    for mode in ("nearest", "linear"):
        for padding in ("zeros", "border", "reflection"):
            seed += 1
            yield grid_sample_case(
                f"gridsample_3d_{mode}_{padding}",
                seed=seed,
                spatial=(3, 4, 5),
                out=(2, 3, 4),
                opset_mode=mode,
                padding_mode=padding,
                align_corners=seed % 2,
            )


def single_node_case(name: str, op: str, feeds: dict, consts: dict, inputs: list[str], out_shape, **attrs):
    """One node reading graph inputs (``feeds``) and initializers
    (``consts``, for the inputs that decide shapes) in the order ``inputs``
    ("" for an absent optional input)."""
    node = helper.make_node(op, inputs, ["Y"], name=f"{name}_node", **attrs)
    graph = helper.make_graph(
        [node],
        name,
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for k, v in feeds.items()],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, out_shape or ["batch", "frames", "bins", "two"])],
        [numpy_helper.from_array(v, k) for k, v in consts.items()],
    )
    meta = {"op": op, "attributes": attrs, "constants": {k: v.tolist() for k, v in consts.items()}}
    return name, graph, feeds, meta, None


def spectral_cases():
    rng = np.random.default_rng(60)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    i64 = lambda v: np.array(v, dtype=np.int64)  # noqa: E731
    c = single_node_case
    yield c("dft_real_onesided", "DFT", {"x": f32(2, 12, 1)}, {}, ["x"], [2, 7, 2], onesided=1)
    yield c("dft_complex_inverse_padded", "DFT", {"x": f32(2, 5, 3, 2)}, {"n": i64(8), "axis": i64(1)}, ["x", "n", "axis"], [2, 8, 3, 2], inverse=1)
    yield c("dft_inner_axis_cut", "DFT", {"x": f32(3, 4, 9, 1)}, {"n": i64(6), "axis": i64(-2)}, ["x", "n", "axis"], [3, 4, 6, 2])
    yield c("dft_odd_length", "DFT", {"x": f32(1, 7, 2)}, {}, ["x"], [1, 7, 2])
    hann = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(16) / 16)).astype(np.float32)
    yield c("stft_hann_onesided", "STFT", {"x": f32(2, 64, 1)}, {"step": i64(6), "window": hann}, ["x", "step", "window"], None)
    yield c("stft_complex_frame_length", "STFT", {"x": f32(1, 40, 2)}, {"step": i64(7), "n": i64(10)}, ["x", "step", "", "n"], None, onesided=0)
    yield c(
        "col2im_strides_pads_dilations",
        "Col2Im",
        {"x": f32(2, 3 * 6, 15)},
        {"image": i64([6, 9]), "block": i64([2, 3])},
        ["x", "image", "block"],
        [2, 3, 6, 9],
        strides=[2, 2],
        pads=[1, 0, 1, 2],
        dilations=[2, 1],
    )
    yield c(
        "col2im_3d",
        "Col2Im",
        {"x": f32(1, 2 * 8, 27)},
        {"image": i64([4, 4, 4]), "block": i64([2, 2, 2])},
        ["x", "image", "block"],
        [1, 2, 4, 4, 4],
        pads=[0, 0, 0, 0, 0, 0],
    )

    x = f32(2, 3, 10, 12)
    rois = np.array(
        [[0.5, 1.0, 7.5, 6.0], [2.0, 2.0, 3.0, 3.5], [-3.0, -1.0, 4.0, 20.0], [8.0, 0.0, 11.9, 9.9], [5.0, 5.0, 5.0, 5.0]],
        dtype=np.float32,
    )
    idx = np.array([0, 1, 1, 0, 1], dtype=np.int64)
    cases = []
    for mode in ("avg", "max"):
        for ctm in ("half_pixel", "output_half_pixel"):
            for ratio in (0, 2):
                cases.append(c(
                    f"roialign_{mode}_{ctm}_ratio{ratio}",
                    "RoiAlign",
                    {"x": x, "rois": rois, "idx": idx},
                    {},
                    ["x", "rois", "idx"],
                    [5, 3, 3, 4],
                    mode=mode,
                    coordinate_transformation_mode=ctm,
                    output_height=3,
                    output_width=4,
                    sampling_ratio=ratio,
                    spatial_scale=0.75,
                ))
                # onnxruntime implements RoiAlign up to opset 16.
                cases[-1][3]["opset"] = 16
    yield from cases


def chain_case(name: str, nodes: list, feeds: dict, consts: dict, out_shape, reference: str = "onnxruntime"):
    """Nodes from the graph inputs ``feeds`` and initializers ``consts`` to
    a float output ``Y``, for the storage-only types (8-bit floats, 4-bit
    integers) that numpy cannot hold: they live between the nodes."""
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for k, v in feeds.items()],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(v, k) if isinstance(v, np.ndarray) else v for k, v in consts.items()],
    )
    desc = [{"op": n.op_type, "attributes": {a.name: helper.get_attribute_value(a) for a in n.attribute}} for n in nodes]
    meta = {"op": "+".join(n.op_type for n in nodes), "nodes": desc, "storage_reference": reference}
    return name, graph, feeds, meta, None


def storage_type_cases():
    """Round trips through the 8-bit floats and the 4-bit integers: Cast
    with and without saturation, and QuantizeLinear/DequantizeLinear per
    tensor and per axis, on values that cover rounding ties, subnormals,
    overflow, infinities and NaN."""
    rng = np.random.default_rng(70)
    special = np.array([0.0, -0.0, 1.0625, 1.0626, 464.0, 465.0, 1e6, -1e6, np.inf, -np.inf, np.nan, 2.0**-10, 2.0**-17, 57344.0, 61440.0, -3.3], dtype=np.float32)
    x = np.concatenate([special, (rng.standard_normal(48) * 300).astype(np.float32)]).reshape(4, 16)
    f8 = {
        "e4m3fn": TensorProto.FLOAT8E4M3FN,
        "e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ,
        "e5m2": TensorProto.FLOAT8E5M2,
        "e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ,
    }
    for tname, t in f8.items():
        for sat in (1, 0):
            nodes = [
                helper.make_node("Cast", ["x"], ["c"], to=t, saturate=sat),
                helper.make_node("Cast", ["c"], ["Y"], to=TensorProto.FLOAT),
            ]
            yield chain_case(f"cast_{tname}_saturate{sat}", nodes, {"x": x}, {}, [4, 16], "onnx.reference")
    scale = np.array([0.5, 2.0, 0.03125, 7.0], dtype=np.float32)
    finite = np.where(np.isfinite(x), x, 1.0).astype(np.float32)
    for tname, t in f8.items():
        for sat in (1, 0):
            zero = helper.make_tensor("zp", t, [4], [0, 0, 0, 0])
            nodes = [
                helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["q"], axis=0, saturate=sat),
                helper.make_node("DequantizeLinear", ["q", "scale", "zp"], ["Y"], axis=0),
            ]
            yield chain_case(f"qdq_{tname}_per_axis_saturate{sat}", nodes, {"x": finite}, {"scale": scale, "zp": zero}, [4, 16], "onnx.reference")
    for tname, t, zps in (("int4", TensorProto.INT4, [-3, 0, 2, 7]), ("uint4", TensorProto.UINT4, [8, 0, 15, 3])):
        zero = helper.make_tensor("zp", t, [4], zps)
        nodes = [
            helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["q"], axis=0),
            helper.make_node("DequantizeLinear", ["q", "scale", "zp"], ["Y"], axis=0),
        ]
        yield chain_case(f"qdq_{tname}_per_axis", nodes, {"x": finite}, {"scale": scale, "zp": zero}, [4, 16])
        nodes = [
            helper.make_node("Cast", ["x"], ["c"], to=t),
            helper.make_node("Cast", ["c"], ["Y"], to=TensorProto.FLOAT),
        ]
        # In range and off the ties: onnxruntime wraps out-of-range values
        # and ml_dtypes (onnx's evaluator) truncates, where onnx's own test
        # data (the conformance suite checks it) round to nearest even and
        # clamp; onnxruntime rounds in range.
        lo, hi = (-8, 7) if t == TensorProto.INT4 else (0, 15)
        in_range = (rng.uniform(lo - 0.45, hi + 0.45, (4, 16)).round(1) + 0.05).astype(np.float32)
        yield chain_case(f"cast_{tname}", nodes, {"x": in_range}, {}, [4, 16])
        # A 4-bit initializer with an odd element count (packed, the last
        # byte half used), dequantized.
        w = helper.make_tensor("w", t, [3, 5], list(rng.integers(-8 if t == TensorProto.INT4 else 0, 8 if t == TensorProto.INT4 else 16, 15)))
        nodes = [
            helper.make_node("DequantizeLinear", ["w", "s"], ["d"]),
            helper.make_node("Add", ["d", "x"], ["Y"]),
        ]
        yield chain_case(f"dq_{tname}_odd_initializer", nodes, {"x": rng.standard_normal((3, 5)).astype(np.float32)}, {"w": w, "s": np.array(0.25, dtype=np.float32)}, [3, 5])


def scan_cases():
    """Scan (opset 16) over every attribute: two states, scan inputs along
    axis 1 and (reversed) axis 0, scan outputs stacked along axis 0 and
    (reversed) axis -1, a body initializer and an outer-scope read."""
    rng = np.random.default_rng(80)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    vi = lambda n, shape: helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)  # noqa: E731
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["a", "x1"], ["ax"]),
            helper.make_node("Mul", ["b", "decay"], ["bd"]),
            helper.make_node("Add", ["ax", "x2"], ["a_next"]),
            helper.make_node("Add", ["bd", "outer"], ["b_next"]),
            helper.make_node("Tanh", ["a_next"], ["y1"]),
            helper.make_node("Sub", ["a_next", "x2"], ["y2"]),
        ],
        "body",
        [vi("a", [4]), vi("b", [3]), vi("x1", [4]), vi("x2", [4])],
        [vi("a_next", [4]), vi("b_next", [3]), vi("y1", [4]), vi("y2", [4])],
        [numpy_helper.from_array(np.array(0.9, dtype=np.float32), "decay")],
    )
    steps = 5
    feeds = {"a0": f32(4), "b0": f32(3), "x1": f32(4, steps), "x2": f32(steps, 4)}
    attrs = dict(
        num_scan_inputs=2,
        scan_input_axes=[1, 0],
        scan_input_directions=[0, 1],
        scan_output_axes=[0, -1],
        scan_output_directions=[0, 1],
    )
    node = helper.make_node("Scan", ["a0", "b0", "x1", "x2"], ["a", "b", "ys1", "ys2"], name="scan_node", body=body, **attrs)
    graph = helper.make_graph(
        [node],
        "scan_all_attributes",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in feeds.items()],
        [vi("a", [4]), vi("b", [3]), vi("ys1", [steps, 4]), vi("ys2", [4, steps])],
        [numpy_helper.from_array(np.array([0.5, -1.0, 2.0], dtype=np.float32), "outer")],
    )
    yield "scan_all_attributes", graph, feeds, {"op": "Scan", "attributes": attrs, "opset": 16}, None


def deform_conv_cases():
    """DeformConv (opset 19) with groups, two offset groups, a mask, a
    bias, strides, pads and dilations, offsets reaching outside the image."""
    rng = np.random.default_rng(90)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    n, c, h, w, m, k = 2, 4, 7, 6, 6, 3
    attrs = dict(group=2, offset_group=2, strides=[2, 1], pads=[1, 2, 1, 0], dilations=[1, 2], kernel_shape=[k, k])
    oh = (h + 2 - k) // 2 + 1
    ow = (w + 2 - (2 * (k - 1) + 1)) // 1 + 1
    feeds = {
        "x": f32(n, c, h, w),
        "offset": (f32(n, 2 * 2 * k * k, oh, ow) * 2.5).astype(np.float32),
        "mask": rng.uniform(0, 1, (n, 2 * k * k, oh, ow)).astype(np.float32),
    }
    consts = {"w": f32(m, c // 2, k, k), "b": f32(m)}
    case = single_node_case("deform_conv_groups_mask", "DeformConv", feeds, consts, ["x", "w", "offset", "b", "mask"], [n, m, oh, ow], **attrs)
    case[3]["opset"] = 19
    yield case


def run_ort(path: pathlib.Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


def save(graph, path: pathlib.Path, opset: int = OPSET) -> None:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="trtc export_ops.py")
    model.ir_version = 10
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    cases = []
    for name, graph, feeds, meta, twin in [*recurrent_cases(), *grid_sample_cases(), *spectral_cases(), *storage_type_cases(), *scan_cases(), *deform_conv_cases()]:
        path = OUT / f"{name}.onnx"
        save(graph, path, meta.get("opset", OPSET))
        if "storage_reference" in meta:
            # The storage-type cases run on both onnxruntime and onnx's
            # evaluator (ml_dtypes), which disagree at a few edges:
            # onnxruntime saturates -484.9 to -448 in E4M3FN without
            # saturation and makes 61440 NaN in E5M2, not infinity;
            # ml_dtypes truncates to the 4-bit integers. The reference named
            # is recorded, and the manifest lists the inputs where the other
            # one disagrees.
            ort_outs = run_ort(path, feeds)
            ev_outs = dict(zip(["Y"], ReferenceEvaluator(str(path)).run(None, feeds)))
            outs, other = (ev_outs, ort_outs) if meta["storage_reference"] == "onnx.reference" else (ort_outs, ev_outs)
            differ = ~((outs["Y"] == other["Y"]) | (np.isnan(outs["Y"]) & np.isnan(other["Y"])))
            meta["other_disagrees_at"] = [float(v) for v in feeds["x"].ravel()[differ.ravel()]]
        elif twin is None:
            outs = run_ort(path, feeds)
        else:
            twin_path = pathlib.Path(tempfile.mkdtemp()) / "twin.onnx"
            save(twin, twin_path)
            outs = to_batch_major(run_ort(twin_path, to_time_major(feeds)))
        np.savez(OUT / f"{name}.inputs.npz", **feeds)
        np.savez(OUT / f"{name}.outputs.npz", **outs)
        cases.append({"name": name, **meta})
        print(f"{name}: {', '.join(f'{k} {list(v.shape)}' for k, v in outs.items())}")
    manifest = {
        "generator": "testdata/export_ops.py",
        "versions": {"onnx": onnx.__version__, "onnxruntime": ort.__version__, "numpy": np.__version__},
        "reference": "onnxruntime CPUExecutionProvider, graph_optimization_level=ORT_DISABLE_ALL, 1 thread",
        "opset": OPSET,
        "cases": cases,
    }
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
