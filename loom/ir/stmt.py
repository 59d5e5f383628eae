"""Statements of the loop IR."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Any

from loom.abi.dtype import BOOL
from loom.ir.expr import IntImm, PrimExpr, Var, _access_lanes
from loom.ir.node import Node, node
from loom.ir.op import convert

if TYPE_CHECKING:  # buffer.py imports this module (Buffer.store builds a BufferStore)
    from loom.ir.buffer import Buffer


class Stmt(Node):
    """Base of all statements."""


@node
class LetStmt(Stmt):
    """Bind `var` to `value` for the statements in `body`."""

    var: Var
    value: PrimExpr
    body: Stmt

    def __post_init__(self) -> None:
        if self.var.dtype != self.value.dtype:
            raise TypeError(f"let {self.var.name}: {self.var.dtype} bound to a {self.value.dtype}")


@node
class AttrStmt(Stmt):
    """An annotation `key = value` on `body` (pragmas are `pragma_<name>`); `node` is what the
    annotation is about (a loop variable, a buffer's data), if anything."""

    key: str
    value: PrimExpr
    body: Stmt
    node: Var | None = None


@node
class AssertStmt(Stmt):
    """Fail with `message` unless `condition` holds, then run `body`. A `message` of None
    means the failing call in `condition` has set the runtime's last error already."""

    condition: PrimExpr
    message: str | None
    body: Stmt


@node
class DeferStmt(Stmt):
    """Run `body`, then `cleanup`: also when `body` fails (like Go's defer), so memory taken
    before `body` is given back on every exit path."""

    cleanup: Stmt
    body: Stmt


class ForKind(StrEnum):
    SERIAL = "serial"
    PARALLEL = "parallel"
    VECTORIZED = "vectorized"
    UNROLLED = "unrolled"


UNROLL_FULL = "unroll_full"
"""A `For` annotation: the code generator asks the back-end compiler to unroll the loop
completely (loom/transform/unroll_loop.py: pragma unroll_explicit False)."""


@node
class For(Stmt):
    """`for loop_var in [min, min + extent)`, run as `kind` says."""

    loop_var: Var
    min: PrimExpr
    extent: PrimExpr
    kind: ForKind
    body: Stmt
    annotations: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        self._set("kind", ForKind(self.kind))
        for name in ("min", "extent"):
            value = getattr(self, name)
            if value.dtype != self.loop_var.dtype:
                raise TypeError(
                    f"loop {self.loop_var.name}: {name} has dtype {value.dtype}, "
                    f"the loop variable {self.loop_var.dtype}"
                )


@node
class Allocate(Stmt):
    """Storage for `buffer` (in its scope) that lives during `body`."""

    buffer: Buffer
    body: Stmt


@node
class BufferStore(Stmt):
    """`buffer[indices] = value`; with a vector index, lanes whose `predicate` is false are not
    written."""

    buffer: Buffer
    value: PrimExpr
    indices: tuple[PrimExpr, ...]
    predicate: PrimExpr | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.indices, tuple):
            self._set("indices", tuple(self.indices))
        lanes = _access_lanes(self.buffer, self.indices, self.predicate)
        expected = self.buffer.dtype.with_lanes(lanes)
        if self.value.dtype != expected:
            raise TypeError(
                f"store to {self.buffer.name} needs a {expected} value, got {self.value.dtype}"
            )


@node
class IfThenElse(Stmt):
    condition: PrimExpr
    then_case: Stmt
    else_case: Stmt | None = None

    def __post_init__(self) -> None:
        if self.condition.dtype != BOOL:
            raise TypeError(f"if condition must be a scalar bool, got {self.condition.dtype}")


@node
class Evaluate(Stmt):
    """Evaluate an expression for its effect (an extern call)."""

    value: PrimExpr


@node
class SeqStmt(Stmt):
    seq: tuple[Stmt, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.seq, tuple):
            self._set("seq", tuple(self.seq))
        for s in self.seq:
            if not isinstance(s, Stmt):
                raise TypeError(f"SeqStmt holds statements, got {type(s).__name__}")


NOP = Evaluate(IntImm(0))


def store(buffer: Buffer, value, indices, predicate: PrimExpr | None = None) -> BufferStore:
    """`buffer[indices] = value`, Python numbers converted (the counterpart of `buffer[...]` and
    `Buffer.load`)."""
    return BufferStore(buffer, convert(value), tuple(convert(i) for i in indices), predicate)


def is_nop(s: Stmt) -> bool:
    return isinstance(s, Evaluate) and isinstance(s.value, IntImm)


def seq(*stmts: Stmt) -> Stmt:
    """A sequence: nested sequences are flattened and no-ops dropped; one statement stays itself."""
    flat: list[Stmt] = []
    for s in stmts:
        if isinstance(s, list | tuple):
            s = seq(*s)
        if isinstance(s, SeqStmt):
            flat.extend(s.seq)
        elif not is_nop(s):
            flat.append(s)
    if not flat:
        return NOP
    return flat[0] if len(flat) == 1 else SeqStmt(tuple(flat))
