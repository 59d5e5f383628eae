"""How a stage's iteration variables derive from one another: the split and fuse relations,
the singleton loop `fuse()` of no axes adds, and the extents and positions they give every
variable."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from loom.ir import op as irop
from loom.ir.bound import IntBound
from loom.ir.expr import PrimExpr, Var
from loom.ir.simplify import can_prove, simplify
from loom.te.tensor import Extent, IterVar, as_int


@dataclasses.dataclass(frozen=True)
class Split:
    """`parent = outer * extent(inner) + inner`."""

    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int | None
    nparts: int | None


@dataclasses.dataclass(frozen=True)
class Fuse:
    """`outer = fused // extent(inner)`, `inner = fused % extent(inner)`."""

    outer: IterVar
    inner: IterVar
    fused: IterVar


@dataclasses.dataclass(frozen=True)
class Singleton:
    """A loop of extent 1 derived from no axis (TVM's `fuse()` of no axes): it gives a stage
    without loops (0-d) a loop to compute another stage at or to annotate. Its variable is
    always 0 and no other variable depends on it."""

    iter_var: IterVar


Relation = Split | Fuse | Singleton


def is_reduce_relation(rel: Relation) -> bool:
    """True if the relation derives reduction axes (split and fuse never mix kinds)."""
    if isinstance(rel, Singleton):
        return rel.iter_var.is_reduce
    return (rel.parent if isinstance(rel, Split) else rel.outer).is_reduce


def as_extent(e: PrimExpr) -> Extent:
    """`e` simplified: an int if it is a constant, else the expression."""
    e = simplify(e)
    value = as_int(e)
    return e if value is None else value


def _ceil_div(a: Extent, b: Extent) -> Extent:
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return as_extent(irop.floordiv(irop.sub(irop.add(a, b), 1), b))


def _product(a: Extent, b: Extent) -> Extent:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    return as_extent(irop.mul(a, b))


def relation_extents(
    relations: Sequence[Relation], root_extent: dict[IterVar, Extent]
) -> dict[IterVar, Extent]:
    """Extents of all iteration variables from the root extents, through splits and fuses
    (ints where constant; a split of a symbolic extent gives `floordiv(n + f - 1, f)`)."""
    ext = dict(root_extent)
    for rel in relations:
        if isinstance(rel, Split):
            parent = ext[rel.parent]
            if rel.factor is not None:
                ext[rel.outer], ext[rel.inner] = _ceil_div(parent, rel.factor), rel.factor
            else:
                ext[rel.outer], ext[rel.inner] = rel.nparts, _ceil_div(parent, rel.nparts)
        elif isinstance(rel, Singleton):
            ext[rel.iter_var] = 1
        else:
            ext[rel.fused] = _product(ext[rel.outer], ext[rel.inner])
    return ext


def relation_offsets(
    relations: Sequence[Relation], leaves: Sequence[IterVar], ext: dict[IterVar, Extent]
) -> dict[IterVar, PrimExpr]:
    """Each iteration variable's position in its range, as an expression of the leaf loops."""
    off: dict[IterVar, PrimExpr] = {iv: iv.var for iv in leaves}
    for rel in reversed(relations):
        if isinstance(rel, Split):
            off[rel.parent] = off[rel.outer] * ext[rel.inner] + off[rel.inner]
        elif isinstance(rel, Singleton):
            continue  # a leaf itself, which no other variable derives from
        else:
            fused = off[rel.fused]
            off[rel.outer] = irop.floordiv(fused, ext[rel.inner])
            off[rel.inner] = irop.floormod(fused, ext[rel.inner])
    return off


def _covers(rel: Split, ext: dict[IterVar, Extent], var_bounds) -> bool:
    """True if the split's loops provably run no further than its parent's extent."""
    outer, inner, parent = ext[rel.outer], ext[rel.inner], ext[rel.parent]
    if isinstance(outer, int) and isinstance(inner, int) and isinstance(parent, int):
        return outer * inner <= parent
    return can_prove(irop.less_equal(irop.mul(outer, inner), parent), var_bounds)


def uncovered_splits(
    relations: Sequence[Relation],
    ext: dict[IterVar, Extent],
    var_bounds: dict[Var, IntBound] | None = None,
) -> list[Split]:
    """Splits whose loops may run past the parent's extent: a constant factor that does not
    divide, or a symbolic extent not proven to be a multiple of it (`var_bounds` help prove)."""
    return [
        rel for rel in relations if isinstance(rel, Split) and not _covers(rel, ext, var_bounds)
    ]
