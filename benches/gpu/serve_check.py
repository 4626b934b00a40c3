"""trtc serve with GPU instances (run by benches/gpu/run.sh on the device,
which has no tritonclient: this client speaks the v2 HTTP protocol with the
standard library, binary tensors both ways, as tritonclient does).

Serves example_cnn built for this GPU with two KIND_GPU instances, checks
readiness and the model configuration, sends requests from 16 threads and
compares every answer with the CPU executor's output for the same input
(saved by `trtc run --device cpu`), then prints throughput, latency and the
execution count from /metrics. Then the dynamic batcher on the GPU:
testdata/serve/batch_cnn built once with a batch profile (1 to 32), served
as `batched` (the GPU instances, dynamic_batching) and as `reference` (one
CPU instance, no batching); requests of 1 to 3 rows from 16 threads go to
both, every answer of `batched` must equal `reference`'s, and the metrics
must show fewer executions than inferences. Prints PASS/FAIL lines and a
summary.

    python3 benches/gpu/serve_check.py --trtc .dev/bin/trtc
"""

import argparse
import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--trtc", required=True)
p.add_argument("--requests", type=int, default=2000)
p.add_argument("--threads", type=int, default=16)
p.add_argument("--target", default="cuda", help="cpu (with --kind KIND_CPU) checks the script without a GPU")
p.add_argument("--kind", default="KIND_GPU")
args = p.parse_args()
failures = 0


def check(name, ok, detail=""):
    global failures
    failures += 0 if ok else 1
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + str(detail) if detail else ''}", flush=True)


root = tempfile.mkdtemp(prefix="trtc-serve-gpu-")
repo = os.path.join(root, "models")
os.makedirs(os.path.join(repo, "cnn", "1"))
engine = os.path.join(repo, "cnn", "1", "model.engine")
build = [args.trtc, "build", "testdata/models/example_cnn.onnx", "-o", engine, "--target", args.target]
subprocess.run(build + (["--opt-level", "0"] if args.target != "cpu" else []), check=True, capture_output=True, timeout=120)
with open(os.path.join(repo, "cnn", "config.pbtxt"), "w") as f:
    gpus = " gpus: [ 0 ]" if args.kind == "KIND_GPU" else ""
    f.write(f"instance_group [ {{ count: 2 kind: {args.kind}{gpus} }} ]\n")
# The batch-profile engine, served batched (GPU instances) and as the CPU
# reference.
for name in ("batched", "reference"):
    os.makedirs(os.path.join(repo, name, "1"))
batched = os.path.join(repo, "batched", "1", "model.engine")
profile = ["--min-shapes", "x:1x3x16x16", "--opt-shapes", "x:8x3x16x16", "--max-shapes", "x:32x3x16x16"]
subprocess.run([args.trtc, "build", "testdata/serve/batch_cnn.onnx", "-o", batched, "--target", args.target] + profile
               + (["--opt-level", "0"] if args.target != "cpu" else []), check=True, capture_output=True, timeout=120)
shutil.copy(batched, os.path.join(repo, "reference", "1", "model.engine"))
with open(os.path.join(repo, "batched", "config.pbtxt"), "w") as f:
    f.write(f"instance_group [ {{ count: 2 kind: {args.kind}{gpus} }} ]\n"
            "dynamic_batching { max_queue_delay_microseconds: 2000 }\n")
with open(os.path.join(repo, "reference", "config.pbtxt"), "w") as f:
    f.write("instance_group [ { count: 1 kind: KIND_CPU } ]\n")
inputs = "testdata/models/example_cnn.inputs.npz"
ref = os.path.join(root, "cpu.npz")
subprocess.run([args.trtc, "run", engine, "--inputs", inputs, "--device", "cpu", "--save-outputs", ref],
               check=True, capture_output=True, timeout=60)
x = np.load(inputs)["input"].astype(np.float32)
want = np.load(ref)["logits"]

serve = subprocess.Popen([args.trtc, "serve", "--model-repository", repo, "--http-port", "0", "--grpc-port", "0",
                          "--metrics-port", "0"], stderr=subprocess.PIPE, text=True)
addr = metrics = None
deadline = time.time() + 60
while time.time() < deadline and (addr is None or metrics is None):
    line = serve.stderr.readline()
    if not line:
        break
    print("[server]", line.rstrip())
    if line.startswith("trtc serve: HTTP on http://"):
        addr = line.strip().split("http://", 1)[1]
    if line.startswith("trtc serve: metrics on http://"):
        metrics = line.strip().split("http://", 1)[1].rsplit("/metrics", 1)[0]
threading.Thread(target=lambda: [print("[server]", l.rstrip()) for l in serve.stderr], daemon=True).start()
check(f"trtc serve started ({args.kind} instances)", addr is not None and metrics is not None)
if addr is None:
    serve.kill()
    sys.exit(1)
host, port = addr.rsplit(":", 1)


def request(conn, method, path, body=None, headers=None):
    conn.request(method, path, body=body, headers=headers or {})
    r = conn.getresponse()
    return r.status, dict(r.getheaders()), r.read()


