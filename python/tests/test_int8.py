"""INT8 through Python calibrators gives what `trtc build --int8 --calib`
gives on the same batches, and calibration caches round-trip."""

import subprocess

import numpy as np
import pytest
import trtc


def batches(count, shape, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, size=shape).astype(np.float32) for _ in range(count)]


def cli_build(trtc_bin, model, out, *flags):
    subprocess.run([trtc_bin, "build", str(model), "-o", str(out), *flags], check=True, capture_output=True, timeout=600)
    return out.read_bytes()


@pytest.mark.parametrize(
    "make, flag",
    [
        (lambda b: trtc.EntropyCalibrator(b), "entropy"),
        (lambda b: trtc.MinMaxCalibrator(b), "minmax"),
        (lambda b: trtc.PercentileCalibrator(b, 99.9), "percentile=99.9"),
    ],
)
def test_python_calibrator_equals_the_cli(tmp_path, trtc_bin, example_model, make, flag):
    data = batches(5, (1, 3, 32, 32))
    calib_dir = tmp_path / "calib"
    calib_dir.mkdir()
    for i, b in enumerate(data):
        np.save(calib_dir / f"batch{i:02}.npy", b)
    want = cli_build(trtc_bin, example_model, tmp_path / "cli.engine", "--int8", "--calib", str(calib_dir), "--calibrator", flag)
    engine = trtc.build(example_model, int8=True, calibrator=make(iter(data)))
    assert engine.serialize() == want
    # The caches both write are the same too.
    cli_cache, py_cache = tmp_path / "cli.cache", tmp_path / "py.cache"
    calib_flags = ["--calib", str(calib_dir), "--calibrator", flag, "--calib-cache", str(cli_cache)]
    cli_build(trtc_bin, example_model, tmp_path / "cached.engine", "--int8", *calib_flags)
    calibrator = make(iter(data))
    calibrator.cache_file = str(py_cache)
    trtc.build(example_model, int8=True, calibrator=calibrator)
    assert py_cache.read_bytes() == cli_cache.read_bytes()
    assert "--int8" in engine.build_flags
    assert any(l["precision"] == "int8" for l in engine.inspect()["layers"])


def test_fp8_through_a_python_calibrator_equals_the_cli(tmp_path, trtc_bin, example_model):
    data = batches(4, (1, 3, 32, 32), seed=2)
    calib_dir = tmp_path / "calib"
    calib_dir.mkdir()
    for i, b in enumerate(data):
        np.save(calib_dir / f"batch{i:02}.npy", b)
    # --fp8 calibrates with min-max unless told otherwise.
    want = cli_build(trtc_bin, example_model, tmp_path / "cli.engine", "--fp8", "--calib", str(calib_dir))
    engine = trtc.build(example_model, fp8=True, calibrator=trtc.MinMaxCalibrator(iter(data)))
    assert engine.serialize() == want
    assert "--fp8" in engine.build_flags
    assert any(l["precision"] == "fp8" for l in engine.inspect()["layers"])
    with pytest.raises(trtc.BuildError, match="cannot be combined"):
        trtc.build(example_model, int8=True, fp8=True, calibrator=trtc.MinMaxCalibrator(iter(data)))


def test_a_generator_of_dicts_and_a_plain_object(example_model):
    data = batches(3, (1, 3, 32, 32), seed=1)

    class Plain:
        """Only get_batch, as the smallest TensorRT-style calibrator."""

        def __init__(self):
            self.calls = 0

        def get_batch(self):
            self.calls += 1
            return {"input": data[self.calls - 1]} if self.calls <= len(data) else None

    plain = Plain()
    a = trtc.build(example_model, int8=True, calibrator=plain)
    assert plain.calls == len(data) + 1
    b = trtc.build(example_model, int8=True, calibrator=trtc.EntropyCalibrator({"input": x} for x in data))
    assert a.serialize() == b.serialize()


def test_calib_batches_limits_the_batches_taken(example_model):
    data = batches(6, (1, 3, 32, 32), seed=2)
    limited = trtc.build(example_model, int8=True, calibrator=trtc.MinMaxCalibrator(data), calib_batches=2)
    first_two = trtc.build(example_model, int8=True, calibrator=trtc.MinMaxCalibrator(data[:2]))
    assert limited.serialize() == first_two.serialize()


def test_cache_round_trip(tmp_path, trtc_bin, example_model):
    data = batches(4, (1, 3, 32, 32), seed=3)
    cache = tmp_path / "calib.cache"
    first = trtc.build(example_model, int8=True, calibrator=trtc.EntropyCalibrator(data, cache_file=cache))
    text = cache.read_text()
    assert text.startswith("TRT-") and "input:" in text

    class NoBatches(trtc.EntropyCalibrator):
        def get_batch(self):
            raise AssertionError("the cache should have been used")

    # The cache through the calibrator, through calib_cache, and through the CLI.
    again = trtc.build(example_model, int8=True, calibrator=NoBatches([], cache_file=cache))
    by_file = trtc.build(example_model, int8=True, calib_cache=cache)
    cli = cli_build(trtc_bin, example_model, tmp_path / "cli.engine", "--int8", "--calib-cache", str(cache))
    assert again.serialize() == by_file.serialize() == cli
    x = data[0]
    assert np.array_equal(first.create_context(exact=True).run(x)["logits"], again.create_context(exact=True).run(x)["logits"])


def test_a_bad_cache_from_the_calibrator(example_model):
    class BadCache:
        def get_batch(self):
            return None

        def read_calibration_cache(self):
            return b"not a cache"

    with pytest.raises(trtc.BuildError) as err:
        trtc.build(example_model, int8=True, calibrator=BadCache())
    assert "read_calibration_cache" in str(err.value)


def test_fp16_observes_ranges_on_the_calibrator_batches(example_model):
    data = batches(2, (1, 3, 32, 32), seed=4)
    engine = trtc.build(example_model, fp16=True, calibrator=trtc.EntropyCalibrator(data))
    x = data[0]
    ref = trtc.build(example_model).create_context(exact=True).run(x)["logits"]
    out = engine.create_context().run(x)["logits"]
    assert np.max(np.abs(out - ref)) <= 1e-2 * np.max(np.abs(ref))


def test_a_tensorrt_style_calibrator_gets_the_input_names(example_model):
    """get_batch(names) as TensorRT calls it, returning arrays in that order."""
    data = batches(3, (1, 3, 32, 32), seed=6)

    class TensorRTStyle:
        def __init__(self):
            self.seen = []
            self.left = list(data)

        def get_batch(self, names):
            self.seen.append(list(names))
            return [self.left.pop(0)] if self.left else None

    calibrator = TensorRTStyle()
    a = trtc.build(example_model, int8=True, calibrator=calibrator)
    assert calibrator.seen == [["input"]] * 4
    b = trtc.build(example_model, int8=True, calibrator=trtc.EntropyCalibrator(data))
    assert a.serialize() == b.serialize()

    class WrongCount(TensorRTStyle):
        def get_batch(self, names):
            return [data[0], data[0]]

    with pytest.raises(trtc.BuildError, match="returned 2 arrays for 1 inputs"):
        trtc.build(example_model, int8=True, calibrator=WrongCount())
