"""Object code of LLVM builds in the compile cache (loom/runtime/compile_cache.py), keyed by the
lowered module's fingerprint and the target: a kernel compiled before, in this process or
another, skips LLVM.

The key holds everything that determines the object code: the lowered IRModule (every function,
its names and attributes; loom/ir/fingerprint.py), the target (kind, triple, CPU, features,
options), the LLVM version, and loom's code (`compile_cache.code_version`). A module of a target
kind that loom does not define is not cached: its backend's rewrites of the LLVM IR are code
that loom's version does not cover.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import llvmlite
import llvmlite.binding as llvm

from loom.abi import FunctionSignature
from loom.ir.fingerprint import fingerprint
from loom.ir.function import IRModule
from loom.runtime import compile_cache

if TYPE_CHECKING:  # the target package registers the kinds, which import this
    from loom.target.target import Target

KIND = "llvm-object"
_LLVM = f"llvmlite {llvmlite.__version__} LLVM {llvm.llvm_version_info}"


def object_key(mod: IRModule, target: Target) -> str | None:
    """The cache key of `mod` compiled for `target`, or None when it must not be cached."""
    if not compile_cache.enabled() or not type(target.backend).__module__.startswith("loom."):
        return None
    fp = fingerprint(mod)
    if fp is None:
        return None
    described = repr((target.kind, target.triple, target.cpu, target.features, target.options))
    return compile_cache.key_of(KIND, fp, described, _LLVM)


def pack(
    signatures: dict[str, FunctionSignature], object_code: bytes, memories: tuple[str, ...]
) -> bytes:
    """An entry: a JSON header (signatures, memories), its length first, then the object."""
    header = json.dumps(
        {
            "signatures": [s.to_json() for s in signatures.values()],
            "memories": list(memories),
        }
    ).encode()
    return len(header).to_bytes(4, "little") + header + object_code


def unpack(data: bytes) -> tuple[dict[str, FunctionSignature], bytes, tuple[str, ...]]:
    size = int.from_bytes(data[:4], "little")
    header = json.loads(data[4 : 4 + size])
    signatures = [FunctionSignature.from_json(s) for s in header["signatures"]]
    return {s.name: s for s in signatures}, data[4 + size :], tuple(header["memories"])
