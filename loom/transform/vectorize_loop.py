"""vectorize_loop: loops marked vectorized become vector operations.

Afterwards no `For` of kind vectorized is left. The loop variable becomes `ramp(min, 1, lanes)`;
expressions that depend on it become vector expressions, buffer accesses vector loads/stores.
A lane-dependent condition becomes a predicate on the stores (and loads) it guards, so a guarded
tail (a split whose factor does not divide) becomes a masked store; the loop around such a vector
loop is first peeled (`_peel_tail`), so that the iterations where the guard provably holds run
unmasked and only the last, partial vector is masked: one guarded iteration (run serially, as
any vector code, where the target's code generator cannot emit its masked loads). Whenever the
body cannot be vectorized without changing its meaning (a store whose index does not depend on
the loop, a buffer read at another index than it is written, an extern call, an allocation, a
nested vector loop), the loop runs as a serial loop instead. With "tir.disable_vectorize" (or
a target whose code generator takes scalar IR, C), every vectorized loop runs serially, its
guarded tail still peeled off the whole vectors.

A vectorized loop longer than `VECTOR_REGISTERS` vector registers of its narrowest element type
(the target's registers; 64 bytes without a target) runs in chunks of that many lanes: a loop
over the chunks (unrolled when there are at most `UNROLLED_CHUNKS`), then one shorter vector for
the remainder. LLVM's code generator takes time superlinear in a vector's lanes (4096 int8 lanes
build in about 6 s, 65,536 abort LLVM). Any vector of more than `MAX_LANES` lanes that reaches
this pass with a target (hand-written IR) is refused. Vector code the target's code generator
cannot emit (`Target.vector_problem`: for Hexagon, docs/hexagon.md) runs as a power-of-two
vector and the rest, each serially if it still cannot be emitted.
"""

from __future__ import annotations

from collections.abc import Callable

from loom.errors import LoomError
from loom.ir import expr as E
from loom.ir.bound import IntBound, const_int_bound
from loom.ir.expr import IntImm, PrimExpr, Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.op import add, logical_and, logical_not, mul
from loom.ir.simplify import can_prove, simplify_stmt
from loom.ir.stmt import (
    AssertStmt,
    AttrStmt,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
    seq,
)
from loom.ir.visitor import Mutator, Visitor, free_vars, substitute, visit_each_once
from loom.transform.pass_infra import Pass, PassContext, register_pass

VECTOR_REGISTERS = 4
"""A vector covers at most this many vector registers of its loop's narrowest element type."""
UNROLLED_CHUNKS = 8
"""A wide loop split into at most this many full chunks has its chunk loop unrolled."""
DEFAULT_VECTOR_BYTES = 64
"""The register width assumed without a target (AVX-512's, the widest of loom's CPUs)."""
MAX_LANES = 1024
"""No vector in a module built for a target has more lanes (1024 int8 lanes build in about
1 s; see docs/schedules.md)."""


class _CannotVectorize(Exception):
    pass


def _broadcast(e: PrimExpr, lanes: int) -> PrimExpr:
    return e if e.dtype.lanes == lanes else E.Broadcast(e, lanes)


def _is_vector(e: PrimExpr) -> bool:
    return e.dtype.lanes > 1


