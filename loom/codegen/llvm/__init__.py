"""The LLVM code generator: loop IR -> LLVM IR (llvmlite) -> optimized object code."""

from __future__ import annotations

from loom.codegen.common import link_flags, memories_used, resolve_symbols
from loom.codegen.llvm.emit import optimize
from loom.codegen.llvm.module import generate
from loom.ir.function import IRModule
from loom.ir.printer import to_text
from loom.runtime import elf
from loom.runtime.linker import load_host_object
from loom.runtime.module import NativeModule
from loom.runtime.signature import signature_of
from loom.target import Target


def build_llvm(mod: IRModule, target: Target) -> NativeModule:
    """Compile every function of `mod` (lowered for `target`); for the host, link it with the
    runtime libraries that provide its undefined symbols and load it."""
    signatures = {f.name: signature_of(f, target.alignment) for f in mod}
    llvm_module, tm = optimize(str(generate(mod, target, signatures)), target)
    object_code = tm.emit_object(llvm_module)
    providers = resolve_symbols(elf.parse(object_code).undefined_symbols(), target.device)
    sources = {"ir": to_text(mod), "ll": str(llvm_module), "asm": tm.emit_assembly(llvm_module)}
    name = mod.functions[0].name if len(mod) else "empty"
    library = None
    if target.is_host:
        library = load_host_object(object_code, name, link_flags(providers))
    return NativeModule(
        "llvm",
        signatures,
        sources,
        target,
        library,
        object_code=object_code,
        extern_symbols=providers,
        memories=memories_used(mod),
    )


__all__ = ["build_llvm", "memories_used", "resolve_symbols"]
