"""Every exported test model builds and runs from Python and matches
onnxruntime's recorded outputs, as the Rust model tests require."""

import numpy as np
import pytest
import trtc

from conftest import MODELS, manifest_models, recorded, relative_error

MODELS_OK = manifest_models()


def test_the_manifest_lists_the_models():
    assert len(MODELS_OK) >= 33


@pytest.mark.parametrize("model", MODELS_OK, ids=[m["name"] for m in MODELS_OK])
def test_model_matches_onnxruntime(model):
    engine = trtc.build(MODELS / model["file"])
    inputs = recorded(MODELS / model["inputs_file"])
    expected = recorded(MODELS / model["outputs_file"])
    assert [b.name for b in engine.inputs] == [i["name"] for i in model["inputs"]]
    for b, declared in zip(engine.inputs, model["inputs"]):
        assert b.dtype == np.dtype(declared["dtype"])
        assert b.shape == tuple(inputs[b.name].shape)
    # The reference arithmetic on one thread and the fast kernels on two.
    for options in ({"exact": True, "threads": 1}, {"threads": 2}):
        outputs = engine.create_context(device="cpu", **options).run(inputs)
        assert list(outputs) == [b.name for b in engine.outputs]
        assert sorted(outputs) == sorted(expected)
        for name, ref in expected.items():
            assert outputs[name].shape == ref.shape, name
            assert outputs[name].dtype == ref.dtype, name
            err = relative_error(outputs[name], ref)
            assert err <= 1e-4, f"{model['name']} {name} ({options}): max err / max |ref| = {err:.2e}"


def test_engine_round_trips_through_a_file_and_bytes(tmp_path, example_model):
    engine = trtc.build(example_model)
    path = tmp_path / "model.engine"
    engine.save(path)
    assert path.read_bytes() == engine.serialize()
    loaded = trtc.Engine.load(str(path))
    again = trtc.Engine.from_bytes(path.read_bytes())
    x = np.random.default_rng(0).standard_normal(engine.inputs[0].shape).astype(np.float32)
    want = engine.create_context(exact=True).run(x)["logits"]
    for e in (loaded, again):
        assert np.array_equal(e.create_context(exact=True).run(x)["logits"], want)


def test_bytes_and_path_give_the_same_engine(example_model):
    assert trtc.build(example_model.read_bytes()).serialize() == trtc.build(str(example_model)).serialize()


def test_inspect_reports_bindings_and_layers(example_model):
    engine = trtc.build(example_model, fp16=True)
    report = engine.inspect()
    assert report["target"] == "cpu"
    assert [i["name"] for i in report["inputs"]] == ["input"]
    assert report["layers"] and all({"name", "op", "precision"} <= set(l) for l in report["layers"])
    assert any(l["precision"] == "fp16" for l in report["layers"])
    assert "--fp16" in engine.build_flags


def test_inputs_are_read_from_array_likes(example_model):
    engine = trtc.build(example_model)
    ctx = engine.create_context(exact=True)
    x = np.random.default_rng(1).standard_normal(engine.inputs[0].shape).astype(np.float32)
    want = ctx.run({"input": x})["logits"]
    # A non-contiguous view, a nested list and a one-array call all agree.
    strided = np.asfortranarray(x)
    assert not strided.flags.c_contiguous
    assert np.array_equal(ctx.run({"input": strided})["logits"], want)
    assert np.array_equal(ctx.run({"input": x.tolist()})["logits"], want)
    assert np.array_equal(ctx.run(x)["logits"], want)


def test_outputs_are_new_arrays(example_model):
    engine = trtc.build(example_model)
    ctx = engine.create_context()
    x = np.zeros(engine.inputs[0].shape, np.float32)
    first = ctx.run(x)["logits"]
    kept = first.copy()
    ctx.run(np.ones_like(x))
    assert np.array_equal(first, kept)
    assert first.flags.writeable