class _Vectorizer:
    """Rewrites one loop body for `lanes` lanes; raises _CannotVectorize to give up."""

    def __init__(self, var: Var, start: PrimExpr, lanes: int, var_bounds: dict[Var, IntBound]):
        self.lanes = lanes
        self.vmap: dict[Var, PrimExpr] = {var: E.Ramp(start, IntImm(1, var.dtype), lanes)}
        self.var_bounds = dict(var_bounds)

    # -- expressions ---------------------------------------------------------------------------
    def expr(self, e: PrimExpr, pred: PrimExpr | None) -> PrimExpr:
        """The vector form of `e`; unchanged (a scalar) if `e` does not depend on the lanes."""
        if isinstance(e, Var):
            return self.vmap.get(e, e)
        if isinstance(e, E.IntImm | E.FloatImm | E.StringImm):
            return e
        if _is_vector(e):
            raise _CannotVectorize("nested vector expression")
        method = getattr(self, "e_" + type(e).__name__, None)
        if method is not None:
            return method(e, pred)
        if isinstance(e, E.BinaryOp | E.CompareOp | E.LogicalOp):
            a, b = self.expr(e.a, pred), self.expr(e.b, pred)
            if a is e.a and b is e.b:
                return e
            lanes = max(a.dtype.lanes, b.dtype.lanes)
            if pred is not None and _traps_on_zero(e) and _is_vector(b):
                b = _divisor_in_masked_lanes(b, pred, lanes)
            return type(e)(_broadcast(a, lanes), _broadcast(b, lanes))
        raise _CannotVectorize(f"unsupported expression {type(e).__name__}")

    def e_Not(self, e: E.Not, pred):
        a = self.expr(e.a, pred)
        return e if a is e.a else E.Not(a)

    def e_Cast(self, e: E.Cast, pred):
        v = self.expr(e.value, pred)
        return e if v is e.value else E.Cast(e.dtype.with_lanes(v.dtype.lanes), v)

    def e_Select(self, e: E.Select, pred):
        c = self.expr(e.condition, pred)
        t, f = self.expr(e.true_value, pred), self.expr(e.false_value, pred)
        if c is e.condition and t is e.true_value and f is e.false_value:
            return e
        lanes = max(c.dtype.lanes, t.dtype.lanes, f.dtype.lanes)
        return E.Select(c, _broadcast(t, lanes), _broadcast(f, lanes))

    def e_BufferLoad(self, e: E.BufferLoad, pred):
        indices = [self.expr(i, pred) for i in e.indices]
        if e.predicate is not None:
            raise _CannotVectorize("predicated load inside a vectorized loop")
        if not any(_is_vector(i) for i in indices) and (pred is None or self._in_bounds(e)):
            return e  # lane-invariant: one scalar load serves every lane
        return E.BufferLoad(e.buffer, tuple(_broadcast(i, self.lanes) for i in indices), pred)

    def e_Let(self, e: E.Let, pred):
        value = self.expr(e.value, pred)
        if not _is_vector(value):
            body = self.expr(e.body, pred)
            return e if value is e.value and body is e.body else E.Let(e.var, value, body)
        var = Var(e.var.name, value.dtype)
        self.vmap[e.var] = var
        return E.Let(var, value, self.expr(e.body, pred))

    def e_Call(self, e: E.Call, pred):
        if e.kind == E.CallKind.EXTERN:
            self._require_invariant(e)
            return e
        if e.op == "if_then_else":
            return self._if_then_else(e, pred)
        if e.op in ("address_of", "isnullptr"):
            self._require_invariant(e)
            return e
        args = [self.expr(a, pred) for a in e.args]
        if all(a is b for a, b in zip(args, e.args)):
            return e
        lanes = max(a.dtype.lanes for a in args)
        return E.Call(e.dtype.with_lanes(lanes), e.op, tuple(_broadcast(a, lanes) for a in args))

    def _if_then_else(self, e: E.Call, pred):
        cond, t, f = e.args
        c = self.expr(cond, pred)
        if not _is_vector(c):
            tv, fv = self.expr(t, pred), self.expr(f, pred)
            if c is cond and tv is t and fv is f:
                return e
            lanes = max(tv.dtype.lanes, fv.dtype.lanes)
            return E.Call(
                e.dtype.with_lanes(lanes),
                "if_then_else",
                (c, _broadcast(tv, lanes), _broadcast(fv, lanes)),
            )
        # Lane-wise lazy select: each side only reads where its lanes are taken.
        for side in (t, f):
            _reject_trapping_division(side)
        tv = self.expr(t, _and(pred, c))
        fv = self.expr(f, _and(pred, logical_not(c)))
        return E.Select(c, _broadcast(tv, self.lanes), _broadcast(fv, self.lanes))

    def _in_bounds(self, e: E.BufferLoad) -> bool:
        """True if a scalar load provably stays inside its buffer (so it needs no mask)."""
        for index, extent in zip(e.indices, e.buffer.shape):
            if not isinstance(extent, IntImm):
                return False
            b = const_int_bound(index, self.var_bounds)
            if b.lo is None or b.hi is None or b.lo < 0 or b.hi >= extent.value:
                return False
        return True

    def _require_invariant(self, e: PrimExpr) -> None:
        def check(n) -> None:
            if isinstance(n, Var) and n in self.vmap:
                raise _CannotVectorize("a call depends on the vectorized loop")

        visit_each_once(e, check)

    # -- statements ----------------------------------------------------------------------------
    def stmt(self, s: Stmt, pred: PrimExpr | None) -> Stmt:
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            raise _CannotVectorize(f"unsupported statement {type(s).__name__}")
        return method(s, pred)

    def s_BufferStore(self, s: BufferStore, pred):
        if s.predicate is not None:
            raise _CannotVectorize("predicated store inside a vectorized loop")
        indices = [self.expr(i, pred) for i in s.indices]
        if not any(_is_vector(i) for i in indices):
            raise _CannotVectorize(f"store to {s.buffer.name} does not depend on the lane")
        value = _broadcast(self.expr(s.value, pred), self.lanes)
        return BufferStore(s.buffer, value, tuple(_broadcast(i, self.lanes) for i in indices), pred)

    def s_SeqStmt(self, s: SeqStmt, pred):
        return seq(*[self.stmt(c, pred) for c in s.seq])

    def s_IfThenElse(self, s: IfThenElse, pred):
        c = self.expr(s.condition, pred)
        if not _is_vector(c):
            else_case = self.stmt(s.else_case, pred) if s.else_case is not None else None
            return IfThenElse(c, self.stmt(s.then_case, pred), else_case)
        for branch in (s.then_case, s.else_case):
            if branch is not None:
                _require_straight_line(branch)
        then_case = self.stmt(s.then_case, _and(pred, c))
        if s.else_case is None:
            return then_case
        return seq(then_case, self.stmt(s.else_case, _and(pred, logical_not(c))))

    def s_For(self, s: For, pred):
        lo, extent = self.expr(s.min, pred), self.expr(s.extent, pred)
        if _is_vector(lo) or _is_vector(extent):
            raise _CannotVectorize("inner loop bounds depend on the lane")
        if s.kind == ForKind.PARALLEL:
            raise _CannotVectorize("parallel loop inside a vectorized loop")
        self.var_bounds.update(_loop_bound(s))
        return s.replace(body=self.stmt(s.body, pred))

    def s_LetStmt(self, s: LetStmt, pred):
        value = self.expr(s.value, pred)
        if _is_vector(value):
            var = Var(s.var.name, value.dtype)
            self.vmap[s.var] = var
            return LetStmt(var, value, self.stmt(s.body, pred))
        return LetStmt(s.var, value, self.stmt(s.body, pred))

    def s_AttrStmt(self, s: AttrStmt, pred):
        return s.replace(body=self.stmt(s.body, pred))

    def s_AssertStmt(self, s: AssertStmt, pred):
        self._require_invariant(s.condition)
        return s.replace(body=self.stmt(s.body, pred))

    def s_Evaluate(self, s: Evaluate, pred):
        if isinstance(s.value, IntImm):
            return s
        raise _CannotVectorize("a call statement would run once instead of once per lane")


