"""loom: a tensor compiler for processors with explicit memory hierarchies."""

from loom.errors import InterpreterError, LoomError, LoweringError, ScheduleError

__all__ = ["InterpreterError", "LoomError", "LoweringError", "ScheduleError"]
