"""Checks `trtc serve` with Triton's own Python client, as a user would talk
to it. Run by server/tests/tritonclient.rs, which builds the repository
(models cnn v1/v2, types v3, slow v1, broken, missing), the reference
inputs and outputs (the CPU executor's, in --refs) and starts the server.

Every check prints one line; the script exits 1 if any failed. The last
check sends SIGTERM to the server with requests in flight."""

import argparse
import gzip
import http.client
import json
import os
import queue
import signal
import socket
import sys
import threading
import time

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

parser = argparse.ArgumentParser()
parser.add_argument("--http", required=True)
parser.add_argument("--grpc", required=True)
parser.add_argument("--metrics", required=True)
parser.add_argument("--refs", required=True)
parser.add_argument("--server-pid", type=int, required=True)
parser.add_argument("--max-input-size", type=int, required=True)
args = parser.parse_args()

passed, failed = 0, 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok    {name}")
    else:
        failed += 1
        print(f"FAIL  {name}: {detail}")


def refs(tag):
    with np.load(os.path.join(args.refs, f"{tag}.inputs.npz")) as i, np.load(os.path.join(args.refs, f"{tag}.outputs.npz")) as o:
        return {k: i[k] for k in i.files}, {k: o[k] for k in o.files}


def raises(fn, status=None, needle=""):
    """The InferenceServerException fn raises, checked for status and text."""
    try:
        fn()
    except InferenceServerException as e:
        good = (status is None or e.status() == str(status)) and needle in e.message()
        return good, f"status {e.status()}: {e.message()}"
    return False, "no error"


client = httpclient.InferenceServerClient(url=args.http)

# Health and readiness: strict readiness is false while 'broken' and
# 'missing' fail to load; the others serve.
check("server live", client.is_server_live())
check("server not ready (some models failed to load)", not client.is_server_ready())
check("cnn ready", client.is_model_ready("cnn"))
check("cnn version 1 ready", client.is_model_ready("cnn", "1"))
check("cnn version 2 ready", client.is_model_ready("cnn", "2"))
check("cnn version 7 not ready", not client.is_model_ready("cnn", "7"))
check("types ready (no config.pbtxt)", client.is_model_ready("types"))
check("broken not ready", not client.is_model_ready("broken"))
check("missing not ready", not client.is_model_ready("missing"))
check("unknown model not ready", not client.is_model_ready("nope"))

meta = client.get_server_metadata()
check("server metadata", meta["name"] == "trtc" and "binary_tensor_data" in meta["extensions"], meta)

index = {(m["name"], m.get("version")): m for m in client.get_model_repository_index()}
b = index.get(("broken", None), {})
check("index: broken is UNAVAILABLE with the field named",
      b.get("state") == "UNAVAILABLE" and "max_batch_size" in b.get("reason", ""), b)
mi = index.get(("missing", "1"), {})
check("index: missing version 1 is UNAVAILABLE", mi.get("state") == "UNAVAILABLE" and "model.engine" in mi.get("reason", ""), mi)
g = index.get(("gpu", "1"), {})
if g.get("state") == "READY":
    check("index: gpu (KIND_GPU) ready on this machine's GPU", True)
else:
    check("index: gpu (KIND_GPU) unavailable without a GPU, with the reason",
          g.get("state") == "UNAVAILABLE" and "KIND_GPU" in g.get("reason", ""), g)
check("index: cnn versions ready", index.get(("cnn", "1"), {}).get("state") == "READY" and index.get(("cnn", "2"), {}).get("state") == "READY", index)

# Metadata and configuration.
cnn_in, cnn_out = refs("cnn_1")
md = client.get_model_metadata("cnn")
check("cnn metadata versions", md["versions"] == ["1", "2"], md)
check("cnn metadata inputs",
      [(t["name"], t["datatype"], t["shape"]) for t in md["inputs"]]
      == [(k, np_to_triton_dtype(v.dtype), list(v.shape)) for k, v in cnn_in.items()], md)
md1 = client.get_model_metadata("cnn", "1")
check("cnn version 1 metadata", md1["versions"] == ["1"], md1)
ty_in, ty_out = refs("types_3")
mt = client.get_model_metadata("types")
check("types metadata datatypes", [t["datatype"] for t in mt["inputs"]] == ["FP16", "INT64", "BOOL"]
      and [t["datatype"] for t in mt["outputs"]] == ["FP16", "INT64", "BOOL"], mt)
