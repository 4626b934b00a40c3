"""Sends the same HTTP requests to Triton Inference Server and to `trtc
serve`, both serving the models of benches/serve/run.sh (`cnn`: one input
f32[1,3,32,32] -> logits; `batched`: x f32[-1,3,16,16] -> logits, probs),
and prints the two answers side by side, marking those whose status codes
differ: well-formed and malformed inference requests (JSON and binary
tensors), metadata, readiness, unknown models and versions.
Usage: python compare_triton.py --triton HOST:PORT --trtc HOST:PORT (HTTP
ports; run with the tritonclient venv's python, which has numpy)."""

import argparse
import http.client
import json

import numpy as np

p = argparse.ArgumentParser()
p.add_argument("--triton", required=True)
p.add_argument("--trtc", required=True)
p.add_argument("--differences-only", action="store_true", help="print only the requests answered with different status codes")
args = p.parse_args()


def req(addr, method, path, body=b"", headers=None):
    host, port = addr.rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=10)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict(r.getheaders()), data


def jbody(obj):
    return json.dumps(obj).encode()


x = np.random.default_rng(0).random((1, 3, 32, 32)).astype(np.float32)
xb = np.random.default_rng(0).random((2, 3, 16, 16)).astype(np.float32)
inp = {"name": "input", "shape": [1, 3, 32, 32], "datatype": "FP32", "data": x.flatten().tolist()}
# A binary request: the JSON header, then the tensor's bytes.
hdr = jbody({"inputs": [{"name": "input", "shape": [1, 3, 32, 32], "datatype": "FP32", "parameters": {"binary_data_size": x.nbytes}}],
             "outputs": [{"name": "logits", "parameters": {"binary_data": True}}]})
cases = [
    ("GET", "/v2", b"", {}),
    ("GET", "/v2/models/cnn", b"", {}),
    ("GET", "/v2/models/batched", b"", {}),
    ("GET", "/v2/models/cnn/versions/1", b"", {}),
    ("GET", "/v2/models/cnn/versions/x", b"", {}),
    ("GET", "/v2/models/cnn/ready", b"", {}),
    ("GET", "/v2/models/nope/ready", b"", {}),
    ("GET", "/v2/models/cnn/versions/9/ready", b"", {}),
    ("GET", "/v2/nothing", b"", {}),
    ("POST", "/v2/health/ready", b"", {}),
    ("POST", "/v2/repository/index", b"", {}),
    ("POST", "/v2/repository/index", b'{"ready": true}', {}),
    ("POST", "/v2/models/cnn/infer", jbody({"id": "abc", "inputs": [inp]}), {}),
    ("POST", "/v2/models/cnn/infer", jbody({"inputs": [inp], "outputs": [{"name": "logits"}]}), {}),
    ("POST", "/v2/models/cnn/infer", jbody({"inputs": [inp], "outputs": [{"name": "bogus"}]}), {}),
    ("POST", "/v2/models/cnn/infer", jbody({"inputs": [dict(inp, datatype="FP64")]}), {}),
    ("POST", "/v2/models/cnn/infer", jbody({"inputs": [dict(inp, shape=[3,32,32])]}), {}),
    ("POST", "/v2/models/cnn/infer", jbody({"inputs": [dict(inp, data=[1.0, 2.0])]}), {}),
    ("POST", "/v2/models/cnn/infer", jbody({"inputs": [dict(inp, name="other")]}), {}),
    ("POST", "/v2/models/cnn/infer", jbody({"inputs": []}), {}),
    ("POST", "/v2/models/cnn/infer", jbody({}), {}),
    ("POST", "/v2/models/cnn/infer", b"{not json", {}),
    ("POST", "/v2/models/cnn/infer", b"", {}),
    ("POST", "/v2/models/cnn/infer", jbody({"inputs": [dict(inp, data=[[v] for v in x.flatten().tolist()])]}), {}),
    ("POST", "/v2/models/cnn/infer", jbody({"inputs": [dict(inp, data=["a"]*3072)]}), {}),
    ("POST", "/v2/models/cnn/infer", hdr + x.tobytes(), {"Inference-Header-Content-Length": str(len(hdr)), "Content-Type": "application/octet-stream"}),
    ("POST", "/v2/models/cnn/infer", hdr + x.tobytes()[:-4], {"Inference-Header-Content-Length": str(len(hdr))}),
    ("POST", "/v2/models/cnn/infer", hdr + x.tobytes(), {"Inference-Header-Content-Length": str(len(hdr) + 5)}),
    ("POST", "/v2/models/cnn/infer", hdr + x.tobytes(), {"Inference-Header-Content-Length": "abc"}),
    ("POST", "/v2/models/cnn/infer", hdr + x.tobytes() + b"xx", {"Inference-Header-Content-Length": str(len(hdr))}),
    ("POST", "/v2/models/cnn/versions/9/infer", jbody({"inputs": [inp]}), {}),
    ("POST", "/v2/models/nope/infer", jbody({"inputs": [inp]}), {}),
    ("GET", "/v2/models/cnn/infer", b"", {}),
    ("POST", "/v2/models/batched/infer", jbody({"inputs": [{"name": "x", "shape": [2,3,16,16], "datatype": "FP32", "data": xb.flatten().tolist()}], "outputs": [{"name": "probs"}]}), {}),
    ("POST", "/v2/models/batched/infer", jbody({"inputs": [{"name": "x", "shape": [40,3,16,16], "datatype": "FP32", "data": [0.0]*(40*768)}]}), {}),
    ("POST", "/v2/models/batched/infer", jbody({"inputs": [{"name": "x", "shape": [0,3,16,16], "datatype": "FP32", "data": []}]}), {}),
    ("POST", "/v2/models/cnn/infer", jbody({"inputs": [inp], "parameters": {"binary_data_output": True}}), {}),
    ("POST", "/v2/models/cnn/infer", jbody({"inputs": [inp], "outputs": [{"name": "logits"}, {"name": "logits"}]}), {}),
]


def short(s, h, d):
    """Status, the headers that matter, and the body with data elided."""
    keys = {k.lower(): v for k, v in h.items() if k.lower() in ("content-type", "inference-header-content-length")}
    try:
        j = json.loads(d)
        if "outputs" in j:
            for o in j["outputs"]:
                if "data" in o: o["data"] = f"[{len(o['data'])} values]"
        body = json.dumps(j)[:300]
    except Exception:
        body = repr(d[:120])
    return f"{s} {keys} {body}"


differ = 0
for m, path, b, h in cases:
    t = short(*req(args.triton, m, path, b, h))
    o = short(*req(args.trtc, m, path, b, h))
    same = t.split(" ")[0] == o.split(" ")[0]
    differ += not same
    if not same or not args.differences_only:
        print(("   " if same else "!! ") + f"{m} {path} {list(h)}\n     triton: {t}\n     trtc:   {o}")
print(f"{len(cases)} requests, {differ} with different status codes")
