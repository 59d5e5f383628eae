"""The operations `rfactor` makes of a reduction (TVM's `Schedule.rfactor`).

`B[i] = sum(A[i, k], k)` with `k` split into `ko, ki` and factored over `ki` becomes

    B.rf[ki, i] = sum(A[i, ko * f + ki], ko)   where ko * f + ki < extent(k)
    B[i]        = sum(B.rf[ki.v, i], ki.v)

The factored axis turns data-parallel in `B.rf` (at position `factor_axis` among its axes), the
stage's other reduction loops move into `B.rf` as its reduction axes, and `B` reduces the
partial results over a new axis `ki.v`. Both are plain compute operations: bound inference and
lowering treat them as any other. Only the order in which the combiner meets the elements
changes (a float sum is reassociated; max, min and the integer reducers give the same result).
"""

from __future__ import annotations

from collections.abc import Sequence

from loom.ir import op as irop
from loom.ir.expr import IntImm, PrimExpr, Var
from loom.ir.simplify import simplify
from loom.ir.visitor import substitute
from loom.te.relations import (
    Extent,
    Relation,
    Split,
    as_extent,
    is_reduce_relation,
    relation_extents,
    relation_offsets,
    uncovered_splits,
)
from loom.te.tensor import ComputeOp, IterVar, IterVarKind, ProducerLoad, Range, Reduce


def _axis(name: str, extent: Extent, kind: IterVarKind) -> IterVar:
    e = irop.convert(extent)  # an int, or an expression of shape variables
    return IterVar(Var(name, e.dtype), Range(IntImm(0, e.dtype), e), kind)


def factor_ops(
    op: ComputeOp,
    relations: Sequence[Relation],
    leaves: Sequence[IterVar],
    axis: IterVar,
    factor_axis: int,
) -> tuple[ComputeOp, ComputeOp]:
    """(the partial reductions over every reduction loop of `leaves` but `axis`, with `axis`
    a data-parallel axis at `factor_axis`; `op` rewritten to reduce them over `axis`).
    `relations` and `leaves` are the stage's; `factor_axis` is in 0..len(op.axis)."""
    body: Reduce = op.body
    reduce_relations = [r for r in relations if is_reduce_relation(r)]
    ext = relation_extents(
        reduce_relations, {iv: as_extent(iv.dom.extent) for iv in op.reduce_axis}
    )
    reduce_leaves = [iv for iv in leaves if iv.is_reduce]
    offsets = relation_offsets(reduce_relations, reduce_leaves, ext)

    data = tuple(_axis(iv.name, as_extent(iv.dom.extent), IterVarKind.DATA_PAR) for iv in op.axis)
    factor = _axis(axis.name, ext[axis], IterVarKind.DATA_PAR)
    rf_axis = (*data[:factor_axis], factor, *data[factor_axis:])
    rest: list[IterVar] = []  # the other reduction loops, reduction axes of the rf stage
    as_rf = {axis.var: factor.var}
    for iv in reduce_leaves:
        if iv is not axis:
            rest.append(_axis(iv.name, ext[iv], IterVarKind.REDUCE))
            as_rf[iv.var] = rest[-1].var
    values: dict[Var, PrimExpr] = {old.var: new.var for old, new in zip(op.axis, data)}
    for iv in op.reduce_axis:
        values[iv.var] = simplify(iv.dom.min + substitute(offsets[iv], as_rf))
    # the loops of a split that does not divide run past their parent: skip those points
    guards = [
        irop.less(substitute(offsets[rel.parent], as_rf), ext[rel.parent])
        for rel in uncovered_splits(reduce_relations, ext)
        if isinstance(rel, Split)
    ]
    cond = substitute(body.condition, values)
    if guards:  # likely: the vectorizer peels the last iteration, where they fail
        guard = irop.likely(irop.all_(*guards))
        cond = guard if _is_true(cond) else irop.logical_and(cond, guard)
    source = substitute(body.source, values)
    if rest:
        rf_body: PrimExpr = Reduce(body.combiner, source, tuple(rest), cond)
    elif _is_true(cond):
        rf_body = source
    else:
        rf_body = irop.if_then_else(cond, source, body.combiner.identity(body.dtype))
    rf = ComputeOp(f"{op.name}.rf", rf_axis, rf_body)

    combined = _axis(f"{axis.name}.v", ext[axis], IterVarKind.REDUCE)
    index = [iv.var for iv in op.axis]
    index.insert(factor_axis, combined.var)
    partial = ProducerLoad(rf.output(0), tuple(index))
    return rf, op.with_body(
        Reduce(body.combiner, partial, (combined,), irop.const(True), body.init)
    )


def _is_true(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and bool(e.value)
