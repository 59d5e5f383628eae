"""Tensorize: replace a loop nest by a hardware intrinsic that computes the same thing.

A `TensorIntrin` declares what the instruction computes as a small tensor expression over
placeholders (its semantics), and how a matched region lowers (`lower(call)` returning the
statements: `body` for a plain computation, `reset` and `update` for a reduction).
`s[C].tensorize(axis, intrin)` replaces the loop `axis` and every loop inside it. Lowering
checks the match and names what differs: the number, kinds and extents of the loops, the
structure of the computation (operations, dtypes, the reduction), and how each tensor is
indexed (which loops it varies with, its innermost dimension contiguous). Tiles cut short by a
split that does not divide become extents smaller than the declared ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from loom.errors import ScheduleError
from loom.ir import op as irop
from loom.ir.bound import IntBound
from loom.ir.buffer import Buffer
from loom.ir.expr import LT, FloatImm, IntImm, PrimExpr, StringImm, Var
from loom.ir.printer import to_text
from loom.ir.simplify import simplify
from loom.ir.stmt import Stmt
from loom.ir.visitor import children, free_vars, post_order_visit, substitute
from loom.te.tensor import ComputeOp, IterVar, ProducerLoad, Reduce, Tensor


@dataclasses.dataclass(frozen=True)
class Region:
    """Where an operand of a tensorized region lies: its buffer, the element offset of the
    region's origin, and the element stride of each intrinsic axis it varies with."""

    buffer: Buffer
    offset: PrimExpr
    strides: dict[str, int]


@dataclasses.dataclass(frozen=True)
class TensorizeCall:
    """A matched region: operands by placeholder name, the output, and each intrinsic axis's
    extent for this region (smaller than declared at the edge of a tensor)."""

    intrin: TensorIntrin
    inputs: dict[str, Region]
    output: Region
    extents: dict[str, PrimExpr]


@dataclasses.dataclass(frozen=True, eq=False)
class TensorIntrin:
    """`compute`: the intrinsic's semantics (a te.compute over te.placeholders);
    `lower(call) -> dict`: the statements for a matched region: {"body": ...} or
    {"reset": ..., "update": ...} for a reduction."""

    name: str
    compute: Tensor
    lower: Callable[[TensorizeCall], dict[str, Stmt]]

    @property
    def op(self) -> ComputeOp:
        return self.compute.op

    @property
    def axes(self) -> tuple[IterVar, ...]:
        return self.op.axis + self.op.reduce_axis


def decl_tensor_intrin(
    compute: Tensor, lower: Callable[[TensorizeCall], dict[str, Stmt]], name: str | None = None
) -> TensorIntrin:
    """Declare an intrinsic (TVM's te.decl_tensor_intrin)."""
    if not isinstance(compute, Tensor) or not isinstance(compute.op, ComputeOp):
        raise TypeError(
            "decl_tensor_intrin takes the te.compute tensor that states what the intrinsic computes"
        )
    return TensorIntrin(name or compute.name, compute, lower)


