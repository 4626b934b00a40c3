"""Writes a Triton Inference Server model repository that serves trtc
engines through benches/serve/triton_model.py (Python backend): for each
`--model NAME=ENGINE`, DIR/NAME/config.pbtxt (bindings read from the
engine; max_batch_size from a profile whose first axis varies, as `trtc
serve` derives it) and DIR/NAME/1/model.py. Run by benches/serve/run.sh."""

import argparse
import os
import sysconfig

import trtc

TYPES = {"f32": "TYPE_FP32", "f16": "TYPE_FP16", "bf16": "TYPE_BF16", "f64": "TYPE_FP64", "i64": "TYPE_INT64",
         "i32": "TYPE_INT32", "i16": "TYPE_INT16", "i8": "TYPE_INT8", "u8": "TYPE_UINT8", "bool": "TYPE_BOOL"}

p = argparse.ArgumentParser()
p.add_argument("--out", required=True)
p.add_argument("--model", action="append", required=True, metavar="NAME=ENGINE")
p.add_argument("--instances", type=int, default=2)
p.add_argument("--batched", action="append", default=[], metavar="NAME",
               help="give NAME dynamic_batching { max_queue_delay_microseconds: 500 }, as run.sh does for trtc serve")
args = p.parse_args()

here = os.path.dirname(os.path.abspath(__file__))
for spec in args.model:
    name, engine_path = spec.split("=", 1)
    engine = trtc.Engine.load(engine_path)
    bindings = list(engine.inputs) + list(engine.outputs)
    max_batch = 0
    if all(b.shape and b.shape[0] == -1 for b in bindings):
        max_batch = min(b.max_shape[0] for b in engine.inputs)

    def tensor(b):
        dims = list(b.shape[1:] if max_batch else b.shape)
        if b.element_type not in TYPES:
            raise SystemExit(f"{engine_path}: binding {b.name} is {b.element_type}, which this script does not map")
        return f'{{ name: "{b.name}" data_type: {TYPES[b.element_type]} dims: {dims} }}'

    lines = [f'name: "{name}"', 'backend: "python"', f"max_batch_size: {max_batch}",
             "input [ " + ", ".join(tensor(b) for b in engine.inputs) + " ]",
             "output [ " + ", ".join(tensor(b) for b in engine.outputs) + " ]",
             f"instance_group {{ count: {args.instances} kind: KIND_CPU }}",
             f'parameters {{ key: "engine" value: {{ string_value: "{os.path.abspath(engine_path)}" }} }}']
    if name in args.batched:
        lines.append("dynamic_batching { max_queue_delay_microseconds: 500 }")
    os.makedirs(os.path.join(args.out, name, "1"), exist_ok=True)
    with open(os.path.join(args.out, name, "config.pbtxt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    # The Python backend's stub embeds the base interpreter and does not pass
    # PYTHONPATH on: the model finds numpy and trtc in this venv explicitly.
    with open(os.path.join(here, "triton_model.py")) as f:
        source = f.read()
    with open(os.path.join(args.out, name, "1", "model.py"), "w") as f:
        f.write(f"import sys\nsys.path.insert(0, {sysconfig.get_paths()['purelib']!r})\n" + source)
