"""Bound inference across stages: the range of every loop of every stage.

A stage computed at the root covers its whole shape. A stage attached with `compute_at(C, ivar)`
covers only the region its consumer C reads during one iteration of loop `ivar`: C's loops
outside `ivar` (and `ivar` itself) stay fixed symbols, the loops inside it range over their
extents. Loop extents are always constants (the upper bound of the region's size); the region's
start may be an expression of the enclosing loops.

Where each stage is computed comes from an `Attachment` per stage: the stage's own compute_at,
except for a scan's body, which lowering places in the scan's time loop (as TVM does). A scan's
stage has its time axis as its only loop; an extern stage has no loops and reads whole tensors.
"""

from __future__ import annotations

import dataclasses

from loom.errors import LoweringError, ScheduleError
from loom.ir import op as irop
from loom.ir.bound import IntBound, const_int_bound
from loom.ir.expr import IntImm, PrimExpr, Var
from loom.ir.interval import symbolic_interval
from loom.ir.simplify import can_prove, simplify
from loom.ir.visitor import free_vars, post_order_visit, substitute
from loom.te.extern import ExternOp
from loom.te.relations import as_extent, relation_extents, relation_offsets, uncovered_splits
from loom.te.scan import ScanOp
from loom.te.schedule import AttachType, Stage
from loom.te.tensor import ComputeOp, Extent, IterVar, ProducerLoad, Reduce, is_size_var


@dataclasses.dataclass(frozen=True)
class Attachment:
    """Where a stage is computed: at the root, inlined, or inside loop `ivar` of `stage`."""

    type: str
    stage: Stage | None = None
    ivar: IterVar | None = None


def own_attachments(stages: list[Stage]) -> dict[Stage, Attachment]:
    """Each stage's attachment as its schedule gives it."""
    return {s: Attachment(s.attach_type, s.attach_stage, s.attach_ivar) for s in stages}


def loop_leaves(stage: Stage) -> list[IterVar]:
    """The loops of a stage, outermost first: a scan's time axis; none for an extern stage."""
    if isinstance(stage.op, ScanOp):
        return [stage.op.scan_axis]
    if isinstance(stage.op, ExternOp):
        return []
    return stage.leaf_iter_vars


@dataclasses.dataclass
class StageBounds:
    """Where a stage's loops run: root ranges (start expression, extent), the extent of every
    iteration variable (an int, or an expression for a symbolic shape), and each one's offset as
    an expression of the leaf loop vars."""

    root_min: dict[IterVar, PrimExpr]
    extent: dict[IterVar, Extent]
    offset: dict[IterVar, PrimExpr]

    def root_value(self, iv: IterVar) -> PrimExpr:
        return simplify(self.root_min[iv] + self.offset[iv])


def derive_extents(stage: Stage, root_extent: dict[IterVar, Extent]) -> dict[IterVar, Extent]:
    """Extents of all iteration variables from the root extents, through splits and fuses."""
    return relation_extents(stage.relations, root_extent)


def derive_offsets(stage: Stage, ext: dict[IterVar, Extent]) -> dict[IterVar, PrimExpr]:
    """Each iteration variable's position in its range, as an expression of the leaf loops."""
    return relation_offsets(stage.relations, stage.leaf_iter_vars, ext)


def split_guards(
    stage: Stage, bounds: StageBounds, var_bounds: dict[Var, IntBound] | None = None
) -> list[PrimExpr]:
    """Conditions `offset(parent) < extent(parent)` for splits whose factor does not divide
    (or is not proven to divide a symbolic extent)."""
    return [
        irop.less(bounds.offset[rel.parent], bounds.extent[rel.parent])
        for rel in uncovered_splits(stage.relations, bounds.extent, var_bounds)
    ]


def loop_bound(extent: Extent) -> IntBound:
    """The values of a loop variable running over [0, extent): [0, extent - 1], or [0, +inf)
    for a symbolic extent (inside the loop the variable is never negative)."""
    return IntBound(0, extent - 1) if isinstance(extent, int) else IntBound(0, None)


def last_index(extent: Extent) -> PrimExpr:
    """`extent - 1` as an expression."""
    return IntImm(extent - 1) if isinstance(extent, int) else simplify(irop.sub(extent, 1))


