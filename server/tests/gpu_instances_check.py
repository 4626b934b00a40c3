"""Checks trtc serve's GPU instances against its CPU instance (see
gpu_instances.rs): many concurrent requests of 1 to 4 rows, over HTTP
(binary tensors) and gRPC, to model `gpu` (KIND_GPU, dynamic batching) and
model `cpu` (KIND_CPU, the same engine); every answer's shape and values
must agree, and the metrics must show the GPU instances batching."""
import argparse
import sys
import threading

import numpy as np
import tritonclient.grpc as G
import tritonclient.http as H

p = argparse.ArgumentParser()
p.add_argument("--http", required=True)
p.add_argument("--grpc", required=True)
p.add_argument("--metrics", required=True)
p.add_argument("--requests", type=int, default=96)
args = p.parse_args()

rng = np.random.default_rng(1)
xs = [rng.random((int(rng.integers(1, 5)), 3, 16, 16)).astype(np.float32) for _ in range(args.requests)]
answers, errors = {}, []


def run(i):
    x = xs[i]
    try:
        if i % 2:
            c = H.InferenceServerClient(args.http)
            name = c.get_model_metadata("gpu")["outputs"][0]["name"]
            inp = H.InferInput("x", list(x.shape), "FP32")
            inp.set_data_from_numpy(x, binary_data=True)
            answers[i] = (c.infer("gpu", [inp]).as_numpy(name), c.infer("cpu", [inp]).as_numpy(name))
        else:
            c = G.InferenceServerClient(args.grpc)
            name = c.get_model_metadata("gpu").outputs[0].name
            inp = G.InferInput("x", list(x.shape), "FP32")
            inp.set_data_from_numpy(x)
            answers[i] = (c.infer("gpu", [inp]).as_numpy(name), c.infer("cpu", [inp]).as_numpy(name))
    except Exception as e:  # reported below, with the request
        errors.append(f"request {i} ({x.shape[0]} rows): {e}")


threads = [threading.Thread(target=run, args=(i,)) for i in range(len(xs))]
for t in threads:
    t.start()
for t in threads:
    t.join()
if errors:
    sys.exit("\n".join(errors[:5]))
bad = [i for i, (g, r) in answers.items() if g.shape != r.shape or g.shape[0] != xs[i].shape[0]]
if bad:
    sys.exit(f"requests {bad[:5]}: GPU answer shapes {[answers[i][0].shape for i in bad[:5]]}, rows sent {[xs[i].shape[0] for i in bad[:5]]}")
worst = max(float(np.abs(g - r).max() / max(np.abs(r).max(), 1e-30)) for g, r in answers.values())
import urllib.request

metrics = urllib.request.urlopen(f"http://{args.metrics}/metrics").read().decode()
value = {l.split(" ")[0]: float(l.split(" ")[1]) for l in metrics.splitlines() if l.startswith("nv_inference_")}
rows = value['nv_inference_count{model="gpu",version="1"}']
execs = value['nv_inference_exec_count{model="gpu",version="1"}']
print(f"{len(answers)} requests ({int(rows)} rows) over HTTP and gRPC: GPU instances against the CPU instance, "
      f"worst {worst:.2e} of scale; {int(execs)} GPU executions")
if worst > 3e-3:
    sys.exit(f"the GPU instances' answers differ from the CPU instance's by {worst:.2e} of scale")
if rows != sum(x.shape[0] for x in xs) or execs >= len(xs):
    sys.exit(f"expected {sum(x.shape[0] for x in xs)} rows in fewer than {len(xs)} executions (batched)")
