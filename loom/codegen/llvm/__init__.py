"""The LLVM code generator: loop IR -> LLVM IR (llvmlite) -> optimized object code, as a
module that loom.packaging links and loads."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from loom.abi import FunctionSignature
from loom.codegen.common import memories_used
from loom.codegen.llvm.emit import optimize
from loom.codegen.llvm.module import generate
from loom.codegen.signature import module_signatures
from loom.ir.function import IRModule
from loom.ir.printer import to_text
from loom.runtime.device_module import DeviceModule
from loom.runtime.module import NativeModule

if TYPE_CHECKING:  # the target package registers the kinds, which import this
    from loom.target.target import Target


@dataclasses.dataclass
class CompiledLLVM:
    """An object file and what is known about it."""

    signatures: dict[str, FunctionSignature]
    object_code: bytes
    sources: dict[str, str]
    memories: tuple[str, ...]


def compile_llvm(mod: IRModule, target: Target) -> CompiledLLVM:
    """Compile every function of `mod` (lowered for `target`) to one object file."""
    signatures = module_signatures(mod, target.alignment)
    llvm_module, tm = optimize(str(generate(mod, target, signatures)), target)
    object_code = tm.emit_object(llvm_module)
    sources = {"ir": to_text(mod), "ll": str(llvm_module), "asm": tm.emit_assembly(llvm_module)}
    return CompiledLLVM(signatures, object_code, sources, memories_used(mod))


def build_llvm(mod: IRModule, target: Target) -> NativeModule:
    """Compile for a CPU target: a host module with its object code, not linked yet."""
    c = compile_llvm(mod, target)
    return NativeModule(
        "llvm", c.signatures, c.sources, target, object_code=c.object_code, memories=c.memories
    )


def build_device(mod: IRModule, target: Target) -> DeviceModule:
    """Compile for a device target (Hexagon): a module whose object code loom.packaging links
    into a position-independent shared object that a device session loads."""
    c = compile_llvm(mod, target)
    return DeviceModule(
        target.device,
        c.signatures,
        None,
        target,
        sources=c.sources,
        memories=c.memories,
        object_code=c.object_code,
    )


__all__ = ["build_device", "build_llvm", "compile_llvm"]
