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
mkdir -p fuzz/corpus/{onnx_build,engine_load,npz_read,cache_parse}
cp -f testdata/models/{example_cnn,squeezenet1_1_legacy}.onnx testdata/qdq/example_cnn_qdq.onnx fuzz/corpus/onnx_build/
cp -f testdata/models/example_cnn.*.npz fuzz/corpus/npz_read/
# Engines to start from: the small testdata models, built by the CLI.
cargo build --quiet --bin trtc
./target/debug/trtc build testdata/models/example_cnn.onnx -o fuzz/corpus/engine_load/example_cnn.engine 2>/dev/null
./target/debug/trtc build testdata/models/example_cnn.onnx --fp16 -o fuzz/corpus/engine_load/example_cnn_fp16.engine 2>/dev/null
for t in onnx_build engine_load npz_read cache_parse; do
  [ -d "fuzz/regressions/$t" ] && cp -f fuzz/regressions/$t/* "fuzz/corpus/$t/" 2>/dev/null || true
done
passed=0
failed=0
for t in onnx_build engine_load npz_read cache_parse; do
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
