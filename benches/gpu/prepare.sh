#!/usr/bin/env bash
# Prepares .dev/ (git-ignored) for one device call of benches/gpu/run.sh:
# stripped release binaries of trtc and trtc-serve (they run unchanged on
# the GPU machine), the
# Python package's wheel, PyTorch's baseline script, and ONNX's conformance data. Then, from the
# session: run(command="OUT=$OUT timeout 555 bash benches/gpu/run.sh",
#              carry=[".dev"], timeout_s=560).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --locked -p trtc --bin trtc -p trtc-server --bin trtc-serve
mkdir -p .dev/bin .dev/tools
rm -rf .dev/bin && mkdir -p .dev/bin && cp target/release/trtc target/release/trtc-serve .dev/bin/
strip .dev/bin/trtc .dev/bin/trtc-serve
cp ../shared/tools/pytorch_baseline.py .dev/tools/
# The Python package as a wheel (abi3; run.sh unpacks it onto PYTHONPATH,
# since the GPU machine has no network for pip).
if [ ! -x .cache/maturin-venv/bin/maturin ]; then
    python3 -m venv .cache/maturin-venv
    .cache/maturin-venv/bin/pip install --quiet "maturin==1.16.0"
fi
rm -rf .dev/wheels
.cache/maturin-venv/bin/maturin build --quiet --release --strip -m python/Cargo.toml -o .dev/wheels
if [ ! -f .dev/onnx-backend.tgz ]; then
    bash scripts/fetch-conformance.sh
    tar czf .dev/onnx-backend.tgz -C .cache onnx-backend-1.16.2
fi
git log -1 --format='commit %h %s' > .dev/commit.txt
du -sh .dev
