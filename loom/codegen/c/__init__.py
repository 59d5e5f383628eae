"""The C code generator: loop IR -> portable C99 (gnu99) -> an object file from the system C
compiler, linked and loaded like the LLVM back end's output."""

from __future__ import annotations

from loom.codegen.c.module import generate
from loom.codegen.common import link_flags, memories_used, resolve_symbols
from loom.errors import LoomError
from loom.ir.function import IRModule
from loom.ir.printer import to_text
from loom.runtime import elf
from loom.runtime.linker import compile_c_object, load_host_object
from loom.runtime.module import NativeModule
from loom.runtime.signature import FunctionSignature, module_signatures
from loom.target import Target


def generate_c(mod: IRModule, target: Target, signatures: dict[str, FunctionSignature]) -> str:
    """The C source of every function of `mod` (lowered for `target`)."""
    return generate(mod, target, signatures)


def compile_c(
    mod: IRModule,
    target: Target,
    type_key: str = "c",
    siblings: dict[str, str] | None = None,
    sibling_signatures: dict[str, FunctionSignature] | None = None,
) -> NativeModule:
    """Generate C for every function of `mod` (lowered for `target`, the host) and compile it
    with `cc`: a module with its object, not loaded yet. `siblings` (symbol -> type key) are
    symbols other modules linked into the same library define; `sibling_signatures` the
    signatures of those functions, which say which arrays they only read."""
    if not target.is_host:
        raise LoomError(
            f"target {target.kind} compiles with this machine's C compiler, but {target.triple} "
            "is not the host; use loom.codegen.c.generate_c for the source, or target llvm for "
            "that triple"
        )
    signatures = module_signatures(mod, target.alignment, sibling_signatures)
    source = generate_c(mod, target, signatures)
    name = mod.functions[0].name if len(mod) else "empty"
    object_code = compile_c_object(source, name)
    providers = resolve_symbols(elf.parse(object_code).undefined_symbols(), target.device, siblings)
    return NativeModule(
        type_key,
        signatures,
        {"c": source, "ir": to_text(mod)},
        target,
        object_code=object_code,
        extern_symbols=providers,
        memories=memories_used(mod),
    )


def build_c(mod: IRModule, target: Target) -> NativeModule:
    """Generate C for every function of `mod` (lowered for `target`, the host), compile it with
    `cc`, link it with the runtime libraries that provide its undefined symbols and load it."""
    module = compile_c(mod, target)
    name = mod.functions[0].name if len(mod) else "empty"
    module.library = load_host_object(module.object_code, name, link_flags(module.extern_symbols))
    return module


__all__ = ["build_c", "compile_c", "generate_c"]
