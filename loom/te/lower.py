"""Lowering a schedule to a PrimFunc ("schedule ops"): loop nests, buffers, attachments.

Each lowered stage becomes a loop nest over its leaf axes that stores into its buffer. A stage at
the root gets a buffer of its full shape allocated around the whole function (arguments are
parameters instead); a stage attached with compute_at gets a buffer of the region it computes,
allocated inside the attach loop; an inlined stage has its rule substituted into its readers.
A reduction stores its identity in an init nest (over the data-parallel loops inside the first
reduction loop), then updates in the full nest.

A stage with several outputs (a tuple rule, a tuple reducer) has a buffer per output, all over
the same region. A scan's stage is its time loop: its inits run before it, and its body (the
stages between its state and its updates, loom/te/scan.py) runs inside it one time step at a
time, the updates writing the scan's buffer, which the state placeholder also names. An extern
stage is its own statement, with the real buffers in place of the ones it was written with.
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
from loom.ir.offset_buffer import lower_offset_buffers
from loom.ir.simplify import Analyzer, simplify
from loom.ir.stmt import (
    NOP,
    Allocate,
    AttrStmt,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    Stmt,
    seq,
    store,
)
from loom.ir.visitor import Mutator, free_vars, rename_vars, substitute
from loom.te.bound import (
    Attachment,
    StageBounds,
    infer_bounds,
    last_index,
    leaf_var_bounds,
    loop_bound,
    loop_leaves,
    own_attachments,
    shape_var_bounds,
    split_guards,
)
from loom.te.extern import ExternOp
from loom.te.multi_output import (
    OutputValues,
    TupleReduce,
    num_outputs,
    output_dtype,
    output_shape,
    value_index,
)
from loom.te.scan import ScanOp, scan_body
from loom.te.schedule import AttachType, Schedule, Stage
from loom.te.tensor import (
    ComputeOp,
    Extent,
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
        if isinstance(rule, OutputValues):  # a compute with several outputs: the one read
            rule = rule.values[value_index(e.tensor)]
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
        buf = self.lowering.buffers.get((stage, value_index(e.tensor)))
        if buf is None:
            raise LoweringError(
                f"tensor {e.tensor.name} is read but is neither an argument nor "
                "computed; pass it in the argument list"
            )
        starts = self.lowering.region_starts(stage)
        simplifier = self.lowering.simplifier
        return buf.load([simplifier.simplify(i - s) for i, s in zip(e.indices, starts)])


class _SubstituteBuffers(Mutator):
    """Put real buffers in place of the ones an extern stage's statement was written with:
    in loads, stores, any other buffer field, and where a buffer's data pointer is used."""

    def __init__(self, buffers: dict[Buffer, Buffer]):
        self.buffers = buffers
        self.data = {old.data: new.data for old, new in buffers.items()}

    def visit_Var(self, v: Var) -> PrimExpr:
        return self.data.get(v, v)

    def generic_mutate(self, node):
        node = super().generic_mutate(node)
        changes = {}
        for name in type(node)._child_fields:
            value = getattr(node, name)
            if isinstance(value, Buffer) and value in self.buffers:
                changes[name] = self.buffers[value]
            elif isinstance(value, tuple) and any(isinstance(v, Buffer) for v in value):
                changes[name] = tuple(self.buffers.get(v, v) for v in value)
        return node.replace(**changes) if changes else node


