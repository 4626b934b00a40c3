#!/usr/bin/env bash
# CPU figures for benches/RESULTS.md: full-size torchvision ResNet-50 (random
# weights) exported with both exporters, built with and without activation
# buffer reuse, then timed by `trtc bench` (median of 20 runs after warm-up).
# Needs the testdata venv for the export: python -m venv V && V/bin/pip install -r testdata/requirements.txt
# Usage: benches/cpu_resnet50.sh [PYTHON] [TRTC]
set -euo pipefail
cd "$(dirname "$0")/.."
py=${1:-python3}
trtc=${2:-target/release/trtc}
out=.cache/bench
[ -f $out/resnet50_legacy.onnx ] || "$py" benches/export_resnet50.py $out
for exporter in legacy dynamo; do
  m=$out/resnet50_$exporter.onnx
  [ -f "$m" ] || continue
  for mode in reuse no-reuse; do
    flag=""; [ $mode = no-reuse ] && flag="--no-buffer-reuse"
    start=$(date +%s.%N)
    $trtc build "$m" -o $out/r50_${exporter}_${mode}.engine $flag 2>/dev/null
    end=$(date +%s.%N)
    echo "== resnet50 $exporter, $mode: build $(echo "$end - $start" | bc) s"
    $trtc inspect $out/r50_${exporter}_${mode}.engine | grep -E "activations|weights|layers \("
    $trtc bench $out/r50_${exporter}_${mode}.engine --iterations 20 --warmup 3
  done
done
