"""loom: a tensor compiler for processors with explicit memory hierarchies."""

__version__ = "0.1.0"

from loom import backend, ir, nd, runtime, target, te, transform
from loom.backend import npu as _npu  # noqa: F401  (registers the built-in reference NPU)
from loom.driver import build, lower
from loom.errors import DeviceError, InterpreterError, LoomError, LoweringError, ScheduleError
from loom.runtime.session import device
from loom.transform import PassContext

__all__ = [
    "DeviceError",
    "InterpreterError",
    "LoomError",
    "LoweringError",
    "PassContext",
    "ScheduleError",
    "backend",
    "build",
    "device",
    "ir",
    "lower",
    "nd",
    "runtime",
    "target",
    "te",
    "transform",
]
