"""Linking objects into shared libraries with the system linker, and loading them."""

from __future__ import annotations

import ctypes
import pathlib
import tempfile

from loom.runtime import host_runtime
from loom.runtime.native_lib import cache_dir, find_tool, run


def host_link_flags() -> list[str]:
    """Link against loom's host runtime (found again through the rpath) and libm."""
    lib = host_runtime.library_path()
    return [f"-L{lib.parent}", f"-l:{lib.name}", f"-Wl,-rpath,{lib.parent}", "-lm"]


def link_host_shared(
    objects: list[pathlib.Path], output: pathlib.Path, flags: list[str] = ()
) -> None:
    """`cc -shared` the objects with the host runtime, libm and `flags` (other libraries)."""
    base = host_link_flags()
    extra = [f for f in flags if f not in base]
    run(
        [find_tool("cc"), "-shared", "-o", str(output), *map(str, objects), *base, *extra],
        "linking a shared library",
    )


def load_host_object(object_code: bytes, name: str, flags: list[str] = ()) -> ctypes.CDLL:
    """Link one object file into a shared library, load it, and delete the files (the loaded
    library stays mapped)."""
    host_runtime.library()  # its symbols must be global before the kernel is loaded
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        obj = pathlib.Path(tmp) / f"{name}.o"
        obj.write_bytes(object_code)
        lib = pathlib.Path(tmp) / f"{name}.so"
        link_host_shared([obj], lib, flags)
        return ctypes.CDLL(str(lib))
