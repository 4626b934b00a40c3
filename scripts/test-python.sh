#!/usr/bin/env bash
# The Python package's tests: `pip install ./python` into a fresh venv (as
# a user does; maturin comes from PyPI through pip's build isolation), then
# pytest over python/tests. Run after `cargo test`, whose build it reuses:
# the wheel is built with the dev profile (dependencies optimized, see
# Cargo.toml), unless TRTC_PYTHON_PROFILE says otherwise (e.g. release).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.cache/python-venv
rm -rf $venv
python3 -m venv $venv
$venv/bin/pip install --quiet --disable-pip-version-check "pytest==8.4.2" "pillow==11.3.0" "pyyaml==6.0.2" "onnx==1.23.2" "ray[serve]==2.60.0"
MATURIN_PEP517_ARGS="--profile ${TRTC_PYTHON_PROFILE:-dev}" \
  $venv/bin/pip install --quiet --disable-pip-version-check ./python
# The CLI the tests compare with (and the server `trtc serve` runs next to
# it): scripts/test.sh passes the ones `cargo test` built; build them
# otherwise.
if [ -z "${TRTC_BIN:-}" ]; then
  cargo build --quiet --locked -p trtc --bin trtc -p trtc-server --bin trtc-serve
  export TRTC_BIN="$PWD/target/debug/trtc"
fi
# From the repository root, so that `import trtc` finds the installed
# package rather than the sources in python/trtc.
$venv/bin/python -m pytest -q python/tests "$@"
