#!/usr/bin/env bash
# Installs NVRTC 13.0.88 (the version the GPU machine's driver matches) from
# PyPI's nvidia-cuda-nvrtc wheel into .cache/nvrtc. No GPU and no CUDA
# toolkit needed: `trtc build --target sm_XX` and the compile tests only use it.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.cache/nvrtc
[ -f $dest/nvidia/cu13/lib/libnvrtc.so.13 ] && exit 0
mkdir -p .cache/wheel
python3 -m pip download --quiet --no-deps --only-binary=:all: nvidia-cuda-nvrtc==13.0.88 -d .cache/wheel \
  --python-version 3.11 --platform manylinux_2_12_x86_64 --implementation cp
rm -rf $dest.tmp && mkdir -p $dest.tmp
python3 - $dest.tmp .cache/wheel/nvidia_cuda_nvrtc-13.0.88-*.whl <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[2]).extractall(sys.argv[1])
PY
rm -rf $dest && mv $dest.tmp $dest
echo "NVRTC in $dest/nvidia/cu13/lib"
