#!/usr/bin/env bash
# Benchmarks trtc serve on the CPU executor, in one run: the example CNN
# (static shapes), and testdata/serve/batch_cnn.onnx built with a batch
# profile (1 to 32 rows) served twice, without and with the dynamic batcher
# (`dynamic_batching { max_queue_delay_microseconds: 500 }`); for each, the
# runtime called directly (trtc bench) at batch 1, then tritonclient over
# HTTP and gRPC at concurrency 1, 8 and 64 (benches/serve/bench.py), every
# request one row.
# Usage: bash benches/serve/run.sh [INSTANCES]   (CPU instances, default 2;
# REQUESTS=N sets the requests per protocol and concurrency, default 3200)
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
./target/release/trtc-serve --model-repository $dir/models --http-port 0 --grpc-port 0 --metrics-port 0 2> $dir/serve.log &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "metrics on" $dir/serve.log && break; sleep 0.1; done
http=$(sed -n 's|^trtc serve: HTTP on http://||p' $dir/serve.log)
grpc=$(sed -n 's|^trtc serve: gRPC on ||p' $dir/serve.log)
echo "== trtc serve, $instances CPU instances, tritonclient 2.73"
for model in cnn unbatched batched; do
    .cache/tritonclient/bin/python benches/serve/bench.py --http "$http" --grpc "$grpc" --model $model --requests "${REQUESTS:-3200}"
    curl -s "http://$(sed -n 's|^trtc serve: metrics on http://||p' $dir/serve.log)" \
        | grep -E "^nv_inference_(count|exec_count)\{model=\"$model\"" || true
done
