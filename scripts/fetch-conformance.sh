#!/usr/bin/env bash
# Fetches ONNX's backend conformance suite (the test data inside the
# onnx==1.16.2 wheel; newer wheels no longer ship node/) into .cache/.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.cache/onnx-backend-1.16.2
if [ -d "$dest/node" ] && [ "$(ls "$dest/node" | wc -l)" -ge 1282 ]; then
  exit 0
fi
mkdir -p .cache/wheel
python3 -m pip download --quiet --no-deps --only-binary=:all: onnx==1.16.2 -d .cache/wheel \
  --python-version 3.11 --platform manylinux_2_17_x86_64 --implementation cp
wheel=$(ls .cache/wheel/onnx-1.16.2-*.whl | head -1)
rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
python3 - "$wheel" "$dest.tmp" <<'PY'
import sys, zipfile, os
wheel, out = sys.argv[1], sys.argv[2]
prefix = "onnx/backend/test/data/"
with zipfile.ZipFile(wheel) as z:
    for n in z.namelist():
        if n.startswith(prefix) and not n.endswith("/"):
            target = os.path.join(out, n[len(prefix):])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(z.read(n))
PY
rm -rf "$dest" && mv "$dest.tmp" "$dest"
echo "conformance suite in $dest: $(ls "$dest/node" | wc -l) node cases"
