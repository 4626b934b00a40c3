"""Throughput and latency of `trtc serve` (or Triton) measured with
tritonclient, over HTTP (binary tensors), gRPC and gRPC streams
(ModelStreamInfer), at several concurrencies; each client is a
thread with its own tritonclient (tritonclient's async_infer sleeps 10 ms
per submission, so it cannot load a server). Run by benches/serve/run.sh."""

import argparse
import json
import queue
import threading
import time

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

p = argparse.ArgumentParser()
p.add_argument("--http", required=True)
p.add_argument("--grpc", required=True)
p.add_argument("--model", default="cnn")
p.add_argument("--requests", type=int, default=3200, help="requests per (protocol, concurrency)")
p.add_argument("--concurrency", default="1,8,64")
p.add_argument("--protocols", default="http,grpc,stream",
               help="http (binary tensors), grpc (unary ModelInfer), stream (ModelStreamInfer, one request in flight per client)")
p.add_argument("--batch", type=int, default=1, help="rows per request where the model batches (shape -1)")
args = p.parse_args()

meta = httpclient.InferenceServerClient(args.http).get_model_metadata(args.model)
inputs = {t["name"]: np.random.default_rng(0).random([args.batch if d == -1 else d for d in t["shape"]]).astype(np.float32)
          for t in meta["inputs"]}


def client(proto, n, latencies):
    mod = httpclient if proto == "http" else grpcclient
    c = mod.InferenceServerClient(args.http if proto == "http" else args.grpc)
    ins = []
    for k, v in inputs.items():
        i = mod.InferInput(k, list(v.shape), "FP32")
        i.set_data_from_numpy(v)
        ins.append(i)
    outs = [mod.InferRequestedOutput(t["name"]) for t in meta["outputs"]]
    if proto == "stream":
        # One stream per client, one request in flight: the round trip of
        # each request, as for the unary protocols.
        answers = queue.Queue()
        c.start_stream(callback=lambda result, error: answers.put(error))

        def infer():
            c.async_stream_infer(args.model, ins, outputs=outs)
            error = answers.get(timeout=60)
            if error is not None:
                raise error
    else:
        def infer():
            c.infer(args.model, ins, outputs=outs)
    for _ in range(3):
        infer()
    mine = []
    for _ in range(n):
        t = time.perf_counter()
        infer()
        mine.append(time.perf_counter() - t)
    latencies.extend(mine)
    if proto == "stream":
        c.stop_stream()
    c.close()


rows = []
for proto in args.protocols.split(","):
    for conc in [int(x) for x in args.concurrency.split(",")]:
        per = max(1, args.requests // conc)
        lat = []
        threads = [threading.Thread(target=client, args=(proto, per, lat)) for _ in range(conc)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - start
        a = np.array(lat) * 1e3
        rows.append({"model": args.model, "protocol": proto, "concurrency": conc, "requests": len(lat), "throughput_rps": len(lat) / wall,
                     "p50_ms": float(np.percentile(a, 50)), "p99_ms": float(np.percentile(a, 99))})
        r = rows[-1]
        print(f"{args.model} {proto:6} c={conc:<3} {r['requests']} requests: {r['throughput_rps']:.0f} req/s, p50 {r['p50_ms']:.3f} ms, p99 {r['p99_ms']:.3f} ms")
# The server's own account (Triton's statistics extension) over all of this
# model's requests above: where a request's time went inside the server.
stats = httpclient.InferenceServerClient(args.http).get_inference_statistics(args.model)["model_stats"]
for st in stats:
    inf = st["inference_stats"]
    n = max(1, inf["success"]["count"])
    mean = {k: inf[k]["ns"] / n / 1e3 for k in ["success", "queue", "compute_input", "compute_infer", "compute_output"]}
    print(f"{args.model} server side, mean per request over {inf['success']['count']} requests in {st['execution_count']} executions: "
          f"request {mean['success']:.1f} us = queue {mean['queue']:.1f} + input {mean['compute_input']:.1f} + "
          f"infer {mean['compute_infer']:.1f} + output {mean['compute_output']:.1f} + the rest")
print(json.dumps(rows))
