"""lower_pragmas: loop nests under a pragma with a registered rule become one extern call.

Afterwards no `pragma_<name>` with a registered rule is left: its copy nest was checked to be
`dst[...] = src[...]` with affine indices, described as at most `rule.max_dims` dimensions
(contiguous dimensions merged), and replaced by the rule's call, whose status is checked.
Pragmas without a rule stay as hints for other passes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from loom import abi, memory
from loom.abi.dtype import dtype
from loom.errors import LoomError
from loom.ir import op
from loom.ir.buffer import Buffer
from loom.ir.expr import LT, BufferLoad, Call, IntImm, PrimExpr, Ramp, Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.printer import to_text
from loom.ir.simplify import simplify
from loom.ir.stmt import NOP, AssertStmt, AttrStmt, BufferStore, Evaluate, For, IfThenElse, Stmt
from loom.ir.stmt import seq as seq_stmt
from loom.ir.visitor import Mutator, free_vars, substitute
from loom.memory.pragma import PragmaRule, get_pragma_rule
from loom.transform.lower_memory import target_of
from loom.transform.pass_infra import Pass, register_pass


@dataclasses.dataclass
class CopyNest:
    """A copy `dst[dst_offset + sum(i*ds)] = src[src_offset + sum(i*ss)]` over dims (extent,
    src stride, dst stride) in elements, outermost first, contiguous dimensions merged."""

    src: Buffer
    dst: Buffer
    src_offset: PrimExpr
    dst_offset: PrimExpr
    dims: list[tuple[PrimExpr, int, int]]
    params: dict = dataclasses.field(default_factory=dict)  # what the rule's convert found

    @property
    def elem_bytes(self) -> int:
        return self.src.dtype.itemsize

    def src_address(self) -> PrimExpr:
        return op.call_intrin("handle", "address_of", self.src.load([self.src_offset]))

    def dst_address(self) -> PrimExpr:
        return op.call_intrin("handle", "address_of", self.dst.load([self.dst_offset]))

    def as_rows(self) -> tuple[int, int, int, int]:
        """(rows, row_bytes, src_stride_bytes, dst_stride_bytes) of a 1- or 2-d copy."""
        b = self.elem_bytes
        if not self.dims:
            return 1, b, b, b
        if len(self.dims) == 1:
            n, ss, ds = self.dims[0]
            return (1, n * b, n * b, n * b) if ss == ds == 1 else (n, b, ss * b, ds * b)
        (rows, ss, ds), (cols, s1, d1) = self.dims
        if s1 != 1 or d1 != 1:
            raise LoomError("the inner dimension of the copy is not contiguous")
        return rows, cols * b, ss * b, ds * b


def analyze_copy(
    body: Stmt,
    where: str,
    convert: Callable[[PrimExpr], tuple[BufferLoad, dict] | None] | None = None,
) -> CopyNest:
    """The copy a pragma'd loop nest performs: `dst[...] = src[...]` (or `= f(src[...])` when
    `convert` recognizes f), under guards `i < bound` that shorten a loop (a tile at the edge
    of a tensor); a clear error for anything else."""
    loops: list[For] = []
    guards: list[PrimExpr] = []
    s = body
    while isinstance(s, For | AttrStmt | IfThenElse):
        if isinstance(s, For):
            if not isinstance(s.extent, IntImm):
                raise LoomError(f"{where}: loop {s.loop_var.name} has a non-constant extent")
            loops.append(s)
        elif isinstance(s, IfThenElse):
            if s.else_case is not None:
                raise LoomError(f"{where}: the copy nest has an if/else")
            guards.append(s.condition)
            s = s.then_case
            continue
        s = s.body
    if not isinstance(s, BufferStore):
        raise LoomError(
            f"{where}: the loop nest must be a copy between two buffers "
            f"(dst[...] = src[...]), found {type(s).__name__}"
        )
    load, params = _source(s.value, where, convert)
    if s.predicate is not None or load.predicate is not None:
        raise LoomError(
            f"{where}: the copy is vectorized with a predicate; do not vectorize "
            "data-movement loops"
        )
    if convert is None and load.buffer.dtype != s.buffer.dtype:
        raise LoomError(f"{where}: the copy converts {load.buffer.dtype} to {s.buffer.dtype}")
    if len(load.indices) != 1 or len(s.indices) != 1:
        raise LoomError(f"{where}: buffers must be flattened before pragma lowering")
    src_index, dst_index = load.indices[0], s.indices[0]
    lanes = []
    if isinstance(src_index, Ramp) or isinstance(dst_index, Ramp):
        lanes = [_ramp_dim(src_index, dst_index, where)]
        src_index = src_index.base if isinstance(src_index, Ramp) else src_index
        dst_index = dst_index.base if isinstance(dst_index, Ramp) else dst_index
    variables = [loop.loop_var for loop in loops]
    src_off, src_strides = _affine(src_index, variables, where, load.buffer.name)
    dst_off, dst_strides = _affine(dst_index, variables, where, s.buffer.name)
    extents = _guarded_extents(loops, guards, where)
    dims = [(n, ss, ds) for n, ss, ds in zip(extents, src_strides, dst_strides)]
    starts = {loop.loop_var: loop.min for loop in loops}
    return CopyNest(
        load.buffer,
        s.buffer,
        simplify(substitute(src_off, starts)),
        simplify(substitute(dst_off, starts)),
        _merge(dims + lanes),
        params,
    )


def _source(value: PrimExpr, where: str, convert) -> tuple[BufferLoad, dict]:
    if convert is not None:
        found = convert(value)
        if found is None:
            raise LoomError(
                f"{where}: the rule does not recognize the copied value {to_text(value)}"
            )
        return found
    if not isinstance(value, BufferLoad):
        raise LoomError(
            f"{where}: the loop nest must be a copy between two buffers "
            f"(dst[...] = src[...]), found a store of {type(value).__name__}"
        )
    return value, {}


def _guarded_extents(loops: list[For], guards: list[PrimExpr], where: str) -> list[PrimExpr]:
    """Each loop's extent, shortened by the guards `v + rest < bound` on its variable."""
    extents = [loop.extent for loop in loops]
    index = {loop.loop_var: k for k, loop in enumerate(loops)}
    for guard in guards:
        for cond in op.conjuncts(guard):
            used = [v for v in free_vars(cond) if v in index]
            if len(used) != 1 or not isinstance(cond, LT):
                raise LoomError(
                    f"{where}: the guard {to_text(cond)} of the copy is not a bound on one loop"
                )
            v = used[0]
            rest = simplify(substitute(cond.a, {v: IntImm(0, v.dtype)}))
            if (
                not isinstance(simplify(cond.a - rest - v), IntImm)
                or simplify(cond.a - rest - v).value != 0
            ):
                raise LoomError(
                    f"{where}: the guard {to_text(cond)} of the copy is not a bound on one loop"
                )
            k = index[v]
            start = substitute(rest, {loop.loop_var: loop.min for loop in loops})
            extents[k] = simplify(op.min_(extents[k], cond.b - start - loops[k].min))
    return extents