cfg = client.get_model_config("cnn")
check("cnn config", cfg["max_batch_size"] == 0 and cfg["instance_group"][0]["count"] == 2
      and cfg["instance_group"][0]["kind"] == "KIND_CPU" and [t["name"] for t in cfg["input"]] == list(cnn_in), cfg)
cfg = client.get_model_config("types")
check("types config completed from the engine", [t["data_type"] for t in cfg["input"]] == ["TYPE_FP16", "TYPE_INT64", "TYPE_BOOL"], cfg)
ok, detail = raises(lambda: client.get_model_metadata("nope"), 404, "unknown model")
check("metadata of an unknown model is 404", ok, detail)


def infer(model, inputs_np, version="", binary_in=True, outputs=None, binary_out=True, request_id="", compression=None):
    ins = []
    for k, v in inputs_np.items():
        i = httpclient.InferInput(k, list(v.shape), np_to_triton_dtype(v.dtype))
        i.set_data_from_numpy(v, binary_data=binary_in)
        ins.append(i)
    outs = None if outputs is None else [httpclient.InferRequestedOutput(n, binary_data=binary_out) for n in outputs]
    return client.infer(model, ins, model_version=version, outputs=outs, request_id=request_id,
                        request_compression_algorithm=compression, response_compression_algorithm=compression)


def same(result, expected, names):
    for n in names:
        got = result.as_numpy(n)
        if got is None or got.dtype != expected[n].dtype or not np.array_equal(got, expected[n]):
            return False, f"{n}: got {got!r}, expected {expected[n]!r}"
    return True, ""


# Inference, each answer against the CPU executor's output.
for version in ["1", "2"]:
    i, o = refs(f"cnn_{version}")
    for binary_in in [True, False]:
        for binary_out in [True, False]:
            r = infer("cnn", i, version, binary_in, list(o), binary_out)
            ok, detail = same(r, o, o)
            check(f"cnn v{version} infer, binary in {binary_in}, binary out {binary_out}", ok, detail)
r = infer("cnn", cnn_in, request_id="req-42")
check("id echoed, latest version answers", r.get_response().get("id") == "req-42" and r.get_response()["model_version"] == "2",
      r.get_response())
for binary_in in [True, False]:
    for binary_out in [True, False]:
        r = infer("types", ty_in, "", binary_in, list(ty_out), binary_out)
        ok, detail = same(r, ty_out, ty_out)
        check(f"types FP16/INT64/BOOL, binary in {binary_in}, out {binary_out}", ok, detail)
for compression in ["gzip", "deflate"]:
    for binary in [True, False]:
        r = infer("types", ty_in, "3", binary, list(ty_out), binary, compression=compression)
        ok, detail = same(r, ty_out, ty_out)
        check(f"{compression} request and response, binary {binary}", ok, detail)
r = infer("types", ty_in, "3", True, ["not_c"], True)
check("requested output subset", r.as_numpy("a2") is None and np.array_equal(r.as_numpy("not_c"), ty_out["not_c"]),
      r.get_response())
r = infer("types", ty_in, "3", True, None)
ok, detail = same(r, ty_out, ty_out)
check("all outputs when none are requested", ok, detail)

# Errors the client can make.
wrong = {k: v.astype(np.float64) for k, v in cnn_in.items()}
for name, fn, status, needle in [
    ("unknown model", lambda: infer("nope", cnn_in), 404, "unknown model"),
    ("unknown version", lambda: infer("cnn", cnn_in, "9"), 404, "no version 9"),
    ("model that failed to load", lambda: infer("broken", cnn_in), 503, "not available"),
    ("wrong datatype", lambda: infer("cnn", wrong), 400, "FP64 does not match the model's FP32"),
    ("wrong shape", lambda: infer("cnn", {k: v.reshape(-1) for k, v in cnn_in.items()}), 400, "shape"),
    ("unknown input", lambda: infer("cnn", {"bogus": list(cnn_in.values())[0]}), 400, "unknown input 'bogus'"),
    ("missing input", lambda: infer("types", {"a": ty_in["a"]}), 400, "missing input 'b'"),
    ("unknown output", lambda: infer("cnn", cnn_in, outputs=["bogus"]), 400, "unknown output 'bogus'"),
]:
    ok, detail = raises(fn, status, needle)
    check(f"error: {name}", ok, detail)


