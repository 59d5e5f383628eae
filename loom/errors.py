"""The exception types every part of loom raises.

`loom.error` is this module too, so that TVM's `tvm.error.TVMError` is `loom.error.TVMError`.
"""


class LoomError(RuntimeError):
    """Base of every error loom raises on purpose: says what was expected, what was found, where.

    A RuntimeError, as TVM's errors are (`tvm.error.TVMError`), so that a script written for
    TVM that catches RuntimeError catches loom's errors too (docs/tvm-compat.md, "TE
    behaviour")."""


TVMError = LoomError
"""TVM's name of its base error (`tvm.TVMError`, `tvm.error.TVMError`): `except tvm.TVMError`
in a TVM script catches every error loom raises on purpose."""


class ScheduleError(LoomError):
    """An invalid use of a schedule primitive; the message names the stage and the axis."""


class LoweringError(LoomError):
    """A schedule or program that cannot be turned into a loop program."""


class InterpreterError(LoomError):
    """The reference interpreter met an illegal operation (out-of-bounds access, zero divisor)."""


class DeviceError(LoomError):
    """A device session failed: the device answered with an error, its process exited or hung,
    or the session is closed. The message says which, and the last command."""
