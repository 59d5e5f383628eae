"""loom: a tensor compiler for processors with explicit memory hierarchies."""

from loom import ir, te, transform
from loom.driver import lower
from loom.errors import InterpreterError, LoomError, LoweringError, ScheduleError
from loom.transform import PassContext

__all__ = [
    "InterpreterError",
    "LoomError",
    "LoweringError",
    "PassContext",
    "ScheduleError",
    "ir",
    "lower",
    "te",
    "transform",
]
