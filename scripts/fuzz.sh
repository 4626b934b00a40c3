#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 60) with cargo fuzz
# (libFuzzer), seeded from testdata/. Stable toolchain: `-s none` builds
# with sanitizer coverage but without ASan (which needs nightly). Findings
# land in fuzz/artifacts/<target>/ and fail the run; keep them as
# regression inputs under fuzz/regressions/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz --version 0.13.2
mkdir -p fuzz/corpus/{onnx_build,engine_load,npz_read,cache_parse,serve_request}
cp -f testdata/models/{example_cnn,squeezenet1_1_legacy}.onnx testdata/qdq/example_cnn_qdq.onnx fuzz/corpus/onnx_build/
cp -f testdata/models/example_cnn.*.npz fuzz/corpus/npz_read/
# Engines to start from: the small testdata models, built by the CLI.
cargo build --quiet --bin trtc
./target/debug/trtc build testdata/models/example_cnn.onnx -o fuzz/corpus/engine_load/example_cnn.engine 2>/dev/null
./target/debug/trtc build testdata/models/example_cnn.onnx --fp16 -o fuzz/corpus/engine_load/example_cnn_fp16.engine 2>/dev/null
# Requests to start from: an HTTP one (first byte 0, the JSON length, then
# the JSON and the binary tensor), a gRPC one cannot be written by hand here
# and grows from the HTTP seed's bytes, and a config.pbtxt (first byte 2).
python3 - fuzz/corpus/serve_request <<'PY'
import json, struct, sys
head = json.dumps({"id": "1", "inputs": [{"name": "input", "shape": [1, 3, 32, 32], "datatype": "FP32",
                   "parameters": {"binary_data_size": 12288}}],
                   "outputs": [{"name": "logits", "parameters": {"binary_data": True}}]}).encode()
open(sys.argv[1] + "/http_binary", "wb").write(b"\0" + struct.pack("<H", len(head)) + head + bytes(12288))
js = json.dumps({"inputs": [{"name": "input", "shape": [1, 3, 32, 32], "datatype": "FP32", "data": [0.5] * 3072}]}).encode()
open(sys.argv[1] + "/http_json", "wb").write(b"\0\xff\xff" + js)
cfg = b'name: "m" max_batch_size: 0 input [ { name: "x" data_type: TYPE_FP32 dims: [ 1, 3 ] } ]\n' \
      b'dynamic_batching { preferred_batch_size: [ 4 ] default_queue_policy { max_queue_size: 8 } }\n' \
      b'instance_group [ { count: 2 kind: KIND_CPU } ] version_policy: { latest { num_versions: 2 } }\n'
open(sys.argv[1] + "/config", "wb").write(b"\2" + cfg)
PY
for t in onnx_build engine_load npz_read cache_parse serve_request; do
  [ -d "fuzz/regressions/$t" ] && cp -f fuzz/regressions/$t/* "fuzz/corpus/$t/" 2>/dev/null || true
done
passed=0
failed=0
for t in onnx_build engine_load npz_read cache_parse serve_request; do
  log="fuzz/artifacts/$t.log"
  mkdir -p fuzz/artifacts
  if (cd fuzz && cargo fuzz run -s none "$t" "corpus/$t" -- -max_total_time="$seconds" -rss_limit_mb=4096 \
        -max_len=1048576 -print_final_stats=1) >"$log" 2>&1; then
    # libFuzzer's closing line: "Done 123456 runs in 60 second(s)".
    runs=$(grep -o 'Done [0-9]* runs' "$log" | tail -n 1 | cut -d' ' -f2)
    echo "fuzz $t: ${runs:-?} runs in ${seconds}s, no findings"
    passed=$((passed + 1))
  else
    echo "fuzz $t: FAILED (input kept under fuzz/artifacts/$t/; the log's end follows)"
    tail -n 40 "$log"
    failed=$((failed + 1))
  fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
