"""trtc's CPU executor against onnxruntime's CPU provider (issue 20).

For each model: build an FP32 engine for the CPU target, then time
`trtc bench --device cpu --inputs <the model's npz> --threads T` and an
onnxruntime session with `intra_op_num_threads=T` (sequential execution,
all graph optimizations) on the same inputs, alternating the two in rounds so
that drift on the machine hits both alike. Prints each model's medians, the
ratio trtc / onnxruntime, and the geometric mean of the ratios.

Usage (testdata venv, or any venv with onnxruntime and numpy):
    python benches/cpu_vs_onnxruntime.py [--trtc target/release/trtc]
        [--threads 1] [--iterations 20] [--rounds 3] [--filter SUBSTRING]
        [--model PATH.onnx ...]

Models default to every `testdata/models/*_legacy.onnx` with its
`.inputs.npz`, plus the full-size CNNs in `.cache/bench/full/` (from
`benches/export_full_models.py`) when present; a model without inputs gets
seeded random ones, written next to the engine.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / ".cache" / "bench" / "cpu_vs_ort"


def default_models():
    models = sorted((ROOT / "testdata" / "models").glob("*_legacy.onnx"))
    return models + sorted((ROOT / ".cache" / "bench" / "full").glob("*.onnx"))


def inputs_for(model, session):
    npz = model.with_name(model.name.replace(".onnx", ".inputs.npz"))
    if npz.exists():
        with np.load(npz) as z:
            return npz, {k: z[k] for k in z.files}
    rng = np.random.default_rng(0)
    feeds = {}
    for i in session.get_inputs():
        if any(not isinstance(d, int) for d in i.shape):
            sys.exit(f"{model}: input {i.name} has symbolic dims {i.shape} and no inputs npz")
        if i.type != "tensor(float)":
            sys.exit(f"{model}: input {i.name} is {i.type}; give an inputs npz")
        feeds[i.name] = rng.standard_normal(i.shape, dtype=np.float32)
    path = OUT / f"{model.stem}.inputs.npz"
    np.savez(path, **feeds)
    return path, feeds


def time_trtc(trtc, engine, npz, threads, iterations):
    out = subprocess.run(
        [trtc, "bench", str(engine), "--device", "cpu", "--inputs", str(npz), "--threads", str(threads),
         "--iterations", str(iterations), "--warmup", "2", "--json"],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)["median_ms"]


def time_ort(session, feeds, iterations):
    for _ in range(2):
        session.run(None, feeds)
    ms = []
    for _ in range(iterations):
        t = time.perf_counter()
        session.run(None, feeds)
        ms.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ms)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--trtc", default=str(ROOT / "target" / "release" / "trtc"))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--filter", default="")
    p.add_argument("--model", action="append", type=Path)
    a = p.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    models = [m for m in (a.model or default_models()) if a.filter in m.name]
    print(f"onnxruntime {ort.__version__}, {a.threads} thread(s), {a.rounds} rounds x {a.iterations} runs, medians")
    print(f"{'model':<28} {'trtc ms':>9} {'ort ms':>9} {'trtc/ort':>9}")
    ratios = []
    for model in models:
        engine = OUT / f"{model.stem}.engine"
        if not engine.exists() or engine.stat().st_mtime < Path(a.trtc).stat().st_mtime:
            subprocess.run([a.trtc, "build", str(model), "-o", str(engine)], check=True, capture_output=True)
        so = ort.SessionOptions()
        so.intra_op_num_threads = a.threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
        npz, feeds = inputs_for(model, session)
        ours, theirs = [], []
        for _ in range(a.rounds):
            ours.append(time_trtc(a.trtc, engine, npz, a.threads, a.iterations))
            theirs.append(time_ort(session, feeds, a.iterations))
        t, o = statistics.median(ours), statistics.median(theirs)
        ratios.append(t / o)
        print(f"{model.stem:<28} {t:>9.3f} {o:>9.3f} {t / o:>9.2f}", flush=True)
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"geometric mean of trtc/ort over {len(ratios)} models: {geo:.2f}; worst {max(ratios):.2f}")


if __name__ == "__main__":
    main()
