"""What the Python package adds to a run, and calibration through a Python
calibrator against the CLI's (issue 16).

1. Per-call overhead: the same engine timed by `trtc bench --json` (the Rust
   runtime: one `ExecutionContext::run` per timed call) and by `ctx.run`
   from Python (dict in, numpy arrays out, GIL released around the run), one
   thread each, in alternating rounds. Overhead = Python median - Rust
   median. Models: a one-layer Relu on float32[1,64] (written with the
   `onnx` package; the run itself costs almost nothing) and
   testdata/models/example_cnn.onnx.
2. Calibration: `trtc build --int8 --calib DIR` against `trtc.build(...,
   int8=True, calibrator=trtc.EntropyCalibrator(batches))` on the same
   batches (resnet18_dynamo, 128 random batches), wall time of each, median of
   the rounds.

Usage (a venv with the package, numpy and onnx; build both in release):
    cargo build --release -p trtc --bin trtc
    MATURIN_PEP517_ARGS="--profile release" pip install ./python numpy onnx
    python benches/python_overhead.py [--trtc target/release/trtc] [--iterations 20000] [--rounds 3]
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
import json
from pathlib import Path

import numpy as np
import trtc

ROOT = Path(__file__).resolve().parent.parent


def relu_model(path):
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "tiny", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)


def rust_median_us(trtc_bin, engine_path, iterations):
    out = subprocess.run(
        [trtc_bin, "bench", str(engine_path), "--device", "cpu", "--threads", "1", "--iterations", str(iterations), "--warmup", "200", "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)["median_ms"] * 1000.0


def python_median_us(engine, iterations):
    ctx = engine.create_context(device="cpu", threads=1)
    rng = np.random.default_rng(0)
    feeds = {b.name: rng.standard_normal(b.shape).astype(b.dtype) for b in engine.inputs}
    for _ in range(200):
        ctx.run(feeds)
    times = []
    clock = time.perf_counter_ns
    for _ in range(iterations):
        t = clock()
        ctx.run(feeds)
        times.append(clock() - t)
    return statistics.median(times) / 1000.0


def overhead(trtc_bin, model, iterations, rounds, work):
    engine = trtc.build(model)
    path = work / (Path(model).stem + ".engine")
    engine.save(path)
    rust, py = [], []
    for _ in range(rounds):
        rust.append(rust_median_us(trtc_bin, path, iterations))
        py.append(python_median_us(engine, iterations))
    r, p = statistics.median(rust), statistics.median(py)
    print(f"| {Path(model).name} | {r:.2f} µs | {p:.2f} µs | {p - r:+.2f} µs |")


def calibration(trtc_bin, rounds, work):
    model = ROOT / "testdata" / "models" / "resnet18_dynamo.onnx"
    shape = trtc.build(model).inputs[0].shape
    rng = np.random.default_rng(1)
    batches = [rng.uniform(-1, 1, size=shape).astype(np.float32) for _ in range(128)]
    calib = work / "calib"
    calib.mkdir(exist_ok=True)
    for i, b in enumerate(batches):
        np.save(calib / f"b{i:03}.npy", b)
    cli, py = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        subprocess.run([trtc_bin, "build", str(model), "-o", str(work / "cli.engine"), "--int8", "--calib", str(calib)], check=True, capture_output=True)
        cli.append(time.perf_counter() - t)
        t = time.perf_counter()
        engine = trtc.build(model, int8=True, calibrator=trtc.EntropyCalibrator(batches), progress=False)
        py.append(time.perf_counter() - t)
    assert engine.serialize() == (work / "cli.engine").read_bytes(), "the two engines differ"
    c, p = statistics.median(cli), statistics.median(py)
    print(f"| resnet18_dynamo, 128 batches of {list(shape)} | {c:.3f} s | {p:.3f} s | {p / c:.2f}× |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trtc", default=str(ROOT / "target" / "release" / "trtc"))
    ap.add_argument("--iterations", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        relu = work / "relu64.onnx"
        relu_model(relu)
        print(f"trtc {trtc.__version__}, Python {sys.version.split()[0]}, numpy {np.__version__}")
        print("| model | Rust `trtc bench` median | Python `ctx.run` median | added by Python |")
        print("|---|---|---|---|")
        overhead(args.trtc, relu, args.iterations, args.rounds, work)
        overhead(args.trtc, ROOT / "testdata" / "models" / "example_cnn.onnx", max(args.iterations // 10, 100), args.rounds, work)
        print()
        print("| calibration | CLI `--calib DIR` | Python calibrator | ratio |")
        print("|---|---|---|---|")
        calibration(args.trtc, args.rounds, work)


if __name__ == "__main__":
    main()