@dataclasses.dataclass
class _Lowering:
    sch: Schedule
    stages: list[Stage]  # lowered stages, producers first
    bodies: dict[Stage, PrimExpr]  # compute stages' rules
    buffers: dict[tuple[Stage, int], Buffer]  # each output of each stage (and placeholder)
    bounds: dict[Stage, StageBounds]
    var_bounds: dict[Var, IntBound]
    loop_extents: dict[Var, int | PrimExpr]  # every leaf loop variable's extent
    attach: dict[Stage, Attachment]
    shared: set[Stage]  # stages writing another stage's buffer (a scan's init and update)
    params: set[tuple[Stage, int]]  # outputs that are arguments: the caller allocates them
    # one Analyzer without variable bounds and one with `var_bounds` serve every simplification
    # and proof of the lowering (each keeps its cache across them)
    simplifier: Analyzer
    analyzer: Analyzer

    def region_starts(self, stage: Stage) -> list[PrimExpr]:
        op = stage.op
        if stage in self.shared or stage not in self.bounds or not isinstance(op, ComputeOp):
            return [IntImm(0)] * len(output_shape(op, 0))
        b = self.bounds[stage]
        return [b.root_min[iv] for iv in op.axis]

    def stage_buffers(self, stage: Stage) -> list[Buffer]:
        return [self.buffers[(stage, k)] for k in range(num_outputs(stage.op))]

    def allocate(self, stage: Stage, stmt: Stmt) -> Stmt:
        """`stmt` inside the allocations of the buffers `stage` owns."""
        if stage in self.shared:
            return stmt
        for k in reversed(range(num_outputs(stage.op))):
            if (stage, k) not in self.params:
                stmt = Allocate(self.buffers[(stage, k)], stmt)
        return stmt

    # -- one stage ---------------------------------------------------------------------------
    def stage_nest(self, stage: Stage) -> Stmt:
        """The loops computing `stage` into its buffers, with attached stages inside."""
        if isinstance(stage.op, ScanOp):
            # the time loop; the body's stages and the updates are attached inside it
            return self.loops(stage, loop_leaves(stage), NOP, [], outermost=True)
        if isinstance(stage.op, ExternOp):
            return self.extern_nest(stage)
        bounds = self.bounds[stage]
        op: ComputeOp = stage.op
        values = {iv.var: bounds.root_value(iv) for iv in op.root_iter_vars}
        if stage in self.shared:  # the scan's buffer, of the whole shape
            index = [values[iv.var] for iv in op.axis]
        else:
            index = [self.simplifier.simplify(bounds.offset[iv]) for iv in op.axis]
        bufs = self.stage_buffers(stage)
        guards = split_guards(stage, bounds, self.var_bounds) + self.domain_guards(
            stage, bounds, values
        )
        body = self.bodies[stage]
        to_loads = _ReadsToLoads(self)
        if stage.tensorized is not None:
            if len(bufs) > 1:
                raise ScheduleError(
                    f"stage {stage.name}: tensorize of a compute with several outputs is not "
                    "supported"
                )
            return self.tensorized_nest(stage, bounds, values, index, bufs[0], guards, to_loads)
        leaves = stage.leaf_iter_vars

        def rule(e: PrimExpr) -> PrimExpr:
            return to_loads.visit(substitute(e, values))

        if isinstance(body, OutputValues):
            stores = seq(*[store(b, rule(v), index) for b, v in zip(bufs, body.values)])
            return self.loops(stage, leaves, stores, guards, outermost=True)
        if not isinstance(body, Reduce | TupleReduce):
            return self.loops(stage, leaves, store(bufs[0], rule(body), index), guards, True)
        if isinstance(body, Reduce):
            identity = [rule(body.identity())]
            update: Stmt = store(
                bufs[0], body.combiner.combine(bufs[0].load(index), rule(body.source)), index
            )
        else:
            identity = [rule(v) for v in body.identity()]
            accs = [b.load(index) for b in bufs]
            combined = body.combiner.combine_tuple(accs, [rule(s) for s in body.sources])
            # every output's new value is computed from the old ones before any is stored
            temps = [Var(f"{b.name}.v", b.dtype) for b in bufs]
            update = seq(*[store(b, t, index) for b, t in zip(bufs, temps)])
            for t, value in reversed(list(zip(temps, combined))):
                update = LetStmt(t, value, update)
        first_reduce = next((k for k, iv in enumerate(leaves) if iv.is_reduce), len(leaves))
        outer, inner = leaves[:first_reduce], leaves[first_reduce:]
        init_leaves = [iv for iv in inner if not iv.is_reduce]
        reduce_vars = {iv.var for iv in inner if iv.is_reduce}
        init_guards = [g for g in guards if not free_vars(g) & reduce_vars]
        init = self.loops(
            stage,
            init_leaves,
            seq(*[store(b, v, index) for b, v in zip(bufs, identity)]),
            init_guards,
            attach=False,
        )
        init = rename_vars(
            init, {iv.var: iv.var.copy_with_name(f"{iv.var.name}.init") for iv in init_leaves}
        )
        cond = self.simplifier.simplify(rule(body.condition))
        if not (isinstance(cond, IntImm) and cond.value):
            update = IfThenElse(cond, update)
        update_nest = self.loops(stage, inner, update, guards)
        inner_vars = {iv.var for iv in inner}
        outer_guards = [g for g in guards if not free_vars(g) & inner_vars]
        return self.loops(stage, outer, seq(init, update_nest), outer_guards, outermost=True)

    def extern_nest(self, stage: Stage) -> Stmt:
        """The extern stage's statement, on the real buffers of its inputs and outputs."""
        op: ExternOp = stage.op
        mapping: dict[Buffer, Buffer] = {}
        for placeholder, tensor in zip(op.input_placeholders, op.inputs):
            producer = self.sch[tensor]
            if self.attach.get(producer, Attachment(AttachType.ROOT)).type == AttachType.SCOPE:
                raise ScheduleError(
                    f"stage {producer.name} is computed at a loop of "
                    f"{self.attach[producer].stage.name}, but the extern stage {stage.name} "
                    "reads all of it; compute it at the root"
                )
            buf = self.buffers.get((producer, value_index(tensor)))
            if buf is None:
                raise LoweringError(
                    f"extern stage {stage.name} reads {tensor.name}, which is neither an "
                    "argument nor computed; pass it in the argument list"
                )
            mapping[placeholder] = buf
        for k, placeholder in enumerate(op.output_placeholders):
            mapping[placeholder] = self.buffers[(stage, k)]
        for buf in mapping.values():
            if buf.strides:
                raise ScheduleError(
                    f"extern stage {stage.name} reads or writes {buf.name}, whose rows are "
                    "padded (storage_align); an extern takes compact tensors"
                )
        # every access through a view of a placeholder (the buffer itself, a flat index, an
        # access_ptr, a decl_buffer(data=..., elem_offset=...) row) as one of the real buffer
        body = lower_offset_buffers(
            op.body, storage={p.data: buf.flattened() for p, buf in mapping.items()}
        )
        return _SubstituteBuffers(mapping).visit(body)

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
            place = self.attach[child]
            if place.type == AttachType.SCOPE and place.stage is stage and place.ivar in inner[1:]:
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
        if self.attach[stage].type != AttachType.SCOPE:
            return []
        guards = []
        for iv, extent in zip(stage.op.axis, stage.op.shape):
            v = values[iv.var]
            if not self.analyzer.can_prove(irop.greater_equal(v, 0)):
                guards.append(irop.greater_equal(v, 0))
            if not self.below(v, extent):
                guards.append(irop.less(v, extent))
        return guards

    def below(self, v: PrimExpr, extent: int | PrimExpr) -> bool:
        """True if `v < extent` holds wherever the loops of `v` run. A loop of symbolic extent
        has no constant bound, so its variable is relaxed to [0, extent - 1] symbolically
        (`i < n` inside the loop over n)."""
        if self.analyzer.can_prove(irop.less(v, extent)):
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
        gap = self.simplifier.simplify(irop.sub(interval[1], extent))
        return self.analyzer.can_prove(irop.less(gap, 0))

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
        pragmas = stage.pragmas  # a property that looks through all stages: asked once
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
            for key, value in reversed(pragmas.get(iv, [])):
                stmt = AttrStmt(f"pragma_{key}", value, stmt, iv.var)
            stmt = _guard(stmt, placed.get(k - 1, []))
        return stmt

    def attach_children(self, stage: Stage, ivar: IterVar, body: Stmt) -> Stmt:
        children = [
            s
            for s in self.stages
            if self.attach[s].type == AttachType.SCOPE
            and self.attach[s].stage is stage
            and self.attach[s].ivar is ivar
        ]
        if not children:
            return body
        stmt = seq(*[self.stage_nest(c) for c in children], body)
        for child in reversed(children):
            stmt = self.allocate(child, stmt)
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


