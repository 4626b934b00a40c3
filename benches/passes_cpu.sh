#!/usr/bin/env bash
# Node counts and CPU-executor latency with all optimization passes on and
# off (`--disable-pass all`), measured back to back in one run.
# Usage: benches/passes_cpu.sh [TRTC] MODEL.onnx...
set -euo pipefail
trtc=${1:-target/release/trtc}; shift
tmp=$(mktemp -d)
printf "| model | nodes imported | nodes optimized | median off (ms) | median on (ms) | on/off |\n|---|---|---|---|---|---|\n"
for m in "$@"; do
  name=$(basename "$m" .onnx)
  $trtc build "$m" -o $tmp/off.engine --disable-pass all 2>/dev/null
  nodes=$($trtc build "$m" -o $tmp/on.engine -v 2>&1 | grep -E "^imported|-> [0-9]+ nodes" | tail -1 | sed -E 's/.*-> ([0-9]+) nodes/\1/')
  imported=$($trtc inspect $tmp/off.engine | sed -nE 's/^layers \(([0-9]+)\):/\1/p')
  off=$($trtc bench $tmp/off.engine --iterations 20 --warmup 3 --json | sed -E 's/.*"median_ms":([0-9.]+).*/\1/')
  on=$($trtc bench $tmp/on.engine --iterations 20 --warmup 3 --json | sed -E 's/.*"median_ms":([0-9.]+).*/\1/')
  printf "| %s | %s | %s | %.3f | %.3f | %.2f |\n" "$name" "$imported" "$nodes" "$off" "$on" "$(echo "$on / $off" | bc -l)"
done
rm -rf $tmp
