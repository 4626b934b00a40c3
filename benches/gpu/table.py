"""Prints the benchmark table of a device run (benches/gpu/run.sh): trtc's
medians (GPU compute from CUDA events, and end to end with host copies)
next to PyTorch's eager and CUDA-graph medians measured in the same call.

    python3 benches/gpu/table.py OUT_DIR
"""
import glob, json, os, sys

out = sys.argv[1]
torch = {}
for f in ("torch_fp16.json", "torch_fp32.json"):
    p = os.path.join(out, f)
    if os.path.exists(p):
        d = json.load(open(p))
        for k, v in d.get("results", {}).items():
            torch[(k, d["dtype"])] = v

rows = []
for p in sorted(glob.glob(os.path.join(out, "bench.*.json"))):
    parts = os.path.basename(p)[len("bench."):-len(".json")].split(".")
    model, prec, batch = parts[0], parts[1], int(parts[2][1:])
    tag = " (tuned)" if len(parts) > 3 else ""
    try:
        r = json.load(open(p))
    except Exception:
        rows.append(f"| {model}{tag} | {prec} | {batch} | failed | | | | |")
        continue
    t = torch.get((f"{model}_b{batch}", prec), {})
    gpu = (r.get("gpu_compute") or {}).get("median_ms")
    e2e = r.get("median_ms")
    graph = t.get("cudagraph_ms")
    eager = t.get("eager_ms")
    ratio = f"{gpu / graph:.2f}x" if gpu and graph else ""
    fmt = lambda v: f"{v:.3f}" if isinstance(v, (int, float)) else "-"
    rows.append(f"| {model}{tag} | {prec} | {batch} | {fmt(gpu)} | {fmt(e2e)} | {fmt(eager)} | {fmt(graph)} | {ratio} |")

print("| model | precision | batch | trtc GPU ms | trtc end-to-end ms | torch eager ms | torch CUDA graph ms | trtc GPU / torch graph |")
print("|---|---|---|---|---|---|---|---|")
print("\n".join(rows))