def _and(pred: PrimExpr | None, cond: PrimExpr) -> PrimExpr:
    return cond if pred is None else logical_and(pred, cond)


def _traps_on_zero(e: PrimExpr) -> bool:
    return isinstance(e, E.Div | E.Mod | E.FloorDiv | E.FloorMod) and e.dtype.is_integer


def _divisor_in_masked_lanes(b: PrimExpr, pred: PrimExpr, lanes: int) -> PrimExpr:
    """A vector divisor that is 1 in the lanes `pred` masks off: their masked loads read 0,
    and an integer division by 0 would fail the whole vector (its quotient is discarded)."""
    one = _broadcast(IntImm(1, b.dtype.with_lanes(1)), lanes)
    return E.Select(_broadcast(pred, lanes), b, one)


def _reject_trapping_division(e: PrimExpr) -> None:
    """A masked-off lane must not divide by zero: refuse integer division by a non-constant."""

    def check(n) -> None:
        if (
            isinstance(n, E.Div | E.Mod | E.FloorDiv | E.FloorMod)
            and n.dtype.is_integer
            and not isinstance(n.b, IntImm)
        ):
            raise _CannotVectorize("integer division under a lane condition")

    visit_each_once(e, check)


def _require_straight_line(s: Stmt) -> None:
    def check(n) -> None:
        if isinstance(n, For | Evaluate | AssertStmt):
            raise _CannotVectorize("a loop or call under a lane-dependent condition")

    visit_each_once(s, check)


