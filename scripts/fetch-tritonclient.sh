#!/usr/bin/env bash
# Makes a Python venv in .cache/tritonclient with Triton's own client library
# (tritonclient[http,grpc] from PyPI) and numpy: the server tests talk to
# `trtc serve` through it, as users do.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.cache/tritonclient
[ -f $dest/.complete-2.73.0-grpc ] && exit 0
rm -rf $dest
python3 -m venv $dest
$dest/bin/pip install --quiet --disable-pip-version-check "tritonclient[http,grpc]==2.73.0" "numpy==2.4.6"
touch $dest/.complete-2.73.0-grpc
echo "tritonclient in $dest"
