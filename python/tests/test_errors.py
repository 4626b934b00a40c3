"""Bad models, options, inputs and engines raise trtc.Error subclasses with
one-line messages; nothing a caller passes crashes the interpreter."""

import os

import numpy as np
import pytest
import trtc

from conftest import MODELS


def one_line(err):
    message = str(err.value)
    assert message and "\n" not in message, repr(message)
    return message


@pytest.fixture(scope="module")
def engine(example_model):
    return trtc.build(example_model)


@pytest.fixture(scope="module")
def bert():
    return trtc.build(MODELS / "bert_dynamo.onnx")


def test_the_exceptions_derive_from_trtc_error_and_the_builtins():
    for cls in (trtc.BuildError, trtc.EngineError, trtc.BindingError, trtc.ExecutionError, trtc.DeviceError, trtc.FileError, trtc.ArgumentError):
        assert issubclass(cls, trtc.Error)
    assert issubclass(trtc.FileError, OSError)
    assert issubclass(trtc.BindingError, ValueError)
    assert issubclass(trtc.EngineError, ValueError)


@pytest.mark.parametrize(
    "model, expected",
    [
        (b"", "not a valid ONNX model"),
        (b"\x08\x07garbage\xff\xff", "not a valid ONNX model"),
        (b"\xff" * 64, "not a valid ONNX model"),
    ],
)
def test_malformed_model_bytes(model, expected):
    with pytest.raises(trtc.BuildError) as err:
        trtc.build(model)
    assert expected in one_line(err)


def test_truncated_model_file(tmp_path, example_model):
    data = example_model.read_bytes()
    path = tmp_path / "truncated.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(trtc.BuildError) as err:
        trtc.build(path)
    assert str(path) in one_line(err)


def test_missing_model_file_and_a_directory(tmp_path):
    with pytest.raises(trtc.BuildError) as err:
        trtc.build(tmp_path / "absent.onnx")
    assert "absent.onnx" in one_line(err)
    with pytest.raises(trtc.BuildError):
        trtc.build(tmp_path)


def test_model_of_the_wrong_type():
    with pytest.raises(TypeError):
        trtc.build(12)


@pytest.mark.parametrize(
    "options, expected",
    [
        ({"target": "sm_70"}, "sm_80"),
        ({"target": "tpu"}, "expected cpu, cuda or sm_XX"),
        ({"opt_level": 3}, "tune GPU kernels"),
        ({"timing_cache": "t.cache"}, "tune GPU kernels"),
        ({"target": "sm_90", "opt_level": 9}, "0 to 5"),
        ({"calib_cache": "c.cache"}, "needs int8=True"),
        ({"int8": True}, "needs calibration data"),
        ({"layer_precision": {"/conv1/*": "bf16"}}, "not a precision"),
        ({"layer_precision": ["nothing-to-split"]}, "expected NAME=PRECISION"),
        ({"int8": True, "calib_batches": 0, "calibrator": trtc.EntropyCalibrator([])}, "at least 1"),
        ({"int8": True, "calibrator": trtc.EntropyCalibrator([])}, "gave no batch"),
        ({"shapes": {"input": [1, 3, 16, 16, 2]}}, "input"),
    ],
)
def test_bad_build_options(example_model, options, expected):
    with pytest.raises(trtc.Error) as err:
        trtc.build(example_model, **options)
    assert expected in one_line(err)


def test_a_calibrator_that_fails_raises_its_own_exception(example_model):
    class Broken:
        def get_batch(self):
            raise KeyError("from the calibrator")

    with pytest.raises(KeyError, match="from the calibrator"):
        trtc.build(example_model, int8=True, calibrator=Broken())


@pytest.mark.parametrize(
    "batch, expected",
    [
        ({"input": np.zeros((2, 3, 32, 32), np.float32)}, "the engine's input is f32[1,3,32,32]"),
        ({"image": np.zeros((1, 3, 32, 32), np.float32)}, "no input named 'image'"),
        ({"input": np.zeros((1, 3, 32, 32), np.int64)}, "must be f32"),
        ({"input": "not an array"}, "input"),
        ({}, "no array for the input 'input'"),
    ],
)
def test_bad_calibration_batches(example_model, batch, expected):
    with pytest.raises(trtc.BuildError) as err:
        trtc.build(example_model, int8=True, calibrator=trtc.EntropyCalibrator([batch]))
    assert "calibration batch 0" in one_line(err) and expected in str(err.value)


