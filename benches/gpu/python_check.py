"""The Python package on the GPU (run by benches/gpu/run.sh with the wheel
that prepare.sh built unpacked on PYTHONPATH): host arrays and PyTorch
CUDA tensors through a GPU engine, against the CPU executor; the errors
for unusable device tensors; per-call time of both paths. Prints one
PASS/FAIL line per check and a summary."""

import statistics
import sys
import threading
import time

import numpy as np
import torch
import trtc

failures = 0


def check(name, ok, detail=""):
    global failures
    failures += 0 if ok else 1
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)


def rel(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b)) / max(np.max(np.abs(b)), 1e-30))


model = "testdata/models/example_cnn.onnx"
x = np.load("testdata/models/example_cnn.inputs.npz")["input"]
engine = trtc.build(model, target="cuda", opt_level=0)
cpu = engine.create_context(device="cpu", exact=True).run(x)["logits"]
ctx = engine.create_context(device="cuda")
check("context on the GPU", ctx.device == "cuda:0", ctx.device)
host = ctx.run({"input": x})["logits"]
check("host arrays through the GPU engine", rel(host, cpu) <= 1e-3, f"rel {rel(host, cpu):.2e}")

xt = torch.from_numpy(x).cuda()
yt = torch.full(engine.outputs[0].shape, float("nan"), dtype=torch.float32, device="cuda")
out = ctx.run_device({"input": xt}, {"logits": yt})
dev = yt.cpu().numpy()
check("run_device with torch CUDA tensors", np.array_equal(dev, host), f"rel {rel(dev, cpu):.2e}")
check("run_device returns the outputs", out["logits"] is yt)

# Inputs produced on another stream right before the call are waited for.
side = torch.cuda.Stream()
with torch.cuda.stream(side):
    xs = torch.from_numpy(x).cuda(non_blocking=True) * 1.0
ys = torch.empty_like(yt)
ctx.run_device({"input": xs}, {"logits": ys})
check("an input still being written on another stream", np.array_equal(ys.cpu().numpy(), host))

for label, inputs, outputs in [
    ("a float64 input", {"input": xt.double()}, {"logits": yt}),
    ("a non-contiguous input", {"input": xt.transpose(2, 3)}, {"logits": yt}),
    ("a host array as an input", {"input": x}, {"logits": yt}),
    ("a wrong output shape", {"input": xt}, {"logits": yt[:, :5]}),
    ("a missing input", {}, {"logits": yt}),
]:
    try:
        ctx.run_device(inputs, outputs)
        check(f"refuses {label}", False, "no error")
    except trtc.Error as e:
        check(f"refuses {label}", "\n" not in str(e), f"{type(e).__name__}: {e}")

# Threads, one GPU context each.
results = [None] * 4


def work(i):
    c = engine.create_context(device="cuda")
    results[i] = [c.run(x)["logits"] for _ in range(20)]


threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check("4 threads with a GPU context each", all(np.array_equal(r, host) for rs in results for r in rs))


# An engine whose batch varies (1 to 32) on the GPU: host arrays and torch
# tensors at several batches, each against the CPU executor, and the
# refusal of a batch outside the profile.
dyn = trtc.build("testdata/serve/batch_cnn.onnx", target="cuda", opt_level=0,
                 profiles=[{"x": ((1, 3, 16, 16), (8, 3, 16, 16), (32, 3, 16, 16))}])
dcpu = dyn.create_context(device="cpu", exact=True)
dgpu = dyn.create_context(device="cuda")
rng = np.random.default_rng(0)
for n in (1, 5, 32, 1):
    xb = rng.standard_normal((n, 3, 16, 16)).astype(np.float32)
    want = dcpu.run({"x": xb})["probs"]
    got = dgpu.run({"x": xb})["probs"]
    check(f"batch {n} of a profile engine, host arrays", got.shape == want.shape and rel(got, want) <= 1e-3,
          f"shape {got.shape}, rel {rel(got, want):.2e}")
    out = torch.full((n, want.shape[1]), float("nan"), dtype=torch.float32, device="cuda")
    dgpu.run_device({"x": torch.from_numpy(xb).cuda()}, {"probs": out})
    check(f"batch {n} of a profile engine, run_device", np.array_equal(out.cpu().numpy(), got))
try:
    dgpu.run({"x": np.zeros((33, 3, 16, 16), np.float32)})
    check("refuses batch 33 (outside the profile)", False, "no error")
except trtc.Error as e:
    check("refuses batch 33 (outside the profile)", "axis 0 is 33" in str(e), str(e))


def median_us(f, n=300):
    for _ in range(20):
        f()
    times = []
    for _ in range(n):
        t = time.perf_counter_ns()
        f()
        times.append(time.perf_counter_ns() - t)
    return statistics.median(times) / 1000


print(f"per call, example_cnn on the GPU: ctx.run (host arrays) {median_us(lambda: ctx.run(x)):.1f} us, "
      f"ctx.run_device (torch tensors) {median_us(lambda: ctx.run_device({'input': xt}, {'logits': yt})):.1f} us")
print(f"python checks: {failures} failed")
sys.exit(1 if failures else 0)