def _ramp_dim(src: PrimExpr, dst: PrimExpr, where: str) -> tuple[int, int, int]:
    strides = []
    for index in (src, dst):
        if isinstance(index, Ramp) and isinstance(index.stride, IntImm):
            strides.append((index.lanes, index.stride.value))
        else:
            raise LoomError(f"{where}: a vector copy needs constant-stride ramps on both sides")
    (n, ss), (m, ds) = strides
    return n, ss, ds


def _affine(
    index: PrimExpr, variables: list[Var], where: str, name: str
) -> tuple[PrimExpr, list[int]]:
    zero = {v: IntImm(0, v.dtype) for v in variables}
    offset = simplify(substitute(index, zero))
    strides = []
    for v in variables:
        coef = simplify(substitute(index, {**zero, v: IntImm(1, v.dtype)}) - offset)
        if not isinstance(coef, IntImm):
            raise LoomError(f"{where}: the index of {name} is not affine in loop {v.name}")
        strides.append(coef.value)
    rebuilt = offset
    for v, c in zip(variables, strides):
        rebuilt = rebuilt + v * c
    if not isinstance(simplify(index - rebuilt), IntImm) or simplify(index - rebuilt).value:
        raise LoomError(f"{where}: the index of {name} is not affine in the loop variables")
    return offset, strides


