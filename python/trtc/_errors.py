"""The exceptions trtc raises. Every one derives from :class:`trtc.Error`."""


class Error(Exception):
    """Base class of every error trtc raises; the message is one line."""


class BuildError(Error):
    """The model could not be imported or built (or the build options are wrong)."""


class EngineError(Error, ValueError):
    """An engine is corrupted, truncated, or of another format version."""


class BindingError(Error, ValueError):
    """Inputs do not match the engine's bindings (names, dtypes, shapes)."""


class ExecutionError(Error):
    """A layer failed while the engine ran."""


class DeviceError(Error):
    """A device is absent or failed (no GPU, CUDA's libraries missing, a CUDA error)."""


class ArgumentError(Error, ValueError):
    """An argument has a value trtc cannot use (a thread count, a device name)."""


class FileError(Error, OSError):
    """A file could not be read or written."""


class InternalError(Error):
    """A bug in trtc; the message says what failed. Please report it."""
