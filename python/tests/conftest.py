"""Shared fixtures: the repository's test models and the `trtc` binary."""

import json
import os
import pathlib
import shutil

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
MODELS = REPO / "testdata" / "models"


def manifest_models():
    """The exported test models (testdata/models/manifest.json)."""
    manifest = json.loads((MODELS / "manifest.json").read_text())
    return [m for m in manifest["models"] if m["status"] == "ok"]


def recorded(path):
    """An .npz file as a dict of arrays."""
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def relative_error(ours, ref):
    """max |ours - ref| / max |ref| (the Rust model tests' measure)."""
    ours = np.asarray(ours, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    scale = max(np.max(np.abs(ref)) if ref.size else 0.0, 1e-30)
    return float(np.max(np.abs(ours - ref)) / scale) if ref.size else 0.0


@pytest.fixture(scope="session")
def example_model():
    return MODELS / "example_cnn.onnx"


@pytest.fixture(scope="session")
def trtc_bin():
    """The `trtc` command: $TRTC_BIN, else the workspace's debug or release
    build, else one on PATH."""
    candidates = [os.environ.get("TRTC_BIN"), REPO / "target" / "debug" / "trtc", REPO / "target" / "release" / "trtc"]
    for c in candidates:
        if c and pathlib.Path(c).is_file():
            return str(c)
    found = shutil.which("trtc")
    if found is None:
        pytest.fail("no trtc binary: build it with `cargo build -p trtc --bin trtc` or set TRTC_BIN")
    return found
