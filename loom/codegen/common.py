"""What every code generator needs to know about a module besides its code: the memories the
functions use and the stack buffers' sizes."""

from __future__ import annotations

from loom import memory
from loom.errors import LoomError
from loom.ir import expr as E
from loom.ir import stmt as S
from loom.ir.buffer import Buffer
from loom.ir.function import IRModule
from loom.ir.visitor import visit_each_once
from loom.memory.program import GLOBALS_ATTR
from loom.memory.scope import Stack
from loom.transform.lower_memory import MEMORIES_ATTR
from loom.transform.lower_parallel import PARALLEL_TASK_ATTR


def memories_used(mod: IRModule) -> tuple[str, ...]:
    """Memory scopes of the buffers the functions use, apart from their parameters (which live
    in the caller's memory). A parallel task's parameters are its closure, and the parameters
    of the function whose loop it runs are that function's (the task unpacks the same
    variables)."""
    scopes: dict[str, None] = {}
    for func in mod:
        owner = func.attr(PARALLEL_TASK_ATTR)
        params = {p.data if isinstance(p, Buffer) else p for p in func.params}
        if owner is not None and owner in mod:
            params |= {p.data for p in mod[owner].params if isinstance(p, Buffer)}

        def record(n, params=params) -> None:
            buf = None
            if isinstance(n, E.BufferLoad | S.BufferStore | S.Allocate):
                buf = n.buffer
            elif isinstance(n, E.Call) and n.op == "address_of":
                buf = n.args[0].buffer
            if buf is not None and buf.data not in params:
                scopes.setdefault(buf.scope)

        visit_each_once(func.body, record)
        for scope in func.attr(MEMORIES_ATTR, ()):  # fixed-address buffers (lower_memory_scopes)
            scopes.setdefault(scope)
    return tuple(scopes)


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


def global_arrays(mod) -> dict:
    """symbol -> GlobalArray of the arrays of the library (plan_memory's static pools), which a
    code generator emits where `global_address` first names them."""
    return {g.symbol: g for g in mod.attr(GLOBALS_ATTR, ())}


def unknown_global(symbol: str, arrays) -> LoomError:
    return LoomError(
        f"global_address names {symbol!r}, which is not an array of the module (it has "
        f"{sorted(arrays)})"
    )


def check_function_names(mod: IRModule, libraries) -> None:
    """No function of `mod` may take the name of a symbol one of its runtime `libraries`
    provides: the code's own calls of that symbol (LLVM turns `llvm.exp.f64` into a call of
    libm's `exp`) would reach the function instead, and never return."""
    for func in mod:
        for lib in libraries:
            if lib.provides(func.name):
                raise LoomError(
                    f"function name {func.name!r} is a symbol of {lib.name}: calls of "
                    f"{lib.name}'s {func.name} would call this function instead; choose another "
                    "name"
                )
