#!/usr/bin/env bash
# Build time of every testdata model, CPU target vs sm_90 (kernel selection
# plus NVRTC compiling each distinct kernel once, on all CPU threads), with
# the release binary. Medians of 3 builds each.
#   bash benches/build_times.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/fetch-nvrtc.sh >/dev/null
export TRTC_NVRTC_PATH=${TRTC_NVRTC_PATH:-$PWD/.cache/nvrtc/nvidia/cu13/lib}
cargo build --release --locked -q -p trtc --bin trtc
T=target/release/trtc
tmp=$(mktemp -d)
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
time_build() { # model target
    for i in 1 2 3; do
        local t0=$(date +%s%N)
        $T build "$1" -o "$tmp/e" --target "$2" > "$tmp/log" 2>&1 || { echo fail; return; }
        echo $(( ($(date +%s%N) - t0) / 1000000 ))
    done | median
}
echo "| model | layers | cpu ms | sm_90 ms | kernels | host layers |"
echo "|---|---|---|---|---|---|"
for m in testdata/models/*.onnx; do
    cpu=$(time_build "$m" cpu)
    gpu=$(time_build "$m" sm_90)
    k=$(grep -o "[0-9]* cubins" "$tmp/log" | cut -d' ' -f1)
    layers=$(grep -o "([0-9]* layers" "$tmp/log" | tr -dc 0-9)
    host=$(grep -o "[0-9]* on the host" "$tmp/log" | cut -d' ' -f1)
    echo "| $(basename "$m" .onnx) | $layers | $cpu | $gpu | $k | $host |"
done
rm -rf "$tmp"