# -- matching ------------------------------------------------------------------------------------
class _Matcher:
    """Checks one stage against one intrinsic; every mismatch is a ScheduleError."""

    def __init__(self, stage, intrin: TensorIntrin, where: str):
        self.stage = stage
        self.intrin = intrin
        self.where = where
        self.tensors: dict[Tensor, Tensor] = {}  # stage tensor -> intrinsic placeholder

    def fail(self, what: str) -> ScheduleError:
        return ScheduleError(f"{self.where}: {what}")

    def loops(self, inner: list[IterVar], extents: dict[IterVar, int]) -> dict[IterVar, IterVar]:
        """Pair the stage's loops inside the tensorize axis with the intrinsic's axes."""
        axes = self.intrin.axes
        if len(inner) != len(axes):
            raise self.fail(
                f"{len(inner)} loops from the tensorize axis inward "
                f"{[v.name for v in inner]}, the intrinsic has {len(axes)} axes "
                f"{[a.name for a in axes]}"
            )
        pairs = {}
        for leaf, axis in zip(inner, axes):
            if leaf.is_reduce != axis.is_reduce:
                kind = "a reduction" if leaf.is_reduce else "a data-parallel"
                raise self.fail(
                    f"loop {leaf.name} is {kind} axis but the intrinsic's {axis.name} is not"
                )
            declared = axis.dom.extent.value
            if extents[leaf] > declared:  # a shorter loop is a partial tile
                raise self.fail(
                    f"loop {leaf.name} has extent {extents[leaf]}, more than the intrinsic's "
                    f"axis {axis.name} ({declared})"
                )
            pairs[leaf] = axis
        return pairs

    def body(self, stage_body: PrimExpr) -> None:
        ibody = self.intrin.op.body
        if isinstance(stage_body, Reduce) != isinstance(ibody, Reduce):
            raise self.fail("the stage and the intrinsic must both be reductions or both not")
        if isinstance(ibody, Reduce):
            if stage_body.combiner.name != ibody.combiner.name:
                raise self.fail(
                    f"the stage reduces with {stage_body.combiner.name}, the "
                    f"intrinsic with {ibody.combiner.name}"
                )
            for e in (stage_body.condition, ibody.condition):
                if not (isinstance(e, IntImm) and e.value):
                    raise self.fail("reductions with a where= condition cannot be tensorized")
            self.same(stage_body.source, ibody.source)
            if (stage_body.init is None) != (ibody.init is None):
                raise self.fail("the stage and the intrinsic differ in their reduction's init")
            if ibody.init is not None:
                self.same(stage_body.init, ibody.init)
        else:
            self.same(stage_body, ibody)
        if stage_body.dtype != ibody.dtype:
            raise self.fail(f"the stage computes {stage_body.dtype}, the intrinsic {ibody.dtype}")

    def same(self, a: PrimExpr, b: PrimExpr) -> None:
        """Same operations and dtypes; loads map stage tensors to the intrinsic's placeholders
        (their indices are checked as access patterns, later)."""

        if isinstance(a, ProducerLoad) and isinstance(b, ProducerLoad):
            seen = self.tensors.setdefault(a.tensor, b.tensor)
            if seen != b.tensor or a.tensor.dtype != b.tensor.dtype:
                raise self.fail(
                    f"the stage reads {a.tensor.name} ({a.tensor.dtype}) where the "
                    f"intrinsic reads {b.tensor.name} ({b.tensor.dtype})"
                )
            return
        if type(a) is not type(b) or a.dtype != b.dtype:
            raise self.fail(
                f"the stage computes {to_text(a)} ({a.dtype}) where the intrinsic "
                f"computes {to_text(b)} ({b.dtype})"
            )
        if isinstance(a, IntImm | FloatImm | StringImm):
            if a != b:
                raise self.fail(f"constant {to_text(a)} differs from the intrinsic's {to_text(b)}")
            return

        ca, cb = children(a), children(b)
        if len(ca) != len(cb) or getattr(a, "op", None) != getattr(b, "op", None):
            raise self.fail(
                f"the stage computes {to_text(a)} where the intrinsic computes {to_text(b)}"
            )
        for x, y in zip(ca, cb):
            self.same(x, y)


def _affine(
    index: PrimExpr, variables: list[Var], bounds: Mapping[Var, IntBound] | None = None
) -> tuple[PrimExpr, list[PrimExpr], list[Var]]:
    """(offset, coefficient of each variable, the variables `index` is not affine in) of
    `index`; `bounds` (the ranges of the loops around and inside the region) let
    floordiv/floormod by a tile size reduce."""
    zero = {v: IntImm(0, v.dtype) for v in variables}
    offset = simplify(substitute(index, zero), bounds)
    coefs = [
        simplify(substitute(index, {**zero, v: IntImm(1, v.dtype)}) - offset, bounds)
        for v in variables
    ]
    rebuilt = offset
    for v, c in zip(variables, coefs):
        rebuilt = rebuilt + v * c
    if simplify(index - rebuilt, bounds) == IntImm(0, index.dtype):
        return offset, coefs, []
    # e.g. floordiv(k, 2): the variables whose own step is not constant, the others held
    not_affine = []
    for v in variables:
        at0 = substitute(index, {v: IntImm(0, v.dtype)})
        step = substitute(index, {v: IntImm(1, v.dtype)}) - at0
        if simplify(index - (at0 + v * step), bounds) != IntImm(0, index.dtype):
            not_affine.append(v)
    return offset, coefs, not_affine or list(variables)


def _intrinsic_pattern(load: ProducerLoad, axes: tuple[IterVar, ...]) -> dict[str, int]:
    """Element strides of a placeholder access in the intrinsic, per axis it varies with."""
    t = load.tensor
    strides, acc = [], 1
    for extent in reversed(t.shape):
        strides.append(acc)
        acc *= extent
    strides.reverse()
    flat = IntImm(0)
    for index, stride in zip(load.indices, strides):
        flat = flat + index * stride
    _, coefs, not_affine = _affine(flat, [a.var for a in axes])
    out = {}
    for axis, c in zip(axes, coefs):
        if not isinstance(c, IntImm) or axis.var in not_affine:
            raise ScheduleError(f"intrinsic: the index of {t.name} is not affine in {axis.name}")
        if c.value:
            out[axis.name] = c.value
    return out


