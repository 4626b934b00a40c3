#!/usr/bin/env bash
# Benchmarks trtc serve on the CPU executor, in one run: the example CNN
# (static shapes), and testdata/serve/batch_cnn.onnx built with a batch
# profile (1 to 32 rows) served twice, without and with the dynamic batcher
# (`dynamic_batching { max_queue_delay_microseconds: 500 }`); for each, the
# runtime called directly (trtc bench) at batch 1, then tritonclient over
# HTTP, gRPC and gRPC streams at concurrency 1, 8 and 64
# (benches/serve/bench.py), every
# request one row. Then the same against Triton Inference Server itself:
# the `tritonserver` that PyPI's nvidia-pytriton ships (CPU build, Python
# backend only), serving the same engines through trtc's Python package
# with the same instance counts, exact mode and one thread per instance
# (benches/serve/triton_model.py), so that the two servers' figures differ
# by the server alone.
# Usage: bash benches/serve/run.sh [INSTANCES]   (CPU instances, default 2;
# REQUESTS=N sets the requests per protocol and concurrency, default 3200;
# TRITON=0 skips Triton; benches/serve/compare_triton.py then compares
# the two servers' answers to the same well-formed and malformed requests)
set -euo pipefail
cd "$(dirname "$0")/../.."
instances=${1:-2}
bash scripts/fetch-tritonclient.sh
cargo build --release --quiet --bin trtc --bin trtc-serve
dir=target/serve-bench
rm -rf $dir && mkdir -p $dir/models/cnn/1 $dir/models/unbatched/1 $dir/models/batched/1
./target/release/trtc build testdata/models/example_cnn.onnx -o $dir/models/cnn/1/model.engine >/dev/null
echo "instance_group { count: $instances kind: KIND_CPU }" > $dir/models/cnn/config.pbtxt
./target/release/trtc build testdata/serve/batch_cnn.onnx -o $dir/models/batched/1/model.engine \
    --min-shapes x:1x3x16x16 --opt-shapes x:8x3x16x16 --max-shapes x:32x3x16x16 >/dev/null
cp $dir/models/batched/1/model.engine $dir/models/unbatched/1/
echo "instance_group { count: $instances kind: KIND_CPU }" > $dir/models/unbatched/config.pbtxt
printf 'instance_group { count: %s kind: KIND_CPU }\ndynamic_batching { max_queue_delay_microseconds: 500 }\n' \
    "$instances" > $dir/models/batched/config.pbtxt
echo "== the runtime directly (trtc bench --device cpu, the server's exact math, one thread)"
./target/release/trtc bench $dir/models/cnn/1/model.engine --device cpu --exact --threads 1 --iterations 2000 | grep -i latency
.cache/tritonclient/bin/python -c "import numpy as np; np.savez('$dir/x1.npz', x=np.random.default_rng(0).random((1, 3, 16, 16)).astype(np.float32))"
./target/release/trtc bench $dir/models/batched/1/model.engine --device cpu --exact --threads 1 --inputs $dir/x1.npz \
    --iterations 2000 | grep -i latency
requests=${REQUESTS:-3200}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_ready() {
    for _ in $(seq 600); do curl -sf "http://$1/v2/health/ready" >/dev/null && return 0; sleep 0.1; done
    echo "the server on $1 did not become ready"; return 1
}
counts() {
    curl -s "http://$1/metrics" | grep -E "^nv_inference_(count|exec_count)\{model=\"$2\"" || true
}

./target/release/trtc-serve --model-repository $dir/models --http-port 0 --grpc-port 0 --metrics-port 0 2> $dir/serve.log &
trtc_pid=$!
trap 'kill $trtc_pid ${triton_pid:-} 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "metrics on" $dir/serve.log && break; sleep 0.1; done
http=$(sed -n 's|^trtc serve: HTTP on http://||p' $dir/serve.log)
grpc=$(sed -n 's|^trtc serve: gRPC on ||p' $dir/serve.log)
metrics=$(sed -n 's|^trtc serve: metrics on http://||p' $dir/serve.log | sed 's|/metrics$||')
echo "== trtc serve, $instances CPU instances, tritonclient 2.73"
for model in cnn unbatched batched; do
    .cache/tritonclient/bin/python benches/serve/bench.py --http "$http" --grpc "$grpc" --model $model --requests "$requests"
    counts "$metrics" $model
