"""How a stage's iteration variables derive from one another: the split and fuse relations,
and the extents and positions they give every variable."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from loom.ir import op as irop
from loom.ir.expr import PrimExpr
from loom.te.tensor import IterVar


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


Relation = Split | Fuse


def is_reduce_relation(rel: Relation) -> bool:
    """True if the relation derives reduction axes (split and fuse never mix kinds)."""
    return (rel.parent if isinstance(rel, Split) else rel.outer).is_reduce


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def relation_extents(
    relations: Sequence[Relation], root_extent: dict[IterVar, int]
) -> dict[IterVar, int]:
    """Extents of all iteration variables from the root extents, through splits and fuses."""
    ext = dict(root_extent)
    for rel in relations:
        if isinstance(rel, Split):
            parent = ext[rel.parent]
            if rel.factor is not None:
                ext[rel.outer], ext[rel.inner] = _ceil_div(parent, rel.factor), rel.factor
            else:
                ext[rel.outer], ext[rel.inner] = rel.nparts, _ceil_div(parent, rel.nparts)
        else:
            ext[rel.fused] = ext[rel.outer] * ext[rel.inner]
    return ext


def relation_offsets(
    relations: Sequence[Relation], leaves: Sequence[IterVar], ext: dict[IterVar, int]
) -> dict[IterVar, PrimExpr]:
    """Each iteration variable's position in its range, as an expression of the leaf loops."""
    off: dict[IterVar, PrimExpr] = {iv: iv.var for iv in leaves}
    for rel in reversed(relations):
        if isinstance(rel, Split):
            off[rel.parent] = off[rel.outer] * ext[rel.inner] + off[rel.inner]
        else:
            fused = off[rel.fused]
            off[rel.outer] = irop.floordiv(fused, ext[rel.inner])
            off[rel.inner] = irop.floormod(fused, ext[rel.inner])
    return off


def uncovered_splits(relations: Sequence[Relation], ext: dict[IterVar, int]) -> list[Split]:
    """Splits whose factor does not divide: their loops run past the parent's extent."""
    return [
        rel
        for rel in relations
        if isinstance(rel, Split) and ext[rel.outer] * ext[rel.inner] > ext[rel.parent]
    ]