def match_region(
    stage,
    intrin: TensorIntrin,
    inner: list[IterVar],
    extents: dict[IterVar, int],
    stage_body: PrimExpr,
    flat_access: Callable[[ProducerLoad | None], tuple],
    guards: list[PrimExpr],
    outer_bounds: Mapping[Var, IntBound] | None = None,
) -> TensorizeCall:
    """The TensorizeCall of a stage's region, or a ScheduleError naming what does not match.

    `flat_access(load)` gives (buffer, flattened index in the leaf loop variables) of a read of
    the stage's body (None: the stage's own output); `guards` are the conditions of the nest;
    `outer_bounds` the ranges of the loops around the region.
    """
    where = f"stage {stage.name}: tensorize with {intrin.name}"
    m = _Matcher(stage, intrin, where)
    pairs = m.loops(inner, extents)
    m.body(stage_body)
    variables = [leaf.var for leaf in inner]
    names = [pairs[leaf].name for leaf in inner]
    ranges = {**(outer_bounds or {}), **{v.var: IntBound(0, extents[v] - 1) for v in inner}}

    def region(load: ProducerLoad | None, ipattern: dict[str, int], what: str) -> Region:
        buf, index = flat_access(load)
        offset, coefs, not_affine = _affine(index, variables, ranges)
        if not_affine:
            loops = ", ".join(names[variables.index(v)] for v in not_affine)
            raise m.fail(f"{what} (index {to_text(index)}) is not indexed affinely by loop {loops}")
        strides = {}
        for name, c in zip(names, coefs):
            if not isinstance(c, IntImm):
                raise m.fail(f"{what} is not indexed affinely by loop {name}")
            if c.value:
                strides[name] = c.value
        if set(strides) != set(ipattern):
            raise m.fail(
                f"{what} varies with {sorted(strides)}, the intrinsic's operand with "
                f"{sorted(ipattern)}"
            )
        contiguous = [n for n, s in ipattern.items() if s == 1]
        for n in contiguous:
            if strides[n] != 1:
                raise m.fail(
                    f"{what} is not contiguous along {n} (stride {strides[n]}), as the "
                    "intrinsic needs"
                )
        return Region(buf, offset, strides)

    loads: list[ProducerLoad] = []
    post_order_visit(stage_body, lambda n: loads.append(n) if isinstance(n, ProducerLoad) else None)
    iloads: dict[Tensor, ProducerLoad] = {}
    post_order_visit(
        intrin.op.body,
        lambda n: iloads.setdefault(n.tensor, n) if isinstance(n, ProducerLoad) else None,
    )
    axes = intrin.axes
    inputs = {}
    for load in loads:
        placeholder = m.tensors[load.tensor]
        pattern = _intrinsic_pattern(iloads[placeholder], axes)
        got = region(load, pattern, f"{load.tensor.name} (the intrinsic's {placeholder.name})")
        if placeholder.name in inputs and inputs[placeholder.name] != got:
            raise m.fail(f"{load.tensor.name} is read at two different places")
        inputs[placeholder.name] = got
    out_pattern = _intrinsic_pattern(
        ProducerLoad(intrin.compute, tuple(a.var for a in intrin.op.axis)), axes
    )
    output = region(None, out_pattern, f"the output {stage.name}")
    return TensorizeCall(intrin, inputs, output, _extents(m, inner, extents, pairs, guards))


def _extents(
    m: _Matcher,
    inner: list[IterVar],
    loop_extents: dict[IterVar, int],
    pairs: dict[IterVar, IterVar],
    guards: list[PrimExpr],
) -> dict[str, PrimExpr]:
    """Each axis's extent in this region: its loop's (at most the declared one), cut by a
    guard `e < bound` that varies with that loop only (a tile at the edge of the tensor)."""
    extents = {pairs[leaf].name: IntImm(loop_extents[leaf]) for leaf in inner}
    by_var = {leaf.var: leaf for leaf in inner}
    for g in guards:
        for cond in irop.conjuncts(g):
            used = [v for v in free_vars(cond) if v in by_var]
            if not used:
                continue
            if len(used) != 1 or not isinstance(cond, LT):
                raise m.fail(f"the guard {cond} cannot be expressed as a tile size")
            v = used[0]
            lhs_at_zero = simplify(substitute(cond.a, {v: IntImm(0, v.dtype)}))
            coef = simplify(substitute(cond.a, {v: IntImm(1, v.dtype)}) - lhs_at_zero)
            if not (isinstance(coef, IntImm) and coef.value == 1):
                raise m.fail(f"the guard {cond} cannot be expressed as a tile size")
            name = pairs[by_var[v]].name
            extents[name] = simplify(irop.min_(extents[name], cond.b - lhs_at_zero))
    return extents