def _unique_name(name: str, taken: set[str]) -> str:
    """`name`, or `name_1`, `name_2`, ... if taken (as TVM names two placeholders both called
    "placeholder" in one argument list)."""
    unique, k = name, 0
    while unique in taken:
        k += 1
        unique = f"{name}_{k}"
    taken.add(unique)
    return unique


def _tensor_name(op, k: int) -> str:
    return op.name if num_outputs(op) == 1 else f"{op.name}.v{k}"


def lower_schedule(sch: Schedule, args: Sequence[Tensor | Var], name: str) -> PrimFunc:
    """The PrimFunc computing the schedule's outputs; `args` are its parameters in order. Two
    tensor arguments with the same name get unique parameter names (`A`, `A_1`, ...)."""
    if not isinstance(args, list | tuple):
        raise TypeError(f"args must be a list of tensors and scalar vars, got {args!r}")
    params: list[Buffer | Var] = []
    arg_buffers: dict[tuple[Stage, int], Buffer] = {}
    taken: set[str] = set()
    scalars: list[Var] = []
    for a in args:  # scalar names first: a tensor named like one is the one renamed
        if isinstance(a, Var):
            if a in scalars:
                raise LoweringError(f"scalar argument {a.name} is given twice")
            if a.name in taken:
                raise LoweringError(
                    f"two scalar arguments are named {a.name!r}; give the te.var names that differ"
                )
            taken.add(a.name)
            scalars.append(a)
    states = _scan_states(sch)
    for a in args:
        if isinstance(a, Var):
            params.append(a)
            continue
        if not isinstance(a, Tensor):
            raise TypeError(f"args must hold tensors and te.var scalars, got {a!r}")
        if a.op in states:
            raise LoweringError(
                f"tensor {a.name} is the state placeholder of scan {states[a.op].name}, which "
                "the scan computes; pass the scan's result instead"
            )
        if isinstance(a.op, PlaceholderOp) and not any(st.op is a.op for st in sch.stages):
            params.append(decl_buffer(a.shape, a.dtype, _unique_name(a.name, taken)))
            continue  # an input nothing reads
        stage, k = sch[a], value_index(a)
        if (stage, k) in arg_buffers:
            raise LoweringError(f"tensor {a.name} is given twice in the argument list")
        if stage.scope != "global":
            raise LoweringError(
                f"stage {stage.name} is an argument, so it lives in the caller's "
                f"memory, but set_scope gave it scope {stage.scope!r}"
            )
        buf = decl_buffer(
            output_shape(stage.op, k),
            output_dtype(stage.op, k),
            _unique_name(_tensor_name(stage.op, k), taken),
        )
        arg_buffers[(stage, k)] = buf
        params.append(buf)
    arg_stages = {stage for stage, _ in arg_buffers}
    for out in sch.outputs:
        if sch[out] not in arg_stages:
            raise LoweringError(f"output {out.name} is not in the argument list")

    bodies = _effective_bodies(sch)
    stages = _lowered_stages(sch, bodies, arg_stages, states)
    attach, regions, shared = _scan_placement(sch, stages, arg_stages)
    _check_attachments(stages, attach)
    simplifier = Analyzer()
    bounds = infer_bounds(stages, bodies, arg_stages, attach, regions, simplifier)
    var_bounds: dict[Var, IntBound] = shape_var_bounds(stages)
    for stage in stages:
        var_bounds.update(leaf_var_bounds(stage, bounds[stage]))
    buffers = dict(arg_buffers)
    for stage in stages:
        if stage in shared:
            continue
        for k in range(num_outputs(stage.op)):
            if (stage, k) in buffers:
                continue
            if isinstance(stage.op, ComputeOp):
                shape = tuple(bounds[stage].extent[iv] for iv in stage.op.axis)
            else:
                shape = output_shape(stage.op, k)
            buffers[(stage, k)] = decl_buffer(
                shape,
                output_dtype(stage.op, k),
                _tensor_name(stage.op, k),
                scope=stage.scope,
                strides=_strides(stage.name, shape, stage.align),
            )
    for stage in stages:  # a scan's init, update and state use the scan's buffers
        if isinstance(stage.op, ScanOp):
            for k, parts in enumerate(
                zip(stage.op.init, stage.op.update, stage.op.state_placeholder)
            ):
                for t in parts:
                    buffers[(sch[t], value_index(t))] = buffers[(stage, k)]
    loop_extents = {
        iv.var: bounds[stage].extent[iv] for stage in stages for iv in loop_leaves(stage)
    }
    lowering = _Lowering(
        sch,
        stages,
        bodies,
        buffers,
        bounds,
        var_bounds,
        loop_extents,
        attach,
        shared,
        set(arg_buffers),
        simplifier,
        Analyzer(var_bounds),
    )
    roots = [s for s in stages if attach[s].type != AttachType.SCOPE or s in arg_stages]
    body = seq(*[lowering.stage_nest(s) for s in roots])
    for stage in reversed(roots):
        body = lowering.allocate(stage, body)
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


