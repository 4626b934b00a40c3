"""trtc from Python: build, calibrate and run engines.

    import numpy as np, trtc

    engine = trtc.build("model.onnx", fp16=True)          # or trtc.Engine.load("model.engine")
    ctx = engine.create_context()
    outputs = ctx.run({"input": np.zeros((1, 3, 224, 224), np.float32)})

Everything trtc raises derives from :class:`trtc.Error`, with the same
one-line messages as the ``trtc`` command.
"""

from ._errors import (
    ArgumentError,
    BindingError,
    BuildError,
    DeviceError,
    EngineError,
    Error,
    ExecutionError,
    FileError,
    InternalError,
)
from ._trtc import Binding, Context, Engine, __version__, build
from .calibration import Calibrator, EntropyCalibrator, MinMaxCalibrator, PercentileCalibrator

__all__ = [
    "ArgumentError",
    "Binding",
    "BindingError",
    "BuildError",
    "Calibrator",
    "Context",
    "DeviceError",
    "Engine",
    "EngineError",
    "EntropyCalibrator",
    "Error",
    "ExecutionError",
    "FileError",
    "InternalError",
    "MinMaxCalibrator",
    "PercentileCalibrator",
    "__version__",
    "build",
]