done
trtc_http=$http

# trtc serve stays up, idle, for the protocol comparison at the end.
[ "${TRITON:-1}" = 0 ] && exit 0
# Triton's venv: the server binary (nvidia-pytriton bundles it with its
# libraries), and trtc's Python package built in release.
venv=.cache/triton-bench
if [ ! -f $venv/.complete-pytriton-0.7.0 ]; then
    rm -rf $venv
    python3 -m venv $venv
    $venv/bin/pip install --quiet --disable-pip-version-check "nvidia-pytriton==0.7.0"
    touch $venv/.complete-pytriton-0.7.0
fi
MATURIN_PEP517_ARGS="--profile release" $venv/bin/pip install --quiet --disable-pip-version-check --force-reinstall --no-deps ./python
site=$($venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
pyver=$($venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
libdir=$($venv/bin/python -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')
server=$site/pytriton/tritonserver
mkdir -p $dir/triton-backends/python
cp $server/backends/python/*.so $server/backends/python/*.py $server/python_backend_stubs/$pyver/triton_python_backend_stub \
    $dir/triton-backends/python/
echo "== the runtime from Python (Context.run in the venv Triton's model uses, exact, one thread)"
for engine in $dir/models/cnn/1/model.engine $dir/models/batched/1/model.engine; do
    $venv/bin/python -c "
import sys, time, numpy as np, trtc
e = trtc.Engine.load(sys.argv[1]); c = e.create_context(device='cpu', threads=1, exact=True)
x = {b.name: np.random.default_rng(0).random([1 if d == -1 else d for d in b.shape]).astype(np.float32) for b in e.inputs}
t = []
for _ in range(2000):
    s = time.perf_counter(); c.run(x); t.append(time.perf_counter() - s)
print(f'{sys.argv[1]}: median {np.median(t[100:]) * 1e3:.3f} ms')" $engine
done
$venv/bin/python benches/serve/triton_repository.py --out $dir/triton --instances "$instances" --batched batched \
    --model cnn=$dir/models/cnn/1/model.engine --model unbatched=$dir/models/unbatched/1/model.engine \
    --model batched=$dir/models/batched/1/model.engine
http=127.0.0.1:$(free_port); grpc_port=$(free_port); metrics_port=$(free_port)
# The Python backend's stub processes embed the venv's Python (its
# libpython; the model adds the venv's packages to its path) and load
# libraries that the wheel ships beside the server.
LD_LIBRARY_PATH=$libdir:$site/nvidia_pytriton.libs $server/bin/tritonserver --model-repository "$PWD/$dir/triton" \
    --backend-directory "$PWD/$dir/triton-backends" --http-address 127.0.0.1 --grpc-address 127.0.0.1 \
    --metrics-address 127.0.0.1 --http-port "${http#*:}" --grpc-port "$grpc_port" --metrics-port "$metrics_port" \
    --allow-gpu-metrics false > $dir/triton.log 2>&1 &
triton_pid=$!
wait_ready "$http" || { tail -20 $dir/triton.log; exit 1; }
echo "== Triton Inference Server $(sed -n 's/.*server_version *| *\([0-9.]*\).*/\1/p' $dir/triton.log | head -1) (nvidia-pytriton 0.7.0's tritonserver), Python backend running the same engines, $instances CPU instances"
for model in cnn unbatched batched; do
    .cache/tritonclient/bin/python benches/serve/bench.py --http "$http" --grpc "127.0.0.1:$grpc_port" --model $model --requests "$requests"
    counts "127.0.0.1:$metrics_port" $model
done
echo "== the same requests to both servers (benches/serve/compare_triton.py)"
.cache/tritonclient/bin/python benches/serve/compare_triton.py --triton "$http" --trtc "$trtc_http" --differences-only
