"""Tensorize: replace a loop nest by a hardware intrinsic that computes the same thing.

A `TensorIntrin` declares what the instruction computes as a small tensor expression over
placeholders (its semantics), and how a matched region lowers (`lower(call)` returning the
statements: `body` for a plain computation, `reset` and `update` for a reduction).
`s[C].tensorize(axis, intrin)` replaces the loop `axis` and every loop inside it. Lowering
checks the match and names what differs: the number, kinds and extents of the loops, the
structure of the computation (operations, dtypes, the reduction), and how each tensor is
indexed (which loops it varies with, its innermost dimension contiguous). Tiles cut short by a
split that does not divide become extents smaller than the declared ones.

`decl_tensor_intrin` also takes TVM's form, `fcompute(ins, outs)` over declared buffers
(`tir.decl_buffer`): lowering binds each buffer to its region as TVM does (data, element
offset checked against its offset_factor, strides, shape) and rewrites the statements
fcompute returned onto the region's buffer (the end of this file).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from loom.errors import ScheduleError
from loom.ir import op as irop
from loom.ir.bound import IntBound
from loom.ir.buffer import Buffer
from loom.ir.expr import LT, FloatImm, IntImm, PrimExpr, StringImm, Var
from loom.ir.offset_buffer import OffsetBuffer, decl_offset_buffer, lower_offset_buffers
from loom.ir.printer import to_text
from loom.ir.simplify import simplify
from loom.ir.stmt import NOP, AssertStmt, Evaluate, IfThenElse, Stmt
from loom.ir.visitor import children, free_vars, post_order_visit, substitute
from loom.te.tensor import (
    ComputeOp,
    IterVar,
    PlaceholderOp,
    ProducerLoad,
    Reduce,
    Tensor,
    as_int,
)


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
    # the variables of the stage's reduction loops outside the region (loops from 0): when
    # there are any, the intrinsic computes part of the reduction (reset and update run apart)
    outer_reduce_vars: tuple[Var, ...] = ()


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
    compute,
    lower: Callable,
    name: str | None = None,
    binds: Mapping[Tensor, Buffer] | None = None,
    scalar_params=None,
    default_buffer_params: Mapping | None = None,
) -> TensorIntrin:
    """Declare an intrinsic, in loom's form or TVM's.

    loom's form: `compute` is the te.compute tensor of what the intrinsic computes and
    `lower(call)` makes its statements from a `TensorizeCall`. TVM's form
    (`te.decl_tensor_intrin(op, fcompute, name, binds, ...)`): `compute` is the ComputeOp and
    `fcompute(ins, outs)` receives a buffer per input and output (`binds[tensor]`, or one
    declared with `default_buffer_params`) and returns a statement, or (body, reset, update)
    for a reduction; each buffer is bound to the region it covers (its data, element offset
    and strides become the region's: see `_bind`)."""
    if isinstance(compute, ComputeOp):
        if scalar_params:
            raise TypeError(
                "decl_tensor_intrin: scalar_params are not supported (loom's intrinsics take "
                "no scalar arguments at tensorize time)"
            )
        return _decl_tvm_form(compute, lower, name, binds or {}, default_buffer_params or {})
    if not isinstance(compute, Tensor) or not isinstance(compute.op, ComputeOp):
        raise TypeError(
            "decl_tensor_intrin takes the te.compute tensor that states what the intrinsic "
            f"computes (or, as in TVM, its op), got {compute!r}"
        )
    if binds or scalar_params or default_buffer_params:
        raise TypeError(
            "decl_tensor_intrin: binds, scalar_params and default_buffer_params go with TVM's "
            "form, decl_tensor_intrin(tensor.op, fcompute, ...)"
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
    outer = stage.leaf_iter_vars[: len(stage.leaf_iter_vars) - len(inner)]
    return TensorizeCall(
        intrin,
        inputs,
        output,
        _extents(m, inner, extents, pairs, guards),
        tuple(iv.var for iv in outer if iv.is_reduce),
    )


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


# -- TVM's form: fcompute(ins, outs) over buffers bound to the regions ---------------------------
def _decl_tvm_form(
    compute_op: ComputeOp,
    fcompute: Callable,
    name: str | None,
    binds: Mapping[Tensor, Buffer],
    default_buffer_params: Mapping,
) -> TensorIntrin:
    name = name or compute_op.name
    inputs = compute_op.input_tensors
    for t in inputs:
        if not isinstance(t.op, PlaceholderOp):
            raise ValueError(
                f"decl_tensor_intrin {name}: input {t.name} is computed; the intrinsic's "
                "inputs must be te.placeholders"
            )
    output = compute_op.output(0)
    tensors = [*inputs, output]
    for t, buf in binds.items():
        if t not in tensors:
            raise ValueError(
                f"decl_tensor_intrin {name}: binds names {t!r}, which is not an input or the "
                f"output of {compute_op.name} ({[x.name for x in tensors]})"
            )
        if not isinstance(buf, Buffer):
            raise TypeError(f"decl_tensor_intrin {name}: binds[{t.name}] must be a Buffer")
        declared = [_constant(n) for n in buf.shape]
        if (
            buf.dtype != t.dtype
            or len(declared) != len(t.shape)
            or any(n is not None and n != as_int(e) for n, e in zip(declared, t.shape))
        ):
            raise ValueError(
                f"decl_tensor_intrin {name}: buffer {buf.name} ({buf.dtype}, shape "
                f"{[to_text(n) for n in buf.shape]}) bound to {t.name} ({t.dtype}, shape "
                f"{list(t.shape)})"
            )
    buffers = [
        binds[t]
        if t in binds
        else decl_offset_buffer(t.shape, t.dtype, t.op.name, **default_buffer_params)
        for t in tensors
    ]
    stmts = _statements(name, fcompute(buffers[:-1], buffers[-1:]))
    is_reduce = isinstance(compute_op.body, Reduce)
    if not is_reduce and stmts["body"] is None:
        raise ValueError(f"decl_tensor_intrin {name}: fcompute returned no body")
    if is_reduce and stmts["body"] is None and stmts["update"] is None:
        raise ValueError(f"decl_tensor_intrin {name}: fcompute returned no body and no update")
    operands = dict(zip([t.name for t in inputs] + [None], zip(tensors, buffers)))
    return TensorIntrin(name, output, lambda call: _lower_tvm_form(call, operands, stmts))


def _statements(name: str, result) -> dict[str, Stmt | None]:
    """body, reset and update from what fcompute returned (an expression is evaluated)."""
    parts = list(result) if isinstance(result, tuple | list) else [result]
    if not 1 <= len(parts) <= 3:
        raise TypeError(
            f"decl_tensor_intrin {name}: fcompute returns a statement or (body, reset, update), "
            f"got {len(parts)} values"
        )
    out: list[Stmt | None] = []
    for part in parts:
        if isinstance(part, PrimExpr):
            part = Evaluate(part)
        if part is not None and not isinstance(part, Stmt):
            raise TypeError(
                f"decl_tensor_intrin {name}: fcompute returned {part!r}, not a statement"
            )
        out.append(part)
    out += [None] * (3 - len(out))
    return dict(zip(("body", "reset", "update"), out))


def _lower_tvm_form(
    call: TensorizeCall,
    operands: dict[str | None, tuple[Tensor, Buffer]],
    stmts: dict[str, Stmt | None],
) -> dict[str, Stmt]:
    intrin = call.intrin
    where = f"tensorize with {intrin.name}"
    for axis in intrin.axes:
        got = call.extents[axis.name]
        if _constant(got) != axis.dom.extent.value:
            raise ScheduleError(
                f"{where}: axis {axis.name} has extent {to_text(got)} in a region at the edge of "
                f"the tensor, the intrinsic's buffers {axis.dom.extent.value} (TVM's form takes "
                "whole tiles: split by a factor that divides the extent)"
            )
    binding = _Binding()
    accesses = _placeholder_accesses(intrin)
    for key, (tensor, buf) in operands.items():
        region = call.output if key is None else call.inputs[key]
        strides = _region_strides(where, tensor, accesses[tensor], region, intrin.axes)
        _bind(where, buf, tensor, region, strides, binding)

    def lowered(stmt: Stmt) -> Stmt:
        stmt = lower_offset_buffers(stmt, binding.values, binding.storage)
        for cond, message in reversed(binding.checks):
            stmt = AssertStmt(cond, message, stmt)
        return stmt

    if not isinstance(intrin.op.body, Reduce):
        return {"body": lowered(stmts["body"])}
    body, reset, update = (stmts[k] for k in ("body", "reset", "update"))
    if not call.outer_reduce_vars and body is not None:
        # the whole reduction is inside: TVM runs the body alone (lowering runs reset, update)
        return {"reset": NOP, "update": lowered(body)}
    if update is None:
        raise ScheduleError(
            f"{where}: a reduction loop lies outside the tensorized region, so the intrinsic "
            "needs an update statement: fcompute returned no (body, reset, update)"
        )
    if reset is not None:
        return {"reset": lowered(reset), "update": lowered(update)}
    if body is None:
        raise ScheduleError(
            f"{where}: fcompute returned no reset and no body to start the reduction with"
        )
    # as TVM: without a reset, the body (which starts the sum) runs in the first iteration of
    # the reduction loops outside, the update in the others
    first = irop.all_(*(irop.equal(v, 0) for v in call.outer_reduce_vars))
    return {"reset": NOP, "update": IfThenElse(first, lowered(body), lowered(update))}


def _placeholder_accesses(intrin: TensorIntrin) -> dict[Tensor, tuple[PrimExpr, ...]]:
    """How the intrinsic indexes each tensor (its output by its axes)."""
    found = {intrin.compute: tuple(a.var for a in intrin.op.axis)}

    def record(n) -> None:
        if isinstance(n, ProducerLoad):
            found.setdefault(n.tensor, n.indices)

    post_order_visit(intrin.op.body, record)
    return found


def _region_strides(
    where: str,
    tensor: Tensor,
    indices: tuple[PrimExpr, ...],
    region: Region,
    axes: tuple[IterVar, ...],
) -> list[int]:
    """The element stride of each dimension of `tensor` in the region: a dimension indexed
    `c * axis + ...` moves by the region's stride of `axis` divided by c; a dimension the
    intrinsic indexes by no axis (extent 1) gets the compact stride."""
    variables = [a.var for a in axes]
    coefs = [_affine(index, variables)[1] for index in indices]
    strides: list[int | None] = []
    for row in coefs:
        stride = None
        for axis, c in zip(axes, row):
            if isinstance(c, IntImm) and c.value:
                got = region.strides.get(axis.name, 0)
                if got % c.value:
                    raise ScheduleError(
                        f"{where}: {tensor.name} moves {got} elements along {axis.name}, not a "
                        f"multiple of the intrinsic's {c.value}"
                    )
                stride = got // c.value
                break
        strides.append(stride)
    inner = 1
    for d in reversed(range(len(strides))):
        if strides[d] is None:
            strides[d] = inner
        inner = strides[d] * as_int(tensor.shape[d])
    for axis, column in zip(axes, zip(*coefs) if coefs else ()):
        moved = sum(c.value * s for c, s in zip(column, strides) if isinstance(c, IntImm))
        if moved != region.strides.get(axis.name, 0):
            raise ScheduleError(
                f"{where}: the region of {tensor.name} is not a strided view of its buffer "
                f"along {axis.name}"
            )
    return strides


def _constant(e: PrimExpr) -> int | None:
    e = simplify(e)
    return e.value if isinstance(e, IntImm) else None


def _bind(
    where: str,
    buf: Buffer,
    tensor: Tensor,
    region: Region,
    strides: list[int],
    binding: _Binding,
) -> None:
    """Bind the declared buffer `buf` of `tensor` to `region`, as TVM's buffer binding does:
    its data to the region's buffer, its shape to the tensor's, its element offset (a
    variable, checked against offset_factor, or a constant that must be the region's) and its
    strides (variables, or constants that must be the region's; none declared: the region
    must be compact)."""
    if buf.scope != region.buffer.scope:
        raise ScheduleError(
            f"{where}: buffer {buf.name} is declared in scope {buf.scope!r}, the region is in "
            f"{region.buffer.scope!r}"
        )
    binding.storage[buf.data] = region.buffer
    for declared, extent in zip(buf.shape, tensor.shape):
        binding.bind(where, declared, extent, f"the extent of {buf.name}")
    _bind_offset(where, buf, simplify(region.offset), binding)
    if buf.strides:
        for d, (declared, got) in enumerate(zip(buf.strides, strides)):
            binding.bind(where, declared, got, f"stride {d} of {buf.name}")
        return
    compact = [_constant(s) for s in buf.element_strides()]
    extents = [_constant(n) for n in buf.shape]
    if any(a != b for a, b, n in zip(strides, compact, extents) if n != 1):
        raise ScheduleError(
            f"{where}: buffer {buf.name} is declared compact (strides {compact}), the region's "
            f"strides are {strides}: declare its strides (te.var for a stride that varies)"
        )


def _bind_offset(where: str, buf: Buffer, offset: PrimExpr, binding: _Binding) -> None:
    declared = buf.elem_offset if isinstance(buf, OffsetBuffer) else IntImm(0)
    if not isinstance(declared, Var):
        if _constant(offset - declared) != 0:
            raise ScheduleError(
                f"{where}: buffer {buf.name} is declared at element offset {to_text(declared)}, "
                f"the region starts at {to_text(offset)}: declare it with offset_factor (a "
                "variable offset) to bind it to a region inside a larger buffer"
            )
        return
    binding.values[declared] = offset
    factor = buf.offset_factor
    if factor <= 1:
        return
    rest = simplify(irop.floormod(offset, factor))
    if not isinstance(rest, IntImm):  # decided when the program runs, as in TVM
        binding.checks.append(
            (
                irop.equal(rest, 0),
                f"{where}: the element offset of {buf.name} is not a multiple of its "
                f"offset_factor {factor}",
            )
        )
    elif rest.value:
        raise ScheduleError(
            f"{where}: buffer {buf.name} needs an element offset that is a multiple of its "
            f"offset_factor {factor}, the region starts at {to_text(offset)}"
        )


@dataclasses.dataclass
class _Binding:
    """What binding an intrinsic's buffers to a region gives: values of their variables
    (offsets, strides, extents), the region's buffer for each one's data, and the checks left
    for run time."""

    values: dict[Var, PrimExpr] = dataclasses.field(default_factory=dict)
    storage: dict[Var, Buffer] = dataclasses.field(default_factory=dict)
    checks: list[tuple[PrimExpr, str]] = dataclasses.field(default_factory=list)

    def bind(self, where: str, declared: PrimExpr, got: int, what: str) -> None:
        """A declared variable takes the value `got` (the same everywhere it occurs); a
        declared constant must be it."""
        if isinstance(declared, Var):
            value = IntImm(got, declared.dtype)
            if _constant(self.values.setdefault(declared, value)) != got:
                raise ScheduleError(
                    f"{where}: variable {declared.name} ({what}) is bound to "
                    f"{to_text(self.values[declared])} and {got}"
                )
        elif _constant(declared) != got:
            raise ScheduleError(
                f"{where}: {what} is declared {to_text(declared)}, the region's is {got}"
            )
