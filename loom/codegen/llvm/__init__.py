"""The LLVM code generator: loop IR -> LLVM IR (llvmlite) -> optimized object code."""

from __future__ import annotations

import dataclasses

from loom.codegen.common import link_flags, memories_used, resolve_symbols
from loom.codegen.llvm.emit import optimize
from loom.codegen.llvm.module import generate
from loom.ir.function import IRModule
from loom.ir.printer import to_text
from loom.runtime import elf
from loom.runtime.linker import load_host_object
from loom.runtime.module import NativeModule
from loom.runtime.signature import FunctionSignature, module_signatures
from loom.target import Target


@dataclasses.dataclass
class CompiledLLVM:
    """An object file and what is known about it."""

    signatures: dict[str, FunctionSignature]
    object_code: bytes
    sources: dict[str, str]
    providers: dict[str, str]  # undefined symbol -> runtime library
    memories: tuple[str, ...]


def compile_llvm(mod: IRModule, target: Target) -> CompiledLLVM:
    """Compile every function of `mod` (lowered for `target`) to one object file, and attribute
    each of its undefined symbols to a declared runtime library."""
    signatures = module_signatures(mod, target.alignment)
    llvm_module, tm = optimize(str(generate(mod, target, signatures)), target)
    object_code = tm.emit_object(llvm_module)
    providers = resolve_symbols(elf.parse(object_code).undefined_symbols(), target.device)
    sources = {"ir": to_text(mod), "ll": str(llvm_module), "asm": tm.emit_assembly(llvm_module)}
    return CompiledLLVM(signatures, object_code, sources, providers, memories_used(mod))


def build_llvm(mod: IRModule, target: Target) -> NativeModule:
    """Compile for a CPU target; for the host, link with the runtime libraries that provide
    the undefined symbols and load it."""
    c = compile_llvm(mod, target)
    library = None
    if target.is_host:
        name = mod.functions[0].name if len(mod) else "empty"
        library = load_host_object(c.object_code, name, link_flags(c.providers))
    return NativeModule(
        "llvm",
        c.signatures,
        c.sources,
        target,
        library,
        object_code=c.object_code,
        extern_symbols=c.providers,
        memories=c.memories,
    )


def build_device(mod: IRModule, target: Target):
    """Compile for a device target (Hexagon): a position-independent shared object that a
    device session loads."""
    from loom.runtime.device_module import DeviceModule, link_shared_object

    c = compile_llvm(mod, target)
    shared_object = link_shared_object(c.object_code, "hexagon")
    return DeviceModule(
        "hexagon",
        c.signatures,
        shared_object,
        target,
        sources=c.sources,
        extern_symbols=c.providers,
        memories=c.memories,
        object_code=c.object_code,
    )


__all__ = ["build_device", "build_llvm", "compile_llvm", "memories_used", "resolve_symbols"]
