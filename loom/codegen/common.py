"""What every code generator needs to know about a module besides its code: the runtime
library resolving each undefined symbol, the memories the functions use, the variables a
loop body uses from outside (what a parallel task captures), and the stack buffers' sizes."""

from __future__ import annotations

from loom import memory
from loom.errors import LoomError
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.buffer import Buffer
from loom.ir.expr import Var
from loom.ir.function import IRModule
from loom.ir.visitor import post_order_visit
from loom.memory.scope import Stack
from loom.runtime import abi
from loom.transform.lower_memory import MEMORIES_ATTR


def memories_used(mod: IRModule) -> tuple[str, ...]:
    """Memory scopes of the buffers the functions use, apart from their parameters (which live
    in the caller's memory)."""
    scopes: dict[str, None] = {}
    for func in mod:
        params = {p.data for p in func.params if isinstance(p, Buffer)}

        def record(n, params=params) -> None:
            buf = None
            if isinstance(n, E.BufferLoad | S.BufferStore | S.Allocate):
                buf = n.buffer
            elif isinstance(n, E.Call) and n.op == "address_of":
                buf = n.args[0].buffer
            if buf is not None and buf.data not in params:
                scopes.setdefault(buf.scope)

        post_order_visit(func.body, record)
        for scope in func.attr(MEMORIES_ATTR, ()):  # fixed-address buffers (lower_memory_scopes)
            scopes.setdefault(scope)
    return tuple(scopes)


MODULE_PROVIDER = "module:"
"""Prefix of the provider of a symbol defined by another module of the same library."""


def resolve_symbols(
    names: list[str], device: str, siblings: dict[str, str] | None = None
) -> dict[str, str]:
    """The runtime library providing each undefined symbol ("module:<type>" for one defined by
    a sibling module linked into the same library, given as `siblings`: symbol -> type key);
    an error names those nothing provides."""
    out, missing = {}, []
    siblings = siblings or {}
    for name in names:
        if name in siblings:
            out[name] = MODULE_PROVIDER + siblings[name]
            continue
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


def link_flags(providers: dict[str, str]) -> list[str]:
    """What the host linker needs for the libraries in `providers` (symbol -> library)."""
    flags: list[str] = []
    for lib_name in dict.fromkeys(providers.values()):
        if lib_name.startswith(MODULE_PROVIDER):
            continue  # linked into the same library
        link = abi.get_library(lib_name).link_flags
        flags += link() if link is not None else []
    return flags


def used_vars(node) -> list[Var]:
    """Variables and buffer data pointers used in `node`, in first-use order."""
    found: dict[Var, None] = {}

    def record(n) -> None:
        if isinstance(n, Var):
            found.setdefault(n)
        elif isinstance(n, E.BufferLoad | S.BufferStore | S.Allocate):
            found.setdefault(n.buffer.data)
        elif isinstance(n, E.Call) and n.op == "address_of":
            found.setdefault(n.args[0].buffer.data)

    post_order_visit(node, record)
    return list(found)


def bound_vars(node) -> set[Var]:
    """Variables defined inside `node`: loop and let variables, allocated buffers."""
    bound: set[Var] = set()

    def record(n) -> None:
        if isinstance(n, S.For):
            bound.add(n.loop_var)
        elif isinstance(n, S.LetStmt | E.Let):
            bound.add(n.var)
        elif isinstance(n, S.Allocate):
            bound.add(n.buffer.data)

    post_order_visit(node, record)
    return bound


def captured_vars(loop_body, loop_var: Var) -> list[Var]:
    """The variables a loop body uses from outside itself, in first-use order."""
    inner = bound_vars(loop_body) | {loop_var}
    return [v for v in used_vars(loop_body) if v not in inner]


def stack_buffer_bytes(alloc: S.Allocate) -> int:
    """The bytes of a buffer a code generator puts on the stack: lower_memory_scopes has turned
    every other allocation into calls or addresses, and a stack buffer needs a constant size."""
    buf = alloc.buffer
    if not isinstance(memory.get(buf.scope).strategy, Stack):
        raise LoomError(
            f"buffer {buf.name} in scope {buf.scope} reached code generation as an Allocate; "
            "lower_memory_scopes must run first"
        )
    elements = buf.storage_elements()
    if not isinstance(elements, E.IntImm):
        raise LoomError(
            f"buffer {buf.name} in scope {buf.scope} needs a constant size to live on the stack"
        )
    return elements.value * buf.dtype.itemsize


def check_stack(function: str, nbytes: int, limit: int) -> None:
    """Refuse a function (or parallel task) whose stack buffers exceed the target's limit."""
    if nbytes > limit:
        raise LoomError(
            f"function {function} allocates {nbytes} bytes on the stack (stack scopes such as "
            f"local), more than the target's limit of {limit}; use scope 'global' for large "
            "buffers"
        )