# The same over gRPC: tritonclient.grpc sends raw_input_contents and reads
# raw_output_contents.
gclient = grpcclient.InferenceServerClient(url=args.grpc)
check("grpc: server live", gclient.is_server_live())
check("grpc: server not ready (some models failed to load)", not gclient.is_server_ready())
check("grpc: cnn version 2 ready", gclient.is_model_ready("cnn", "2"))
check("grpc: broken not ready", not gclient.is_model_ready("broken"))
gm = gclient.get_server_metadata(as_json=True)
check("grpc: server metadata", gm.get("name") == "trtc" and "binary_tensor_data" in gm.get("extensions", []), gm)
gmd = gclient.get_model_metadata("types", as_json=True)
check("grpc: model metadata", gmd.get("versions") == ["3"] and [t["datatype"] for t in gmd["inputs"]] == ["FP16", "INT64", "BOOL"], gmd)
gcfg = gclient.get_model_config("cnn", as_json=True).get("config", {})
check("grpc: model config", gcfg.get("name") == "cnn" and gcfg.get("instance_group", [{}])[0].get("count") == 2
      and gcfg["instance_group"][0].get("kind") == "KIND_CPU" and [t["name"] for t in gcfg.get("input", [])] == list(cnn_in), gcfg)
gidx = {(m["name"], m.get("version", "")): m for m in gclient.get_model_repository_index(as_json=True).get("models", [])}
check("grpc: repository index", gidx.get(("broken", ""), {}).get("state") == "UNAVAILABLE"
      and gidx.get(("cnn", "1"), {}).get("state") == "READY", gidx)


def ginfer(model, inputs_np, version="", outputs=None, request_id=""):
    ins = []
    for k, v in inputs_np.items():
        i = grpcclient.InferInput(k, list(v.shape), np_to_triton_dtype(v.dtype))
        i.set_data_from_numpy(v)
        ins.append(i)
    outs = None if outputs is None else [grpcclient.InferRequestedOutput(n) for n in outputs]
    return gclient.infer(model, ins, model_version=version, outputs=outs, request_id=request_id)


for model, version in [("cnn", "1"), ("cnn", "2"), ("types", "3"), ("slow", "1")]:
    i, o = refs(f"{model}_{version}")
    ok, detail = same(ginfer(model, i, version), o, o)
    check(f"grpc: {model} v{version} infer", ok, detail)
# An output requested twice is answered once, as Triton does.
r = infer("types", ty_in, outputs=["b2", "b2"])
outs = [o["name"] for o in r.get_response()["outputs"]]
check("an output requested twice is answered once (HTTP)", outs == ["b2"] and np.array_equal(r.as_numpy("b2"), ty_out["b2"]), outs)
r = ginfer("types", ty_in, outputs=["b2", "b2"])
outs = [o.name for o in r.get_response().outputs]
check("an output requested twice is answered once (gRPC)", outs == ["b2"] and np.array_equal(r.as_numpy("b2"), ty_out["b2"]), outs)
r = ginfer("types", ty_in, outputs=["b2"], request_id="g-7")
check("grpc: requested output subset and id", r.as_numpy("a2") is None and np.array_equal(r.as_numpy("b2"), ty_out["b2"])
      and r.get_response().id == "g-7", r.get_response())


def graises(fn, code, needle=""):
    try:
        fn()
    except InferenceServerException as e:
        return (code in str(e.status())) and needle in e.message(), f"{e.status()}: {e.message()}"
    return False, "no error"


for name, fn, code, needle in [
    ("unknown model", lambda: ginfer("nope", cnn_in), "NOT_FOUND", "unknown model"),
    ("unknown version", lambda: ginfer("cnn", cnn_in, "9"), "NOT_FOUND", "no version 9"),
    ("model that failed to load", lambda: ginfer("broken", cnn_in), "UNAVAILABLE", "not available"),
    ("wrong datatype", lambda: ginfer("cnn", wrong), "INVALID_ARGUMENT", "FP64 does not match"),
    ("wrong shape", lambda: ginfer("cnn", {k: v.reshape(-1) for k, v in cnn_in.items()}), "INVALID_ARGUMENT", "shape"),
    ("missing input", lambda: ginfer("types", {"a": ty_in["a"]}), "INVALID_ARGUMENT", "missing input 'b'"),
    ("unknown output", lambda: ginfer("cnn", cnn_in, outputs=["bogus"]), "INVALID_ARGUMENT", "unknown output 'bogus'"),
    ("message over the size limit", lambda: ginfer("slow", {"x": np.zeros((1024, 1024), np.float32)}), "OUT_OF_RANGE", "too large"),
    ("an RPC trtc does not serve", lambda: gclient.load_model("cnn"), "UNIMPLEMENTED", ""),
]:
    ok, detail = graises(fn, code, needle)
    check(f"grpc error: {name}", ok, detail)

