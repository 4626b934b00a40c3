"""Type stubs of trtc's native module (re-exported by the ``trtc`` package)."""

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str

PathLike = Union[str, "os.PathLike[str]"]

class Binding:
    """One input or output of an engine."""

    name: str
    """The ONNX name."""
    dtype: np.dtype
    """The numpy dtype of its arrays. numpy has no bfloat16 or 8-bit float
    types: those bindings hold their raw words (uint16, uint8)."""
    element_type: str
    """trtc's element type: f32, f16, bf16, i64, f8e4m3fn, ..."""
    shape: Tuple[int, ...]
    """The shape; -1 on the axes that vary within the engine's profile."""
    min_shape: Tuple[int, ...]
    """The profile's smallest shape (``shape`` when nothing varies)."""
    opt_shape: Tuple[int, ...]
    max_shape: Tuple[int, ...]

class Context:
    """Runs one engine (its activation memory; on a GPU, its stream). Make
    one per thread: calls on one context from several threads take turns."""

    @property
    def engine(self) -> "Engine": ...
    @property
    def device(self) -> str:
        """``cpu`` or ``cuda:0``."""
    @property
    def threads(self) -> int:
        """Threads each CPU layer may use (0 on a GPU)."""
    @property
    def profile(self) -> Optional[int]:
        """The optimization profile set with :meth:`set_profile`, or None."""
    def set_profile(self, index: Optional[int]) -> None:
        """Makes every run use optimization profile ``index`` (None: the
        first profile that admits a run's shapes), as TensorRT's
        ``set_optimization_profile_async``. Shapes outside it are refused
        even when another profile admits them. CPU contexts only.

        Raises :class:`trtc.BindingError` for a profile the engine lacks,
        :class:`trtc.ArgumentError` on a GPU context.
        """
    def run(self, inputs: Union[Mapping[str, npt.ArrayLike], npt.ArrayLike]) -> Dict[str, np.ndarray]:
        """Runs the engine and returns its outputs by name, in binding order.

        ``inputs`` maps input names to arrays, or is one array for an engine
        with one input. numpy arrays must have the binding's dtype (no
        silent narrowing); C-contiguous ones are read in place. Other
        array-likes (lists, scalars) are converted. The GIL is released
        while the engine runs.

        Raises :class:`trtc.BindingError` for unknown, missing, mistyped or
        misshapen inputs, :class:`trtc.ExecutionError` when a layer fails.
        """

    def run_device(self, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> Dict[str, Any]:
        """Runs the engine on arrays already on the GPU, with no copy through
        the host (a GPU context only).

        ``inputs`` and ``outputs`` map binding names to objects with
        ``__cuda_array_interface__`` (PyTorch CUDA tensors, CuPy arrays) on
        the context's GPU, C-contiguous, of each binding's dtype and shape.
        Every input must be given; ``outputs`` may name a subset of the
        outputs, which are written in place. Waits for all pending work on
        the GPU first (the arrays' producers, on any stream) and for the
        engine's work before returning. Returns ``outputs`` as a dict.

        Raises :class:`trtc.ArgumentError` on a CPU context,
        :class:`trtc.BindingError` for unusable arrays.
        """

class Engine:
    """A loaded engine, shared by any number of contexts and threads."""

    @staticmethod
    def load(path: PathLike) -> "Engine":
        """Loads an engine file. Raises :class:`trtc.FileError` when it cannot
        be read, :class:`trtc.EngineError` when it is not a valid engine."""
    @staticmethod
    def from_bytes(data: bytes) -> "Engine":
        """Loads an engine from the bytes of an engine file."""
    def save(self, path: PathLike) -> None:
        """Writes the engine file."""
    def serialize(self) -> bytes:
        """The engine file's bytes."""
    @property
    def inputs(self) -> List[Binding]: ...
    @property
    def outputs(self) -> List[Binding]: ...
    @property
    def target(self) -> str:
        """``cpu``, or ``sm_XX`` (with the GPU's name when built on one)."""
    @property
    def build_flags(self) -> List[str]:
        """The ``trtc build`` flags that describe how the engine was built."""
    @property
    def format_version(self) -> int: ...
    @property
    def trtc_version(self) -> str: ...
    def inspect(self) -> Dict[str, Any]:
        """What ``trtc inspect --json`` prints: bindings, memory, and each
        layer's op, precision, tactic and launches."""
    def create_context(self, *, device: str = "auto", threads: Optional[int] = None, exact: bool = False) -> Context:
        """A context that runs this engine.

        ``device``: ``"auto"`` (the GPU when the engine carries kernels for
        the GPU present, else the CPU with a RuntimeWarning saying why),
        ``"cpu"`` or ``"cuda"``. ``threads``: threads per CPU layer (default:
        every core; outputs do not depend on it). ``exact``: the CPU
        executor's bit-reproducible f32 arithmetic instead of its faster
        kernels (whose results differ within tested bounds).

        Raises :class:`trtc.ArgumentError` for an unknown device or a thread
        count outside 1..1024, :class:`trtc.DeviceError` when the GPU cannot
        run the engine.
        """

def build(
    model: Union[PathLike, bytes],
    *,
    fp16: bool = False,
    int8: bool = False,
    fp8: bool = False,
    calibrator: Optional[Any] = None,
    calib_cache: Optional[PathLike] = None,
    calib_batches: Optional[int] = None,
    shapes: Optional[Mapping[str, Sequence[int]]] = None,
    profiles: Optional[Any] = None,
    target: str = "cpu",
    opt_level: Optional[int] = None,
    timing_cache: Optional[PathLike] = None,
    error_on_cache_miss: bool = False,
    layer_precision: Optional[Union[Mapping[str, str], Sequence[str]]] = None,
    disable_passes: Optional[Sequence[str]] = None,
    progress: Optional[bool] = None,
) -> Engine:
    """Builds an engine from an ONNX model (a path, or the model's bytes:
    then external data is refused), as ``trtc build`` does.

    - ``fp16``, ``int8``, ``fp8``: reduced precision (``--fp16``, ``--int8``,
      ``--fp8``; not ``int8`` and ``fp8`` together).
    - ``calibrator``: INT8 or FP8 calibration data, an object with ``get_batch()``
      (see :mod:`trtc.calibration`); with ``fp16`` alone, the batches FP16
      observes tensor ranges on.
    - ``calib_cache``: a calibration cache file, reused when it exists and
      written after calibrating otherwise (``--calib-cache``).
    - ``calib_batches``: use at most this many batches (``--calib-batches``).
    - ``shapes``: input shapes resolving symbolic dimensions (``--shape``).
    - ``profiles``: ``[{input name: (min shape, opt shape, max shape)}, ...]``,
      one dict per optimization profile (``--min-shapes``, ``--opt-shapes``,
      ``--max-shapes``, repeated): the engine runs any shape inside one of
      them, a run taking the first that fits (CPU target for now). The
      bindings' ``min_shape``/``opt_shape``/``max_shape`` are profile 0's.
    - ``target``: ``"cpu"``, ``"cuda"`` (the GPU of this machine) or
      ``"sm_XX"`` (no GPU needed).
    - ``opt_level``, ``timing_cache``, ``error_on_cache_miss``: GPU tactic
      tuning (``--opt-level``, ``--timing-cache``, ``--error-on-cache-miss``).
    - ``layer_precision``: ``{pattern: "fp32"|"fp16"|"int8"|"fp8"}`` or
      ``["PATTERN=PRECISION", ...]``, later entries winning
      (``--layer-precision``).
    - ``disable_passes``: optimization passes to skip (``--disable-pass``).
    - ``progress``: a calibration progress bar on stderr (default: when
      stderr is a terminal).

    The GIL is released while the model is imported, calibrated and built.
    Raises :class:`trtc.BuildError` with the CLI's one-line message.
    """
