"""TVM's `tvm.target.codegen` queries about the LLVM that compiles loom's code (llvmlite's).

llvmlite has no call that looks an intrinsic's name up, so the table is read from the LLVM it
bundles: its library holds LLVM's intrinsic name table, one string of names separated by NULs
in the order of `Intrinsic::ID`, starting with "not_intrinsic" (ID 0).
"""

from __future__ import annotations

import functools
import mmap
import pathlib

import llvmlite.binding as llvm

from loom.errors import LoomError

_TABLE_START = b"\0not_intrinsic\0llvm."


def llvm_version_major(allow_none: bool = False) -> int:
    """The major version of the LLVM loom compiles with (llvmlite's)."""
    del allow_none  # loom always has LLVM: llvmlite is one of its dependencies
    return llvm.llvm_version_info[0]


@functools.cache
def _intrinsic_ids() -> dict[str, int]:
    """LLVM's intrinsic names to their IDs."""
    libraries = sorted(pathlib.Path(llvm.__file__).parent.glob("*llvmlite*"))
    libraries = [p for p in libraries if p.suffix in (".so", ".dylib", ".dll")]
    if not libraries:
        raise LoomError("llvm_lookup_intrinsic_id: llvmlite's LLVM library was not found")
    with open(libraries[0], "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        start = m.find(_TABLE_START)
        if start < 0:
            raise LoomError(
                f"llvm_lookup_intrinsic_id: no intrinsic name table in {libraries[0]} "
                f"(LLVM {llvm.llvm_version_info})"
            )
        ids: dict[str, int] = {}
        pos = start + 1
        while True:
            end = m.find(b"\0", pos)
            name = m[pos:end]
            if ids and not name.startswith(b"llvm."):
                break
            ids[name.decode()] = len(ids)
            pos = end + 1
    return ids


def llvm_lookup_intrinsic_id(name: str) -> int:
    """The ID of the LLVM intrinsic `name` ("llvm.sqrt"), 0 if there is none. A name with a
    type suffix ("llvm.sqrt.f32") finds the intrinsic it specializes, as LLVM's lookup does
    for overloaded intrinsics (loom does not know which ones are, so any suffix is taken)."""
    if not isinstance(name, str):
        raise TypeError(f"llvm_lookup_intrinsic_id takes a name (str), got {name!r}")
    ids = _intrinsic_ids()
    if not name.startswith("llvm."):
        return 0
    candidate = name
    while candidate != "llvm":
        found = ids.get(candidate)
        if found:
            return found
        candidate = candidate.rpartition(".")[0]
    return 0
