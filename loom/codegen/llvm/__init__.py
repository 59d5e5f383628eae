"""The LLVM code generator: loop IR -> LLVM IR (llvmlite) -> optimized object code."""

from __future__ import annotations

from loom.codegen.llvm.emit import optimize
from loom.codegen.llvm.module import generate
from loom.ir.function import IRModule
from loom.runtime.linker import load_host_object
from loom.runtime.module import Module
from loom.runtime.signature import signature_of
from loom.target import Target


def build_llvm(mod: IRModule, target: Target) -> Module:
    """Compile every function of `mod`; for the host, link and load the library too."""
    signatures = {f.name: signature_of(f, target.alignment) for f in mod}
    llvm_module, tm = optimize(str(generate(mod, target, signatures)), target)
    object_code = tm.emit_object(llvm_module)
    sources = {"ll": str(llvm_module), "asm": tm.emit_assembly(llvm_module)}
    name = mod.functions[0].name if len(mod) else "empty"
    library = load_host_object(object_code, name) if target.is_host else None
    return Module("llvm", signatures, sources, target, library, object_code=object_code)
