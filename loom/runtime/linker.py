"""Linking host objects into shared libraries with the system linker and loading them, and the
runtime library that resolves each undefined symbol (docs/architecture.md, decision 3)."""

from __future__ import annotations

import functools
import hashlib
import pathlib
import subprocess
import tempfile

from loom import abi
from loom.abi import MODULE_PROVIDER
from loom.errors import LoomError
from loom.runtime import compile_cache, host_runtime
from loom.runtime.elf import elf_machine_of_triple, host_machine
from loom.runtime.library import SharedLibrary
from loom.runtime.native_lib import cache_dir, find_tool, run


def resolve_symbols(
    names: list[str], device: str, siblings: dict[str, str] | None = None
) -> dict[str, str]:
    """The runtime library providing each undefined symbol ("module:<type>" for one defined by
    a sibling module linked into the same library, given as `siblings`: symbol -> type key);
    an error names those nothing provides."""
    out, missing = {}, []
    siblings = siblings or {}
    for name in names:
        if name in siblings:
            out[name] = MODULE_PROVIDER + siblings[name]
            continue
        lib = abi.provider(name, device)
        if lib is None:
            missing.append(name)
        else:
            out[name] = lib.name
    if missing:
        hints = [f"{m} (similar: {', '.join(abi.similar_symbols(m)) or 'none'})" for m in missing]
        raise LoomError(
            f"the compiled code needs symbols no runtime library declares for "
            f"{device}: {'; '.join(hints)}"
        )
    return out


def link_flags(providers: dict[str, str]) -> list[str]:
    """What the host linker needs for the libraries in `providers` (symbol -> library)."""
    flags: list[str] = []
    for lib_name in dict.fromkeys(providers.values()):
        if lib_name.startswith(MODULE_PROVIDER):
            continue  # linked into the same library
        link = abi.get_library(lib_name).link_flags
        flags += link() if link is not None else []
    return flags


def link_host_shared(
    objects: list[pathlib.Path],
    output: pathlib.Path,
    flags: list[str] = (),
    *,
    standalone: bool = False,
) -> None:
    """`cc -shared` the objects with the host runtime, libm and `flags` (other libraries).

    `standalone` says that every undefined symbol of the objects is defined by a library
    already loaded into this process with its symbols global (one with a `load`: the host
    runtime, the NPU simulator), where the loaded library will find it. The objects are then
    linked alone, by the linker `cc` runs (no `flags`, no C library, start files or libm): the
    linker does not read the C library, libm and the runtime again for every kernel, which was
    four fifths of a small kernel's link time."""
    if standalone:
        command = [host_linker(), "-shared", "--eh-frame-hdr", "--build-id", "-o", str(output)]
        run([*command, *map(str, objects)], "linking a shared library")
        return
    base = host_runtime.host_link_flags()
    extra = [f for f in flags if f not in base]
    run(
        [find_tool("cc"), "-shared", "-o", str(output), *map(str, objects), *base, *extra],
        "linking a shared library",
    )


@functools.cache
def host_linker() -> str:
    """The linker `cc` runs (`cc -print-prog-name=ld`), asked once."""
    cc = find_tool("cc")
    proc = subprocess.run([cc, "-print-prog-name=ld"], capture_output=True, text=True)
    name = proc.stdout.strip()
    if proc.returncode != 0 or not name:
        raise LoomError(f"{cc} -print-prog-name=ld failed: {proc.stderr.strip()}")
    return name if pathlib.Path(name).is_absolute() else find_tool(name)


def load_host_object(
    object_code: bytes | list[bytes], name: str, flags: list[str] = (), *, standalone=False
) -> SharedLibrary:
    """Link object files into one shared library (`standalone`: see link_host_shared), load
    it, and delete the files (the loaded library stays mapped until the last function or module
    using it is gone).

    A standalone library linked from the same objects before is taken from the compile cache
    (loom/runtime/compile_cache.py) instead of linking again. It is still loaded from a file of
    its own: a library opened twice from one file would share its global variables between the
    two modules."""
    host_runtime.library()  # its symbols must be global before the kernel is loaded
    objects = [object_code] if isinstance(object_code, bytes) else list(object_code)
    key = _library_key(objects) if standalone and compile_cache.enabled() else None
    cached = compile_cache.get(_LIBRARY_KIND, key) if key is not None else None
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        lib = pathlib.Path(tmp) / f"{name}.so"
        if cached is not None:
            lib.write_bytes(cached)
        else:
            paths = []
            for k, code in enumerate(objects):
                paths.append(pathlib.Path(tmp) / f"{name}{k}.o")
                paths[-1].write_bytes(code)
            link_host_shared(paths, lib, flags, standalone=standalone)
            if key is not None:
                compile_cache.put(_LIBRARY_KIND, key, lib.read_bytes())
        try:
            return SharedLibrary(lib)
        except OSError as e:
            raise LoomError(f"cannot load the library linked for {name}: {e}") from None


_LIBRARY_KIND = "shared-library"


def _library_key(objects: list[bytes]) -> str:
    """What a standalone link's output depends on: the objects, in order, and the linker."""
    digests = [hashlib.sha256(code).hexdigest() for code in objects]
    return compile_cache.key_of(_LIBRARY_KIND, host_linker(), *digests)


def link_objects(
    objects: list[pathlib.Path], output: pathlib.Path, triple: str, cc: str | None, flags: list[str]
) -> None:
    host = elf_machine_of_triple(triple) == host_machine()
    if host:
        tool = find_tool(cc or "cc")
        run(
            [tool, "-shared", "-o", str(output), *map(str, objects), "-lm", *flags],
            f"linking {output.name}",
        )
    else:
        tool = find_tool(cc or "ld.lld", "lld")
        # a DT_HASH table: the device runtime's loader finds symbols through it
        run(
            [tool, "-shared", "--hash-style=sysv", "-o", str(output), *map(str, objects), *flags],
            f"linking {output.name} for {triple}",
        )


def link_relocatable(objects: list[pathlib.Path], output: pathlib.Path, triple: str) -> None:
    """`ld -r`: the objects as one relocatable object file (every section kept)."""
    if elf_machine_of_triple(triple) == host_machine():
        command = [host_linker(), "-r"]
    else:
        command = [find_tool("ld.lld", "lld"), "-r"]
    run([*command, "-o", str(output), *map(str, objects)], f"linking {output.name}")
