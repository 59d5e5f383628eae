"""A shared library loaded into this process for its kernels, and unloaded again when nothing
can call into it any more.

`SharedLibrary` opens a library (`dlopen`, `RTLD_LOCAL`) and hands out function pointers into
it. Every function pointer keeps its library alive, and so does every module, `NativeFunction`
and `time_evaluator` closure that holds one of them; when the last of them is gone the library
is closed (`dlclose`) and its memory maps are returned. So a process that builds many kernels (a
tuner, a notebook, a server) does not run out of memory maps, and a kernel can never be called
after its code is unmapped.

No reference cycle holds a library: it is closed as soon as its last user is dropped, without
waiting for the garbage collector. (A ctypes function pointer looked up by name through a
`CDLL` refers to itself, and a `CDLL` caches the pointers it returns: both are cycles, which is
why the pointers are made from the symbol's address here.)

The libraries that other libraries resolve symbols from (the host runtime, the NPU simulator:
opened `RTLD_GLOBAL` by their own modules) are not `SharedLibrary`s: they stay loaded for the
life of the process.
"""

from __future__ import annotations

import _ctypes
import ctypes
import os
import weakref

from loom.errors import LoomError

ENTRY_POINT = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
"""`int32_t name(void *const *args)`: every entry point (docs/architecture.md, decision 4).
Calls release the GIL, as every ctypes call of a C function does."""


def _close(handle: int) -> None:
    _ctypes.dlclose(handle)


class SharedLibrary:
    """A library opened with `dlopen(path, RTLD_NOW | RTLD_LOCAL)`, closed (`dlclose`) when the
    last object referring to it (this one, or a function pointer from `function`) is gone.

    Raises OSError (with the dynamic loader's message) when the library cannot be loaded.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._handle = _ctypes.dlopen(self.path, ctypes.RTLD_LOCAL)  # ctypes adds RTLD_NOW
        self._finalizer = weakref.finalize(self, _close, self._handle)
        # at exit the process unmaps everything anyway; closing then could pull code from
        # under a daemon thread still running a kernel
        self._finalizer.atexit = False

    def function(self, name: str, prototype=ENTRY_POINT):
        """A ctypes function pointer to the symbol `name` (an entry point unless `prototype`,
        a `ctypes.CFUNCTYPE` type, says otherwise). The pointer keeps this library loaded."""
        try:
            address = _ctypes.dlsym(self._handle, name)
        except OSError:
            raise LoomError(f"{self.path} has no symbol {name!r}") from None
        pointer = prototype(address)
        pointer.library = self  # the code it points to stays mapped while it exists
        return pointer

    def __copy__(self) -> SharedLibrary:
        return self  # one owner per open: a copy would close the library a second time

    def __deepcopy__(self, memo) -> SharedLibrary:
        return self

    def __reduce__(self):
        raise TypeError(f"a loaded library ({self.path}) cannot be pickled")

    def __repr__(self) -> str:
        return f"<loom.runtime.library.SharedLibrary {self.path}>"
