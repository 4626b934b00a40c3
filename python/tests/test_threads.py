"""Contexts on several Python threads: the same outputs as one thread, and
faster, since the GIL is released while an engine runs."""

import os
import threading
import time

import numpy as np
import pytest
import trtc

from conftest import MODELS


@pytest.fixture(scope="module")
def engine():
    return trtc.build(MODELS / "resnet18_dynamo.onnx")


def inputs(engine, count):
    rng = np.random.default_rng(5)
    return [rng.standard_normal(engine.inputs[0].shape).astype(np.float32) for _ in range(count)]


def run_all(engine, xs, threads):
    """Runs every input, split over `threads` Python threads with one
    single-threaded context each; returns the outputs in input order and
    the wall time."""
    out = [None] * len(xs)
    errors = []

    def work(k):
        try:
            ctx = engine.create_context(threads=1, exact=True)
            for i in range(k, len(xs), threads):
                out[i] = ctx.run(xs[i])["logits"]
        except Exception as e:  # reported below
            errors.append(e)

    start = time.perf_counter()
    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - start
    assert not errors, errors
    return out, elapsed


def test_four_threads_give_the_outputs_of_one(engine):
    xs = inputs(engine, 12)
    one, _ = run_all(engine, xs, 1)
    four, _ = run_all(engine, xs, 4)
    for a, b in zip(one, four):
        assert np.array_equal(a, b)


def test_one_context_shared_by_threads_takes_turns(engine):
    xs = inputs(engine, 8)
    ctx = engine.create_context(threads=1, exact=True)
    want = [ctx.run(x)["logits"] for x in xs]
    got = [None] * len(xs)

    def work(i):
        got[i] = ctx.run(xs[i])["logits"]

    workers = [threading.Thread(target=work, args=(i,)) for i in range(len(xs))]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for a, b in zip(want, got):
        assert np.array_equal(a, b)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores to run in parallel")
def test_threads_run_in_parallel(engine):
    # A ratio, not a time: 4 threads on 2 or more cores must beat one
    # thread clearly; the best of 10 attempts (each a few milliseconds)
    # absorbs a busy machine (with 3, one fresh-clone run in three here
    # missed it).
    xs = inputs(engine, 16)
    run_all(engine, xs[:2], 1)
    ratios = []
    for _ in range(10):
        _, sequential = run_all(engine, xs, 1)
        _, parallel = run_all(engine, xs, 4)
        ratios.append(parallel / sequential)
        if ratios[-1] < 0.8:
            break
    assert min(ratios) < 0.8, f"4 threads took {min(ratios):.2f}x the time of one (the GIL is not released?)"
