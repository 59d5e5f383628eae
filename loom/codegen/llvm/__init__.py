"""The LLVM code generator: loop IR -> LLVM IR (llvmlite) -> optimized object code."""

from __future__ import annotations

from loom.codegen.llvm.emit import optimize
from loom.codegen.llvm.module import generate
from loom.errors import LoomError
from loom.ir.function import IRModule
from loom.ir.printer import to_text
from loom.runtime import abi, elf
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
        flags: list[str] = []
        for lib_name in dict.fromkeys(providers.values()):
            link = abi.get_library(lib_name).link_flags
            flags += link() if link is not None else []
        library = load_host_object(object_code, name, flags)
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


def memories_used(mod: IRModule) -> tuple[str, ...]:
    """Memory scopes of the buffers the functions use, apart from their parameters (which live
    in the caller's memory)."""
    from loom.ir.buffer import Buffer
    from loom.ir.expr import BufferLoad, Call
    from loom.ir.stmt import Allocate, BufferStore
    from loom.ir.visitor import post_order_visit

    scopes: dict[str, None] = {}
    for func in mod:
        params = {p.data for p in func.params if isinstance(p, Buffer)}

        def record(n) -> None:
            buf = None
            if isinstance(n, BufferLoad | BufferStore | Allocate):
                buf = n.buffer
            elif isinstance(n, Call) and n.op == "address_of":
                buf = n.args[0].buffer
            if buf is not None and buf.data not in params:
                scopes.setdefault(buf.scope)

        post_order_visit(func.body, record)
    return tuple(scopes)


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