def _merge(dims: list[tuple[PrimExpr, int, int]]) -> list[tuple[PrimExpr, int, int]]:
    """Drop extent-1 dimensions and merge a dimension into the next when both have constant
    extents and are contiguous."""
    out: list[tuple[PrimExpr, int, int]] = []
    for n, ss, ds in dims:
        n = IntImm(n) if isinstance(n, int) else n
        if isinstance(n, IntImm) and n.value == 1:
            continue
        if out:
            pn, pss, pds = out[-1]
            if (
                isinstance(pn, IntImm)
                and isinstance(n, IntImm)
                and pss == n.value * ss
                and pds == n.value * ds
            ):
                out[-1] = (IntImm(pn.value * n.value), ss, ds)
                continue
        out.append((n, ss, ds))
    return out


class _LowerPragmas(Mutator):
    def __init__(self, func: PrimFunc, device: str):
        self.func = func
        self.device = device

    def visit_AttrStmt(self, s: AttrStmt) -> Stmt:
        s = self.generic_mutate(s)
        if not s.key.startswith("pragma_"):
            return s
        rule = get_pragma_rule(s.key[len("pragma_") :])
        if rule is None:
            return s
        where = f"function {self.func.name}, pragma {rule.name!r}"
        nest = analyze_copy(s.body, where, rule.convert)
        for role, buf, space in (
            ("reads", nest.src, rule.src_space),
            ("writes", nest.dst, rule.dst_space),
        ):
            actual = memory.get(buf.scope).address_space
            if space is not None and actual != space:
                raise LoomError(
                    f"{where}: the copy {role} {buf.name} in scope {buf.scope} "
                    f"(address space {actual}), but the rule {role} address space "
                    f"{space}"
                )
        if len(nest.dims) > rule.max_dims:
            raise LoomError(
                f"{where}: the copy has {len(nest.dims)} dimensions after merging "
                f"contiguous ones {nest.dims}; the rule handles {rule.max_dims}"
            )
        return self.call(rule, nest, where)

    def call(self, rule: PragmaRule, nest: CopyNest, where: str) -> Stmt:
        if rule.make_calls is not None:
            return seq_stmt(*[self.checked(c, where) for c in rule.make_calls(nest)])
        _, sym = abi.lookup(rule.symbol, self.device, self.func.name)
        if rule.make_args is not None:
            args = list(rule.make_args(nest))
        else:
            try:
                rows = nest.as_rows()
            except LoomError as e:
                raise LoomError(f"{where}: {e}") from None
            args = [nest.src_address(), nest.dst_address(), *rows]
        if len(args) != len(sym.params):
            raise LoomError(
                f"{where}: {sym.c_declaration()} takes {len(sym.params)} "
                f"arguments, the rule gives {len(args)}"
            )
        args = [op.cast(a, dtype(t)) for a, (_, t) in zip(args, sym.params)]
        ret = dtype("int32") if sym.ret == "void" else dtype(sym.ret)
        return self.checked(Call(ret, sym.name, tuple(args), "extern"), where)

    def checked(self, call: Call, where: str) -> Stmt:
        """Run an extern call; a non-zero status fails with its error (or a message)."""
        _, sym = abi.lookup(call.op, self.device, self.func.name)
        if sym.ret == "void":
            return Evaluate(call)
        message = None if sym.sets_last_error else f"{sym.name} failed ({where})"
        return AssertStmt(op.equal(call, 0), message, NOP)


def _run(mod: IRModule) -> IRModule:
    device = target_of(mod).device
    return mod.map_functions(lambda f: f.with_body(_LowerPragmas(f, device).visit(f.body)))


lower_pragmas = register_pass(Pass("lower_pragmas", _run))
