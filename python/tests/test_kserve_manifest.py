"""examples/kserve: the InferenceService's container arguments start
`trtc serve` on a model repository, and its probes' paths answer (no
cluster needed: the container's command runs here, on free ports)."""

import json
import socket
import subprocess
import time
import urllib.request

import pytest
import trtc

from conftest import REPO

yaml = pytest.importorskip("yaml")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_manifest_args_serve_a_repository(tmp_path, trtc_bin, example_model):
    manifest = yaml.safe_load((REPO / "examples" / "kserve" / "inferenceservice.yaml").read_text())
    assert manifest["kind"] == "InferenceService"
    container = manifest["spec"]["predictor"]["containers"][0]
    assert container["name"] == "kserve-container"
    assert any(e["name"] == "STORAGE_URI" for e in container["env"])
    args = list(container["args"])
    served_port = int(args[args.index("--http-port") + 1])
    assert container["ports"][0]["containerPort"] == served_port

    # The storage initializer's /mnt/models, and ports free on this machine.
    repo = tmp_path / "models"
    (repo / "cnn" / "1").mkdir(parents=True)
    trtc.build(example_model).save(repo / "cnn" / "1" / "model.engine")
    http = free_port()
    replace = {"/mnt/models": str(repo), "0.0.0.0": "127.0.0.1", str(served_port): str(http)}
    for flag in ("--grpc-port", "--metrics-port"):
        replace[args[args.index(flag) + 1]] = str(free_port())
    args = [replace.get(a, a) for a in args]

    server = subprocess.Popen([trtc_bin, "serve", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{http}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + container["readinessProbe"]["httpGet"]["path"], timeout=5) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert server.poll() is None, server.stdout.read().decode()
                if time.monotonic() > deadline:
                    server.terminate()
                    pytest.fail(f"trtc serve did not get ready in 60 s: {server.communicate(timeout=30)[0].decode()[-2000:]}")
                time.sleep(0.2)
        with urllib.request.urlopen(base + container["livenessProbe"]["httpGet"]["path"], timeout=5) as r:
            assert r.status == 200
        with urllib.request.urlopen(base + "/v2/models/cnn", timeout=5) as r:
            meta = json.loads(r.read())
        assert meta["name"] == "cnn" and meta["inputs"][0]["name"] == "input"
    finally:
        server.terminate()
        server.wait(timeout=30)
