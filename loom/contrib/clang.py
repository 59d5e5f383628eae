"""TVM's `tvm.contrib.clang`: C or C++ to LLVM IR text with clang (`create_llvm`)."""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from collections.abc import Sequence

from loom.contrib.cc import option_list
from loom.runtime.native_lib import find_tool, run

_SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".ll")


def find_clang(required: bool = True) -> list[str]:
    """The clang commands found (loom's toolchain installs `clang`), as TVM's; none found is a
    LoomError saying how to install it when `required`."""
    path = shutil.which("clang")
    if path is None and required:
        find_tool("clang", "clang")  # raises, naming the package
    return [path] if path else []


def create_llvm(
    inputs: str | Sequence[str],
    output: str | os.PathLike | None = None,
    options: Sequence[str] | str | None = None,
    cc: str | None = None,
) -> str:
    """The LLVM IR (text) of `inputs`: source files (by their suffix) or source code. With
    `output`, the IR is also written there."""
    sources = [inputs] if isinstance(inputs, str) else list(inputs)
    if not sources or not all(isinstance(s, str) for s in sources):
        raise TypeError(f"create_llvm: inputs must be source code or file names, got {inputs!r}")
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for k, code in enumerate(sources):
            if code.endswith(_SOURCE_SUFFIXES) and pathlib.Path(code).is_file():
                files.append(code)
            else:
                path = pathlib.Path(tmp) / f"input{k}.cc"
                path.write_text(code)
                files.append(str(path))
        target = pathlib.Path(output) if output is not None else pathlib.Path(tmp) / "output.ll"
        command = [cc or find_clang()[0], "-S", "-emit-llvm", *option_list(options, "create_llvm")]
        run([*command, "-o", str(target), *files], "create_llvm")
        return target.read_text()


__all__ = ["create_llvm", "find_clang"]