def _scan_states(sch: Schedule) -> dict:
    """The state placeholders of the schedule's scans, each with its scan."""
    return {
        t.op: stage.op
        for stage in sch.stages
        if isinstance(stage.op, ScanOp)
        for t in stage.op.state_placeholder
    }


def _effective_bodies(sch: Schedule) -> dict[Stage, PrimExpr]:
    """Each compute stage's rule with inlined stages substituted."""
    inlined: dict[ComputeOp, PrimExpr] = {}
    bodies: dict[Stage, PrimExpr] = {}
    for stage in sch.stages:
        if not isinstance(stage.op, ComputeOp):
            continue
        # with nothing inlined yet the rule stays as is (the walk would change nothing)
        body = _Inline(inlined).visit(stage.op.body) if inlined else stage.op.body
        if stage.attach_type == AttachType.INLINE:
            if isinstance(body, TupleReduce):
                raise ScheduleError(
                    f"stage {stage.name}: compute_inline: a reduction cannot be inlined"
                )
            inlined[stage.op] = body
        else:
            bodies[stage] = body
    return bodies


def _lowered_stages(
    sch: Schedule, bodies: dict[Stage, PrimExpr], arg_stages: set[Stage], states: dict
) -> list[Stage]:
    """Stages that produce a buffer, producers first; placeholders read must be arguments
    (or a scan's state, which is the scan's buffer)."""
    needed: set[Stage] = set(arg_stages)
    for stage in reversed(sch.stages):
        if stage not in needed and not stage.is_output:
            continue
        needed.add(stage)
        body = bodies.get(stage)
        if body is not None:
            parts = body.parts() if isinstance(body, Reduce | TupleReduce) else [body]
            reads = [t for part in parts for t in producer_tensors(part)]
        elif isinstance(stage.op, ScanOp | ExternOp):
            reads = stage.op.input_tensors
        else:
            continue
        for t in reads:
            producer = sch[t]
            if (
                isinstance(producer.op, PlaceholderOp)
                and producer not in arg_stages
                and producer.op not in states
            ):
                raise LoweringError(
                    f"placeholder {producer.name} is read by {stage.name} "
                    "but is not in the argument list"
                )
            needed.add(producer)
    return [
        s
        for s in sch.stages
        if s in needed
        and not isinstance(s.op, PlaceholderOp)
        and s.attach_type != AttachType.INLINE
    ]


