"""An example accelerator memory, emulated on the host (for tests and the docs).

`setup(base, size)` builds the C emulator (loom/runtime/native/scratchpad_emu), declares its
runtime ABI (`mvin`, `mvout`), registers a fixed-address memory scope for its range (accessible
only from the device "scratchpad_emu", so host code cannot load or store it) and pragma rules
"mvin"/"mvout" that turn copy loop nests into those calls.
"""

from __future__ import annotations

import ctypes
import functools
import pathlib

from loom import abi, memory
from loom.errors import LoomError
from loom.runtime import host_runtime
from loom.runtime.native_lib import NATIVE_DIR, build_library

DEVICE = "scratchpad_emu"
_SOURCE = NATIVE_DIR / "scratchpad_emu" / "scratchpad_emu.c"


@functools.cache
def library_path() -> pathlib.Path:
    return build_library("libscratchpad_emu", [_SOURCE], ["-O2"])


@functools.cache
def library() -> ctypes.CDLL:
    host_runtime.library()  # provides loom_set_last_error
    lib = ctypes.CDLL(str(library_path()), mode=ctypes.RTLD_GLOBAL)
    lib.spad_emu_configure.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
    lib.spad_emu_read.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64]
    lib.spad_emu_last_transfer.argtypes = [ctypes.POINTER(ctypes.c_int64)]
    return lib


def _link_flags() -> list[str]:
    path = library_path()
    return [f"-L{path.parent}", f"-l:{path.name}", f"-Wl,-rpath,{path.parent}"]


def _transfer(name: str, src: str, dst: str) -> abi.ExternSymbol:
    params = (
        ("src", src),
        ("dst", dst),
        ("rows", "int32"),
        ("row_bytes", "int32"),
        ("src_stride", "int32"),
        ("dst_stride", "int32"),
    )
    return abi.ExternSymbol(
        name,
        "int32",
        params,
        sets_last_error=True,
        doc=f"{name}: copy rows between host memory and the scratchpad",
    )


LIBRARY = abi.RuntimeLibrary(
    "scratchpad_emu",
    ("cpu",),
    symbols=(_transfer("mvin", "handle", "uint64"), _transfer("mvout", "uint64", "handle")),
    doc="the example accelerator memory (an emulated scratchpad with mvin/mvout)",
    link_flags=_link_flags,
)


def setup(
    base: int = 0x4000_0000, size: int = 64 * 1024, scope: str = "spad", alignment: int = 16
) -> memory.MemoryScope:
    """Configure the emulator for [base, base + size) and register its ABI, scope and rules."""
    if library().spad_emu_configure(base, size) != 0:
        raise LoomError(host_runtime.last_error())
    abi.register_library(LIBRARY, replace=True)
    spad = memory.MemoryScope(
        scope,
        memory.FixedAddress(base, size, 8, "scratchpad"),
        alignment=alignment,
        accessible_from=(DEVICE,),
        doc="the example accelerator's scratchpad",
    )
    memory.register(spad, replace=True)
    memory.register_pragma_rule(
        memory.PragmaRule("mvin", "mvin", src_space="host", dst_space="scratchpad"), replace=True
    )
    memory.register_pragma_rule(
        memory.PragmaRule("mvout", "mvout", src_space="scratchpad", dst_space="host"), replace=True
    )
    return spad


def teardown(scope: str = "spad") -> None:
    """Unregister what `setup` registered: its scope, the mvin/mvout rules and its ABI."""
    memory.unregister(scope)
    memory.pragma.unregister_pragma_rule("mvin")
    memory.pragma.unregister_pragma_rule("mvout")
    abi.unregister_library(LIBRARY.name)


def read(address: int, nbytes: int) -> bytes:
    """Bytes of the scratchpad at device `address`."""
    out = ctypes.create_string_buffer(nbytes)
    if library().spad_emu_read(address, out, nbytes) != 0:
        raise LoomError(host_runtime.last_error())
    return out.raw


def last_transfer() -> dict[str, int]:
    out = (ctypes.c_int64 * 6)()
    library().spad_emu_last_transfer(out)
    keys = ("direction", "host_address", "device_address", "rows", "row_bytes", "count")
    return dict(zip(keys, out))
