"""Compiling generated C to objects, linking objects into shared libraries with the system
linker, and loading them."""

from __future__ import annotations

import ctypes
import hashlib
import pathlib
import re
import subprocess
import tempfile
from collections.abc import Sequence

from loom.errors import LoomError
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


def load_host_object(
    object_code: bytes | list[bytes], name: str, flags: list[str] = ()
) -> ctypes.CDLL:
    """Link object files into one shared library, load it, and delete the files (the loaded
    library stays mapped)."""
    host_runtime.library()  # its symbols must be global before the kernel is loaded
    objects = [object_code] if isinstance(object_code, bytes) else list(object_code)
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        paths = []
        for k, code in enumerate(objects):
            paths.append(pathlib.Path(tmp) / f"{name}{k}.o")
            paths[-1].write_bytes(code)
        lib = pathlib.Path(tmp) / f"{name}.so"
        link_host_shared(paths, lib, flags)
        return ctypes.CDLL(str(lib))


C_FLAGS = ("-O2", "-fPIC", "-std=gnu99", "-ffp-contract=off", "-fno-strict-aliasing")
"""How generated C is compiled: optimized, position independent, no FMA contraction (the IR
rounds after every operation), no type-based alias analysis, no -march=native."""


def compile_c_object(source: str, name: str, flags: Sequence[str] = C_FLAGS) -> bytes:
    """`cc -c` C source into the bytes of an object file. A compiler error is a LoomError with
    the compiler's output and the offending lines; the source is kept in the cache directory
    so the file:line the compiler names can be opened."""
    cc = find_tool("cc")
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        src = pathlib.Path(tmp) / f"{name}.c"
        obj = pathlib.Path(tmp) / f"{name}.o"
        src.write_text(source)
        proc = subprocess.run(
            [cc, "-c", *flags, "-o", str(obj), str(src)], capture_output=True, text=True
        )
        if proc.returncode == 0:
            return obj.read_bytes()
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    kept = cache_dir() / "failed-c" / f"{name}-{digest}.c"
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_text(source)
    output = (proc.stdout + proc.stderr).replace(str(src), str(kept))
    lines = source.splitlines()
    quoted = []
    for match in re.finditer(rf"{re.escape(str(kept))}:(\d+):(?:\d+:)? error", output):
        number = int(match.group(1))
        if 0 < number <= len(lines) and len(quoted) < 5:
            quoted.append(f"  {kept.name}:{number}: {lines[number - 1].strip()}")
    where = "\n".join(quoted)
    raise LoomError(
        f"the C compiler rejected the generated code for {name} (a code generator bug), "
        f"kept in {kept}:\n{where}\n{' '.join([cc, '-c', *flags])} said:\n{output}"
    )
