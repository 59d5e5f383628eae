"""loom: a tensor compiler for processors with explicit memory hierarchies."""

__version__ = "0.1.0"

from loom import ir, nd, runtime, target, te, transform
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