def infer(conn, arr):
    header = json.dumps({
        "inputs": [{"name": "input", "datatype": "FP32", "shape": list(arr.shape),
                    "parameters": {"binary_data_size": arr.nbytes}}],
        "outputs": [{"name": "logits", "parameters": {"binary_data": True}}],
    }).encode()
    status, headers, body = request(conn, "POST", "/v2/models/cnn/infer", header + arr.tobytes(),
                                    {"Inference-Header-Content-Length": str(len(header)),
                                     "Content-Type": "application/octet-stream"})
    if status != 200:
        raise RuntimeError(f"status {status}: {body[:200]!r}")
    n = int({k.lower(): v for k, v in headers.items()}["inference-header-content-length"])
    meta = json.loads(body[:n])
    out = meta["outputs"][0]
    return np.frombuffer(body[n:n + out["parameters"]["binary_data_size"]], np.float32).reshape(out["shape"])


conn = http.client.HTTPConnection(host, int(port), timeout=60)
status, _, body = request(conn, "GET", "/v2/health/ready")
check("server ready", status == 200, status)
status, _, body = request(conn, "GET", "/v2/models/cnn/config")
cfg = json.loads(body)
check(f"instances of {args.kind}", [g["kind"] for g in cfg.get("instance_group", [])] == [args.kind], cfg.get("instance_group"))
got = infer(conn, x)
err = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))
check("one request, against the CPU executor", err <= 1e-3, f"rel {err:.2e}")
conn.close()

latencies, errors = [], []
per = args.requests // args.threads


def client():
    c = http.client.HTTPConnection(host, int(port), timeout=60)
    mine = []
    for _ in range(per):
        t = time.perf_counter()
        try:
            y = infer(c, x)
            if float(np.max(np.abs(y - want)) / max(np.max(np.abs(want)), 1e-30)) > 1e-3:
                errors.append("wrong answer")
        except Exception as e:  # noqa: BLE001 (counted and printed below)
            errors.append(repr(e))
        mine.append(time.perf_counter() - t)
    latencies.extend(mine)
    c.close()


threads = [threading.Thread(target=client) for _ in range(args.threads)]
start = time.perf_counter()
for t in threads:
    t.start()
for t in threads:
    t.join()
wall = time.perf_counter() - start
a = np.array(latencies) * 1e3
check(f"{len(latencies)} requests from {args.threads} threads, all correct", not errors and len(latencies) == per * args.threads,
      errors[:3])
print(f"throughput {len(latencies) / wall:.0f} req/s, p50 {np.percentile(a, 50):.3f} ms, p99 {np.percentile(a, 99):.3f} ms")
mc = http.client.HTTPConnection(*metrics.rsplit(":", 1), timeout=10)
_, _, text = request(mc, "GET", "/metrics")
for line in text.decode().splitlines():
    if line.startswith(("nv_inference_count{", "nv_inference_exec_count{", "nv_inference_request_success{")):
        print(line)


def infer_model(conn, model, arr):
    header = json.dumps({
        "inputs": [{"name": "x", "datatype": "FP32", "shape": list(arr.shape),
                    "parameters": {"binary_data_size": arr.nbytes}}],
        "outputs": [{"name": "probs", "parameters": {"binary_data": True}}],
    }).encode()
    status, headers, body = request(conn, "POST", f"/v2/models/{model}/infer", header + arr.tobytes(),
                                    {"Inference-Header-Content-Length": str(len(header)),
                                     "Content-Type": "application/octet-stream"})
    if status != 200:
        raise RuntimeError(f"{model}: status {status}: {body[:200]!r}")
    n = int({k.lower(): v for k, v in headers.items()}["inference-header-content-length"])
    out = json.loads(body[:n])["outputs"][0]
    return np.frombuffer(body[n:n + out["parameters"]["binary_data_size"]], np.float32).reshape(out["shape"])


batch_errors, rows_sent = [], []


def batch_client(seed):
    rng = np.random.default_rng(seed)
    c = http.client.HTTPConnection(host, int(port), timeout=60)
    for _ in range(25):
        rows = int(rng.integers(1, 4))
        xb = rng.standard_normal((rows, 3, 16, 16)).astype(np.float32)
        try:
            got, ref_out = infer_model(c, "batched", xb), infer_model(c, "reference", xb)
            if got.shape != ref_out.shape or float(np.max(np.abs(got - ref_out))) > 1e-3:
                batch_errors.append(f"rows {rows}: max diff {float(np.max(np.abs(got - ref_out))):.2e}")
            rows_sent.append(rows)
        except Exception as e:  # noqa: BLE001 (counted and printed below)
            batch_errors.append(repr(e))
    c.close()


threads = [threading.Thread(target=batch_client, args=(k,)) for k in range(args.threads)]
start = time.perf_counter()
for t in threads:
    t.start()
for t in threads:
    t.join()
check(f"batch-profile engine, dynamic batcher on {args.kind}: {len(rows_sent)} requests of 1-3 rows equal the CPU reference",
      not batch_errors and len(rows_sent) == 25 * args.threads, batch_errors[:3])
_, _, text = request(mc, "GET", "/metrics")
counts = {}
for line in text.decode().splitlines():
    for key in ("nv_inference_count", "nv_inference_exec_count"):
        if line.startswith(key + "{") and 'model="batched"' in line:
            counts[key] = float(line.rsplit(" ", 1)[1])
print(f"batched: {counts}, {time.perf_counter() - start:.1f} s")
check("the batcher ran requests together (exec count below inference count)",
      counts.get("nv_inference_exec_count", 1e9) < counts.get("nv_inference_count", 0), counts)
serve.terminate()
try:
    code = serve.wait(timeout=30)
except subprocess.TimeoutExpired:
    serve.kill()
    code = None
check("SIGTERM: exit 0", code == 0, code)
shutil.rmtree(root, ignore_errors=True)
print(f"serve checks: {failures} failed")
sys.exit(1 if failures else 0)