def test_bad_input_dtype(engine):
    ctx = engine.create_context()
    with pytest.raises(trtc.BindingError) as err:
        ctx.run({"input": np.zeros((1, 3, 32, 32), np.float64)})
    assert "must be f32" in one_line(err) and "float64" in str(err.value)
    with pytest.raises(trtc.BindingError):
        ctx.run({"input": np.zeros((1, 3, 32, 32), ">f4")})


def test_bad_input_shapes(engine):
    ctx = engine.create_context()
    for shape in [(1, 3, 32), (1, 3, 32, 31), (2, 3, 32, 32), ()]:
        with pytest.raises(trtc.BindingError) as err:
            ctx.run({"input": np.zeros(shape, np.float32)})
        assert "must be f32[1,3,32,32]" in one_line(err)


def test_missing_unknown_and_odd_inputs(engine, bert):
    ctx = engine.create_context()
    x = np.zeros((1, 3, 32, 32), np.float32)
    with pytest.raises(trtc.BindingError) as err:
        ctx.run({})
    assert "missing input 'input'" in one_line(err)
    with pytest.raises(trtc.BindingError) as err:
        ctx.run({"input": x, "extra": x})
    assert "unknown input 'extra'" in one_line(err)
    with pytest.raises(trtc.BindingError):
        ctx.run({1: x})
    with pytest.raises(trtc.BindingError):
        ctx.run({"input": np.array([object()] * 3072, dtype=object).reshape(1, 3, 32, 32)})
    with pytest.raises(trtc.BindingError) as err:
        bert.create_context().run(np.zeros((1, 8), np.int64))
    assert "pass a dict" in one_line(err)


def test_corrupted_and_truncated_engines(tmp_path, engine):
    data = bytearray(engine.serialize())
    for bad in (b"", bytes(data[:100]), bytes(data[: len(data) - 1]), b"TRTC" + b"\0" * 60):
        with pytest.raises(trtc.EngineError) as err:
            trtc.Engine.from_bytes(bad)
        one_line(err)
    flipped = bytearray(data)
    flipped[len(flipped) // 2] ^= 0xFF
    with pytest.raises(trtc.EngineError) as err:
        trtc.Engine.from_bytes(bytes(flipped))
    one_line(err)
    path = tmp_path / "bad.engine"
    path.write_bytes(bytes(flipped))
    with pytest.raises(trtc.EngineError):
        trtc.Engine.load(path)


def test_unreadable_engine_paths(tmp_path):
    with pytest.raises(trtc.FileError) as err:
        trtc.Engine.load(tmp_path / "absent.engine")
    assert isinstance(err.value, OSError) and "absent.engine" in one_line(err)
    with pytest.raises(trtc.Error):
        trtc.Engine.load(tmp_path)
    if os.path.exists("/dev/zero"):
        with pytest.raises(trtc.Error):
            trtc.Engine.load("/dev/zero")


def test_gpu_requests_without_a_gpu(engine):
    with pytest.raises(trtc.DeviceError) as err:
        engine.create_context(device="cuda")
    assert "built for the CPU" in one_line(err)
    with pytest.raises(trtc.ArgumentError) as err:
        engine.create_context(device="tpu")
    assert "expected 'auto', 'cpu' or 'cuda'" in one_line(err)


def test_bad_thread_counts(engine):
    for threads in (0, 10**6):
        with pytest.raises(trtc.ArgumentError) as err:
            engine.create_context(threads=threads)
        assert "threads must be between 1 and" in one_line(err)
    with pytest.raises(OverflowError):
        engine.create_context(threads=-1)


def test_gpu_engines_on_a_machine_without_a_gpu(example_model):
    engine = trtc.build(example_model, target="sm_90", opt_level=0)
    assert engine.target == "sm_90"
    try:
        engine.create_context(device="cuda")
    except trtc.DeviceError as err:
        assert "\n" not in str(err)
    else:
        pytest.skip("this machine has a GPU that runs sm_90 engines")
    # auto falls back to the CPU executor and says why, as `trtc run` does.
    with pytest.warns(RuntimeWarning, match="running on the cpu"):
        ctx = engine.create_context()
    assert ctx.device == "cpu"
    x = np.zeros(engine.inputs[0].shape, np.float32)
    assert ctx.run(x)["logits"].shape == engine.outputs[0].shape
    with pytest.raises(trtc.ArgumentError, match="needs a context on a GPU"):
        ctx.run_device({"input": x}, {})
