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
from loom.ir.bound import IntBound
from loom.ir.expr import IntImm, PrimExpr, Var
from loom.ir.interval import symbolic_interval
from loom.ir.simplify import Analyzer, simplify
from loom.ir.visitor import child_vars, free_vars, post_order_visit, substitute
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
    # simplifies the root values; infer_bounds gives all stages one, whose cache they share
    simplifier: Analyzer = dataclasses.field(default_factory=Analyzer, repr=False, compare=False)
    # each reader's region and the stage's own nest ask for the same root values
    _values: dict[IterVar, PrimExpr] = dataclasses.field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def root_value(self, iv: IterVar) -> PrimExpr:
        value = self._values.get(iv)
        if value is None:
            value = self.simplifier.simplify(self.root_min[iv] + self.offset[iv])
            self._values[iv] = value
        return value


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


def reads_by_op(body: PrimExpr) -> dict[object, list[tuple[PrimExpr, ...]]]:
    """Index tuples of every read in `body`, by the operation read, each in order of reading."""
    found: dict[object, list[tuple[PrimExpr, ...]]] = {}
    if body is None:  # a scan or extern stage: no rule
        return found

    def record(n) -> None:
        if isinstance(n, ProducerLoad):
            found.setdefault(n.tensor.op, []).append(n.indices)

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
    simplifier: Analyzer | None = None,
) -> dict[Stage, StageBounds]:
    """Bounds of every lowered stage; `stages` in producer-before-consumer order, `bodies` the
    compute stages' rules with inlined stages substituted, `full_domain` the stages that must be
    computed entirely (outputs and arguments), `attach` where each stage is computed (default:
    its compute_at), `regions` the (start, extent) per dimension of stages whose region is
    fixed (a scan's update: one time step), `simplifier` an Analyzer without variable bounds
    that simplifies the stages' root values (the caller's, to share its cache)."""
    attach = attach if attach is not None else own_attachments(stages)
    regions = regions or {}
    simplifier = simplifier if simplifier is not None else Analyzer()
    result: dict[Stage, StageBounds] = {}
    var_bounds: dict[Var, IntBound] = shape_var_bounds(stages)
    # proves under var_bounds, bound as they grow: one Analyzer (and cache) for all regions
    analyzer = Analyzer(var_bounds)
    reads: dict[Stage, dict] | None = None  # each rule's reads, found once a region needs them
    for stage in reversed(stages):
        op = stage.op
        root_min: dict[IterVar, PrimExpr] = {}
        root_ext: dict[IterVar, Extent] = {}
        if not isinstance(op, ComputeOp):
            for iv in loop_leaves(stage):
                root_min[iv], root_ext[iv] = iv.dom.min, as_extent(iv.dom.extent)
            bounds = StageBounds(root_min, root_ext, {iv: iv.var for iv in root_min}, simplifier)
            result[stage] = bounds
            _bind_leaves(stage, bounds, var_bounds, analyzer)
            continue
        for iv in op.reduce_axis:
            root_min[iv], root_ext[iv] = iv.dom.min, as_extent(iv.dom.extent)
        if stage in regions:
            for iv, (lo, extent) in zip(op.axis, regions[stage]):
                root_min[iv], root_ext[iv] = lo, extent
        elif attach[stage].type == AttachType.SCOPE and stage not in full_domain:
            if reads is None:
                reads = {r: reads_by_op(bodies.get(r)) for r in stages}
            readers = [r for r in stages if stage.op in reads[r]]
            region = _region(stage, readers, result, reads, var_bounds, analyzer, attach)
            for iv, (lo, extent) in zip(op.axis, region):
                root_min[iv], root_ext[iv] = lo, extent
        else:
            for iv, extent in zip(op.axis, op.shape):
                root_min[iv], root_ext[iv] = IntImm(0), extent
        ext = derive_extents(stage, root_ext)
        bounds = StageBounds(root_min, ext, derive_offsets(stage, ext), simplifier)
        result[stage] = bounds
        _bind_leaves(stage, bounds, var_bounds, analyzer)
    return result