def _reads_match_writes(body: Stmt) -> bool:
    """True if every buffer written in `body` is read only at the index it is written."""
    stores: dict[Var, set] = {}
    loads: list[E.BufferLoad] = []

    def record(n) -> None:
        if isinstance(n, BufferStore):
            stores.setdefault(n.buffer.data, set()).add(n.indices)
        elif isinstance(n, E.BufferLoad):
            loads.append(n)

    visit_each_once(body, record)
    return all(
        ld.indices in stores[ld.buffer.data] and len(stores[ld.buffer.data]) == 1
        for ld in loads
        if ld.buffer.data in stores
    )


def _loop_bound(loop: For) -> dict[Var, IntBound]:
    lo, n = const_int_bound(loop.min), const_int_bound(loop.extent)
    if lo.lo is None or lo.hi is None or n.hi is None:
        return {}
    return {loop.loop_var: IntBound(lo.lo, lo.hi + n.hi - 1)}


# -- peeling the tail: full vectors unguarded, the last partial one masked -------------------
def _likely_condition(s: IfThenElse) -> PrimExpr | None:
    """The condition of `if (likely(c)) ...` without an else (how lowering guards a split that
    does not divide), or None."""
    c = s.condition
    if s.else_case is None and isinstance(c, E.Call) and c.op == "likely" and len(c.args) == 1:
        return c.args[0]
    return None


class _LaneGuards(Visitor):
    """The likely-guards inside vector loops under a loop that depend on both that loop's
    variable and a vector lane, each with the bounds of the loops around it and the vector
    loops around it."""

    def __init__(self, var: Var, var_bounds: dict[Var, IntBound]):
        self.var = var
        self.bounds = dict(var_bounds)
        self.vector_loops: tuple[For, ...] = ()
        self.found: list[tuple[IfThenElse, PrimExpr, dict[Var, IntBound], tuple[For, ...]]] = []

    def visit_For(self, s: For) -> None:
        saved = self.bounds, self.vector_loops
        self.bounds = {**self.bounds, **_loop_bound(s)}
        if s.kind == ForKind.VECTORIZED:
            self.vector_loops += (s,)
        self.visit(s.body)
        self.bounds, self.vector_loops = saved

    def visit_IfThenElse(self, s: IfThenElse) -> None:
        cond = _likely_condition(s)
        if cond is not None and self.vector_loops:
            used = free_vars(cond)
            if self.var in used and any(v.loop_var in used for v in self.vector_loops):
                self.found.append((s, cond, self.bounds, self.vector_loops))
        self.generic_visit(s)


def _full_iterations(cond: PrimExpr, var: Var, lo: int, n: int, bounds: dict) -> int:
    """The largest k <= n such that `cond` provably holds while `var` is in [lo, lo + k)."""

    def holds(k: int) -> bool:
        return can_prove(cond, {**bounds, var: IntBound(lo, lo + k - 1)})

    if not holds(1):
        return 0
    good, bad = 1, n + 1  # holds(good), not holds(bad) (n + 1: beyond the loop)
    while bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if holds(mid) else (good, mid)
    return good


class _DropGuards(Mutator):
    def __init__(self, guards: set[int]):
        self.guards = guards

    def visit_IfThenElse(self, s: IfThenElse) -> Stmt:
        if id(s) in self.guards:
            return self.visit(s.then_case)
        return self.generic_mutate(s)


