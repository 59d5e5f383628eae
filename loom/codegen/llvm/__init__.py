"""The LLVM code generator: loop IR -> LLVM IR (llvmlite) -> optimized object code, as a
module that loom.packaging links and loads."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from loom.abi import FunctionSignature
from loom.codegen.common import memories_used
from loom.codegen.llvm import cache
from loom.codegen.llvm.emit import optimize
from loom.codegen.llvm.module import generate
from loom.codegen.llvm.sources import LLVMSources
from loom.codegen.signature import module_signatures
from loom.ir.function import IRModule
from loom.runtime import compile_cache
from loom.runtime.device_module import DeviceModule
from loom.runtime.module import NativeModule

if TYPE_CHECKING:  # the target package registers the kinds, which import this
    from loom.target.target import Target


@dataclasses.dataclass
class CompiledLLVM:
    """An object file and what is known about it; `sources` are made when first read."""

    signatures: dict[str, FunctionSignature]
    object_code: bytes
    sources: LLVMSources
    memories: tuple[str, ...]


def compile_llvm(mod: IRModule, target: Target) -> CompiledLLVM:
    """Compile every function of `mod` (lowered for `target`) to one object file, or take it
    from the compile cache when this module was compiled for this target before (in this
    process or on disk: loom/codegen/llvm/cache.py)."""
    key = cache.object_key(mod, target)
    entry = compile_cache.get(cache.KIND, key) if key is not None else None
    if entry is not None:
        signatures, object_code, memories = cache.unpack(entry)
    else:
        signatures = module_signatures(mod, target.alignment)
        llvm_module, tm = optimize(str(generate(mod, target, signatures)), target)
        object_code = tm.emit_object(llvm_module)
        memories = memories_used(mod)
        if key is not None:
            compile_cache.put(cache.KIND, key, cache.pack(signatures, object_code, memories))
    return CompiledLLVM(signatures, object_code, LLVMSources(mod, target), memories)


def build_llvm(mod: IRModule, target: Target) -> NativeModule:
    """Compile for a CPU target: a host module with its object code, not linked yet."""
    c = compile_llvm(mod, target)
    module = NativeModule(
        "llvm", c.signatures, {}, target, object_code=c.object_code, memories=c.memories
    )
    module.sources = c.sources  # made when first read (NativeModule copies a dict it is given)
    return module


def build_device(mod: IRModule, target: Target) -> DeviceModule:
    """Compile for a device target (Hexagon): a module whose object code loom.packaging links
    into a position-independent shared object that a device session loads."""
    c = compile_llvm(mod, target)
    module = DeviceModule(
        target.device, c.signatures, None, target, memories=c.memories, object_code=c.object_code
    )
    module.sources = c.sources  # made when first read
    return module


__all__ = ["build_device", "build_llvm", "compile_llvm"]
