"""`te.scan`: a recurrence over a time axis (TVM's ScanOp).

`scan(init, update, state)` computes, for each state, a tensor whose first rows are `init` and
whose row `t` (for every later t) is `update` at `t`, where `update` reads the state
placeholder at `t - 1` (or earlier). The scan's stage loops over the time axis; the update stage
and the stages it reads that depend on the state (the scan's body) are computed inside that
loop, one time step each, and write the scan's buffer directly (lowering: loom/te/lower.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from loom.abi.dtype import DataType
from loom.ir import op as irop
from loom.ir.expr import Var
from loom.ir.simplify import simplify
from loom.te import schedule as _schedule
from loom.te.multi_output import output_tensor
from loom.te.tensor import (
    ComputeOp,
    Extent,
    IterVar,
    IterVarKind,
    Operation,
    PlaceholderOp,
    Range,
    Tensor,
    as_int,
)


class ScanOp(Operation):
    """Outputs: one tensor per state, of the state placeholder's shape."""

    def __init__(
        self,
        name: str,
        scan_axis: IterVar,
        init: tuple[Tensor, ...],
        update: tuple[Tensor, ...],
        state_placeholder: tuple[Tensor, ...],
        inputs: tuple[Tensor, ...],
        tag: str = "",
        attrs: dict | None = None,
    ):
        self.name = name
        self.scan_axis = scan_axis
        self.init = init
        self.update = update
        self.state_placeholder = state_placeholder
        self.inputs = inputs
        self.tag = tag
        self.attrs = dict(attrs or {})
        self.shape = state_placeholder[0].shape
        self.dtype = state_placeholder[0].dtype
        self.reduce_axis: tuple[IterVar, ...] = ()

    @property
    def num_outputs(self) -> int:
        return len(self.update)

    @property
    def root_iter_vars(self) -> tuple[IterVar, ...]:
        return (self.scan_axis,)

    @property
    def input_tensors(self) -> list[Tensor]:
        return [*self.init, *self.update]

    def output(self, index: int = 0) -> Tensor:
        return output_tensor(self, index)

    def output_shape(self, index: int) -> tuple[Extent, ...]:
        return self.state_placeholder[index].shape

    def output_dtype(self, index: int) -> DataType:
        return self.state_placeholder[index].dtype


def _as_list(value, what: str) -> list[Tensor]:
    items = list(value) if isinstance(value, list | tuple) else [value]
    for t in items:
        if not isinstance(t, Tensor):
            raise TypeError(f"scan {what} must be a tensor or a list of tensors, got {t!r}")
    return items


def _same_extent(a: Extent, b: Extent) -> bool:
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    return as_int(simplify(irop.sub(irop.convert(a), irop.convert(b)))) == 0


def scan(
    init,
    update,
    state_placeholder,
    inputs=None,
    name: str = "scan",
    tag: str = "",
    attrs: dict | None = None,
):
    """A recurrence: row t of each result is `update` at t, which reads `state_placeholder` at
    earlier rows; the first rows (as many as `init` has) are `init`. init, update and
    state_placeholder are tensors or equally long lists of them (one per state); `inputs`, the
    other tensors the update reads, mark the scan's body as in TVM (optional). Returns the
    result tensor, or a list of them for several states."""
    inits = _as_list(init, "init")
    updates = _as_list(update, "update")
    states = _as_list(state_placeholder, "state_placeholder")
    extra = [] if inputs is None else _as_list(inputs, "inputs")
    if not (len(inits) == len(updates) == len(states)) or not states:
        raise ValueError(
            f"scan {name}: init, update and state_placeholder must have the same number of "
            f"tensors (one per state), got {len(inits)}, {len(updates)} and {len(states)}"
        )
    for k, (i, u, s) in enumerate(zip(inits, updates, states)):
        where = f"scan {name}, state {k}"
        if not isinstance(s.op, PlaceholderOp):
            raise TypeError(f"{where}: state_placeholder must be a te.placeholder, got {s!r}")
        for t, what in ((i, "init"), (u, "update")):
            if not isinstance(t.op, ComputeOp):
                raise TypeError(f"{where}: {what} must be a te.compute result, got {t!r}")
            if t.dtype != s.dtype:
                raise TypeError(
                    f"{where}: {what} {t.name} has dtype {t.dtype}, the state {s.dtype}"
                )
            if len(t.shape) != len(s.shape):
                raise ValueError(
                    f"{where}: {what} {t.name} has {len(t.shape)} dimensions, the state "
                    f"{len(s.shape)} (time first)"
                )
            for d in range(1, len(s.shape)):
                if not _same_extent(t.shape[d], s.shape[d]):
                    raise ValueError(
                        f"{where}: dimension {d} of {what} {t.name} is {t.shape[d]}, the "
                        f"state's is {s.shape[d]}"
                    )
        if not _same_extent(u.shape[0], s.shape[0]):
            raise ValueError(
                f"{where}: update {u.name} has {u.shape[0]} time steps, the state {s.shape[0]}"
            )
        if not _same_extent(i.shape[0], inits[0].shape[0]):
            raise ValueError(
                f"scan {name}: every init must have the same number of time steps, "
                f"{inits[0].name} has {inits[0].shape[0]} and {i.name} {i.shape[0]}"
            )
    begin = irop.convert(inits[0].shape[0])
    steps = simplify(irop.sub(irop.convert(states[0].shape[0]), begin))
    if as_int(steps) is not None and as_int(steps) <= 0:
        raise ValueError(
            f"scan {name}: init has {begin} time steps, the state {states[0].shape[0]}: "
            "nothing is left to scan"
        )
    axis = IterVar(Var(f"{name}.idx", steps.dtype), Range(begin, steps), IterVarKind.DATA_PAR)
    op = ScanOp(name, axis, tuple(inits), tuple(updates), tuple(states), tuple(extra), tag, attrs)
    outputs = [op.output(k) for k in range(op.num_outputs)]
    return outputs[0] if len(outputs) == 1 else outputs


def create_schedule(ops) -> _schedule.Schedule:
    """`loom.te.schedule.create_schedule`, where a scan's stage has its time axis as its loop,
    so stages can be computed at it (`s[X].compute_at(s[scan], scan.op.scan_axis)`)."""
    sch = _schedule.create_schedule(ops)
    for stage in sch.stages:
        if isinstance(stage.op, ScanOp) and not stage.leaf_iter_vars:
            stage.all_iter_vars = [stage.op.scan_axis]
            stage.leaf_iter_vars = [stage.op.scan_axis]
    return sch


def scan_body(op: ScanOp, stages: Sequence) -> list:
    """The stages computed once per time step (TVM's scan body): those on a path from a state
    placeholder or one of `op.inputs` to an update, updates included; `stages` in producer
    first order."""
    sources = {t.op for t in (*op.state_placeholder, *op.inputs)}
    updates = {t.op for t in op.update}
    depends: dict[Operation, bool] = {}
    for stage in stages:
        reads = [t.op for t in stage.op.input_tensors]
        depends[stage.op] = stage.op in sources or any(depends.get(r, False) for r in reads)
    feeds: set[Operation] = set()
    for stage in reversed(stages):
        if stage.op in updates or stage.origin_op in updates or stage.op in feeds:
            feeds.add(stage.op)
            feeds.update(t.op for t in stage.op.input_tensors)
    return [
        s
        for s in stages
        if s.op in updates
        or s.origin_op in updates
        or (s.op in feeds and depends[s.op] and s.op not in sources)
    ]
