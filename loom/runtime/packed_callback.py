"""Calling a registered Python function from compiled code (TVM's `call_packed`).

Compiled code calls the C symbol `loom_call_packed(name, types, nargs, a0, ..., a7)` of a small
runtime library (loom/runtime/native/host/loom_packed.c). `types` describes each argument as
`<dtype>[<shape>]` (`"float32[4,8];int32[16]"`) and `a0...` are the arrays' data pointers. The
library forwards the call to a dispatcher installed from here (a ctypes callback), which finds
the function registered under `name` (loom.register_func), gives it each array as an `NDArray`
viewing the kernel's memory (no copy: what the function writes, the kernel sees) and returns 0,
or sets the host runtime's last error and returns -1 if the function raised.

The callback takes the GIL. A kernel runs without it (loom_call.c and ctypes release it), so
calls from the workers of a parallel loop work too, one at a time.
"""

from __future__ import annotations

import ctypes
import functools
import pathlib

import numpy as np

from loom import abi
from loom.runtime import host_runtime
from loom.runtime.device_handle import cpu
from loom.runtime.global_functions import GLOBAL_FUNCTIONS
from loom.runtime.host_ndarray import NDArray
from loom.runtime.native_lib import NATIVE_DIR, build_library

LIBRARY_NAME = "loom_packed_callback"
SYMBOL = "loom_call_packed"
MAX_ARGS = 8
"""Arrays one call passes at most (the C function's pointer parameters)."""

_DISPATCH_TYPE = ctypes.CFUNCTYPE(
    ctypes.c_int32,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_int32,
    ctypes.POINTER(ctypes.c_void_p),
)


def describe(dtype: str, shape: tuple[int, ...]) -> str:
    """One argument's entry in the `types` text."""
    return f"{dtype}[{','.join(str(d) for d in shape)}]"


def _parse(types: str) -> list[tuple[str, tuple[int, ...]]]:
    out = []
    for entry in types.split(";") if types else []:
        dtype, dims = entry.rstrip("]").split("[")
        out.append((dtype, tuple(int(d) for d in dims.split(",") if d)))
    return out


def _as_array(pointer: int, dtype: str, shape: tuple[int, ...]) -> NDArray:
    dt = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    raw = (ctypes.c_char * (count * dt.itemsize)).from_address(pointer)
    view = np.frombuffer(raw, dtype=dt, count=count).reshape(shape)
    return NDArray(view, cpu(0))


def _dispatch(name: bytes, types: bytes, nargs: int, args) -> int:
    text = name.decode(errors="replace")
    try:
        entry = GLOBAL_FUNCTIONS.find(text)
        if entry is None:
            raise LookupError(
                f"no function is registered as {text!r} (loom.register_func); registered: "
                f"{GLOBAL_FUNCTIONS.names()}"
            )
        specs = _parse(types.decode())
        if len(specs) != nargs:
            raise ValueError(f"{nargs} arguments but {len(specs)} described: {types!r}")
        arrays = [_as_array(args[k], dt, shape) for k, (dt, shape) in enumerate(specs)]
        entry.func(*arrays)
    except BaseException as e:  # nothing may unwind through the C frames
        message = f"packed function {text!r} raised {type(e).__name__}: {e}"
        host_runtime.library().loom_set_last_error(message.encode(errors="replace"))
        return -1
    return 0


_DISPATCHER = _DISPATCH_TYPE(_dispatch)  # kept alive as long as the module: C holds its address


@functools.cache
def library_path() -> pathlib.Path:
    return build_library("libloom_packed", [NATIVE_DIR / "host" / "loom_packed.c"], ["-O2"])


@functools.cache
def library() -> ctypes.CDLL:
    """The loaded library (symbols global, so kernels resolve them), the dispatcher
    installed."""
    host_runtime.library()  # the last error the dispatcher sets lives there
    lib = ctypes.CDLL(str(library_path()), mode=ctypes.RTLD_GLOBAL)
    lib.loom_packed_set_dispatch.argtypes = [_DISPATCH_TYPE]
    lib.loom_packed_set_dispatch(_DISPATCHER)
    return lib


def link_flags() -> list[str]:
    lib = library_path()
    library()
    return [f"-L{lib.parent}", f"-l:{lib.name}", f"-Wl,-rpath,{lib.parent}"]


def declaration() -> abi.RuntimeLibrary:
    pointers = ", ".join(f"handle a{k}" for k in range(MAX_ARGS))
    return abi.RuntimeLibrary(
        LIBRARY_NAME,
        ("cpu",),
        symbols=(
            abi.parse_declaration(
                f"int32 {SYMBOL}(const handle name, const handle types, int32 nargs, {pointers})",
                True,
                "call the Python function registered under `name` (loom.register_func)",
            ),
        ),
        doc="calls from compiled code into registered Python functions (TVM's call_packed)",
        link_flags=link_flags,
        load=library,
    )


def ensure_registered() -> None:
    """Declare the library (again, if a test's registry restore removed it)."""
    if abi.LIBRARIES.find(LIBRARY_NAME) is None:
        abi.register_library(declaration())


ensure_registered()  # a module loaded from a file finds the library once this module is imported