def _bind_leaves(
    stage: Stage, bounds: StageBounds, var_bounds: dict[Var, IntBound], analyzer: Analyzer
) -> None:
    """Add the ranges of the stage's loops to `var_bounds` and to its analyzer."""
    for var, bound in leaf_var_bounds(stage, bounds).items():
        var_bounds[var] = bound
        analyzer.bind(var, bound)


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
    reads: dict[Stage, dict[object, list[tuple[PrimExpr, ...]]]],
    var_bounds: dict[Var, IntBound],
    analyzer: Analyzer,
    attach: dict[Stage, Attachment],
) -> list[tuple[PrimExpr, Extent]]:
    """(start, extent) per dimension of the region of `stage` read during one iteration of its
    attach loop, over all its readers (`reads`: each one's reads by operation, reads_by_op);
    `analyzer` knows `var_bounds`."""
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
        for indices in reads[reader][stage.op]:
            accesses.append((tuple(substitute(i, values) for i in indices), relax))
    # symbolic_interval refuses an end it cannot check for overflow; a loop of symbolic extent
    # has no upper bound to check with, so, as TVM does, its index arithmetic is assumed not to
    # overflow (the loops of constant extent are still checked)
    checkable = {v: b for v, b in var_bounds.items() if b.lo is not None and b.hi is not None}
    region = []
    for dim, extent in enumerate(stage.op.shape):
        lows, highs = [], []
        for indices, relax in accesses:
            index = indices[dim]
            used = _used_vars(index, relax)
            interval = symbolic_interval(
                index,
                {v: r for v, r in relax.items() if v in used},
                {v: b for v, b in checkable.items() if v in used},
            )
            if interval is None:
                region.append((IntImm(0), extent))
                break
            lows.append(interval[0])
            highs.append(interval[1])
        else:
            region.append(_union(lows, highs, extent, analyzer))
    return region


def _used_vars(index: PrimExpr, relax: dict[Var, tuple[PrimExpr, PrimExpr]]) -> set[Var]:
    """The variables of `index` and of the relax ranges of those relaxed, recursively: all that
    symbolic_interval looks at. It binds every variable given to it, which costs time; giving
    it only these leaves its result the same. (Every occurrence counts, even one a let binds:
    child_vars, not free_vars.)"""
    used = set(child_vars(index))
    todo = [v for v in used if v in relax]
    while todo:
        for end in relax[todo.pop()]:
            if isinstance(end, IntImm):  # most ends: nothing to walk
                continue
            for v in child_vars(end) - used:
                used.add(v)
                if v in relax:
                    todo.append(v)
    return used


def _owner(iv: IterVar, reader: Stage, attach: dict[Stage, Attachment]) -> Stage:
    """The stage among `reader`'s attach chain owning loop `iv`."""
    s = reader
    # by identity: `in` would compare with ==, which on axes builds an expression first
    while not any(leaf is iv for leaf in loop_leaves(s)):
        s = attach[s].stage
    return s


MAX_PROVEN_REGION = 1 << 24
"""The largest constant region size bound inference takes from a bound analysis; above it, the
bound comes from a variable's dtype (a symbolic extent), and the region is the whole dimension."""


def _union(
    lows: list[PrimExpr], highs: list[PrimExpr], extent: Extent, analyzer: Analyzer
) -> tuple[PrimExpr, Extent]:
    """The region covering every [low, high]: its start and a constant size, or the whole
    dimension [0, extent) when no smaller constant size can be proven (under the variable
    bounds of `analyzer`)."""
    lo, hi = lows[0], highs[0]
    for other in lows[1:]:
        lo = irop.min_(lo, other)
    for other in highs[1:]:
        hi = irop.max_(hi, other)
    lo = analyzer.simplify(lo)
    size = analyzer.simplify(hi - lo + 1)
    if isinstance(size, IntImm):
        n = size.value
    else:
        n = analyzer.const_int_bound(size).hi
        if n is None or n > MAX_PROVEN_REGION:  # a bound from the dtype's range, not a size
            return IntImm(0), extent
    if isinstance(extent, int) and n >= extent:
        return IntImm(0), extent
    if not isinstance(extent, int) and analyzer.can_prove(irop.greater_equal(n, extent)):
        return IntImm(0), extent
    return lo, max(n, 1)
