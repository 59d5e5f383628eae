"""The C code generator: loop IR -> portable C99 (gnu99) -> an object file from the system C
compiler (linked and loaded by loom.packaging, like the LLVM back end's output)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loom.abi import FunctionSignature
from loom.codegen.c.compile import compile_c_object
from loom.codegen.c.module import generate
from loom.codegen.common import check_function_names, memories_used
from loom.codegen.signature import module_signatures
from loom.errors import LoomError
from loom.ir.function import IRModule
from loom.ir.printer import to_text
from loom.runtime.module import NativeModule

if TYPE_CHECKING:  # the target package registers the kinds, which import this
    from loom.target.target import Target


def generate_c(mod: IRModule, target: Target, signatures: dict[str, FunctionSignature]) -> str:
    """The C source of every function of `mod` (lowered for `target`)."""
    return generate(mod, target, signatures)


def compile_c(
    mod: IRModule,
    target: Target,
    type_key: str = "c",
    sibling_signatures: dict[str, FunctionSignature] | None = None,
) -> NativeModule:
    """Generate C for every function of `mod` (lowered for `target`, the host) and compile it
    with `cc`: a module with its object, not linked or loaded yet (loom.packaging.finish does
    that). `sibling_signatures` are the signatures of functions other modules linked into the
    same library define, which say which arrays they only read."""
    if not target.is_host:
        raise LoomError(
            f"target {target.kind} compiles with this machine's C compiler, but {target.triple} "
            "is not the host; use loom.codegen.c.generate_c for the source, or target llvm for "
            "that triple"
        )
    check_function_names(mod, target.backend.libraries())
    signatures = module_signatures(mod, target.alignment, sibling_signatures)
    source = generate_c(mod, target, signatures)
    name = mod.functions[0].name if len(mod) else "empty"
    object_code = compile_c_object(source, name)
    return NativeModule(
        type_key,
        signatures,
        {"c": source, "ir": to_text(mod)},
        target,
        object_code=object_code,
        memories=memories_used(mod),
    )


__all__ = ["compile_c", "generate_c"]
