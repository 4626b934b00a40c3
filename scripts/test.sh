#!/usr/bin/env bash
# Runs every check on a fresh machine: fetches what the tests need (the
# ONNX conformance suite, NVRTC, a venv with tritonclient), checks
# formatting, lints and the module layering, fuzzes each parser of untrusted
# input for TRTC_FUZZ_SECONDS (default 60) per target, then `cargo test` over
# the whole workspace (no GPU needed), then the Python package's tests
# (scripts/test-python.sh). Arguments go to `cargo test`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-conformance.sh
bash scripts/fetch-nvrtc.sh
bash scripts/fetch-tritonclient.sh
export TRTC_NVRTC_PATH="$PWD/.cache/nvrtc/nvidia/cu13/lib"
export TRTC_TRITONCLIENT_PYTHON="$PWD/.cache/tritonclient/bin/python"

# A CI machine builds once and its disk is small: incremental state would
# only add gigabytes, and each stage says how much disk it left.
if [ -n "${CI:-}" ]; then
  export CARGO_INCREMENTAL=0
fi
disk() { echo "$(date +%T) disk after $1: $(du -sh target 2>/dev/null | cut -f1) in target/, $(df -h . | awk 'NR==2 {print $4}') free"; }

if cargo fmt --version >/dev/null 2>&1; then
  cargo fmt --all --check
else
  echo "rustfmt is not installed: the formatting check is skipped (1 check skipped)"
fi
if cargo clippy --version >/dev/null 2>&1; then
  cargo clippy --workspace --all-targets --locked --quiet -- -D warnings
else
  echo "clippy is not installed: the lint check is skipped (1 check skipped)"
fi
cargo xtask layers
# The Python package's pip build must reuse the test build (see the script).
python3 scripts/check-unification.py
disk "fmt, clippy and layers"

fuzz_seconds=${TRTC_FUZZ_SECONDS:-60}
if [ "$fuzz_seconds" -gt 0 ]; then
  bash scripts/fuzz.sh "$fuzz_seconds"
  disk "fuzzing ($(du -sh fuzz/target 2>/dev/null | cut -f1) in fuzz/target/)"
  # The fuzz workspace's build shares nothing with the tests' build.
  if [ -n "${CI:-}" ]; then
    rm -rf fuzz/target
  fi
else
  echo "TRTC_FUZZ_SECONDS=0: fuzzing skipped (5 targets skipped)"
fi

cargo test --workspace --locked "$@"
disk "the tests"
# The test build made the CLI and the server; the Python tests use those
# instead of building them again with the features of a narrower build.
export TRTC_BIN="$PWD/target/debug/trtc"

bash scripts/test-python.sh
disk "the Python package's tests"
