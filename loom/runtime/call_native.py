"""The C extension `loom_call` (loom/runtime/native/host/loom_call.c): the fast path of a call,
built at first use like the host runtime, against this interpreter's headers.

Checking a call's arguments in Python costs microseconds (each `array.ctypes.data` alone builds
an object); in C the same checks cost tens of nanoseconds. When the extension cannot be built
(no C compiler or no Python headers) every call takes the Python path, which checks the same
things and is only slower: `unavailable()` says why.
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import sysconfig
from types import ModuleType

from loom.errors import LoomError
from loom.runtime.native_lib import NATIVE_DIR, build_library

SOURCE = NATIVE_DIR / "host" / "loom_call.c"
MODULE_NAME = "loom_call"  # its PyInit_loom_call


@functools.cache
def _load() -> tuple[ModuleType | None, str | None]:
    include = sysconfig.get_paths().get("include")
    try:
        path = build_library(
            "loom_call",
            [SOURCE],
            ["-O2", f"-I{include}"],
            suffix=importlib.machinery.EXTENSION_SUFFIXES[0],
        )
    except LoomError as e:
        return None, f"the C extension {SOURCE.name} could not be built: {e}"
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as e:  # a damaged file in the cache
        return None, f"the C extension {path} could not be loaded: {e}"
    return module, None


def extension() -> ModuleType | None:
    """The loaded `loom_call` module, or None when it is unavailable (see `unavailable`)."""
    return _load()[0]


def unavailable() -> str | None:
    """Why calls take the Python path (None: they take the C one)."""
    return _load()[1]
