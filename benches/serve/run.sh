#!/usr/bin/env bash
# Benchmarks trtc serve on the CPU executor with the example CNN: the
# runtime called directly (trtc bench), then tritonclient over HTTP and gRPC
# at concurrency 1, 8 and 64 (benches/serve/bench.py), in one run.
# Usage: bash benches/serve/run.sh [INSTANCES]   (CPU instances, default 2)
set -euo pipefail
cd "$(dirname "$0")/../.."
instances=${1:-2}
bash scripts/fetch-tritonclient.sh
cargo build --release --quiet --bin trtc --bin trtc-serve
dir=target/serve-bench
rm -rf $dir && mkdir -p $dir/models/cnn/1
./target/release/trtc build testdata/models/example_cnn.onnx -o $dir/models/cnn/1/model.engine >/dev/null
echo "instance_group { count: $instances kind: KIND_CPU }" > $dir/models/cnn/config.pbtxt
echo "== the runtime directly (trtc bench --device cpu)"
./target/release/trtc bench $dir/models/cnn/1/model.engine --device cpu --iterations 2000 | grep -i latency
./target/release/trtc-serve --model-repository $dir/models --http-port 0 --grpc-port 0 --metrics-port 0 2> $dir/serve.log &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "metrics on" $dir/serve.log && break; sleep 0.1; done
http=$(sed -n 's|^trtc serve: HTTP on http://||p' $dir/serve.log)
grpc=$(sed -n 's|^trtc serve: gRPC on ||p' $dir/serve.log)
echo "== trtc serve, $instances CPU instances, tritonclient 2.73"
.cache/tritonclient/bin/python benches/serve/bench.py --http "$http" --grpc "$grpc"
