"""The LLVM code generator: loop IR -> LLVM IR (llvmlite) -> optimized object code."""

from __future__ import annotations

from loom.codegen.llvm.emit import optimize
from loom.codegen.llvm.module import generate
from loom.errors import LoomError
from loom.ir.function import IRModule
from loom.ir.printer import to_text
from loom.runtime import abi, elf
from loom.runtime.linker import load_host_object
from loom.runtime.module import Module
from loom.runtime.signature import signature_of
from loom.target import Target


def build_llvm(mod: IRModule, target: Target) -> Module:
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
        flags: list[str] = []
        for lib_name in dict.fromkeys(providers.values()):
            link = abi.get_library(lib_name).link_flags
            flags += link() if link is not None else []
        library = load_host_object(object_code, name, flags)
    return Module(
        "llvm",
        signatures,
        sources,
        target,
        library,
        object_code=object_code,
        extern_symbols=providers,
    )


def resolve_symbols(names: list[str], device: str) -> dict[str, str]:
    """The runtime library providing each undefined symbol; an error names those none does."""
    out, missing = {}, []
    for name in names:
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