def _peel_tail(loop: For, var_bounds: dict[Var, IntBound]) -> Stmt | None:
    """`loop` split in two where the lane guards of the vector loops inside it stop holding
    (the guard of a split whose factor does not divide the extent): its first iterations without
    those guards (whole vectors, unmasked), then the rest with them (the last, partial vector,
    masked), as the loop's body with the variable replaced when one iteration is left. None if
    no such guard holds for the first iteration."""
    if (
        loop.kind == ForKind.VECTORIZED
        or not isinstance(loop.min, IntImm)
        or not isinstance(loop.extent, IntImm)
        or loop.extent.value < 2
    ):
        return None
    finder = _LaneGuards(loop.loop_var, var_bounds)
    finder.visit(loop.body)
    lo, n = loop.min.value, loop.extent.value
    full: dict[int, int] = {}  # guard -> iterations it holds for (from the loop's start)
    for node, cond, bounds, _ in finder.found:
        k = _full_iterations(cond, loop.loop_var, lo, n, bounds)
        full[id(node)] = min(k, full.get(id(node), k))
    full = {g: k for g, k in full.items() if k}
    if not full:
        return None
    k = min(full.values())
    dtype = loop.loop_var.dtype
    head = loop.replace(extent=IntImm(k, dtype), body=_DropGuards(set(full)).visit(loop.body))
    if k == n:  # the guards hold everywhere
        return head
    body = loop.body
    if n - k == 1:
        tail = substitute(body, {loop.loop_var: IntImm(lo + k, dtype)})
    else:
        var = loop.loop_var.copy_with_name(loop.loop_var.name)
        tail = loop.replace(
            loop_var=var,
            min=IntImm(lo + k, dtype),
            extent=IntImm(n - k, dtype),
            body=substitute(body, {loop.loop_var: var}),
        )
    return seq(head, tail)


class _VectorizeLoops(Mutator):
    def __init__(
        self,
        enabled: bool,
        vector_bytes: int = DEFAULT_VECTOR_BYTES,
        vector_problem: Callable[[object], str | None] | None = None,
    ):
        self.enabled = enabled
        self.vector_bytes = vector_bytes
        self.vector_problem = vector_problem
        self.var_bounds: dict[Var, IntBound] = {}
        self.in_pragma = 0  # a pragma's copy nest keeps its loop structure: no peeling there

    def visit_AttrStmt(self, s: AttrStmt) -> Stmt:
        pragma = s.key.startswith("pragma_")
        self.in_pragma += pragma
        try:
            return self.generic_mutate(s)
        finally:
            self.in_pragma -= pragma

    def visit_For(self, loop: For) -> Stmt:
        self.var_bounds.update(_loop_bound(loop))
        if not self.in_pragma:  # also when the loops will run serially: no guard in the whole ones
            peeled = _peel_tail(loop, self.var_bounds)
            if peeled is not None:
                return self.visit(peeled)
        loop = self.generic_mutate(loop)
        if loop.kind != ForKind.VECTORIZED:
            return loop
        serial = loop.replace(kind=ForKind.SERIAL)
        if (
            not self.enabled
            or not isinstance(loop.extent, IntImm)
            or loop.extent.value < 2
            or not _reads_match_writes(loop.body)
        ):
            return serial
        n = loop.extent.value
        lanes = max_lanes(loop.body, self.vector_bytes)
        try:
            if n <= lanes:
                return self._vectorize(loop, loop.min, n)
            return self._chunked(loop, n, lanes)
        except _CannotVectorize:
            return serial

    def _vectorize(self, loop: For, start: PrimExpr, lanes: int) -> Stmt:
        """The body for the `lanes` iterations from `start`, as vector code."""
        if lanes == 1:
            return simplify_stmt(substitute(loop.body, {loop.loop_var: start}))
        vectorizer = _Vectorizer(loop.loop_var, start, lanes, self.var_bounds)
        out = simplify_stmt(vectorizer.stmt(loop.body, None))
        if self.vector_problem is None or first_vector_problem(out, self.vector_problem) is None:
            return out
        if lanes & (lanes - 1):  # as a power-of-two vector and the rest
            head = 1 << (lanes.bit_length() - 1)
            rest_start = add(start, IntImm(head, start.dtype))
            return seq(
                self._vectorize(loop, start, head), self._vectorize(loop, rest_start, lanes - head)
            )
        var = loop.loop_var.copy_with_name(loop.loop_var.name)
        body = substitute(loop.body, {loop.loop_var: var})
        return For(var, start, IntImm(lanes, start.dtype), ForKind.SERIAL, body)

    def _chunked(self, loop: For, n: int, lanes: int) -> Stmt:
        """A loop over chunks of `lanes` lanes, then a vector for the remaining n % lanes."""
        dt = loop.loop_var.dtype
        count, rest = divmod(n, lanes)
        chunk = Var(f"{loop.loop_var.name}.chunk", dt)
        start = add(loop.min, mul(chunk, IntImm(lanes, dt)))
        kind = ForKind.UNROLLED if count <= UNROLLED_CHUNKS else ForKind.SERIAL
        body = self._vectorize(loop, start, lanes)
        parts = [For(chunk, IntImm(0, dt), IntImm(count, dt), kind, body)]
        if rest:
            tail_start = add(loop.min, IntImm(count * lanes, dt))
            parts.append(self._vectorize(loop, tail_start, rest))
        return seq(*parts)