def _scan_placement(
    sch: Schedule, stages: list[Stage], arg_stages: set[Stage]
) -> tuple[dict[Stage, Attachment], dict[Stage, list[tuple[PrimExpr, Extent]]], set[Stage]]:
    """Where each stage is computed, with every scan's body in its time loop (as TVM attaches
    it); the region of each update (one time step: row `time`, whole other dimensions); and
    the stages writing a scan's buffer (its inits and updates)."""
    attach = own_attachments(stages)
    regions: dict[Stage, list[tuple[PrimExpr, Extent]]] = {}
    shared: set[Stage] = set()
    lowered = set(stages)
    for scan_stage in stages:
        op = scan_stage.op
        if not isinstance(op, ScanOp):
            continue
        axis = op.scan_axis
        updates = [sch[t] for t in op.update]
        inits = [sch[t] for t in op.init]
        for stage in scan_body(op, sch.stages):
            if stage not in lowered:
                continue
            if stage in arg_stages:
                raise LoweringError(
                    f"stage {stage.name} is computed in each time step of scan {op.name} (it "
                    "depends on the state), so it cannot be an argument"
                )
            place = attach[stage]
            if place.type == AttachType.ROOT:
                attach[stage] = Attachment(AttachType.SCOPE, scan_stage, axis)
            elif stage in updates and place.stage is not scan_stage:
                raise ScheduleError(
                    f"stage {stage.name} is the update of scan {op.name}, computed in the "
                    f"scan's time loop; it cannot be computed at {place.stage.name}"
                )
        time = simplify(axis.dom.min + axis.var)
        for stage in updates + inits:
            if stage.attach_type == AttachType.INLINE:
                role = "update" if stage in updates else "init"
                raise ScheduleError(
                    f"stage {stage.name} is the {role} of scan {op.name}, which writes the "
                    "scan's result: it cannot be inlined"
                )
            if num_outputs(stage.op) > 1:
                raise LoweringError(
                    f"scan {op.name}: {stage.name} has several outputs; the init and update "
                    "of a scan must be computes with one output"
                )
            if stage in arg_stages:
                raise LoweringError(
                    f"stage {stage.name} writes the buffer of scan {op.name}; pass the scan's "
                    "result instead"
                )
            shared.add(stage)
        for stage in inits:
            if attach[stage].type != AttachType.ROOT:
                raise ScheduleError(
                    f"stage {stage.name} is the init of scan {op.name}, computed before its "
                    "time loop; it cannot be computed at another stage's loop or inlined"
                )
        for stage in updates:
            regions[stage] = [(time, 1)] + [(IntImm(0), d) for d in stage.op.shape[1:]]
            for reader in stages:
                if reader is not scan_stage and any(
                    t.op is stage.op for t in reader.op.input_tensors
                ):
                    raise ScheduleError(
                        f"stage {stage.name} is the update of scan {op.name}, computed one "
                        f"time step at a time in its buffer, but {reader.name} reads it; "
                        f"read the scan's result instead"
                    )
    return attach, regions, shared


def _check_attachments(stages: list[Stage], attach: dict[Stage, Attachment]) -> None:
    for stage in stages:
        place = attach[stage]
        if place.type != AttachType.SCOPE:
            continue
        parent, ivar = place.stage, place.ivar
        if parent.attach_type == AttachType.INLINE:
            raise ScheduleError(
                f"stage {stage.name} is computed at a loop of {parent.name}, which was inlined"
            )
        if ivar not in loop_leaves(parent):
            raise ScheduleError(
                f"stage {stage.name} is computed at axis {ivar.name} of {parent.name}, which was "
                "split or fused afterwards; attach to one of "
                f"{[v.name for v in loop_leaves(parent)]}"
            )
        seen, s = {stage}, parent
        while attach.get(s, Attachment(s.attach_type)).type == AttachType.SCOPE:
            if s in seen:
                raise ScheduleError(f"stages attached in a cycle through {stage.name}")
            seen.add(s)
            s = attach[s].stage
