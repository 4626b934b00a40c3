"""Optimization profiles from Python: profiles=[{name: (min, opt, max)}]
builds one engine that runs every batch in the range, as engines built for
each batch do; bindings report -1 on the axes that vary."""

import numpy as np
import pytest
import trtc

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


@pytest.fixture(scope="module")
def dynamic_cnn(tmp_path_factory):
    """x[N,3,16,16] -> Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> y[N,5]."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "B"),
        numpy_helper.from_array(rng.standard_normal((5, 8)).astype(np.float32), "G"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "G"], ["y"], name="fc", transB=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])
    model = helper.make_model(helper.make_graph(nodes, "dynamic", [x], [y], inits), opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path_factory.mktemp("profiles") / "cnn.onnx"
    onnx.save(model, path)
    return path


def test_one_engine_runs_every_batch_of_its_profile(dynamic_cnn):
    engine = trtc.build(dynamic_cnn, profiles=[{"x": ((1, 3, 16, 16), (4, 3, 16, 16), (8, 3, 16, 16))}])
    (x,) = engine.inputs
    assert x.shape == (-1, 3, 16, 16)
    assert (x.min_shape, x.opt_shape, x.max_shape) == ((1, 3, 16, 16), (4, 3, 16, 16), (8, 3, 16, 16))
    assert engine.outputs[0].shape == (-1, 5) and engine.outputs[0].max_shape == (8, 5)
    assert engine.inspect()["profiles"][0]["inputs"][0]["opt"] == [4, 3, 16, 16]
    ctx = engine.create_context(exact=True)
    rng = np.random.default_rng(1)
    for n in (3, 8, 1, 5):
        batch = rng.standard_normal((n, 3, 16, 16)).astype(np.float32)
        fixed = trtc.build(dynamic_cnn, shapes={"x": [n, 3, 16, 16]})
        want = fixed.create_context(exact=True).run(batch)["y"]
        got = ctx.run(batch)["y"]
        assert got.shape == (n, 5)
        assert np.array_equal(got, want), n
    with pytest.raises(trtc.BindingError, match="axis 0 is 9: allowed 1 to 8"):
        ctx.run(np.zeros((9, 3, 16, 16), np.float32))
    # The engine file keeps the profile.
    again = trtc.Engine.from_bytes(engine.serialize())
    assert again.inputs[0].shape == (-1, 3, 16, 16)


def test_a_gpu_engine_with_a_profile_builds_without_a_gpu(dynamic_cnn):
    # Its kernels are compiled for every batch of the profile; here it runs
    # on the CPU executor (a GPU context needs a GPU).
    profile = [{"x": ((1, 3, 16, 16), (4, 3, 16, 16), (8, 3, 16, 16))}]
    engine = trtc.build(dynamic_cnn, target="sm_90", opt_level=0, profiles=profile)
    assert engine.target == "sm_90" and engine.inputs[0].shape == (-1, 3, 16, 16)
    cpu_engine = trtc.build(dynamic_cnn, profiles=profile)
    rng = np.random.default_rng(2)
    for n in (1, 6, 8):
        batch = rng.standard_normal((n, 3, 16, 16)).astype(np.float32)
        got = engine.create_context(device="cpu", exact=True).run(batch)["y"]
        assert np.array_equal(got, cpu_engine.create_context(exact=True).run(batch)["y"]), n


def test_several_profiles(dynamic_cnn):
    small = {"x": ((1, 3, 16, 16), (2, 3, 16, 16), (2, 3, 16, 16))}
    large = {"x": ((4, 3, 16, 16), (8, 3, 16, 16), (8, 3, 16, 16))}
    engine = trtc.build(dynamic_cnn, profiles=[small, large])
    assert len(engine.inspect()["profiles"]) == 2
    ctx = engine.create_context(exact=True)
    for n in (1, 8, 2, 5):
        batch = np.ones((n, 3, 16, 16), np.float32)
        assert ctx.run(batch)["y"].shape == (n, 5)
    with pytest.raises(trtc.BindingError, match="outside each of its 2 profiles"):
        ctx.run(np.zeros((3, 3, 16, 16), np.float32))
    # A context set to one profile refuses shapes only the other admits.
    assert ctx.profile is None
    ctx.set_profile(1)
    assert ctx.profile == 1
    assert ctx.run(np.ones((5, 3, 16, 16), np.float32))["y"].shape == (5, 5)
    with pytest.raises(trtc.BindingError, match="outside profile 1, which the context uses"):
        ctx.run(np.ones((2, 3, 16, 16), np.float32))
    ctx.set_profile(None)
    assert ctx.run(np.ones((2, 3, 16, 16), np.float32))["y"].shape == (2, 5)
    with pytest.raises(trtc.BindingError, match="profile 2 does not exist"):
        ctx.set_profile(2)


def test_bad_profiles(dynamic_cnn):
    with pytest.raises(trtc.BuildError, match="an empty list"):
        trtc.build(dynamic_cnn, profiles=[])
    with pytest.raises(trtc.BuildError, match="does not hold"):
        trtc.build(dynamic_cnn, profiles=[{"x": ((4, 3, 16, 16), (2, 3, 16, 16), (8, 3, 16, 16))}])
    with pytest.raises(TypeError):
        trtc.build(dynamic_cnn, profiles=[{"x": "1x3x16x16"}])
    with pytest.raises(trtc.BuildError, match="symbolic dimension"):
        trtc.build(dynamic_cnn)