def first_vector_problem(s: Stmt, problem: Callable[[object], str | None]) -> str | None:
    """The first reason `problem` gives for a node of `s`, or None."""
    found: list[str] = []

    def record(n) -> None:
        if not found:
            reason = problem(n)
            if reason is not None:
                found.append(reason)

    visit_each_once(s, record)
    return found[0] if found else None


def max_lanes(body: Stmt, vector_bytes: int) -> int:
    """The most lanes a vectorized loop with this body gets at once: `VECTOR_REGISTERS`
    registers of `vector_bytes` of the narrowest element the body loads or stores."""
    sizes = []

    def record(n) -> None:
        if isinstance(n, E.BufferLoad | BufferStore) and not n.buffer.dtype.is_bool:
            sizes.append(n.buffer.dtype.itemsize)

    visit_each_once(body, record)
    narrowest = min(sizes, default=4)
    return max(2, min(MAX_LANES, VECTOR_REGISTERS * vector_bytes // narrowest))


def check_lanes(mod: IRModule) -> None:
    """Refuse a vector of more than MAX_LANES lanes anywhere in `mod`."""
    for func in mod:

        def check(n, func=func) -> None:
            dt = getattr(n, "dtype", None)
            if dt is not None and dt.lanes > MAX_LANES:
                raise LoomError(
                    f"function {func.name}: a vector of {dt.lanes} lanes ({dt}) is wider than "
                    f"the limit of {MAX_LANES} lanes (docs/schedules.md); "
                    "vectorize a loop of at most that many iterations"
                )

        visit_each_once(func.body, check)


def vectorize_func(
    func: PrimFunc,
    enabled: bool = True,
    vector_bytes: int = DEFAULT_VECTOR_BYTES,
    vector_problem: Callable[[object], str | None] | None = None,
) -> PrimFunc:
    vectorizer = _VectorizeLoops(enabled, vector_bytes, vector_problem)
    return func.with_body(vectorizer.visit(func.body))


def _run(mod: IRModule) -> IRModule:
    """Vector code unless disabled by config, or for a target whose code generator takes
    scalar IR only (vectorized loops then run serially)."""
    target = mod.attr("target")
    enabled = not PassContext.current().get_config("tir.disable_vectorize", False) and (
        target is None or target.takes_vector_ir
    )
    vector_bytes = DEFAULT_VECTOR_BYTES if target is None else target.vector_bytes
    problem = None if target is None else target.vector_problem
    out = mod.map_functions(lambda f: vectorize_func(f, enabled, vector_bytes, problem))
    if target is not None:
        check_lanes(out)
    return out


vectorize_loop = register_pass(Pass("vectorize_loop", _run))