def leaf_var_bounds(stage: Stage, bounds: StageBounds) -> dict[Var, IntBound]:
    return {iv.var: loop_bound(bounds.extent[iv]) for iv in loop_leaves(stage)}


def shape_var_bounds(stages: list[Stage]) -> dict[Var, IntBound]:
    """[0, +inf) for each te.size_var in the stages' shapes and reduction domains."""
    found: dict[Var, IntBound] = {}
    for stage in stages:
        op = stage.op
        exprs = [e for e in op.shape if isinstance(e, PrimExpr)]
        exprs += [p for iv in op.reduce_axis for p in (iv.dom.min, iv.dom.extent)]
        for e in exprs:
            for v in free_vars(e):
                if is_size_var(v):
                    found[v] = IntBound(0, None)
    return found


def reads_of(body: PrimExpr, target: ComputeOp | object) -> list[tuple[PrimExpr, ...]]:
    """Index tuples of every read of `target`'s tensor in `body`."""
    found: list[tuple[PrimExpr, ...]] = []
    if body is None:  # a scan or extern stage: no rule
        return found

    def record(n) -> None:
        if isinstance(n, ProducerLoad) and n.tensor.op is target:
            found.append(n.indices)

    parts = body.parts() if isinstance(body, Reduce) else [body]
    for p in parts:
        post_order_visit(p, record)
    return found


def infer_bounds(
    stages: list[Stage],
    bodies: dict[Stage, PrimExpr],
    full_domain: set[Stage],
    attach: dict[Stage, Attachment] | None = None,
    regions: dict[Stage, list[tuple[PrimExpr, Extent]]] | None = None,
) -> dict[Stage, StageBounds]:
    """Bounds of every lowered stage; `stages` in producer-before-consumer order, `bodies` the
    compute stages' rules with inlined stages substituted, `full_domain` the stages that must be
    computed entirely (outputs and arguments), `attach` where each stage is computed (default:
    its compute_at), `regions` the (start, extent) per dimension of stages whose region is
    fixed (a scan's update: one time step)."""
    attach = attach if attach is not None else own_attachments(stages)
    regions = regions or {}
    result: dict[Stage, StageBounds] = {}
    var_bounds: dict[Var, IntBound] = shape_var_bounds(stages)
    for stage in reversed(stages):
        op = stage.op
        root_min: dict[IterVar, PrimExpr] = {}
        root_ext: dict[IterVar, Extent] = {}
        if not isinstance(op, ComputeOp):
            for iv in loop_leaves(stage):
                root_min[iv], root_ext[iv] = iv.dom.min, as_extent(iv.dom.extent)
            bounds = StageBounds(root_min, root_ext, {iv: iv.var for iv in root_min})
            result[stage] = bounds
            var_bounds.update(leaf_var_bounds(stage, bounds))
            continue
        for iv in op.reduce_axis:
            root_min[iv], root_ext[iv] = iv.dom.min, as_extent(iv.dom.extent)
        if stage in regions:
            for iv, (lo, extent) in zip(op.axis, regions[stage]):
                root_min[iv], root_ext[iv] = lo, extent
        elif attach[stage].type == AttachType.SCOPE and stage not in full_domain:
            readers = [r for r in stages if reads_of(bodies.get(r), stage.op)]
            region = _region(stage, readers, result, bodies, var_bounds, attach)
            for iv, (lo, extent) in zip(op.axis, region):
                root_min[iv], root_ext[iv] = lo, extent
        else:
            for iv, extent in zip(op.axis, op.shape):
                root_min[iv], root_ext[iv] = IntImm(0), extent
        ext = derive_extents(stage, root_ext)
        bounds = StageBounds(root_min, ext, derive_offsets(stage, ext))
        result[stage] = bounds
        var_bounds.update(leaf_var_bounds(stage, bounds))
    return result


