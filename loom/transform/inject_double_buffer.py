"""inject_double_buffer: a double-buffered stage's buffer gets two copies (TVM's
InjectDoubleBuffer), one per parity of the loop it is computed in.

`Stage.double_buffer()` marks the loop a stage is computed at with the pragma
`double_buffer = "<buffer name>"` (loom/te/schedule.py); te lowering allocates the stage's
buffer right inside that loop. Afterwards (on flattened buffers) no such pragma is left, and for
each one:
- the buffer is allocated once, around the loop (and its other pragmas), with twice its size:
  two copies `span` elements apart, `span` its size rounded up to the alignment of its memory
  scope (and to the scope's addressing unit), so both copies start where a buffer of that scope
  may start;
- inside the loop, every access `B[e]` becomes `B[e + (i % 2) * span]` with `i` the loop's
  iteration (`loop_var - min`), and a use of the buffer's address (its data variable, as an
  accelerator's intrinsic uses it) becomes the address of copy `i % 2`: for a fixed-address
  scope the base plus `(i % 2) * span` units of the scope, otherwise `address_of(B[(i % 2) *
  span])`.
Iteration `i + 1` then writes the copy that iteration `i` does not read, so a device whose
load queue runs ahead of its compute (docs/npu.md, "Cycle model") overlaps them; the values
computed do not change, since each iteration writes its copy before reading it, as it wrote
its own buffer before. A loop of one iteration (simplify removed it) keeps one copy, and so does
a parallel loop (its iterations run at once, each with its own buffer, as before).
"""

from __future__ import annotations

import math

from loom import memory
from loom.abi.dtype import HANDLE
from loom.errors import LoweringError
from loom.ir import op
from loom.ir.buffer import Buffer, decl_buffer
from loom.ir.expr import BufferLoad, IntImm, PrimExpr, StringImm, Var
from loom.ir.function import PrimFunc
from loom.ir.simplify import simplify
from loom.ir.stmt import Allocate, AttrStmt, BufferStore, For, ForKind, LetStmt, SeqStmt, Stmt
from loom.ir.visitor import Mutator
from loom.memory.scope import FixedAddress
from loom.transform.pass_infra import Pass, register_pass

DOUBLE_BUFFER_PRAGMA = "double_buffer"
"""The pragma `Stage.double_buffer()` puts on the loop its stage is computed at; its value names
the stage's buffer."""
PRAGMA_KEY = f"pragma_{DOUBLE_BUFFER_PRAGMA}"


