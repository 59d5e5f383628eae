"""TVM's `tvm.contrib.cc`: build shared libraries and executables with the system C compiler.

`create_shared` is what TVM scripts pass to `export_library(path, fcompile=...)` and call on
their own object files. The compiler is `cc` (the system's, as loom's linker uses) unless `cc=`
names another (TVM's default is `g++` or $CXX). A failure is a LoomError with the command and
its output (TVM raises its RuntimeError; LoomError is one).
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable, Sequence

from loom.errors import LoomError
from loom.packaging.export import saved_objects, seal_linked
from loom.runtime.native_lib import find_tool, run


def _paths(objects, cwd, what: str) -> list[str]:
    if isinstance(objects, str | os.PathLike):
        objects = [objects]
    try:
        paths = [os.path.join(cwd or "", os.fspath(o)) for o in objects]
    except TypeError:
        raise TypeError(f"{what}: objects must be file paths, got {objects!r}") from None
    if not paths:
        raise ValueError(f"{what}: no objects to link")
    missing = [p for p in paths if not pathlib.Path(p).is_file()]
    if missing:
        raise FileNotFoundError(f"{what}: no such files {missing}")
    return paths


def option_list(options, what: str) -> list[str]:
    """Compiler options as a list: None is none, a string is split at spaces (as TVM's)."""
    if options is None:
        return []
    if isinstance(options, str):
        return options.split()
    if not all(isinstance(o, str) for o in options):
        raise TypeError(f"{what}: options must be strings, got {options!r}")
    return list(options)


def _compile(output, objects, options, cc: str | None, cwd, flags: list[str], what: str) -> None:
    """Run the compiler; relative paths are read from `cwd` (as TVM runs it there)."""
    paths = _paths(objects, cwd, what)
    target = os.path.join(cwd or "", os.fspath(output))
    command = [find_tool(cc or "cc"), *flags, "-o", target, *paths, *option_list(options, what)]
    run(command, what)


def create_shared(
    output, objects, options: Sequence[str] | str | None = None, cc: str | None = None, cwd=None
) -> None:
    """Link (and compile, for C sources) `objects` into the shared library `output`. A
    library linked from objects `Module.save` wrote holds their loom artifact: it is sealed
    (the whole-file checksum `load_module` checks), so `tvm.runtime.load_module` loads it."""
    saved = saved_objects(_paths(objects, cwd, "create_shared"))
    if len(saved) > 1:
        raise LoomError(
            f"create_shared: {len(saved)} objects written by Module.save ({', '.join(saved)}); "
            "a library holds one loom module tree: import the modules into one "
            "(mod.import_module) and export_library it"
        )
    _compile(output, objects, options, cc, cwd, ["-shared", "-fPIC"], "create_shared")
    seal_linked(os.path.join(cwd or "", os.fspath(output)))


create_shared.output_format = "so"


def create_executable(
    output, objects, options: Sequence[str] | str | None = None, cc: str | None = None, cwd=None
) -> None:
    """Link (and compile, for C sources) `objects` into the executable `output`."""
    _compile(output, objects, options, cc, cwd, [], "create_executable")


create_executable.output_format = ""


def cross_compiler(
    compile_func: str | Callable, options: Sequence[str] | str | None = None, output_format="so"
) -> Callable:
    """A `create_shared` with a compiler (a command name, or a function like create_shared)
    and `options` fixed, for `export_library(path, fcompile=...)`, as TVM's."""
    base = option_list(options, "cross_compiler")

    def compile_shared(output, objects, options=None, cc=None, cwd=None) -> None:
        extra = base + option_list(options, "cross_compiler")
        if callable(compile_func):
            compile_func(output, objects, options=extra)
        else:
            create_shared(output, objects, extra, cc=compile_func, cwd=cwd)

    compile_shared.output_format = output_format
    return compile_shared


__all__ = ["create_executable", "create_shared", "cross_compiler"]