def varying_loops(
    stage: Stage, reader: Stage, attach: dict[Stage, Attachment] | None = None
) -> list[IterVar]:
    """The loops that vary while `reader` runs inside one iteration of `stage`'s attach loop:
    the attach target's loops inside the attach loop, and every loop of stages nested there.
    Raises if `reader` does not run inside that iteration."""
    attach = attach if attach is not None else own_attachments([stage, reader])
    target, ivar = attach[stage].stage, attach[stage].ivar
    leaves = loop_leaves(target)
    varying = list(leaves[leaves.index(ivar) + 1 :])
    below = reader
    while below is not target:
        place = attach.get(below) or own_attachments([below])[below]
        if place.type != AttachType.SCOPE:
            raise ScheduleError(
                f"stage {stage.name} is computed inside {target.name} but also read by "
                f"{reader.name}, which is computed outside it; compute {stage.name} at the root "
                "or inline it"
            )
        varying += loop_leaves(below)
        if place.stage is target and leaves.index(place.ivar) < leaves.index(ivar):
            raise ScheduleError(
                f"stage {stage.name} is computed at loop {ivar.name} of {target.name}, but its "
                f"reader {reader.name} is computed at the outer loop {place.ivar.name}"
            )
        below = place.stage
    return varying


def _region(
    stage: Stage,
    readers: list[Stage],
    bounds: dict[Stage, StageBounds],
    bodies: dict[Stage, PrimExpr],
    var_bounds: dict[Var, IntBound],
    attach: dict[Stage, Attachment],
) -> list[tuple[PrimExpr, Extent]]:
    """(start, extent) per dimension of the region of `stage` read during one iteration of its
    attach loop, over all its readers."""
    if not readers:
        raise LoweringError(
            f"stage {stage.name} is attached to {attach[stage].stage.name}, which does not read it"
        )
    accesses: list[tuple[tuple[PrimExpr, ...], dict]] = []
    for reader in readers:
        rb = bounds[reader]
        values = {iv.var: rb.root_value(iv) for iv in reader.op.root_iter_vars}
        relax = {
            iv.var: (IntImm(0), last_index(bounds[_owner(iv, reader, attach)].extent[iv]))
            for iv in varying_loops(stage, reader, attach)
        }
        for indices in reads_of(bodies[reader], stage.op):
            accesses.append((tuple(substitute(i, values) for i in indices), relax))
    # symbolic_interval refuses an end it cannot check for overflow; a loop of symbolic extent
    # has no upper bound to check with, so, as TVM does, its index arithmetic is assumed not to
    # overflow (the loops of constant extent are still checked)
    checkable = {v: b for v, b in var_bounds.items() if b.lo is not None and b.hi is not None}
    region = []
    for dim, extent in enumerate(stage.op.shape):
        lows, highs = [], []
        for indices, relax in accesses:
            interval = symbolic_interval(indices[dim], relax, checkable)
            if interval is None:
                region.append((IntImm(0), extent))
                break
            lows.append(interval[0])
            highs.append(interval[1])
        else:
            region.append(_union(lows, highs, extent, var_bounds))
    return region


def _owner(iv: IterVar, reader: Stage, attach: dict[Stage, Attachment]) -> Stage:
    """The stage among `reader`'s attach chain owning loop `iv`."""
    s = reader
    while iv not in loop_leaves(s):
        s = attach[s].stage
    return s


MAX_PROVEN_REGION = 1 << 24
"""The largest constant region size bound inference takes from a bound analysis; above it, the
bound comes from a variable's dtype (a symbolic extent), and the region is the whole dimension."""


def _union(
    lows: list[PrimExpr], highs: list[PrimExpr], extent: Extent, var_bounds: dict[Var, IntBound]
) -> tuple[PrimExpr, Extent]:
    """The region covering every [low, high]: its start and a constant size, or the whole
    dimension [0, extent) when no smaller constant size can be proven."""
    lo, hi = lows[0], highs[0]
    for other in lows[1:]:
        lo = irop.min_(lo, other)
    for other in highs[1:]:
        hi = irop.max_(hi, other)
    lo = simplify(lo, var_bounds)
    size = simplify(hi - lo + 1, var_bounds)
    if isinstance(size, IntImm):
        n = size.value
    else:
        n = const_int_bound(size, var_bounds).hi
        if n is None or n > MAX_PROVEN_REGION:  # a bound from the dtype's range, not a size
            return IntImm(0), extent
    if isinstance(extent, int) and n >= extent:
        return IntImm(0), extent
    if not isinstance(extent, int) and can_prove(irop.greater_equal(n, extent), var_bounds):
        return IntImm(0), extent
    return lo, max(n, 1)
