#!/usr/bin/env bash
# Runs every test on a fresh machine: fetches what the tests need, then
# `cargo test` over the whole workspace (no GPU needed).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-conformance.sh
bash scripts/fetch-nvrtc.sh
export TRTC_NVRTC_PATH="$PWD/.cache/nvrtc/nvidia/cu13/lib"
cargo test --workspace --locked "$@"
