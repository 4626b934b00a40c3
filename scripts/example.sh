#!/usr/bin/env bash
# Builds the example model shipped in testdata/ into an engine, inspects it,
# runs it on the CPU executor and checks the result against onnxruntime's.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --bin trtc
mkdir -p target/example
./target/debug/trtc build testdata/models/example_cnn.onnx -o target/example/example_cnn.engine
./target/debug/trtc inspect target/example/example_cnn.engine
./target/debug/trtc run target/example/example_cnn.engine \
  --inputs testdata/models/example_cnn.inputs.npz \
  --save-outputs target/example/example_cnn.outputs.npz
./target/debug/trtc compare target/example/example_cnn.outputs.npz testdata/models/example_cnn.outputs.npz
# The same model in FP16, with an accuracy report against the FP32 engine.
./target/debug/trtc build testdata/models/example_cnn.onnx -o target/example/example_cnn_fp16.engine \
  --fp16 --accuracy-report --per-layer
# Its onnxruntime-quantized (Q/DQ) export builds into int8 layers and gives
# onnxruntime's int8 result.
./target/debug/trtc build testdata/qdq/example_cnn_qdq.onnx -o target/example/example_cnn_int8.engine
./target/debug/trtc run target/example/example_cnn_int8.engine \
  --inputs testdata/qdq/example_cnn_qdq.inputs.npz \
  --save-outputs target/example/example_cnn_int8.outputs.npz
./target/debug/trtc compare target/example/example_cnn_int8.outputs.npz testdata/qdq/example_cnn_qdq.outputs.npz
# For a GPU: the engine carries each layer's kernel compiled by NVRTC for
# sm_90 (NVRTC comes from PyPI; no GPU needed to build). `--device auto` runs
# it on the GPU when one of that kind is present, else on the CPU executor,
# which gives the same outputs.
bash scripts/fetch-nvrtc.sh
export TRTC_NVRTC_PATH=${TRTC_NVRTC_PATH:-$PWD/.cache/nvrtc/nvidia/cu13/lib}
./target/debug/trtc build testdata/models/example_cnn.onnx -o target/example/example_cnn_sm90.engine --target sm_90
./target/debug/trtc inspect target/example/example_cnn_sm90.engine | sed -n '/^kernels:/,$p'
./target/debug/trtc run target/example/example_cnn_sm90.engine --device auto \
  --inputs testdata/models/example_cnn.inputs.npz \
  --save-outputs target/example/example_cnn_sm90.outputs.npz
./target/debug/trtc compare target/example/example_cnn_sm90.outputs.npz testdata/models/example_cnn.outputs.npz