# The streaming API (ModelStreamInfer): every request answered once, matched
# by id (answers may come in any order); an error is delivered to the
# callback and the stream goes on.
answers = queue.Queue()
gclient.start_stream(callback=lambda result, error: answers.put((result, error)))
streamed = {}
for k in range(12):
    model, version = [("cnn", "1"), ("cnn", "2"), ("types", "3")][k % 3]
    i, o = refs(f"{model}_{version}")
    ins = []
    for name, v in i.items():
        t = grpcclient.InferInput(name, list(v.shape), np_to_triton_dtype(v.dtype))
        t.set_data_from_numpy(v)
        ins.append(t)
    gclient.async_stream_infer(model, ins, model_version=version, request_id=f"s{k}")
    streamed[f"s{k}"] = o
    if k == 5:
        gclient.async_stream_infer("nope", ins, request_id="s-bad")
got, errors = {}, []
for _ in range(13):
    try:
        result, error = answers.get(timeout=60)
    except queue.Empty:
        break
    if error is not None:
        errors.append(error.message())
    else:
        got[result.get_response().id] = result
gclient.stop_stream()
bad = [k for k, o in streamed.items() if k not in got or not same(got[k], o, o)[0]]
check(f"grpc stream: {len(got)} of 12 requests answered correctly, matched by id", not bad and len(got) == 12, bad)
check("grpc stream: an unknown model's error reaches the callback, the stream goes on",
      len(errors) == 1 and "unknown model 'nope'" in errors[0], errors)
gclient.close()


# Malformed traffic on raw connections: 4xx, and the server stays up.
host, port = args.http.rsplit(":", 1)


def raw(method, path, body=b"", headers=None):
    c = http.client.HTTPConnection(host, int(port), timeout=30)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def json_error(status, data, expect_status):
    try:
        return status == expect_status and "error" in json.loads(data)
    except Exception:
        return False


x = list(cnn_in.values())[0]
xname = list(cnn_in)[0]
good_head = json.dumps({"inputs": [{"name": xname, "shape": list(x.shape), "datatype": "FP32",
                                    "parameters": {"binary_data_size": x.nbytes}}]}).encode()
for name, body, headers, expect in [
    ("not JSON", b"{nope", {}, 400),
    ("deep JSON", b"[" * 100000 + b"]" * 100000, {}, 400),
    ("JSON of the wrong shape", b'{"inputs": 7}', {}, 400),
    ("header length beyond the body", good_head, {"Inference-Header-Content-Length": str(len(good_head) + 10)}, 400),
    ("header length not a number", good_head, {"Inference-Header-Content-Length": "12x"}, 400),
    ("binary data shorter than binary_data_size", good_head + x.tobytes()[:-4],
     {"Inference-Header-Content-Length": str(len(good_head))}, 400),
    ("binary data longer than declared", good_head + x.tobytes() + b"1234",
     {"Inference-Header-Content-Length": str(len(good_head))}, 400),
    ("JSON data count disagrees with shape",
     json.dumps({"inputs": [{"name": xname, "shape": list(x.shape), "datatype": "FP32", "data": [1.0, 2.0]}]}).encode(), {}, 400),
    ("huge declared shape", json.dumps({"inputs": [{"name": xname, "shape": [2**62, 2**62], "datatype": "FP32", "data": []}]}).encode(), {}, 400),
    ("negative binary_data_size", json.dumps({"inputs": [{"name": xname, "shape": list(x.shape), "datatype": "FP32",
                                                         "parameters": {"binary_data_size": -1}}]}).encode(), {}, 400),
    ("BYTES input", json.dumps({"inputs": [{"name": xname, "shape": [1], "datatype": "BYTES", "data": ["a"]}]}).encode(), {}, 400),
    ("broken gzip body", b"\x1f\x8bnot gzip", {"Content-Encoding": "gzip"}, 400),
    ("gzip body inflating past the limit", gzip.compress(b" " * (args.max_input_size + 1000)), {"Content-Encoding": "gzip"}, 400),
    ("unknown Content-Encoding", good_head, {"Content-Encoding": "br"}, 400),
    ("body over --http-max-input-size", b"[" + b" " * (args.max_input_size + 10) + b"]", {}, 413),
]:
    status, data = raw("POST", "/v2/models/cnn/infer", body, headers)
    check(f"malformed: {name} -> {expect}", json_error(status, data, expect), f"{status} {data[:200]!r}")
