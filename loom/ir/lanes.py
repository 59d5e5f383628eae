"""A run of lanes of a vector expression as an expression of its own.

`lane_slice(e, first, count)` is the expression whose lanes are lanes first .. first+count-1 of
`e` (a scalar when count is 1): ramps and broadcasts are cut, every other node is rebuilt from
its cut operands. Used where a code generator splits a vector operation into register-wide
pieces and wants each piece's own condition, simplified on its own (a piece past the end of a
guarded row is provably off and needs no load at all).
"""

from __future__ import annotations

from loom.ir import expr as E
from loom.ir.expr import PrimExpr
from loom.ir.op import add, mul
from loom.ir.visitor import Mutator


class _CannotSlice(Exception):
    """A node whose lanes cannot be cut apart (a vector variable bound outside `e`)."""


class _LaneSlice(Mutator):
    def __init__(self, first: int, count: int):
        self.first = first
        self.count = count

    def visit(self, node):
        dt = getattr(node, "dtype", None)
        if dt is not None and dt.lanes == 1:
            return node  # the same in every lane (a reduction of a vector included)
        return super().visit(node)

    def visit_Ramp(self, e: E.Ramp) -> PrimExpr:
        base = e.base
        if self.first:
            base = add(base, mul(e.stride, E.IntImm(self.first, e.stride.dtype)))
        return E.Ramp(base, e.stride, self.count) if self.count > 1 else base

    def visit_Broadcast(self, e: E.Broadcast) -> PrimExpr:
        return E.Broadcast(e.value, self.count) if self.count > 1 else e.value

    def visit_Cast(self, e: E.Cast) -> PrimExpr:
        return E.Cast(e.dtype.with_lanes(self.count), self.visit(e.value))

    def visit_Call(self, e: E.Call) -> PrimExpr:
        args = tuple(self.visit(a) for a in e.args)
        return e.replace(args=args, dtype=e.dtype.with_lanes(self.count))

    def visit_Var(self, e: E.Var) -> PrimExpr:
        raise _CannotSlice(e.name)  # a vector variable (scalar ones are returned by visit)

    def visit_Let(self, e: E.Let) -> PrimExpr:
        if e.var.dtype.lanes > 1:
            raise _CannotSlice(e.var.name)
        return e.replace(body=self.visit(e.body))


def lane_slice(e: PrimExpr, first: int, count: int) -> PrimExpr | None:
    """Lanes first .. first+count-1 of the vector expression `e` (a scalar expression when
    `count` is 1), or None where `e` reads a vector variable bound outside it."""
    lanes = e.dtype.lanes
    if not (0 <= first and 1 <= count and first + count <= lanes):
        raise ValueError(f"lane_slice: lanes {first}..{first + count - 1} of a {lanes}-lane vector")
    if first == 0 and count == lanes:
        return e
    try:
        return _LaneSlice(first, count).visit(e)
    except _CannotSlice:
        return None


__all__ = ["lane_slice"]
