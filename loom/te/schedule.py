"""Schedules: how each stage's loops are split, ordered, placed and annotated.

`create_schedule(outputs)` makes one `Stage` per operation; the primitives below change how the
stage is lowered to loops, never what it computes. Every invalid use raises `ScheduleError`
naming the stage and the axis.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from loom.errors import ScheduleError
from loom.ir.expr import IntImm, PrimExpr, StringImm, Var
from loom.ir.op import convert
from loom.ir.stmt import ForKind
from loom.ir.visitor import Mutator, substitute
from loom.lazy import lazy_attributes
from loom.te.multi_output import num_outputs, value_index
from loom.te.operation import compute
from loom.te.relations import Fuse, Singleton, Split, is_reduce_relation
from loom.te.rfactor import factor_ops
from loom.te.tensor import (
    ComputeOp,
    IterVar,
    IterVarKind,
    Operation,
    PlaceholderOp,
    ProducerLoad,
    Range,
    Reduce,
    Tensor,
    whole_number,
)
from loom.te.tensorize import TensorIntrin
from loom.transform.inject_double_buffer import DOUBLE_BUFFER_PRAGMA


class AttachType:
    ROOT = "root"
    INLINE = "inline"
    SCOPE = "scope"  # computed inside a loop of another stage (compute_at)


def _derived_iter_var(name: str, kind: IterVarKind) -> IterVar:
    return IterVar(Var(name), None, kind)


class Stage:
    """The schedule of one operation."""

    def __init__(self, op: Operation, schedule: Schedule, is_output: bool):
        self.op = op
        self.origin_op = op
        self.schedule = schedule
        self.is_output = is_output
        roots = list(op.root_iter_vars) if isinstance(op, ComputeOp) else []
        self.all_iter_vars: list[IterVar] = list(roots)
        self.leaf_iter_vars: list[IterVar] = list(roots)
        self.relations: list[Split | Fuse | Singleton] = []
        self.attach_type = AttachType.ROOT
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None
        self.scope = "global"
        self.loop_kinds: dict[IterVar, ForKind] = {}
        self._pragmas: dict[IterVar, list[tuple[str, PrimExpr]]] = {}
        self.double_buffered = False
        self.align: dict[int, tuple[int, int]] = {}
        self.tensorized: tuple[IterVar, object] | None = None
        self.rfactored: dict[IterVar, Stage] = {}  # reduction loops moved to an rf stage

    @property
    def name(self) -> str:
        return self.op.name

    def __repr__(self) -> str:
        return f"Stage({self.name})"

    @property
    def pragmas(self) -> dict[IterVar, list[tuple[str, PrimExpr]]]:
        """The pragmas of each loop: those given with `pragma`, and on a loop where a
        double-buffered stage is computed (compute_at, in whatever order the primitives came),
        `double_buffer = <that stage's name>`."""
        marked = [
            s
            for s in self.schedule.stages
            if s.double_buffered and s.attach_type == AttachType.SCOPE and s.attach_stage is self
        ]
        if not marked:
            return self._pragmas
        merged = {iv: list(p) for iv, p in self._pragmas.items()}
        for child in marked:
            merged.setdefault(child.attach_ivar, []).append(
                (DOUBLE_BUFFER_PRAGMA, StringImm(child.name))
            )
        return merged

    @pragmas.setter
    def pragmas(self, value: dict[IterVar, list[tuple[str, PrimExpr]]]) -> None:
        self._pragmas = value

    # -- checks --------------------------------------------------------------------------------
    def _error(self, message: str) -> ScheduleError:
        return ScheduleError(f"stage {self.name}: {message}")

    def _require_compute(self, primitive: str) -> None:
        if not isinstance(self.op, ComputeOp):
            what = (
                "a placeholder (an input)"
                if isinstance(self.op, PlaceholderOp)
                else f"a {type(self.op).__name__} stage (te.scan / te.extern)"
            )
            raise self._error(f"{primitive} applies to computed stages; {self.name} is {what}")

    def _check_leaf(self, ivar: IterVar, primitive: str) -> None:
        if not isinstance(ivar, IterVar):
            raise TypeError(f"stage {self.name}: {primitive} takes an axis (IterVar), got {ivar!r}")
        if ivar in self.leaf_iter_vars:
            return
        if ivar in self.all_iter_vars:
            raise self._error(
                f"{primitive}: axis {ivar.name} was already split or fused; "
                f"use one of its leaf axes {[v.name for v in self.leaf_iter_vars]}"
            )
        owner = self.schedule.owner_of(ivar)
        where = f"it belongs to stage {owner.name}" if owner else "it belongs to no stage"
        raise self._error(f"{primitive}: axis {ivar.name} is not an axis of this stage ({where})")

    # -- loop structure ------------------------------------------------------------------------
    def split(
        self, parent: IterVar, factor: int | None = None, nparts: int | None = None
    ) -> tuple[IterVar, IterVar]:
        """Split `parent` into (outer, inner): inner has `factor` iterations, or outer has
        `nparts`. A factor that does not divide the extent adds a guard."""
        self._require_compute("split")
        self._check_leaf(parent, "split")
        if (factor is None) == (nparts is None):
            raise self._error(
                f"split of axis {parent.name} needs exactly one of factor= or nparts="
            )
        amount = factor if factor is not None else nparts
        if isinstance(amount, IntImm):
            amount = amount.value
        if isinstance(amount, float | np.floating):  # `n / 4` in a TVM script
            amount = whole_number(amount, f"stage {self.name}: split of axis {parent.name}: factor")
        elif isinstance(amount, np.integer):
            amount = int(amount)
        if isinstance(amount, bool) or not isinstance(amount, int) or amount <= 0:
            raise self._error(
                f"split of axis {parent.name}: factor/nparts must be a positive int, got {amount!r}"
            )
        outer = _derived_iter_var(f"{parent.name}.outer", parent.kind)
        inner = _derived_iter_var(f"{parent.name}.inner", parent.kind)
        rel = Split(
            parent,
            outer,
            inner,
            amount if factor is not None else None,
            amount if nparts is not None else None,
        )
        self.relations.append(rel)
        self.all_iter_vars += [outer, inner]
        pos = self.leaf_iter_vars.index(parent)
        self.leaf_iter_vars[pos : pos + 1] = [outer, inner]
        return outer, inner

    def fuse(self, *axes: IterVar) -> IterVar:
        """Fuse consecutive axes (outermost first) into one; of no axes, add an outermost loop
        of extent 1 (TVM's singleton) and return it."""
        self._require_compute("fuse")
        if len(axes) == 1 and isinstance(axes[0], list | tuple):
            axes = tuple(axes[0])
        if not axes:
            # as TVM: a new outermost loop of extent 1, e.g. a loop of a 0-d stage to
            # compute_at another stage at
            singleton = _derived_iter_var("singleton", IterVarKind.DATA_PAR)
            self.relations.append(Singleton(singleton))
            self.all_iter_vars.append(singleton)
            self.leaf_iter_vars.insert(0, singleton)
            return singleton
        for a in axes:
            self._check_leaf(a, "fuse")
        positions = [self.leaf_iter_vars.index(a) for a in axes]
        if positions != list(range(positions[0], positions[0] + len(axes))):
            names = [a.name for a in axes]
            raise self._error(
                f"fuse: axes {names} must be consecutive, outermost first, in the "
                f"loop order {[v.name for v in self.leaf_iter_vars]}"
            )
        kinds = {a.kind for a in axes}
        if len(kinds) > 1:
            raise self._error(
                f"fuse: cannot fuse reduction and data-parallel axes {[a.name for a in axes]}"
            )
        fused = axes[0]
        for inner in axes[1:]:
            new = _derived_iter_var(f"{fused.name}.{inner.name}.fused", fused.kind)
            self.relations.append(Fuse(fused, inner, new))
            self.all_iter_vars.append(new)
            pos = self.leaf_iter_vars.index(fused)
            self.leaf_iter_vars[pos : pos + 2] = [new]
            fused = new
        return fused

    def reorder(self, *axes: IterVar) -> None:
        """Put `axes` in this order, in the positions they occupy now."""
        self._require_compute("reorder")
        if len(axes) == 1 and isinstance(axes[0], list | tuple):
            axes = tuple(axes[0])
        for a in axes:
            self._check_leaf(a, "reorder")
        if len(set(axes)) != len(axes):
            raise self._error(f"reorder: an axis is given twice in {[a.name for a in axes]}")
        positions = sorted(self.leaf_iter_vars.index(a) for a in axes)
        for pos, a in zip(positions, axes):
            self.leaf_iter_vars[pos] = a

    def tile(
        self, x_parent: IterVar, y_parent: IterVar, x_factor: int, y_factor: int
    ) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        """Split two axes and order the loops (x.outer, y.outer, x.inner, y.inner)."""
        xo, xi = self.split(x_parent, factor=x_factor)
        yo, yi = self.split(y_parent, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def _set_kind(self, ivar: IterVar, kind: ForKind, primitive: str) -> None:
        self._require_compute(primitive)
        self._check_leaf(ivar, primitive)
        self.loop_kinds[ivar] = kind

    def vectorize(self, ivar: IterVar) -> None:
        """Run the loop as vector operations (falls back to a serial loop when the body
        cannot be vectorized, e.g. a reduction over this axis)."""
        self._set_kind(ivar, ForKind.VECTORIZED, "vectorize")

    def unroll(self, ivar: IterVar) -> None:
        self._set_kind(ivar, ForKind.UNROLLED, "unroll")

    def parallel(self, ivar: IterVar) -> None:
        """Run the iterations on several threads."""
        if isinstance(ivar, IterVar) and ivar.is_reduce:
            raise self._error(
                f"parallel: axis {ivar.name} is a reduction axis; its iterations "
                "update the same elements and cannot run in parallel"
            )
        self._set_kind(ivar, ForKind.PARALLEL, "parallel")

    def pragma(self, ivar: IterVar, key: str, value=1) -> None:
        """Annotate the loop with `pragma_<key> = value` (lowered by a registered rule)."""
        self._require_compute("pragma")
        self._check_leaf(ivar, "pragma")
        if not isinstance(key, str) or not key.isidentifier():
            raise self._error(f"pragma key must be an identifier, got {key!r}")
        if key == DOUBLE_BUFFER_PRAGMA:
            raise self._error("pragma 'double_buffer' is set by the double_buffer() primitive")
        self._pragmas.setdefault(ivar, []).append((key, convert(value)))

    def tensorize(self, ivar: IterVar, intrin) -> None:
        """Compute the loops from `ivar` inward with the hardware intrinsic `intrin` (a
        loom.te.TensorIntrin); lowering checks that they compute what it declares."""

        self._require_compute("tensorize")
        self._check_leaf(ivar, "tensorize")
        if not isinstance(intrin, TensorIntrin):
            raise TypeError(f"stage {self.name}: tensorize takes a TensorIntrin, got {intrin!r}")
        self.tensorized = (ivar, intrin)

    # -- placement -----------------------------------------------------------------------------
    def compute_at(self, parent: Stage, ivar: IterVar) -> None:
        """Compute this stage inside loop `ivar` of stage `parent` (a consumer), only the region
        that one iteration of that loop needs."""
        self._require_compute("compute_at")
        if not isinstance(parent, Stage):
            raise TypeError(f"stage {self.name}: compute_at takes a Stage (s[T]), got {parent!r}")
        if parent is self:
            raise self._error("compute_at into its own loop")
        if self.is_output:
            raise self._error("compute_at: an output stage must be computed at the root")
        if not isinstance(ivar, IterVar) or ivar not in parent.leaf_iter_vars:
            name = ivar.name if isinstance(ivar, IterVar) else repr(ivar)
            raise self._error(
                f"compute_at: axis {name} is not a loop of stage {parent.name} "
                f"(its loops are {[v.name for v in parent.leaf_iter_vars]})"
            )
        if not self.schedule.reaches(self, parent):
            raise self._error(
                f"compute_at: stage {parent.name} does not consume {self.name}, "
                f"so loop {ivar.name} is not inside a consumer of this stage"
            )
        self.attach_type = AttachType.SCOPE
        self.attach_stage, self.attach_ivar = parent, ivar

    def compute_inline(self) -> None:
        """Substitute this stage's rule into its consumers; it gets no buffer of its own."""
        self._require_compute("compute_inline")
        if self.is_output:
            raise self._error("compute_inline: an output stage cannot be inlined")
        if isinstance(self.op.body, Reduce):
            raise self._error("compute_inline: a reduction cannot be inlined")
        self.attach_type = AttachType.INLINE
        self.attach_stage = self.attach_ivar = None

    def compute_root(self) -> None:
        """Compute the whole tensor at the top level of the function."""
        self._require_compute("compute_root")
        self.attach_type = AttachType.ROOT
        self.attach_stage = self.attach_ivar = None

    def set_scope(self, scope: str) -> None:
        """Allocate this stage's buffer in memory scope `scope` (e.g. "local.vtcm")."""
        self._require_compute("set_scope")
        if not isinstance(scope, str) or not scope:
            raise self._error(f"set_scope takes a non-empty scope name, got {scope!r}")
        self.scope = scope

    def double_buffer(self) -> None:
        """Give this stage's buffer two copies (TVM's double_buffer): iteration `i` of the loop
        it is computed at (compute_at) writes and its readers read copy `i % 2`, so filling the
        next iteration's copy need not wait for the readers of the current one (an
        accelerator's load queue runs ahead of its compute). The buffer is allocated once,
        outside that loop, twice its size. At the root the stage keeps one copy (nothing
        alternates)."""
        self._require_compute("double_buffer")
        if self.is_output:
            raise self._error("double_buffer: an output stage lives in the caller's memory")
        self.double_buffered = True

    def storage_align(self, axis: IterVar, factor: int, offset: int) -> None:
        """Pad the buffer so that the stride of dimension `axis` is `k * factor + offset`."""
        self._require_compute("storage_align")
        if axis not in self.op.axis:
            raise self._error(
                f"storage_align: {getattr(axis, 'name', axis)!r} is not one of the "
                f"stage's dimensions {[iv.name for iv in self.op.axis]}"
            )
        if not isinstance(factor, int) or factor <= 0 or not 0 <= offset < factor:
            raise self._error(
                f"storage_align needs factor > 0 and 0 <= offset < factor, got "
                f"factor={factor}, offset={offset}"
            )
        self.align[self.op.axis.index(axis)] = (factor, offset)


class _ReplaceTensors(Mutator):
    def __init__(self, mapping: dict[Operation, Operation]):
        self.mapping = mapping

    def visit_ProducerLoad(self, e: ProducerLoad) -> PrimExpr:
        new = self.generic_mutate(e)
        target = self.mapping.get(e.tensor.op)
        if target is None:
            return new
        return ProducerLoad(target.output(value_index(e.tensor)), new.indices)

    def visit_Reduce(self, e: Reduce) -> PrimExpr:
        return self.generic_mutate(e)


def _replace_reads(op: Operation, mapping: dict[Operation, Operation]) -> Operation:
    # an operation reading none of them stays as is (its inputs are known: no walk of its body)
    if not isinstance(op, ComputeOp) or not any(t.op in mapping for t in op.input_tensors):
        return op
    body = _ReplaceTensors(mapping).visit(op.body)
    return op if body is op.body else op.with_body(body)


class Schedule:
    """Stages of all operations that the outputs depend on, producers before consumers."""

    def __init__(self, outputs: Sequence[Operation]):
        self.outputs = list(outputs)
        self.stages: list[Stage] = []
        seen: set[int] = set()

        def visit(op: Operation) -> None:
            if id(op) in seen:
                return
            seen.add(id(op))
            for t in op.input_tensors:
                visit(t.op)
            self.stages.append(Stage(op, self, is_output=any(op is o for o in outputs)))

        for op in outputs:
            visit(op)

    def __getitem__(self, key: Tensor | Operation | Stage) -> Stage:
        if isinstance(key, Stage):
            return key
        op = key.op if isinstance(key, Tensor) else key
        for stage in self.stages:
            if stage.op is op or stage.origin_op is op:
                return stage
        name = getattr(op, "name", repr(op))
        raise ScheduleError(
            f"{name} is not a stage of this schedule (stages: {[s.name for s in self.stages]})"
        )

    def owner_of(self, ivar: IterVar) -> Stage | None:
        for stage in self.stages:
            if ivar in stage.all_iter_vars:
                return stage
        return None

    def readers(self, stage: Stage) -> list[Stage]:
        """Stages whose rule reads `stage`'s tensor directly."""
        return [s for s in self.stages if any(t.op is stage.op for t in s.op.input_tensors)]

    def reaches(self, producer: Stage, consumer: Stage) -> bool:
        """True if data flows from `producer` to `consumer`."""
        frontier, seen = [producer], set()
        while frontier:
            s = frontier.pop()
            for r in self.readers(s):
                if r is consumer:
                    return True
                if id(r) not in seen:
                    seen.add(id(r))
                    frontier.append(r)
        return False

    def normalize(self) -> Schedule:
        """This schedule (TVM's normalize rebases loops to start at 0 and returns a copy):
        loom's loops already start at 0, a reduction over (1, n) and a stage computed at a
        region included, whose start lowering adds to the loop variable; nothing changes."""
        return self

    def replace_op(self, stage: Stage, op: ComputeOp) -> None:
        """Give `stage` the operation `op` (its output's shape and dtype) and make every reader
        of its old operation read `op`. When `op` has loops of its own (not the old operation's
        iteration variables), the stage's loops become them, unscheduled: a schedule replaces a
        stage's rule before scheduling it (operator schedules rebuilding a convolution's stages,
        cache_write)."""
        old = stage.op
        stage.op = op
        roots, old_roots = op.root_iter_vars, old.root_iter_vars
        if len(roots) != len(old_roots) or any(a is not b for a, b in zip(roots, old_roots)):
            stage.all_iter_vars = list(roots)
            stage.leaf_iter_vars = list(roots)
        if stage.is_output:
            self.outputs = [op if o is old else o for o in self.outputs]
        self._replace_dataflow({old: op})

    def _replace_dataflow(
        self,
        mapping: dict[Operation, Operation],
        only: dict[Stage, dict[Operation, Operation]] | None = None,
    ) -> None:
        """Rewrite every stage to read the current operation of each replaced one.

        `mapping` maps replaced operations to their replacements; `only` adds, for some stages,
        replacements that apply to that stage alone (cache_read: its readers read the cache).
        A stage whose rule changes gets a new operation, which its own readers must then read,
        and so on transitively: when an operation is replaced again, every entry that pointed
        at it points at the newest one, so a reader of any version of a stage reads the
        version the schedule holds. The stage list, the outputs and (through the stages) the
        attach points then name only current operations."""
        mapping = dict(mapping)
        only = only or {}
        changed = True
        while changed:  # one pass suffices in producer-first order; loop in case it is not
            changed = False
            for stage in self.stages:
                old = stage.op
                rules = {**mapping, **only[stage]} if stage in only else mapping
                new = _replace_reads(old, rules)
                if new is old:
                    continue
                changed = True
                for key, value in mapping.items():
                    if value is old:
                        mapping[key] = new
                mapping[old] = new
                stage.op = new
                self.outputs = [new if o is old else o for o in self.outputs]

    def cache_read(
        self, tensor: Tensor, scope: str, readers: Sequence[Tensor | Operation | Stage]
    ) -> Tensor:
        """A stage that copies `tensor` into `scope`; `readers` then read the copy."""

        source = self[tensor]
        if num_outputs(source.op) > 1:
            raise ScheduleError(
                f"stage {source.name}: cache_read of an output of an operation with several "
                "outputs is not supported"
            )
        if isinstance(readers, Tensor | Operation | Stage):
            readers = [readers]
        reader_stages = [self[r] for r in readers]
        if not reader_stages:
            raise ScheduleError(f"stage {source.name}: cache_read needs at least one reader")
        for r in reader_stages:
            if not any(t.op is source.op for t in r.op.input_tensors):
                raise ScheduleError(f"stage {r.name}: cache_read: it does not read {source.name}")
        cache = compute(
            source.op.shape, _copy_rule(source.op.output(0)), name=f"{source.name}.{scope}"
        )
        cache_stage = Stage(cache.op, self, is_output=False)
        cache_stage.scope = scope
        self.stages.insert(self.stages.index(source) + 1, cache_stage)
        self._replace_dataflow({}, only={r: {source.op: cache.op} for r in reader_stages})
        return cache

    def cache_write(self, tensor: Tensor, scope: str) -> Tensor:
        """Compute `tensor` into a new stage in `scope`; the original stage copies it out.
        Must be used before any other primitive on that stage."""
        stage = self[tensor]
        stage._require_compute("cache_write")
        if num_outputs(stage.op) > 1:
            raise stage._error("cache_write of an operation with several outputs is not supported")
        if stage.relations or stage.loop_kinds or stage.pragmas:
            raise stage._error("cache_write must come before other primitives on the stage")
        op = stage.op
        new_axis = tuple(IterVar(Var(iv.name), iv.dom, iv.kind) for iv in op.axis)
        mapping = {old.var: new.var for old, new in zip(op.axis, new_axis)}
        body = op.body
        if isinstance(body, Reduce):
            new_raxis = tuple(IterVar(Var(iv.name), iv.dom, iv.kind) for iv in body.axis)
            mapping.update({old.var: new.var for old, new in zip(body.axis, new_raxis)})
            body = Reduce(
                body.combiner,
                substitute(body.source, mapping),
                new_raxis,
                substitute(body.condition, mapping),
                body.init,
            )
        else:
            body = substitute(body, mapping)
        cache_op = ComputeOp(f"{op.name}.{scope}", new_axis, body, op.tag, op.attrs)
        cache_stage = Stage(cache_op, self, is_output=False)
        cache_stage.scope = scope
        self.stages.insert(self.stages.index(stage), cache_stage)
        copy_op = op.with_body(ProducerLoad(cache_op.output(0), tuple(iv.var for iv in op.axis)))
        self.replace_op(stage, copy_op)
        return cache_op.output(0)

    def rfactor(self, tensor: Tensor, axis: IterVar, factor_axis: int = 0) -> Tensor:
        """Factor the reduction computing `tensor` over its reduction loop `axis` (TVM's
        rfactor): a new stage (returned) computes partial results with `axis` a data-parallel
        axis at position `factor_axis`, reducing over the stage's other reduction loops; the
        stage then combines the partial results over a new reduction axis `<axis>.v`. The
        stage keeps its data-parallel loops (splits, fuses, annotations) and loses its
        reduction loops; the new stage starts unscheduled. A float sum is reassociated."""
        if not isinstance(tensor, Tensor):
            raise TypeError(f"rfactor: tensor must be a te.Tensor, got {tensor!r}")
        try:
            stage = self[tensor]
        except ScheduleError:
            raise ScheduleError(
                f"rfactor: tensor {tensor.name} is not a stage of this schedule "
                f"(stages: {[s.name for s in self.stages]})"
            ) from None
        stage._require_compute("rfactor")
        op = stage.op
        if not isinstance(op.body, Reduce):
            raise stage._error(f"rfactor: tensor {tensor.name} is not computed by a reduction")
        if stage.tensorized is not None:
            raise stage._error("rfactor: the stage is tensorized; rfactor before tensorize")
        if not isinstance(axis, IterVar):
            raise TypeError(f"stage {stage.name}: rfactor: axis must be an IterVar, got {axis!r}")
        if axis in stage.rfactored:
            raise stage._error(
                f"rfactor: axis {axis.name} was already factored out into stage "
                f"{stage.rfactored[axis].name}; its reduction loops are "
                f"{[v.name for v in stage.leaf_iter_vars if v.is_reduce]}"
            )
        stage._check_leaf(axis, "rfactor")
        if not axis.is_reduce:
            raise stage._error(
                f"rfactor: axis {axis.name} is not a reduction axis; the stage's reduction "
                f"loops are {[v.name for v in stage.leaf_iter_vars if v.is_reduce]}"
            )
        ndim = len(op.axis)
        if isinstance(factor_axis, bool) or not isinstance(factor_axis, int):
            raise TypeError(f"stage {stage.name}: rfactor: factor_axis must be an int")
        if not -(ndim + 1) <= factor_axis <= ndim:
            raise stage._error(
                f"rfactor: factor_axis {factor_axis} is out of range for {ndim + 1} axes "
                f"(-{ndim + 1}..{ndim})"
            )
        position = factor_axis if factor_axis >= 0 else ndim + 1 + factor_axis
        reduce_loops = [v for v in stage.all_iter_vars if v.is_reduce]
        for child in self.stages:
            if child.attach_stage is stage and child.attach_ivar in reduce_loops:
                raise stage._error(
                    f"rfactor: stage {child.name} is computed at reduction loop "
                    f"{child.attach_ivar.name}, which rfactor moves to another stage"
                )
        rf_op, new_op = factor_ops(op, stage.relations, stage.leaf_iter_vars, axis, position)
        rf_stage = Stage(rf_op, self, is_output=False)
        self.stages.insert(self.stages.index(stage), rf_stage)
        combined = new_op.reduce_axis[0]
        stage.op = new_op
        stage.relations = [r for r in stage.relations if r not in _reduce_relations(stage)]
        stage.all_iter_vars = [v for v in stage.all_iter_vars if not v.is_reduce] + [combined]
        stage.leaf_iter_vars = [v for v in stage.leaf_iter_vars if not v.is_reduce] + [combined]
        stage.loop_kinds = {v: k for v, k in stage.loop_kinds.items() if not v.is_reduce}
        stage.pragmas = {v: p for v, p in stage._pragmas.items() if not v.is_reduce}
        stage.rfactored.update(dict.fromkeys(reduce_loops, rf_stage))
        if stage.is_output:
            self.outputs = [new_op if o is op else o for o in self.outputs]
        self._replace_dataflow({op: new_op})
        return rf_op.output(0)


def _copy_rule(src: Tensor):
    def rule(*ax):  # index names ax0, ax1, ... as in TVM
        return src(*ax)

    return rule


def _reduce_relations(stage: Stage) -> list[Split | Fuse | Singleton]:
    return [r for r in stage.relations if is_reduce_relation(r)]


def create_schedule(ops: Operation | Sequence[Operation] | Tensor) -> Schedule:
    """A schedule for computing `ops` (an operation, a tensor, or a list of them)."""
    if isinstance(ops, Operation | Tensor):
        ops = [ops]
    out = []
    for o in ops:
        o = o.op if isinstance(o, Tensor) else o
        if not isinstance(o, Operation):
            raise TypeError(f"create_schedule takes operations or tensors, got {o!r}")
        if isinstance(o, PlaceholderOp):
            raise ScheduleError(f"stage {o.name}: a placeholder cannot be an output")
        out.append(o)
    return Schedule(out)


# TVM's te.schedule.InferBound / ScheduleOps, imported on first use: they lower schedules, and
# lowering imports this module.
__getattr__, __dir__ = lazy_attributes(
    __name__,
    globals(),
    {
        "InferBound": ("loom.te.schedule_ops", "InferBound"),
        "ScheduleOps": ("loom.te.schedule_ops", "ScheduleOps"),
    },
)

__all__ = [
    "AttachType",
    "Fuse",
    "Range",
    "Schedule",
    "Singleton",
    "Split",
    "Stage",
    "create_schedule",
]
