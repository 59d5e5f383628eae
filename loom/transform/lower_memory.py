"""lower_memory_scopes: every allocation becomes what its memory scope says.

Afterwards only stack allocations (`Stack` scopes) are left as `Allocate`:
- `RuntimeAllocator` scopes: `let data = alloc(bytes, alignment)`, an assertion that it is not
  NULL (the allocator's last error propagates), and `defer free(data)` so the memory is freed
  on every exit path, including errors;
- `FixedAddress` scopes: plan_memory (loom/transform/plan_memory.py), which runs first, has
  placed them (`let data = base + offset`, `fixed_address`); one left here is an error.
Every constant-size allocation is checked against its scope's capacity.
"""

from __future__ import annotations

from loom import abi, memory
from loom.abi.dtype import HANDLE, INT64, dtype
from loom.errors import LoomError
from loom.ir import op
from loom.ir.buffer import Buffer
from loom.ir.expr import Call, CallKind, Cast, IntImm, PrimExpr
from loom.ir.function import IRModule, PrimFunc
from loom.ir.simplify import simplify
from loom.ir.stmt import Allocate, AssertStmt, DeferStmt, Evaluate, LetStmt, Stmt
from loom.ir.visitor import Mutator
from loom.memory.scope import FixedAddress, MemoryScope, RuntimeAllocator, Stack
from loom.transform.pass_infra import Pass, register_pass


def capacity_error(func: PrimFunc, buf: Buffer, scope: MemoryScope, nbytes, target):
    """The error for a buffer larger than its scope (or the target's limit on it), or None."""
    limits = [c for c in (scope.capacity, target.memory_capacity(scope.name)) if c is not None]
    if limits and isinstance(nbytes, IntImm) and nbytes.value > min(limits):
        return LoomError(
            f"function {func.name}: buffer {buf.name} needs {nbytes.value} "
            f"bytes but memory scope {scope.name} has {min(limits)} bytes on {target}"
        )
    return None


def fixed_address(scope: MemoryScope, offset: int) -> PrimExpr:
    """The address of byte `offset` of fixed-address scope `scope`, as a handle."""
    strategy = scope.strategy
    address = strategy.base + offset // (strategy.unit_bits // 8)
    return op.cast(IntImm(address, "uint64"), HANDLE)


class _LowerAllocations(Mutator):
    def __init__(self, func: PrimFunc, target):
        self.func = func
        self.target = target
        self.device = target.device
        self.scopes: dict[str, None] = {}  # every scope allocated in, in order

    def visit_Allocate(self, s: Allocate) -> Stmt:
        buf = s.buffer
        scope = memory.get(buf.scope)
        self.scopes.setdefault(scope.name)
        # in int64: a symbolic element count times the item size may not fit int32
        nbytes = simplify(op.cast(buf.storage_elements(), INT64) * buf.dtype.itemsize)
        self._check_capacity(buf, scope, nbytes)
        alignment = max(buf.alignment, scope.alignment)
        strategy = scope.strategy
        if isinstance(strategy, FixedAddress):
            raise LoomError(
                f"function {self.func.name}: buffer {buf.name} in fixed-address scope "
                f"{scope.name} has no address; plan_memory must run before lower_memory_scopes"
            )
        body = self.visit(s.body)
        if isinstance(strategy, Stack):
            return Allocate(buf.replace(alignment=alignment), body)
        return self._runtime_allocation(buf, scope, strategy, nbytes, alignment, body)

    def _check_capacity(self, buf: Buffer, scope: MemoryScope, nbytes: PrimExpr) -> None:
        too_large = capacity_error(self.func, buf, scope, nbytes, self.target)
        if too_large is not None:
            raise too_large

    def _runtime_allocation(
        self,
        buf: Buffer,
        scope: MemoryScope,
        strategy: RuntimeAllocator,
        nbytes: PrimExpr,
        alignment: int,
        body: Stmt,
    ) -> Stmt:
        _, alloc = abi.lookup(strategy.alloc, self.device, self.func.name)
        _, free = abi.lookup(strategy.free, self.device, self.func.name)
        if len(alloc.params) != 2 or alloc.ret != "handle" or len(free.params) != 1:
            raise LoomError(
                f"memory scope {scope.name}: allocator {alloc.name} must be "
                f"'handle {alloc.name}(size, alignment)' and {free.name} take one "
                "pointer"
            )
        size_t, align_t = (dtype(t) for _, t in alloc.params)
        call = op.call_extern(
            HANDLE, alloc.name, op.cast(nbytes, size_t), op.const(alignment, align_t)
        )
        message = (
            None
            if alloc.sets_last_error
            else (
                f"{alloc.name} returned NULL for buffer {buf.name} ({nbytes} bytes, scope "
                f"{scope.name})"
            )
        )
        free_call = Evaluate(
            Call(
                dtype("int32") if free.ret == "void" else dtype(free.ret),
                free.name,
                (buf.data,),
                "extern",
            )
        )
        not_null = op.logical_not(op.call_intrin("bool", "isnullptr", buf.data))
        return LetStmt(buf.data, call, AssertStmt(not_null, message, DeferStmt(free_call, body)))


def owns_memory(s: LetStmt) -> bool:
    """Whether `s` binds a handle to memory that no other handle of its function reaches: an
    allocator's memory as this pass binds it (checked not NULL, then freed by a `defer` of the
    same handle) or a fixed address (`fixed_address`). A pointer some other extern call returns
    is not (memcpy returns its destination)."""
    value = s.value
    if not s.var.dtype.is_handle:
        return False
    if isinstance(value, Cast) and isinstance(value.value, IntImm):
        return True
    if not (isinstance(value, Call) and value.kind == CallKind.EXTERN):
        return False
    check = s.body
    if not (isinstance(check, AssertStmt) and isinstance(check.body, DeferStmt)):
        return False
    free = check.body.cleanup
    return (
        isinstance(free, Evaluate) and isinstance(free.value, Call) and free.value.args == (s.var,)
    )


MEMORIES_ATTR = "memories"
"""Function attribute: the memory scopes its allocations were placed in. Fixed-address buffers
leave no trace in the lowered body but a constant pointer, so codegen reads this attribute."""


def lower_memory_func(func: PrimFunc, target) -> PrimFunc:
    lowering = _LowerAllocations(func, target)
    body = lowering.visit(func.body)
    known = tuple(func.attr(MEMORIES_ATTR, ()))
    scopes = tuple(dict.fromkeys([*known, *lowering.scopes]))
    return func.with_body(body).with_attr(MEMORIES_ATTR, scopes) if scopes else func.with_body(body)


def _run(mod: IRModule) -> IRModule:
    target = target_of(mod)
    return mod.map_functions(lambda f: lower_memory_func(f, target))


DEVICE_ATTR = "device"
"""PrimFunc attribute: the device the function runs on, when it is not its target's (an
accelerator's kernel: Backend.partition sets it)."""


def device_of(func: PrimFunc, target) -> str:
    """The device `func` runs on: its DEVICE_ATTR, else the target's."""
    return func.attr(DEVICE_ATTR) or target.device


def target_of(mod: IRModule):
    """The target a module is built for (set by loom.build / loom.lower(target=...))."""
    target = mod.attr("target")
    if target is None:
        raise LoomError(
            "this pass needs the module's target: use loom.build or loom.lower(..., target=...)"
        )
    return target


lower_memory_scopes = register_pass(Pass("lower_memory_scopes", _run))
