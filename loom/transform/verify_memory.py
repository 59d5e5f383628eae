"""verify_memory and check_extern_calls: what must hold before code generation.

verify_memory: no allocation in a scope other than a stack scope is left (lower_memory_scopes
ran), and no function loads or stores a buffer whose scope its device cannot access (taking a
buffer's address for a data-movement call is allowed).

check_extern_calls: every extern call names a symbol that a runtime library declares for the
device, with the declared number and types of arguments.
"""

from __future__ import annotations

from loom import abi, memory
from loom.errors import LoomError
from loom.ir.expr import BufferLoad, Call, CallKind
from loom.ir.function import IRModule, PrimFunc
from loom.ir.stmt import Allocate, BufferStore
from loom.ir.visitor import children, node_kinds, visit_kinds_once
from loom.memory.scope import Stack
from loom.transform.lower_memory import device_of, target_of
from loom.transform.pass_infra import Pass, register_pass


class _MemoryChecker:
    """Checks each allocation and access once, in tree order (an unrolled body shares its
    subtrees: each is checked where it first occurs), entering only subtrees that hold one."""

    def __init__(self, func: PrimFunc, device: str):
        self.func = func
        self.device = device
        self.seen: set[int] = set()

    def check_allocate(self, n: Allocate) -> None:
        scope = memory.get(n.buffer.scope)
        if not isinstance(scope.strategy, Stack):
            raise LoomError(
                f"function {self.func.name}: buffer {n.buffer.name} in scope "
                f"{scope.name} is still an Allocate; lower_memory_scopes must run "
                "before code generation"
            )

    def check_access(self, n: BufferLoad | BufferStore, verb: str) -> None:
        scope = memory.get(n.buffer.scope)
        if not scope.accessible(self.device):
            raise LoomError(
                f"function {self.func.name} runs on {self.device} but {verb} buffer "
                f"{n.buffer.name} in memory scope {scope.name}, which only "
                f"{list(scope.accessible_from)} can access; move data with a pragma rule "
                "(e.g. mvin/mvout) instead"
            )

    def visit(self, n) -> None:
        t = type(n)
        if t is Allocate:
            self.check_allocate(n)
        elif t is BufferLoad:
            self.check_access(n, "reads")
        elif t is BufferStore:
            self.check_access(n, "writes")
        elif t is Call and n.op == "address_of":  # taking an address is not an access
            for index in n.args[0].indices:
                self.visit_once(index)
            return
        for child in children(n):
            self.visit_once(child)

    def visit_once(self, n) -> None:
        key = id(n)
        if key not in self.seen and not _CHECKED.isdisjoint(node_kinds(n)):
            self.seen.add(key)
            self.visit(n)


_CHECKED = frozenset({Allocate, BufferLoad, BufferStore, Call})


def verify_memory_func(func: PrimFunc, device: str) -> None:
    _MemoryChecker(func, device).visit_once(func.body)


_CALLS = frozenset({Call})


def check_extern_calls_func(
    func: PrimFunc, device: str, functions: frozenset = frozenset()
) -> None:
    def check(n: Call) -> None:
        if n.kind == CallKind.FUNCTION:
            if n.op not in functions:
                raise LoomError(
                    f"function {func.name} calls function {n.op!r}, which is not in "
                    f"the module (it has {sorted(functions)})"
                )
            return
        if n.op == "function_address" and n.kind == CallKind.INTRINSIC:
            if n.args[0].value not in functions:  # a parallel task's (lower_parallel)
                raise LoomError(
                    f"function {func.name} takes the address of function {n.args[0].value!r}, "
                    f"which is not in the module (it has {sorted(functions)})"
                )
            return
        if n.kind != CallKind.EXTERN:
            return
        lib, sym = abi.lookup(n.op, device, func.name)
        got = [str(a.dtype) for a in n.args]
        want = [t for _, t in sym.params]
        if got != want:
            raise LoomError(
                f"function {func.name} calls {sym.c_declaration()} (from {lib.name}) "
                f"with argument types {got}, expected {want}"
            )

    visit_kinds_once(func.body, _CALLS, check)


def _verify(mod: IRModule) -> IRModule:
    target = target_of(mod)
    for func in mod:  # each on its own device: an accelerator's kernel on the accelerator
        verify_memory_func(func, device_of(func, target))
    return mod


def _check_externs(mod: IRModule) -> IRModule:
    device = target_of(mod).device
    for func in mod:
        check_extern_calls_func(func, device, frozenset(mod.names()))
    return mod


verify_memory = register_pass(Pass("verify_memory", _verify))
check_extern_calls = register_pass(Pass("check_extern_calls", _check_externs))
