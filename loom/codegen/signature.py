"""Signatures of the functions of a lowered module: derived from each PrimFunc and the target's
alignment, including which buffers each function writes."""

from __future__ import annotations

from collections.abc import Mapping

from loom.abi import symbols as abi
from loom.abi.signature import FunctionSignature, ParamSpec
from loom.errors import LoomError
from loom.ir.buffer import Buffer
from loom.ir.expr import (
    Add,
    Call,
    Cast,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    PrimExpr,
    Sub,
    Var,
)
from loom.ir.function import IRModule, PrimFunc
from loom.ir.shape_vars import shape_params
from loom.ir.stmt import BufferStore, LetStmt
from loom.ir.visitor import children, node_kinds, visit_each_once, visit_kinds_once
from loom.transform.lower_parallel import is_task

_ACTIVE = frozenset({BufferStore, LetStmt, Call})
"""The nodes `written_buffers` acts on: a subtree holding none of them writes nothing."""
_CALLS = frozenset({Call})


def written_buffers(
    func: PrimFunc,
    callees: Mapping[str, FunctionSignature] | None = None,
    tasks: Mapping[str, set[Var]] | None = None,
) -> set[Var]:
    """Data variables of buffers the function stores to, or whose address may be written
    through: an address given to a call at a parameter that is not read-only (an extern
    symbol's parameter not declared `const`; a parameter another function in `callees`
    writes; any parameter of a function not in `callees`), or an address that escapes into a
    variable. Each occurrence of an address is judged by where it stands. A parallel task
    whose address the function takes (lower_parallel) runs on its behalf: what the task writes
    (`tasks`: task name -> written_buffers of the task) is written by the function, since the
    task unpacks the function's own variables from its closure."""
    callees = callees or {}
    tasks = tasks or {}
    written: set[Var] = set()

    def read_only_args(call: Call) -> set[int]:
        if call.kind == "func":
            sig = callees.get(call.op)
            if sig is None:
                return set()
            return {k for k, p in enumerate(sig.params) if p.is_buffer and not p.written}
        return abi.read_only_params(call.op)

    def escapes(value) -> None:  # every handle a let binds may be written through later
        visit_each_once(
            value,
            lambda n: written.add(n) if isinstance(n, Var) and n.dtype.is_handle else None,
        )

    seen: set[tuple[int, bool]] = set()  # a subtree shared by an unrolled body, once

    def walk(n, read_only: bool = False) -> None:
        key = (id(n), read_only)
        if key in seen:
            return
        seen.add(key)
        if isinstance(n, BufferStore):
            written.add(n.buffer.data)
        elif isinstance(n, LetStmt):
            escapes(n.value)
        elif isinstance(n, Call) and n.kind == "intrin" and n.op == "function_address":
            written.update(tasks.get(n.args[0].value, ()))
        elif isinstance(n, Call) and n.op == "address_of":
            if not read_only:
                written.add(n.args[0].buffer.data)
        elif isinstance(n, Call) and n.kind != "intrin":
            read = read_only_args(n)
            for k, arg in enumerate(n.args):
                if k not in read and isinstance(arg, Var) and arg.dtype.is_handle:
                    written.add(arg)
                walk(arg, read_only=k in read)
            return
        for child in children(n):  # an address computed from another (a cast, an offset)
            if not _ACTIVE.isdisjoint(node_kinds(child)):  # else nothing under it counts
                walk(child, read_only)

    walk(func.body)
    return written


def signature_of(
    func: PrimFunc,
    alignment: int,
    callees: Mapping[str, FunctionSignature] | None = None,
    tasks: Mapping[str, set[Var]] | None = None,
) -> FunctionSignature:
    """The signature of `func`; buffers without a declared alignment get `alignment`;
    `callees` are the signatures of functions it calls, `tasks` what the parallel tasks it
    launches write (see written_buffers)."""
    written = written_buffers(func, callees, tasks)
    implicit = set(func.params[len(func.params) - shape_params(func) :])
    params = []
    for p in func.params:
        if isinstance(p, Buffer):
            params.append(
                ParamSpec(
                    p.name,
                    str(p.dtype),
                    tuple(_dimension(func, p, d) for d in p.shape),
                    p.alignment or alignment,
                    p.data in written,
                )
            )
        else:
            params.append(ParamSpec(p.name, str(p.dtype), implicit=p in implicit))
    return FunctionSignature(func.name, tuple(params))


_SHAPE_OPERATORS = {Add: "+", Sub: "-", Mul: "*", FloorDiv: "//", FloorMod: "%"}


def _dimension(func: PrimFunc, buf: Buffer, d: PrimExpr) -> int | str:
    """A dimension as a signature holds it: an int, or the text of a symbolic one
    (loom/abi/shape_expr.py)."""

    def text(e: PrimExpr) -> str:
        if isinstance(e, IntImm):
            return str(e.value)
        if isinstance(e, Var):
            return e.name
        if type(e) in _SHAPE_OPERATORS:
            return f"({text(e.a)} {_SHAPE_OPERATORS[type(e)]} {text(e.b)})"
        if isinstance(e, Min | Max):
            return f"{type(e).__name__.lower()}({text(e.a)}, {text(e.b)})"
        if isinstance(e, Cast) and e.value.dtype.is_integer and e.dtype.is_integer:
            if e.dtype.bits >= e.value.dtype.bits:  # widening (int32 to int64): the same value
                return text(e.value)
        raise LoomError(
            f"function {func.name}: argument {buf.name} has the dimension {d}; a symbolic "
            "dimension may use + - * floordiv floormod min max of integers and shape variables"
        )

    if isinstance(d, IntImm):
        return d.value
    t = text(d)
    return t[1:-1] if t.startswith("(") and t.endswith(")") and not isinstance(d, Min | Max) else t


def module_signatures(
    mod: IRModule, alignment: int, callees: Mapping[str, FunctionSignature] | None = None
) -> dict[str, FunctionSignature]:
    """The signatures of every function of `mod` but the parallel tasks (no entry points),
    each computed after those of the functions it calls (in `mod`, or given in `callees`) and
    of the tasks it launches, so arrays passed on only to be read stay inputs."""
    by_name = {f.name: f for f in mod}
    done: dict[str, FunctionSignature] = dict(callees or {})
    task_writes: dict[str, set[Var]] = {}

    def compute(func: PrimFunc, visiting: set[str]) -> None:
        visiting.add(func.name)
        used: list[str] = []  # functions it calls, and tasks it launches

        def record(n) -> None:
            if isinstance(n, Call) and n.kind == "func":
                used.append(n.op)
            elif isinstance(n, Call) and n.kind == "intrin" and n.op == "function_address":
                used.append(n.args[0].value)

        visit_kinds_once(func.body, _CALLS, record)  # enters only subtrees that hold a call
        for name in used:
            if name in by_name and name not in visiting and not _known(name):
                compute(by_name[name], visiting)  # a cycle leaves the callee conservative
        if is_task(func):
            task_writes[func.name] = written_buffers(func, done, task_writes)
        else:
            done[func.name] = signature_of(func, alignment, done, task_writes)

    def _known(name: str) -> bool:
        return name in done or name in task_writes

    for func in mod:
        if not _known(func.name):
            compute(func, set())
    return {f.name: done[f.name] for f in mod if not is_task(f)}