def copy_span(buf: Buffer) -> int:
    """Elements from the start of one copy of the 1-d buffer `buf` to the next: its size
    rounded up to its scope's alignment and addressing unit (and its own alignment)."""
    size = buf.shape[0]
    if not isinstance(size, IntImm):
        raise LoweringError(
            f"double_buffer: buffer {buf.name} has the symbolic size {size}; its two copies "
            "need a constant one"
        )
    scope = memory.get(buf.scope)
    unit = scope.strategy.unit_bits // 8 if isinstance(scope.strategy, FixedAddress) else 1
    itemsize = buf.dtype.itemsize
    step = math.lcm(max(scope.alignment, buf.alignment, 1), unit, itemsize)
    span_bytes = -(-size.value * itemsize // step) * step
    return span_bytes // itemsize


def _unit_bytes(buf: Buffer) -> int | None:
    """The addressing unit of a fixed-address scope in bytes; None for byte-addressed memory."""
    strategy = memory.get(buf.scope).strategy
    return strategy.unit_bits // 8 if isinstance(strategy, FixedAddress) else None


class _SelectCopy(Mutator):
    """Accesses of `old` (any view of its data) into copy `parity` of `new`."""

    def __init__(self, old: Buffer, new: Buffer, parity: PrimExpr, span: int):
        self.old, self.new = old.data, new
        self.offset = parity * IntImm(span, parity.dtype)
        unit = _unit_bytes(new)
        if unit is None:  # a host address: the first element of the copy
            self.address = op.call_intrin(HANDLE, "address_of", new.load([self.offset]))
        else:
            units = IntImm(span * new.dtype.itemsize // unit, "uint64")
            base = op.cast(new.data, "uint64") + op.cast(parity, "uint64") * units
            self.address = op.cast(base, HANDLE)

    def index(self, indices: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        (index,) = indices
        offset = self.offset
        if offset.dtype != index.dtype:
            offset = op.cast(offset, index.dtype)
        return (index + offset,)

    def visit_BufferLoad(self, e: BufferLoad) -> PrimExpr:
        e = self.generic_mutate(e)
        if e.buffer.data is not self.old:
            return e
        return BufferLoad(self.new, self.index(e.indices), e.predicate)

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        s = self.generic_mutate(s)
        if s.buffer.data is not self.old:
            return s
        return BufferStore(self.new, s.value, self.index(s.indices), s.predicate)

    def visit_Var(self, v: Var) -> PrimExpr:
        return self.address if v is self.old else v


def _take_allocation(stmt: Stmt, name: str) -> tuple[Stmt, Buffer | None]:
    """`stmt` without the allocation of buffer `name` made at its top (not inside a loop, a
    branch or another scope's body), and that allocation's buffer."""
    if isinstance(stmt, Allocate):
        if stmt.buffer.name == name:
            return stmt.body, stmt.buffer
        body, found = _take_allocation(stmt.body, name)
        return (stmt.replace(body=body) if found else stmt), found
    if isinstance(stmt, AttrStmt | LetStmt):
        body, found = _take_allocation(stmt.body, name)
        return (stmt.replace(body=body) if found else stmt), found
    if isinstance(stmt, SeqStmt):
        for k, s in enumerate(stmt.seq):
            new, found = _take_allocation(s, name)
            if found:
                return stmt.replace(seq=(*stmt.seq[:k], new, *stmt.seq[k + 1 :])), found
    return stmt, None


class _Inject(Mutator):
    def __init__(self, func: PrimFunc):
        self.func = func

    def visit_AttrStmt(self, s: AttrStmt) -> Stmt:
        if s.key != PRAGMA_KEY:
            return self.generic_mutate(s)
        # the loop's annotations (this stage's and others' double_buffer, other pragmas)
        names: list[str] = []
        kept: list[AttrStmt] = []
        loop: Stmt = s
        while isinstance(loop, AttrStmt) and loop.node is s.node:
            if loop.key != PRAGMA_KEY:
                kept.append(loop)
            elif isinstance(loop.value, StringImm):
                names.append(loop.value.value)
            else:
                raise LoweringError(f"function {self.func.name}: {PRAGMA_KEY} must name a buffer")
            loop = loop.body
        loop = self.visit(loop)
        if not isinstance(loop, For) or loop.loop_var is not s.node:
            # the loop ran once and simplify removed it: one copy suffices
            return self._wrap(kept, loop)
        if loop.kind not in (ForKind.SERIAL, ForKind.UNROLLED):
            # parallel or vectorized: its iterations run at once, so each keeps its own buffer
            # (two copies shared by lanes i and i + 2 would overwrite each other)
            return self._wrap(kept, loop)
        parity = simplify(op.floormod(loop.loop_var - loop.min, IntImm(2, loop.loop_var.dtype)))
        body = loop.body
        doubled_buffers = []
        for name in names:
            body, buf = _take_allocation(body, name)
            if buf is None:
                raise LoweringError(
                    f"function {self.func.name}: double_buffer: no allocation of {name} at "
                    f"the top of loop {loop.loop_var.name}, where its stage is computed"
                )
            span = copy_span(buf)
            doubled = decl_buffer((2 * span,), buf.dtype, buf.name, scope=buf.scope)
            doubled = doubled.replace(alignment=buf.alignment)
            body = _SelectCopy(buf, doubled, parity, span).visit(body)
            doubled_buffers.append(doubled)
        stmt = self._wrap(kept, loop.replace(body=body))
        for doubled in reversed(doubled_buffers):
            stmt = Allocate(doubled, stmt)
        return stmt

    @staticmethod
    def _wrap(attrs: list[AttrStmt], body: Stmt) -> Stmt:
        for attr in reversed(attrs):
            body = attr.replace(body=body)
        return body


def inject_func(func: PrimFunc) -> PrimFunc:
    return func.with_body(_Inject(func).visit(func.body))


inject_double_buffer = register_pass(
    Pass("inject_double_buffer", lambda mod: mod.map_functions(inject_func))
)