status, data = raw("GET", "/v2/nowhere")
check("unknown endpoint -> 404", json_error(status, data, 404), f"{status} {data[:200]!r}")
status, data = raw("GET", "/v2/models/cnn/versions/abc/ready")
check("version that is not a number -> 400", json_error(status, data, 400), f"{status} {data[:200]!r}")

# A body cut short: the client promises more than it sends and hangs up.
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(b"POST /v2/models/cnn/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + good_head[:20])
s.shutdown(socket.SHUT_WR)
try:
    reply = s.recv(4096)
except OSError:
    reply = b""
s.close()
check("truncated body: no success answer", not reply.startswith(b"HTTP/1.1 200"), reply[:100])
check("still live after malformed traffic", client.is_server_live())
r = infer("cnn", cnn_in, "1")
ok, detail = same(r, cnn_out, cnn_out)
check("still correct after malformed traffic", ok, detail)


def metric(name, model, version):
    c = http.client.HTTPConnection(*args.metrics.rsplit(":", 1), timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    key = f'{name}{{model="{model}",version="{version}"}} '
    for line in text.splitlines():
        if line.startswith(key):
            return float(line[len(key):])
    return None


# A bounded load: 64 clients, each its own tritonclient in its own thread,
# 50 requests each; every answer correct, none lost. (tritonclient's
# async_infer sleeps 10 ms after each submission, so it cannot make load.)
def client_thread(model, version, inputs_np, n, results):
    c = httpclient.InferenceServerClient(url=args.http, connection_timeout=120, network_timeout=120)
    ins = []
    for k, v in inputs_np.items():
        t = httpclient.InferInput(k, list(v.shape), np_to_triton_dtype(v.dtype))
        t.set_data_from_numpy(v)
        ins.append(t)
    for _ in range(n):
        try:
            results.append(c.infer(model, ins, model_version=version))
        except Exception as e:
            results.append(e)
    c.close()


def load(model, version, inputs_of_client, clients=64, requests=50):
    """`clients` threads, client k sending inputs_of_client(k) `requests`
    times; the answers (or exceptions) and the seconds it took."""
    results = []
    threads = [threading.Thread(target=client_thread, args=(model, version, inputs_of_client(k), requests, results))
               for k in range(clients)]
    start = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, time.time() - start


before = metric("nv_inference_request_success", "cnn", "1")
i1, o1 = refs("cnn_1")
results, elapsed = load("cnn", "1", lambda k: i1)
bad = [r for r in results if isinstance(r, Exception) or not same(r, o1, o1)[0]]
check(f"load: 64 clients x 50 requests in {elapsed:.1f} s, all {len(results)} answered correctly",
      len(results) == 3200 and not bad, bad[:3])
after = metric("nv_inference_request_success", "cnn", "1")
check("metrics: request_success counts every request", after is not None and before is not None and after - before == 3200,
      (before, after))
count, execs = metric("nv_inference_count", "cnn", "1"), metric("nv_inference_exec_count", "cnn", "1")
check("metrics: unbatched, one execution per inference", count is not None and count == execs, (count, execs))
for m in ["nv_inference_request_duration_us", "nv_inference_queue_duration_us", "nv_inference_compute_infer_duration_us"]:
    v = metric(m, "cnn", "1")
    check(f"metrics: {m} present and positive", v is not None and v > 0, v)
fail = metric("nv_inference_request_failure", "cnn", "")
check("metrics: failures are counted per model version", (metric("nv_inference_request_failure", "cnn", "2") or 0) >= 0
      and metric("nv_inference_request_failure", "types", "3") is not None, fail)

# Dynamic batching: 'batched' has a batch profile (1 to 16 rows), no
# max_batch_size in its config.pbtxt (auto-completed from the engine) and
# dynamic_batching with a 2 ms queue delay. Rows of a batched execution may
# differ from a run alone in the last bits (sums in another order).
def close(result, expected):
    for n in expected:
        got = result.as_numpy(n)
        if got is None or got.shape != expected[n].shape or not np.allclose(got, expected[n], rtol=1e-5, atol=1e-6):
            return False, f"{n}: got {got!r}, expected {expected[n]!r}"
    return True, ""


cfg = client.get_model_config("batched")
check("batched: max_batch_size completed from the engine's profile", cfg.get("max_batch_size") == 16, cfg.get("max_batch_size"))
md = client.get_model_metadata("batched")
check("batched: metadata shapes with -1 for the batch", md["inputs"][0]["shape"] == [-1, 3, 16, 16]
      and md["outputs"][0]["shape"] == [-1, 5], md)
gclient = grpcclient.InferenceServerClient(url=args.grpc)
gmd = gclient.get_model_metadata("batched")
check("batched: gRPC metadata shape", list(gmd.inputs[0].shape) == [-1, 3, 16, 16], gmd)
b1i, b1o = refs("batched_1rows")
b3i, b3o = refs("batched_3rows")
for label, (i, o) in [("1 row", (b1i, b1o)), ("3 rows", (b3i, b3o))]:
    ok, detail = close(infer("batched", i), o)
    check(f"batched: a request of {label} over HTTP", ok, detail)
    ok, detail = close(ginfer("batched", i), o)
    check(f"batched: a request of {label} over gRPC", ok, detail)
check("batched: a batch over max_batch_size is a 400 naming the range",
      *raises(lambda: infer("batched", {"x": np.zeros((17, 3, 16, 16), np.float32)}), 400, "[1..16,3,16,16]"))
check("batched: a wrong image size is a 400",
      *raises(lambda: infer("batched", {"x": np.zeros((2, 3, 8, 16), np.float32)}), 400, "does not match"))
before_count = metric("nv_inference_count", "batched", "1")
before_execs = metric("nv_inference_exec_count", "batched", "1")
results, elapsed = load("batched", "", lambda k: b3i if k % 4 == 0 else b1i)
bad = []
for k, r in enumerate(results):
    if isinstance(r, Exception):
        bad.append(r)
    else:
        rows = r.as_numpy("logits").shape[0]
        ok, detail = close(r, b3o if rows == 3 else b1o)
        if not ok or rows not in (1, 3):
            bad.append(detail)
check(f"batched load: 64 clients x 50 requests in {elapsed:.1f} s, all {len(results)} answered correctly",
      len(results) == 3200 and not bad, bad[:3])
count = metric("nv_inference_count", "batched", "1") - before_count
execs = metric("nv_inference_exec_count", "batched", "1") - before_execs
# 16 of the 64 clients send 3 rows: 16*50*3 + 48*50 = 4800 inferences.
check(f"batched: {count:.0f} inferences in {execs:.0f} executions (batches formed)", count == 4800 and execs < count / 4,
      (count, execs))

# Triton's statistics extension, as tritonclient reads it (and perf_analyzer
# and Model Analyzer do): the same events as the metrics, in nanoseconds.
st = client.get_inference_statistics("batched", "1")["model_stats"]
s0 = st[0] if len(st) == 1 else {}
check("statistics: one entry for batched v1", s0.get("name") == "batched" and s0.get("version") == "1", st)
inf = s0.get("inference_stats", {})
check("statistics: inference and execution counts equal the metrics",
      s0.get("inference_count") == metric("nv_inference_count", "batched", "1")
      and s0.get("execution_count") == metric("nv_inference_exec_count", "batched", "1"), s0)
check("statistics: success and fail count the requests (the two 400s above failed)",
      inf.get("success", {}).get("count") == metric("nv_inference_request_success", "batched", "1")
      and inf.get("fail", {}).get("count") == metric("nv_inference_request_failure", "batched", "1") == 2, inf)
check("statistics: each successful request queued and computed once, durations positive",
      all(inf.get(k, {}).get("count") == inf.get("success", {}).get("count") and inf.get(k, {}).get("ns", 0) > 0
          for k in ["queue", "compute_input", "compute_infer", "compute_output"]), inf)
batches = s0.get("batch_stats", [])
check("statistics: batch_stats cover every execution and row, and batches larger than one request",
      sum(b["compute_infer"]["count"] for b in batches) == s0.get("execution_count")
      and sum(b["batch_size"] * b["compute_infer"]["count"] for b in batches) == s0.get("inference_count")
      and max((b["batch_size"] for b in batches), default=0) > 3, batches)
check("statistics: last_inference is a time in milliseconds", abs(s0.get("last_inference", 0) / 1e3 - time.time()) < 600,
      s0.get("last_inference"))
gst = gclient.get_inference_statistics("batched", "1", as_json=True)["model_stats"]
check("statistics over gRPC: the same counts",
      len(gst) == 1 and int(gst[0]["inference_count"]) == s0.get("inference_count")
      and int(gst[0]["execution_count"]) == s0.get("execution_count")
      and int(gst[0]["inference_stats"]["success"]["count"]) == inf.get("success", {}).get("count"), gst)
every = {(m["name"], m["version"]) for m in client.get_inference_statistics()["model_stats"]}
check("statistics of every model: each loaded version", {("cnn", "1"), ("cnn", "2"), ("batched", "1")} <= every, every)
versions = {m["version"] for m in gclient.get_inference_statistics("cnn", as_json=True)["model_stats"]}
check("statistics of a model: all its loaded versions", versions == {"1", "2"}, versions)
# Triton answers these with 400 / INVALID_ARGUMENT (not 404 as for metadata).
check("statistics: an unknown model is a 400", *raises(lambda: client.get_inference_statistics("nope"), 400, "unknown model"))
check("statistics: an unknown version is a 400", *raises(lambda: client.get_inference_statistics("cnn", "9"), 400, "no version 9"))
try:
    gclient.get_inference_statistics("nope")
    check("statistics over gRPC: an unknown model is INVALID_ARGUMENT", False, "no error")
except InferenceServerException as e:
    check("statistics over gRPC: an unknown model is INVALID_ARGUMENT", e.status() == "StatusCode.INVALID_ARGUMENT", e.status())
check("server metadata lists the statistics extension", "statistics" in client.get_server_metadata()["extensions"])
gclient.close()

# Shutdown with requests in flight: 8 clients send one request each to the
# slow model (one instance); SIGTERM once all have reached the server (one
# running, seven queued). Every one must be answered, correctly, and new
# connections then refused. (A request still on its way when the listener
# closes is refused, as with any server: it was never in flight.)
si, so = refs("slow_1")
# A gRPC stream left open through the shutdown: the server must end it
# rather than wait for the client (the test runs the server with an exit
# timeout far above the harness's 60 s, so a server held open by it fails).
stream_answers = queue.Queue()
sclient = grpcclient.InferenceServerClient(url=args.grpc)
sclient.start_stream(callback=lambda result, error: stream_answers.put((result, error)))
sin = []
for name, v in cnn_in.items():
    t = grpcclient.InferInput(name, list(v.shape), np_to_triton_dtype(v.dtype))
    t.set_data_from_numpy(v)
    sin.append(t)
sclient.async_stream_infer("cnn", sin, model_version="1", request_id="open")
result, error = stream_answers.get(timeout=60)
check("shutdown: a gRPC stream is open and answering", error is None and result.get_response().id == "open", error)
results = []
threads = [threading.Thread(target=client_thread, args=("slow", "", si, 1, results)) for _ in range(8)]
for t in threads:
    t.start()
deadline = time.time() + 60
while time.time() < deadline and (metric("nv_inference_pending_request_count", "slow", "1") or 0) < 7:
    time.sleep(0.005)
queued = metric("nv_inference_pending_request_count", "slow", "1")
os.kill(args.server_pid, signal.SIGTERM)
for t in threads:
    t.join()
bad = [r for r in results if isinstance(r, Exception) or not same(r, so, so)[0]]
check(f"shutdown: the 8 requests in flight ({queued:.0f} queued at SIGTERM) all answered correctly",
      len(results) == 8 and not bad and queued == 7, bad[:3])
time.sleep(0.5)
try:
    socket.create_connection((host, int(port)), timeout=2).close()
    refused = False
except OSError:
    refused = True
check("shutdown: new connections refused", refused)


def exited(pid):
    """Whether the process has ended (a zombie until the harness reaps it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


deadline = time.time() + 20
while time.time() < deadline and not exited(args.server_pid):
    time.sleep(0.05)
check("shutdown: the server ends the open gRPC stream and exits", exited(args.server_pid))
sclient.stop_stream()

print(f"tritonclient checks: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
