"""TVM's `te.schedule.InferBound` and `te.schedule.ScheduleOps`: the two halves of lowering a
schedule, as public functions (`tvm.te.schedule.InferBound(s)` works: loom/te/schedule.py
offers these names).

`InferBound(s)` gives the range of every iteration variable of every stage that lowering
computes (loom/te/bound.py); `ScheduleOps(s, bounds)` gives the loop nest of the schedule, the
body `tvm.lower` starts its passes from (loom/te/lower.py), with the schedule's outputs and the
placeholders they read as its buffers.
"""

from __future__ import annotations

from loom.ir import op as irop
from loom.ir.stmt import Stmt
from loom.te.bound import infer_bounds
from loom.te.lower import (
    _check_attachments,
    _effective_bodies,
    _lowered_stages,
    _scan_placement,
    _scan_states,
    lower_schedule,
)
from loom.te.multi_output import num_outputs
from loom.te.schedule import Schedule, Stage
from loom.te.tensor import ComputeOp, IterVar, PlaceholderOp, Range, Tensor

# The helpers of lower.py used here are its first steps (which stages are lowered, where each
# is computed); lower.py keeps them private because lower_schedule is their only other user.


def _argument_stages(sch: Schedule) -> set[Stage]:
    """The stages a function of the whole schedule takes: its outputs and its inputs (the
    placeholders that are not a scan's state)."""
    states = _scan_states(sch)
    return {
        stage
        for stage in sch.stages
        if stage.is_output or (isinstance(stage.op, PlaceholderOp) and stage.op not in states)
    }


def InferBound(sch: Schedule) -> dict[IterVar, Range]:
    """The range of every iteration variable (root, split, fused) of each stage lowering
    computes, as TVM's InferBound: a stage computed at the root covers its shape; one attached
    with compute_at the region its consumer reads in one iteration of the loop, whose start
    may be an expression of the enclosing loops. Derived loops start at 0."""
    if not isinstance(sch, Schedule):
        raise TypeError(f"InferBound takes a te schedule, got {sch!r}")
    arg_stages = _argument_stages(sch)
    bodies = _effective_bodies(sch)
    stages = _lowered_stages(sch, bodies, arg_stages, _scan_states(sch))
    attach, regions, _ = _scan_placement(sch, stages, arg_stages)
    _check_attachments(stages, attach)
    bounds = infer_bounds(stages, bodies, arg_stages, attach, regions)
    ranges: dict[IterVar, Range] = {}
    for stage in stages:
        b = bounds[stage]
        roots = stage.op.root_iter_vars if isinstance(stage.op, ComputeOp) else ()
        for iv in [*roots, *stage.all_iter_vars, *b.extent]:
            if iv in ranges or iv not in b.extent:
                continue
            start = b.root_min.get(iv, 0)
            ranges[iv] = Range(irop.convert(start), irop.convert(b.extent[iv]))
    return ranges


def ScheduleOps(sch: Schedule, bounds: dict[IterVar, Range] | None = None) -> Stmt:
    """The loop nest of the schedule (before the lowering passes), as TVM's ScheduleOps.

    loom infers the bounds again as it lowers: `bounds` (what InferBound returned) is checked
    to be such a map and is otherwise not read."""
    if not isinstance(sch, Schedule):
        raise TypeError(f"ScheduleOps takes a te schedule, got {sch!r}")
    if bounds is not None and (
        not isinstance(bounds, dict)
        or not all(isinstance(k, IterVar) and isinstance(v, Range) for k, v in bounds.items())
    ):
        raise TypeError(
            "ScheduleOps: bounds must be the map of IterVar to Range that InferBound returns, "
            f"got {type(bounds).__name__}"
        )
    args: list[Tensor] = [
        stage.op.output(0)
        for stage in sch.stages
        if stage in _argument_stages(sch) and isinstance(stage.op, PlaceholderOp)
    ]
    args += [op.output(k) for op in sch.outputs for k in range(num_outputs(op))]
    return lower_schedule(sch, args, "main").body


__all__ = ["InferBound", "ScheduleOps"]
