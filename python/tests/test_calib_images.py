"""scripts/calib_images.py, the example calibration script: its batch files
and its --build path through the package give the same engine."""

import subprocess
import sys

import numpy as np
import pytest
import trtc

from conftest import REPO

Image = pytest.importorskip("PIL.Image")
SCRIPT = REPO / "scripts" / "calib_images.py"


@pytest.fixture()
def images(tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    rng = np.random.default_rng(7)
    for i in range(5):
        pixels = rng.integers(0, 256, size=(40 + i, 48, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"img{i}.png")
    (folder / "broken.png").write_bytes(b"not an image")
    return folder


def script(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=300)


def test_build_equals_the_cli_on_the_written_batches(tmp_path, images, trtc_bin, example_model):
    common = ["--batch", "1", "--resize", "32", "--crop", "32"]
    batches = tmp_path / "batches"
    done = script(images, batches, *common)
    assert done.returncode == 0, done.stderr
    assert "1 unreadable" in done.stdout and len(list(batches.glob("batch_*.npz"))) == 5

    cli_engine = tmp_path / "cli.engine"
    subprocess.run([trtc_bin, "build", str(example_model), "-o", str(cli_engine), "--int8", "--calib", str(batches)], check=True, capture_output=True)
    engine = tmp_path / "py.engine"
    cache = tmp_path / "model.cache"
    done = script(images, engine, *common, "--build", example_model, "--calib-cache", cache)
    assert done.returncode == 0, done.stderr
    assert "in int8" in done.stdout and cache.read_text().startswith("TRT-")
    a = trtc.Engine.load(engine)
    b = trtc.Engine.load(cli_engine)
    x = np.load(batches / "batch_00000.npz")["input"]
    assert np.array_equal(a.create_context(exact=True).run(x)["logits"], b.create_context(exact=True).run(x)["logits"])


def test_build_errors_are_one_line(tmp_path, images):
    done = script(images, tmp_path / "e.engine", "--batch", "1", "--resize", "32", "--crop", "16", "--build", REPO / "testdata" / "models" / "example_cnn.onnx")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("error: calibration batch 0")
    done = script(images, tmp_path / "out", "--calib-cache", tmp_path / "c.cache")
    assert done.returncode == 2 and "go with --build" in done.stderr
