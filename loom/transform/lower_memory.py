"""lower_memory_scopes: every allocation becomes what its memory scope says.

Afterwards only stack allocations (`Stack` scopes) are left as `Allocate`:
- `RuntimeAllocator` scopes: `let data = alloc(bytes, alignment)`, an assertion that it is not
  NULL (the allocator's last error propagates), and `defer free(data)` so the memory is freed
  on every exit path, including errors;
- `FixedAddress` scopes: `let data = base + offset`, the offsets planned by loom's memory
  planner (loom/memory/planner) from each buffer's lifetime, so buffers never alive at the same
  time share space; a buffer lives from its allocation to the end of its body, counted in
  statements of the function. A function whose live buffers need more than the scope's
  capacity is a build error giving required and available bytes.
Every constant-size allocation is checked against its scope's capacity.
"""

from __future__ import annotations

from loom import abi, memory
from loom.abi.dtype import HANDLE, dtype
from loom.errors import LoomError
from loom.ir import op
from loom.ir.buffer import Buffer
from loom.ir.expr import Call, IntImm, PrimExpr
from loom.ir.function import IRModule, PrimFunc
from loom.ir.simplify import simplify
from loom.ir.stmt import Allocate, AssertStmt, DeferStmt, Evaluate, LetStmt, Stmt
from loom.ir.visitor import Mutator, Visitor
from loom.memory.planner import Buffer as Block
from loom.memory.planner import plan
from loom.memory.scope import FixedAddress, MemoryScope, RuntimeAllocator, Stack
from loom.transform.pass_infra import Pass, register_pass


class _Lifetimes(Visitor):
    """[start, end) of each allocation in statements of a walk: from the Allocate to the end of
    its body (an allocation inside a loop is one buffer, reused by every iteration)."""

    def __init__(self):
        self.step = 0
        self.spans: dict[int, tuple[Allocate, int, int]] = {}  # id(allocate) -> span

    def visit(self, node) -> None:
        if isinstance(node, Stmt):
            self.step += 1
        super().visit(node)

    def visit_Allocate(self, s: Allocate) -> None:
        start = self.step
        self.generic_visit(s)
        self.spans[id(s)] = (s, start, self.step + 1)


def _capacity_error(func: PrimFunc, buf: Buffer, scope: MemoryScope, nbytes, target):
    """The error for a buffer larger than its scope (or the target's limit on it), or None."""
    limits = [c for c in (scope.capacity, target.memory_capacity(scope.name)) if c is not None]
    if limits and isinstance(nbytes, IntImm) and nbytes.value > min(limits):
        return LoomError(
            f"function {func.name}: buffer {buf.name} needs {nbytes.value} "
            f"bytes but memory scope {scope.name} has {min(limits)} bytes on {target}"
        )
    return None


def _fixed_blocks(func: PrimFunc, target) -> dict[str, list[tuple[Allocate, Block]]]:
    """scope -> (allocation, planner block) of each fixed-address allocation of `func`."""
    lifetimes = _Lifetimes()
    lifetimes.visit(func.body)
    blocks: dict[str, list] = {}
    for s, start, end in sorted(lifetimes.spans.values(), key=lambda span: span[1]):
        scope = memory.get(s.buffer.scope)
        strategy = scope.strategy
        if not isinstance(strategy, FixedAddress):
            continue
        nbytes = simplify(s.buffer.storage_elements() * s.buffer.dtype.itemsize)
        too_large = _capacity_error(func, s.buffer, scope, nbytes, target)
        if too_large is not None:
            raise too_large
        if not isinstance(nbytes, IntImm):
            raise LoomError(
                f"function {func.name}: buffer {s.buffer.name} in fixed-address "
                f"scope {scope.name} needs a constant size, got {nbytes}"
            )
        alignment = max(s.buffer.alignment, scope.alignment, strategy.unit_bits // 8)
        name = f"{s.buffer.name}#{len(blocks.get(scope.name, []))}"
        block = Block(name, nbytes.value, start, end, alignment)
        blocks.setdefault(scope.name, []).append((s, block))
    return blocks


def _plan_fixed(func: PrimFunc, target) -> dict[int, int]:
    """id(allocate) -> byte offset in its scope, for every fixed-address allocation."""
    offsets = {}
    for scope_name, placed in _fixed_blocks(func, target).items():
        scope = memory.get(scope_name)
        result = plan([b for _, b in placed], capacity=scope.capacity)
        if result.peak > scope.capacity:
            live = ", ".join(
                f"{s.buffer.name}: {b.size} bytes at offset {result.offsets[b.name]}"
                for s, b in placed
            )
            raise LoomError(
                f"function {func.name}: buffers in memory scope {scope_name} need "
                f"{result.peak} bytes ({live}), but the scope has {scope.capacity} bytes"
            )
        offsets.update({id(s): result.offsets[b.name] for s, b in placed})
    return offsets


class _LowerAllocations(Mutator):
    def __init__(self, func: PrimFunc, target):
        self.func = func
        self.target = target
        self.device = target.device
        self.fixed_offsets = _plan_fixed(func, target)  # id(allocate) -> offset
        self.scopes: dict[str, None] = {}  # every scope allocated in, in order

    def visit_Allocate(self, s: Allocate) -> Stmt:
        buf = s.buffer
        scope = memory.get(buf.scope)
        self.scopes.setdefault(scope.name)
        nbytes = simplify(buf.storage_elements() * buf.dtype.itemsize)
        self._check_capacity(buf, scope, nbytes)
        alignment = max(buf.alignment, scope.alignment)
        strategy = scope.strategy
        if isinstance(strategy, FixedAddress):
            address = strategy.base + self.fixed_offsets[id(s)] // (strategy.unit_bits // 8)
            return LetStmt(buf.data, op.cast(IntImm(address, "uint64"), HANDLE), self.visit(s.body))
        body = self.visit(s.body)
        if isinstance(strategy, Stack):
            return Allocate(buf.replace(alignment=alignment), body)
        return self._runtime_allocation(buf, scope, strategy, nbytes, alignment, body)

    def _check_capacity(self, buf: Buffer, scope: MemoryScope, nbytes: PrimExpr) -> None:
        too_large = _capacity_error(self.func, buf, scope, nbytes, self.target)
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


def target_of(mod: IRModule):
    """The target a module is built for (set by loom.build / loom.lower(target=...))."""
    target = mod.attr("target")
    if target is None:
        raise LoomError(
            "this pass needs the module's target: use loom.build or loom.lower(..., target=...)"
        )
    return target


lower_memory_scopes = register_pass(Pass("lower_memory_scopes", _run))
