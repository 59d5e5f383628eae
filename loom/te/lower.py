"""Lowering a schedule to a PrimFunc ("schedule ops"): loop nests, buffers, attachments.

Each lowered stage becomes a loop nest over its leaf axes that stores into its buffer. A stage at
the root gets a buffer of its full shape allocated around the whole function (arguments are
parameters instead); a stage attached with compute_at gets a buffer of the region it computes,
allocated inside the attach loop; an inlined stage has its rule substituted into its readers.
A reduction stores its identity in an init nest (over the data-parallel loops inside the first
reduction loop), then updates in the full nest.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from loom.errors import LoweringError, ScheduleError
from loom.ir import op as irop
from loom.ir.bound import IntBound
from loom.ir.buffer import Buffer, decl_buffer
from loom.ir.expr import IntImm, PrimExpr, Var
from loom.ir.function import PrimFunc
from loom.ir.interval import symbolic_interval
from loom.ir.simplify import can_prove, simplify
from loom.ir.stmt import Allocate, AttrStmt, For, ForKind, IfThenElse, Stmt, seq, store
from loom.ir.visitor import Mutator, free_vars, rename_vars, substitute
from loom.te.bound import (
    StageBounds,
    infer_bounds,
    last_index,
    leaf_var_bounds,
    loop_bound,
    shape_var_bounds,
    split_guards,
)
from loom.te.schedule import AttachType, Schedule, Stage
from loom.te.tensor import (
    ComputeOp,
    IterVar,
    PlaceholderOp,
    ProducerLoad,
    Reduce,
    Tensor,
    producer_tensors,
)
from loom.te.tensorize import match_region
from loom.transform.flatten_buffer import flattened


class _Inline(Mutator):
    """Substitute the rules of inlined stages into an expression."""

    def __init__(self, inlined: dict[ComputeOp, PrimExpr]):
        self.inlined = inlined

    def visit_ProducerLoad(self, e: ProducerLoad) -> PrimExpr:
        e = self.generic_mutate(e)
        rule = self.inlined.get(e.tensor.op)
        if rule is None:
            return e
        return substitute(rule, {iv.var: i for iv, i in zip(e.tensor.op.axis, e.indices)})

    def visit_Reduce(self, e: Reduce) -> PrimExpr:
        return self.generic_mutate(e)


class _ReadsToLoads(Mutator):
    """ProducerLoad(T, idx) -> BufferLoad(buffer of T, idx - start of T's region)."""

    def __init__(self, lowering: _Lowering):
        self.lowering = lowering

    def visit_ProducerLoad(self, e: ProducerLoad) -> PrimExpr:
        e = self.generic_mutate(e)
        stage = self.lowering.sch[e.tensor]
        buf = self.lowering.buffers.get(stage)
        if buf is None:
            raise LoweringError(
                f"tensor {stage.name} is read but is neither an argument nor "
                "computed; pass it in the argument list"
            )
        starts = self.lowering.region_starts(stage)
        return buf.load([simplify(i - s) for i, s in zip(e.indices, starts)])


@dataclasses.dataclass
class _Lowering:
    sch: Schedule
    stages: list[Stage]  # lowered compute stages, producers first
    bodies: dict[Stage, PrimExpr]
    buffers: dict[Stage, Buffer]
    bounds: dict[Stage, StageBounds]
    var_bounds: dict[Var, IntBound]
    loop_extents: dict[Var, int | PrimExpr]  # every leaf loop variable's extent

    def region_starts(self, stage: Stage) -> list[PrimExpr]:
        if stage not in self.bounds:  # a placeholder
            return [IntImm(0)] * len(stage.op.shape)
        b = self.bounds[stage]
        return [b.root_min[iv] for iv in stage.op.axis]

    # -- one stage ---------------------------------------------------------------------------
    def stage_nest(self, stage: Stage) -> Stmt:
        """The loops computing `stage` into its buffer, with attached stages inside."""
        bounds = self.bounds[stage]
        op: ComputeOp = stage.op
        values = {iv.var: bounds.root_value(iv) for iv in op.root_iter_vars}
        index = [simplify(bounds.offset[iv]) for iv in op.axis]
        buf = self.buffers[stage]
        guards = split_guards(stage, bounds, self.var_bounds) + self.domain_guards(
            stage, bounds, values
        )
        body = self.bodies[stage]
        to_loads = _ReadsToLoads(self)
        if stage.tensorized is not None:
            return self.tensorized_nest(stage, bounds, values, index, buf, guards, to_loads)
        leaves = stage.leaf_iter_vars
        if not isinstance(body, Reduce):
            value = to_loads.visit(substitute(body, values))
            return self.loops(stage, leaves, store(buf, value, index), guards, outermost=True)
        first_reduce = next((k for k, iv in enumerate(leaves) if iv.is_reduce), len(leaves))
        outer, inner = leaves[:first_reduce], leaves[first_reduce:]
        init_leaves = [iv for iv in inner if not iv.is_reduce]
        reduce_vars = {iv.var for iv in inner if iv.is_reduce}
        init_guards = [g for g in guards if not free_vars(g) & reduce_vars]
        init = self.loops(
            stage,
            init_leaves,
            store(buf, to_loads.visit(substitute(body.identity(), values)), index),
            init_guards,
            attach=False,
        )
        init = rename_vars(
            init, {iv.var: iv.var.copy_with_name(f"{iv.var.name}.init") for iv in init_leaves}
        )
        source = to_loads.visit(substitute(body.source, values))
        update: Stmt = store(buf, body.combiner.combine(buf.load(index), source), index)
        cond = simplify(to_loads.visit(substitute(body.condition, values)))
        if not (isinstance(cond, IntImm) and cond.value):
            update = IfThenElse(cond, update)
        update_nest = self.loops(stage, inner, update, guards)
        inner_vars = {iv.var for iv in inner}
        outer_guards = [g for g in guards if not free_vars(g) & inner_vars]
        return self.loops(stage, outer, seq(init, update_nest), outer_guards, outermost=True)

    def tensorized_nest(
        self,
        stage: Stage,
        bounds: StageBounds,
        values: dict,
        index: list,
        buf: Buffer,
        guards: list[PrimExpr],
        to_loads: _ReadsToLoads,
    ) -> Stmt:
        """The stage's loops outside its tensorize axis around the intrinsic's statements."""

        ivar, intrin = stage.tensorized
        leaves = stage.leaf_iter_vars
        if ivar not in leaves:
            raise ScheduleError(
                f"stage {stage.name}: tensorize axis {ivar.name} was split or fused afterwards"
            )
        pos = leaves.index(ivar)
        inner = leaves[pos:]
        for child in self.stages:
            if (
                child.attach_type == AttachType.SCOPE
                and child.attach_stage is stage
                and child.attach_ivar in inner[1:]
            ):
                raise ScheduleError(
                    f"stage {child.name} is computed at loop "
                    f"{child.attach_ivar.name} of {stage.name}, which "
                    f"tensorize replaces"
                )
        symbolic = [iv.name for iv in inner if not isinstance(bounds.extent[iv], int)]
        if symbolic:
            raise ScheduleError(
                f"stage {stage.name}: tensorize needs loops of constant extent, but "
                f"{symbolic} have symbolic extents; split them by a constant factor and "
                "tensorize the inner loop"
            )
        inner_vars = {iv.var for iv in inner}
        region_guards = [g for g in guards if free_vars(g) & inner_vars]
        guards = [g for g in guards if not free_vars(g) & inner_vars]

        def flat_access(load):
            if load is None:
                return flattened(buf), buf.flat_index(index)
            read = to_loads.visit(substitute(load, values))
            return flattened(read.buffer), read.buffer.flat_index(read.indices)

        body = self.bodies[stage]
        call = match_region(
            stage,
            intrin,
            inner,
            {iv: bounds.extent[iv] for iv in inner},
            body,
            flat_access,
            region_guards,
            # the ranges of the loops around the region simplify its operands' offsets
            {iv.var: loop_bound(bounds.extent[iv]) for iv in leaves[:pos]},
        )
        stmts = intrin.lower(call)
        needed = ("reset", "update") if isinstance(body, Reduce) else ("body",)
        if not isinstance(stmts, dict) or any(k not in stmts for k in needed):
            raise ScheduleError(
                f"intrinsic {intrin.name}: lower() must return a dict with "
                f"{list(needed)}, got {stmts!r}"
            )
        if not isinstance(body, Reduce):
            return self.loops(stage, leaves[:pos], stmts["body"], guards, outermost=True)
        first_reduce = next((k for k, iv in enumerate(leaves) if iv.is_reduce), len(leaves))
        if pos <= first_reduce:  # the whole reduction happens inside the intrinsic
            return self.loops(
                stage, leaves[:pos], seq(stmts["reset"], stmts["update"]), guards, outermost=True
            )
        outer, middle = leaves[:first_reduce], leaves[first_reduce:pos]
        init_leaves = [iv for iv in middle if not iv.is_reduce]
        reduce_vars = {iv.var for iv in middle if iv.is_reduce}
        init = self.loops(
            stage,
            init_leaves,
            stmts["reset"],
            [g for g in guards if not free_vars(g) & reduce_vars],
            attach=False,
        )
        init = rename_vars(
            init, {iv.var: iv.var.copy_with_name(f"{iv.var.name}.init") for iv in init_leaves}
        )
        update_nest = self.loops(stage, middle, stmts["update"], guards)
        middle_vars = {iv.var for iv in middle}
        outer_guards = [g for g in guards if not free_vars(g) & middle_vars]
        return self.loops(stage, outer, seq(init, update_nest), outer_guards, outermost=True)

    def domain_guards(
        self, stage: Stage, bounds: StageBounds, values: dict[Var, PrimExpr]
    ) -> list[PrimExpr]:
        """For an attached stage whose region may leave its shape: 0 <= index < extent."""
        if stage.attach_type != AttachType.SCOPE:
            return []
        guards = []
        for iv, extent in zip(stage.op.axis, stage.op.shape):
            v = values[iv.var]
            if not can_prove(irop.greater_equal(v, 0), self.var_bounds):
                guards.append(irop.greater_equal(v, 0))
            if not self.below(v, extent):
                guards.append(irop.less(v, extent))
        return guards

    def below(self, v: PrimExpr, extent: int | PrimExpr) -> bool:
        """True if `v < extent` holds wherever the loops of `v` run. A loop of symbolic extent
        has no constant bound, so its variable is relaxed to [0, extent - 1] symbolically
        (`i < n` inside the loop over n)."""
        if can_prove(irop.less(v, extent), self.var_bounds):
            return True
        relax = {}
        for var in free_vars(v):
            loop_extent = self.loop_extents.get(var)
            if loop_extent is not None and not isinstance(loop_extent, int):
                relax[var] = (IntImm(0, var.dtype), last_index(loop_extent))
        if not relax:
            return False
        interval = symbolic_interval(v, relax)
        if interval is None:
            return False
        # as bound inference does, assume the index arithmetic does not overflow: compare the
        # difference (`(n - 1) - n < 0`), since `n - 1 < n` fails for n at the dtype's minimum
        return can_prove(irop.less(simplify(irop.sub(interval[1], extent)), 0), self.var_bounds)

    def loops(
        self,
        stage: Stage,
        leaves: list[IterVar],
        body: Stmt,
        guards: list[PrimExpr],
        attach: bool = True,
        outermost: bool = False,
    ) -> Stmt:
        """Wrap `body` in the loops of `leaves` (outermost first). Each guard that uses one of
        these loops goes just inside the innermost loop it uses; guards that use none belong to
        an enclosing nest, or go outside all loops if this is the `outermost` nest."""
        level_of = {iv.var: k for k, iv in enumerate(leaves)}
        placed: dict[int, list[PrimExpr]] = {}
        for g in guards:
            levels = [level_of[v] for v in free_vars(g) if v in level_of]
            if levels or outermost:
                placed.setdefault(max(levels, default=-1), []).append(g)
        stmt = _guard(body, placed.get(len(leaves) - 1, []))
        for k in range(len(leaves) - 1, -1, -1):
            iv = leaves[k]
            if attach:
                stmt = self.attach_children(stage, iv, stmt)
            stmt = For(
                iv.var,
                IntImm(0, iv.var.dtype),
                _loop_extent(self.bounds[stage].extent[iv], iv),
                stage.loop_kinds.get(iv, ForKind.SERIAL),
                stmt,
            )
            for key, value in reversed(stage.pragmas.get(iv, [])):
                stmt = AttrStmt(f"pragma_{key}", value, stmt, iv.var)
            stmt = _guard(stmt, placed.get(k - 1, []))
        return stmt

    def attach_children(self, stage: Stage, ivar: IterVar, body: Stmt) -> Stmt:
        children = [
            s
            for s in self.stages
            if s.attach_type == AttachType.SCOPE
            and s.attach_stage is stage
            and s.attach_ivar is ivar
        ]
        if not children:
            return body
        stmt = seq(*[self.stage_nest(c) for c in children], body)
        for child in reversed(children):
            stmt = Allocate(self.buffers[child], stmt)
        return stmt


def _loop_extent(extent: int | PrimExpr, iv: IterVar) -> PrimExpr:
    """A loop's extent in its variable's dtype."""
    e = irop.convert(extent)
    return e if e.dtype == iv.var.dtype else irop.cast(e, iv.var.dtype)


def _guard(stmt: Stmt, conds: list[PrimExpr]) -> Stmt:
    if not conds:
        return stmt
    return IfThenElse(irop.likely(irop.all_(*conds)), stmt)


def _strides(
    name: str, shape: tuple[int | PrimExpr, ...], align: dict[int, tuple[int, int]]
) -> tuple[int, ...]:
    """Row-major strides where dimension d's stride is `k * factor + offset` (storage_align)."""
    if not align:
        return ()
    if not all(isinstance(d, int) for d in shape):
        raise ScheduleError(
            f"stage {name}: storage_align needs a buffer of constant shape, got "
            f"{list(shape)}; loom does not align symbolic strides yet"
        )
    strides = [0] * len(shape)
    stride = 1
    for d in range(len(shape) - 1, -1, -1):
        if d in align:
            factor, offset = align[d]
            stride += (factor + offset - stride % factor) % factor
        strides[d] = stride
        stride *= shape[d]
    return tuple(strides)


def lower_schedule(sch: Schedule, args: Sequence[Tensor | Var], name: str) -> PrimFunc:
    """The PrimFunc computing the schedule's outputs; `args` are its parameters in order."""
    if not isinstance(args, list | tuple):
        raise TypeError(f"args must be a list of tensors and scalar vars, got {args!r}")
    params: list[Buffer | Var] = []
    arg_stages: dict[Stage, Buffer] = {}
    for a in args:
        if isinstance(a, Var):
            if a in params:
                raise LoweringError(f"scalar argument {a.name} is given twice")
            params.append(a)
            continue
        if not isinstance(a, Tensor):
            raise TypeError(f"args must hold tensors and te.var scalars, got {a!r}")
        if isinstance(a.op, PlaceholderOp) and not any(st.op is a.op for st in sch.stages):
            params.append(decl_buffer(a.shape, a.dtype, a.name))  # an input nothing reads
            continue
        stage = sch[a]
        if stage in arg_stages:
            raise LoweringError(f"tensor {stage.name} is given twice in the argument list")
        if stage.scope != "global":
            raise LoweringError(
                f"stage {stage.name} is an argument, so it lives in the caller's "
                f"memory, but set_scope gave it scope {stage.scope!r}"
            )
        buf = decl_buffer(stage.op.shape, stage.op.dtype, stage.name)
        arg_stages[stage] = buf
        params.append(buf)
    for out in sch.outputs:
        if sch[out] not in arg_stages:
            raise LoweringError(f"output {out.name} is not in the argument list")

    bodies = _effective_bodies(sch)
    stages = _lowered_stages(sch, bodies, arg_stages)
    _check_attachments(stages)
    bounds = infer_bounds(stages, bodies, set(arg_stages))
    var_bounds: dict[Var, IntBound] = shape_var_bounds(stages)
    for stage in stages:
        var_bounds.update(leaf_var_bounds(stage, bounds[stage]))
    buffers = dict(arg_stages)
    for stage in stages:
        if stage in buffers:
            continue
        b = bounds[stage]
        shape = tuple(b.extent[iv] for iv in stage.op.axis)
        buffers[stage] = decl_buffer(
            shape,
            stage.op.dtype,
            stage.name,
            scope=stage.scope,
            strides=_strides(stage.name, shape, stage.align),
        )
    loop_extents = {
        iv.var: bounds[stage].extent[iv] for stage in stages for iv in stage.leaf_iter_vars
    }
    lowering = _Lowering(sch, stages, bodies, buffers, bounds, var_bounds, loop_extents)
    roots = [s for s in stages if s.attach_type != AttachType.SCOPE or s in arg_stages]
    body = seq(*[lowering.stage_nest(s) for s in roots])
    for stage in reversed(roots):
        if stage not in arg_stages:
            body = Allocate(buffers[stage], body)
    _check_scalars_defined(params, body)
    return PrimFunc(name, tuple(params), body)


def _check_scalars_defined(params: list[Buffer | Var], body: Stmt) -> None:
    """Every scalar variable the function uses is a parameter, or a shape variable: a dimension
    of an argument buffer that is a variable by itself (`te.var("n")` in `(n, 4)`), which that
    argument's shape defines (as in TVM, where the caller's array gives `n`)."""
    defined: set[Var] = set()
    used = {v for v in free_vars(body) if not v.dtype.is_handle}
    for p in params:
        if isinstance(p, Var):
            defined.add(p)
            continue
        for d in p.shape:
            if isinstance(d, Var):
                defined.add(d)
            else:
                used |= free_vars(d)
    missing = used - defined
    if missing:
        names = sorted(v.name for v in missing)
        raise LoweringError(
            f"scalar variables {names} are used but not in the argument list (nor a dimension "
            "of an argument's shape)"
        )


def _effective_bodies(sch: Schedule) -> dict[Stage, PrimExpr]:
    """Each compute stage's rule with inlined stages substituted."""
    inlined: dict[ComputeOp, PrimExpr] = {}
    bodies: dict[Stage, PrimExpr] = {}
    for stage in sch.stages:
        if not isinstance(stage.op, ComputeOp):
            continue
        body = _Inline(inlined).visit(stage.op.body)
        if stage.attach_type == AttachType.INLINE:
            inlined[stage.op] = body
        else:
            bodies[stage] = body
    return bodies


def _lowered_stages(
    sch: Schedule, bodies: dict[Stage, PrimExpr], arg_stages: dict[Stage, Buffer]
) -> list[Stage]:
    """Stages that produce a buffer, producers first; placeholders read must be arguments."""
    needed: set[Stage] = set(arg_stages)
    for stage in reversed(sch.stages):
        if stage not in needed and not stage.is_output:
            continue
        needed.add(stage)
        body = bodies.get(stage)
        if body is None:
            continue

        parts = body.parts() if isinstance(body, Reduce) else [body]
        for part in parts:
            for t in producer_tensors(part):
                producer = sch[t]
                if isinstance(producer.op, PlaceholderOp) and producer not in arg_stages:
                    raise LoweringError(
                        f"placeholder {producer.name} is read by {stage.name} "
                        "but is not in the argument list"
                    )
                needed.add(producer)
    return [
        s
        for s in sch.stages
        if s in needed and isinstance(s.op, ComputeOp) and s.attach_type != AttachType.INLINE
    ]


def _check_attachments(stages: list[Stage]) -> None:
    for stage in stages:
        if stage.attach_type != AttachType.SCOPE:
            continue
        parent, ivar = stage.attach_stage, stage.attach_ivar
        if parent.attach_type == AttachType.INLINE:
            raise ScheduleError(
                f"stage {stage.name} is computed at a loop of {parent.name}, which was inlined"
            )
        if ivar not in parent.leaf_iter_vars:
            raise ScheduleError(
                f"stage {stage.name} is computed at axis {ivar.name} of {parent.name}, which was "
                "split or fused afterwards; attach to one of "
                f"{[v.name for v in parent.leaf_iter_vars]}"
            )
        seen, s = {stage}, parent
        while s.attach_type == AttachType.SCOPE:
            if s in seen:
                raise ScheduleError(f"stages attached in a cycle through {stage.name}")
            seen.add(s)
            s = s.attach_stage
