"""INT8 calibrators shaped like TensorRT's.

``trtc.build(..., int8=True, calibrator=c)`` accepts any object with

- ``get_batch()``: the next batch, a dict of numpy arrays by input name (or
  one array for a single-input model), or ``None`` when there are no more.
  A ``get_batch(names)`` that takes the input names, as TensorRT's
  calibrators do, is called with them (a list of str); it may return the
  arrays in that order as a list;
- optionally ``read_calibration_cache()``: the bytes of an earlier
  calibration (TensorRT's text format), or ``None`` to calibrate;
- optionally ``write_calibration_cache(cache: bytes)``: called with the new
  cache after calibrating;
- optionally ``algorithm``: ``"entropy"`` (the default, TensorRT's
  EntropyCalibration2), ``"minmax"``, ``"percentile=P"`` or ``"auto"`` (per
  tensor, whichever of the three gives the layers reading it the least
  error on the calibration data).

The classes here wrap any iterable of batches (a list, a generator, a
DataLoader yielding numpy arrays) and keep the cache in a file.
"""

import inspect
import os
from typing import Any, Iterable, Optional


def _wants_names(get_batch) -> bool:
    """Whether ``get_batch`` takes a required argument (TensorRT's
    ``get_batch(self, names)``)."""
    try:
        params = inspect.signature(get_batch).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return any(p.kind in positional and p.default is inspect.Parameter.empty for p in params)


class Calibrator:
    """Feeds ``batches`` to the build and keeps the cache in ``cache_file``.

    With an existing ``cache_file`` no calibration runs: its scales are used.
    """

    algorithm = "entropy"

    def __init__(self, batches: Iterable[Any], cache_file: Optional[str] = None):
        self._batches = iter(batches)
        self.cache_file = None if cache_file is None else os.fspath(cache_file)

    def get_batch(self) -> Optional[Any]:
        return next(self._batches, None)

    def read_calibration_cache(self) -> Optional[bytes]:
        if self.cache_file is not None and os.path.exists(self.cache_file):
            with open(self.cache_file, "rb") as f:
                return f.read()
        return None

    def write_calibration_cache(self, cache: bytes) -> None:
        if self.cache_file is not None:
            with open(self.cache_file, "wb") as f:
                f.write(cache)


class EntropyCalibrator(Calibrator):
    """The threshold that minimizes the KL divergence of the 8-bit
    histogram (TensorRT's IInt8EntropyCalibrator2)."""

    algorithm = "entropy"


class MinMaxCalibrator(Calibrator):
    """The largest |x| seen (TensorRT's IInt8MinMaxCalibrator)."""

    algorithm = "minmax"


class PercentileCalibrator(Calibrator):
    """The ``percentile``-th percentile of |x| (0 < percentile <= 100)."""

    def __init__(self, batches: Iterable[Any], percentile: float = 99.99, cache_file: Optional[str] = None):
        super().__init__(batches, cache_file)
        percentile = float(percentile)
        if not 0.0 < percentile <= 100.0:
            raise ValueError(f"percentile must be in (0, 100], not {percentile}")
        self.algorithm = f"percentile={percentile!r}"
