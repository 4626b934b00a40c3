"""examples/ray_serve: 2 replicas of a trtc engine behind Ray Serve on this
machine (CPU only), 64 concurrent HTTP requests, every answer correct and
requests batched."""

import concurrent.futures
import json
import os
import socket
import sys
import urllib.request

import numpy as np
import pytest
import trtc

from conftest import REPO

# On a busy 2-core machine Ray Serve's HTTP proxy can take longer than the
# default 5 s readiness check (seen while a build shared the cores): its
# controller then kills it and `serve.start` fails. Generous limits, set
# before Ray starts so that its processes inherit them.
RAY_ENV = {"RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "60", "RAY_SERVE_PROXY_HEALTH_CHECK_TIMEOUT_S": "60"}
os.environ.update(RAY_ENV)

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body, timeout=120):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def get(url, timeout=60):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


@pytest.fixture(scope="module")
def served(tmp_path_factory, example_model):
    engine_path = tmp_path_factory.mktemp("ray") / "model.engine"
    trtc.build(example_model).save(engine_path)
    port = free_port()
    sys.path.insert(0, str(REPO / "examples" / "ray_serve"))
    import app as ray_app

    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=100 * 1024 * 1024, runtime_env={"env_vars": {"PYTHONPATH": str(REPO / "examples" / "ray_serve"), **RAY_ENV}})
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        application = ray_app.app_builder(
            {"engine": str(engine_path), "replicas": "2", "cpus_per_replica": "1", "device": "cpu", "max_batch_size": "8", "batch_wait_timeout_s": "0.05"}
        )
        serve.run(application, name="trtc", route_prefix="/")
        yield f"http://127.0.0.1:{port}", trtc.Engine.load(engine_path)
    finally:
        serve.shutdown()
        ray.shutdown()
        sys.path.remove(str(REPO / "examples" / "ray_serve"))


def test_concurrent_requests_are_batched_and_correct(served):
    url, engine = served
    rng = np.random.default_rng(11)
    samples = [rng.standard_normal((3, 32, 32)).astype(np.float32) for _ in range(64)]
    local = engine.create_context(device="cpu", threads=1)
    expected = [local.run(s[None])["logits"][0] for s in samples]
    with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
        answers = list(pool.map(lambda s: post(url + "/", {"inputs": {"input": s.tolist()}}), samples))
    for got, want in zip(answers, expected):
        np.testing.assert_allclose(np.asarray(got["outputs"]["logits"], np.float32), want, rtol=1e-5, atol=1e-6)
    # Both replicas answered, and at least one formed a batch of several
    # requests. Ray's router picks the replica a /stats request reaches,
    # so poll until both have reported (or 400 polls).
    stats = {}
    for _ in range(400):
        s = get(url + "/stats")
        stats[s["pid"]] = s["batch_sizes"]
        if sum(sum(v) for v in stats.values()) >= 64:
            break
    assert sum(sum(v) for v in stats.values()) >= 64
    assert max(max(v, default=0) for v in stats.values()) > 1, stats


def test_bad_requests_get_400(served):
    url, _ = served
    for body in ({}, {"inputs": {"x": [1.0]}}, {"inputs": {"input": [1.0, 2.0]}}):
        with pytest.raises(urllib.error.HTTPError) as err:
            post(url + "/", body)
        assert err.value.code == 400
