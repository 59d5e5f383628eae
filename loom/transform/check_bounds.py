"""check_bounds: every buffer access (a read or a write, of an argument or of an allocation)
stays inside its buffer, proven when the program is built or checked when it runs.

Runs in `pipeline.LOWER` right after the first `simplify`: accesses are still N-d, so each index
is held to its own dimension (a column index one past the end is caught, not folded into the
next row), guards the schedule proved true are gone and loops of extent 1 are inlined. The stage
of an access is the buffer its statement stores into: te lowering (loom/te/lower.py) gives each
stage a buffer of the stage's name and computes the stage only by storing into it, so the IR
carries the stage without an annotation. Vector accesses come only from hand-built IR or from
IR lowered before and lowered again (`vectorize_loop` comes later): one lane `l` in
`[0, lanes)` stands for all (a ramp's lane is `base + l * stride`), under the access's
predicate.

For every index `e` of dimension `d` (extent `n`) of an access:

1. *Proven in range* when `0 <= e < n` follows from the loop ranges, the let values and the
   conditions the access is under: the enclosing `if`s (the `likely` guards of split tails, the
   else branch under the negation), `if_then_else` sides (padding), the value of a `require`,
   the body of an `AssertStmt`, and each loop's `min <= var < min + extent` (symbolic shapes).
   A condition `a < b` proves `e < n` when `(n - e) - (b - a)` is provably `>= 0` (the analyzer
   cancels the common linear terms), likewise for `<=`, `>`, `>=`, `==` and for `0 <= e`.
   Predicated vector accesses count only the lanes their predicate enables. Such accesses stay
   as they are.
2. Otherwise, when the index and the conditions use only loop and let variables (a loop whose
   min or extent depends on outer loops adds `min <= var < min + extent` to the conditions) and
   those range over at most 2^20 points, they are evaluated at every point exactly (numpy,
   giving up on anything that could wrap). No executed point outside the buffer: nothing to
   check. Some point outside: the function cannot run correctly, and lowering fails with a
   `LoweringError` naming the stage, the access, the index with the range of values it takes,
   and the extent.
3. Otherwise (a data-dependent index such as a gather `A[B[i]]`, a symbolic shape, a very large
   domain) the index becomes `let v = e in require(0 <= v && v < n, v, message)`: evaluated
   where the access is and only there (a `require` is lazy like `if_then_else`), and a failing
   check fails the call with the message ("main: stage C reads A[B[i]]: index B[i] of dimension
   0 is outside [0, 16)"), which the runtime raises as a `LoomError` on the host and on a
   device alike. A vectorized loop that holds such a check runs serially (a lane-wise check
   would also have to respect the lanes a mask turns off).

With PassContext config `"tir.disable_bound_checks": True` no runtime check is added (step 3 is
skipped; provably out-of-range accesses are still build errors: they cost nothing at run time).
`disabled_pass=["check_bounds"]` skips the pass. An `address_of(A[i])` is an address, not an
access, and is not checked (the loads inside its indices are).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from loom.abi.dtype import DataType
from loom.errors import LoweringError
from loom.ir import expr as E
from loom.ir.bound import IntBound, dtype_range
from loom.ir.buffer import Buffer
from loom.ir.expr import IntImm, PrimExpr, Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.printer import to_text
from loom.ir.simplify import Analyzer
from loom.ir.stmt import (
    AssertStmt,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    Stmt,
)
from loom.ir.visitor import Mutator, free_vars, substitute, visit_each_once
from loom.transform.pass_infra import Pass, PassContext, register_pass

CONFIG = "tir.disable_bound_checks"
MAX_POINTS = 1 << 20  # the largest iteration domain evaluated point by point
_TEXT = 160  # longest expression text in a message (the runtime keeps 1 KiB of error text)

_COMPARES = (E.LT, E.LE, E.GT, E.GE, E.EQ)
_NEGATED = {E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT, E.EQ: E.NE, E.NE: E.EQ}


def _text(e) -> str:
    s = to_text(e)
    return s if len(s) <= _TEXT else s[: _TEXT - 3] + "..."


def _is_int(dt: DataType) -> bool:
    return dt.is_integer and dt.lanes == 1


def _facts(cond: PrimExpr) -> list[PrimExpr]:
    """Integer expressions `f` with `f >= 0` wherever `cond` holds (from its conjuncts that
    compare integers)."""
    t = type(cond)
    if t is E.Call and cond.kind == E.CallKind.INTRINSIC and cond.op == "likely":
        return _facts(cond.args[0])
    if t is E.And:
        return _facts(cond.a) + _facts(cond.b)
    if t is E.Not:
        inner = cond.a
        if type(inner) in _NEGATED and _is_int(inner.a.dtype):
            return _facts(_NEGATED[type(inner)](inner.a, inner.b))
        if type(inner) is E.Or:
            return _facts(E.And(E.Not(inner.a), E.Not(inner.b)))
        return []
    if t not in _COMPARES or not _is_int(cond.a.dtype) or cond.a.dtype != cond.b.dtype:
        return []
    a, b = cond.a, cond.b
    one = IntImm(1, a.dtype)
    if t is E.LT:
        return [E.Sub(E.Sub(b, a), one)]
    if t is E.LE:
        return [E.Sub(b, a)]
    if t is E.GT:
        return [E.Sub(E.Sub(a, b), one)]
    if t is E.GE:
        return [E.Sub(a, b)]
    return [E.Sub(a, b), E.Sub(b, a)]  # EQ


def _negate(cond: PrimExpr) -> PrimExpr:
    if type(cond) is E.Call and cond.kind == E.CallKind.INTRINSIC and cond.op == "likely":
        cond = cond.args[0]
    return E.Not(cond)


def _stores_in(s: Stmt) -> list[str]:
    names: list[str] = []

    def record(n) -> None:
        if isinstance(n, BufferStore) and n.buffer.name not in names:
            names.append(n.buffer.name)

    visit_each_once(s, record)
    return names


# -- exact evaluation over every point of a small iteration domain ---------------------------------
class _Unknown(Exception):
    """The expression cannot be evaluated exactly here (a load, a float, a possible wrap...)."""


_SAFE = 1 << 62  # int64 magnitudes whose sums and differences cannot overflow


class _Points:
    """Evaluates integer and bool expressions at every point of a grid of loop variables (one
    numpy axis per variable), with the IR's semantics; raises _Unknown rather than guess."""

    def __init__(self, axes: dict[Var, np.ndarray]) -> None:
        self.env: dict[Var, np.ndarray] = dict(axes)

    def __call__(self, e: PrimExpr) -> np.ndarray:
        dt = e.dtype
        if dt.lanes != 1 or not (dt.is_integer or dt.is_bool):
            raise _Unknown
        method = getattr(self, "e_" + type(e).__name__, None)
        if method is None:
            raise _Unknown
        value = method(e)
        if not dt.is_bool:
            lo, hi = dtype_range(dt)
            if value.size and (int(value.min()) < lo or int(value.max()) > hi):
                raise _Unknown  # the IR would wrap: not worth modelling
        return value

    @staticmethod
    def _small(*arrays: np.ndarray) -> int:
        return max((int(np.abs(a).max()) if a.size else 0) for a in arrays)

    def e_IntImm(self, e):
        if not -_SAFE < e.value < _SAFE:
            raise _Unknown
        return np.array(e.value, dtype=bool if e.dtype.is_bool else np.int64)

    def e_Var(self, e):
        if e not in self.env:
            raise _Unknown
        return self.env[e]

    def _ints(self, e) -> tuple[np.ndarray, np.ndarray]:
        a, b = self(e.a), self(e.b)
        if a.dtype == bool or b.dtype == bool or self._small(a, b) >= _SAFE:
            raise _Unknown
        return a, b

    def e_Add(self, e):
        a, b = self._ints(e)
        return a + b

    def e_Sub(self, e):
        a, b = self._ints(e)
        return a - b

    def e_Mul(self, e):
        a, b = self._ints(e)
        if self._small(a) * self._small(b) >= _SAFE:
            raise _Unknown
        return a * b

    def _divisor(self, e) -> tuple[np.ndarray, np.ndarray]:
        a, b = self._ints(e)
        if b.size and (b == 0).any():
            raise _Unknown
        return a, b

    def e_FloorDiv(self, e):
        a, b = self._divisor(e)
        return np.floor_divide(a, b)

    def e_FloorMod(self, e):
        a, b = self._divisor(e)
        return np.mod(a, b)

    def e_Div(self, e):
        a, b = self._divisor(e)
        return np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))

    def e_Mod(self, e):
        a, b = self._divisor(e)
        return a - np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b)) * b

    def e_Min(self, e):
        return np.minimum(*self._ints(e))

    def e_Max(self, e):
        return np.maximum(*self._ints(e))

    def _compare(self, e, fn):
        a, b = self(e.a), self(e.b)
        return fn(a.astype(np.int64), b.astype(np.int64))

    def e_EQ(self, e):
        return self._compare(e, np.equal)

    def e_NE(self, e):
        return self._compare(e, np.not_equal)

    def e_LT(self, e):
        return self._compare(e, np.less)

    def e_LE(self, e):
        return self._compare(e, np.less_equal)

    def e_GT(self, e):
        return self._compare(e, np.greater)

    def e_GE(self, e):
        return self._compare(e, np.greater_equal)

    def e_And(self, e):
        return np.logical_and(self(e.a), self(e.b))

    def e_Or(self, e):
        return np.logical_or(self(e.a), self(e.b))

    def e_Not(self, e):
        return np.logical_not(self(e.a))

    def e_Select(self, e):
        return np.where(self(e.condition), self(e.true_value), self(e.false_value))

    def e_Cast(self, e):
        v = self(e.value)
        if e.dtype.is_bool:
            return v != 0
        return v.astype(np.int64)  # the range check in __call__ refuses a wrapping cast

    def e_Call(self, e):
        if e.kind != E.CallKind.INTRINSIC:
            raise _Unknown
        if e.op == "likely":
            return self(e.args[0])
        if e.op == "if_then_else":
            return np.where(self(e.args[0]), self(e.args[1]), self(e.args[2]))
        raise _Unknown

    def e_Let(self, e):
        old = self.env.get(e.var)
        self.env[e.var] = self(e.value)
        try:
            return self(e.body)
        finally:
            if old is None:
                del self.env[e.var]
            else:
                self.env[e.var] = old


# -- the pass ----------------------------------------------------------------------------------
class _Loop:
    """A loop around the current point (or the lane of a vector access)."""

    def __init__(self, var: Var, lo: PrimExpr, extent: PrimExpr, runs: bool, vectorized: bool):
        self.var = var
        self.min = lo
        self.extent = extent
        self.runs = runs  # the extent is provably at least 1
        self.vectorized = vectorized
        self.serialize = False  # a vectorized loop that got a runtime check
        self.range: tuple[int, int] = (0, -1)  # constant bounds of the variable


class _BoundChecker(Mutator):
    def __init__(self, func: PrimFunc, runtime_checks: bool) -> None:
        self.func = func.name
        self.runtime_checks = runtime_checks
        self.an = Analyzer()
        self.loops: list[_Loop] = []
        self.lets: list[tuple[Var, PrimExpr]] = []
        self.conds: list[PrimExpr] = []  # the conditions the current point runs under
        self.facts: list[PrimExpr] = []  # integer expressions known to be >= 0 here
        self.stages: list[Stmt | str] = []  # innermost last
        self.errors: list[str] = []

    # -- scopes ------------------------------------------------------------------------------
    @contextmanager
    def _under(self, cond: PrimExpr) -> Iterator[None]:
        facts = _facts(cond)
        self.conds.append(cond)
        self.facts.extend(facts)
        try:
            yield
        finally:
            self.conds.pop()
            del self.facts[len(self.facts) - len(facts) :]

    @contextmanager
    def _bound(self, var: Var, value: PrimExpr) -> Iterator[None]:
        """`var` bound to `value` (a let) for the scope."""
        rng = self.an.bounds.range(value) if _is_int(value.dtype) or value.dtype.is_bool else None
        old = self.an.bounds.push(var, rng) if rng is not None else None
        self.lets.append((var, value))
        try:
            yield
        finally:
            self.lets.pop()
            if rng is not None:
                self.an.bounds.pop(var, old)

    @contextmanager
    def _stage_of(self, s: Stmt | str) -> Iterator[None]:
        """Accesses in the scope belong to stage `s` (a store's buffer), or, for the expressions
        of statement `s` outside a store (a condition, a let value), to the buffer `s` stores
        into if it stores into one (found only when a message needs it)."""
        self.stages.append(s)
        try:
            yield
        finally:
            self.stages.pop()

    def _stage(self) -> str | None:
        for s in reversed(self.stages):
            if isinstance(s, str):
                return s
            names = _stores_in(s)
            if len(names) == 1:
                return names[0]
        return None

    # -- statements --------------------------------------------------------------------------
    def visit_For(self, s: For) -> Stmt:
        with self._stage_of(s):
            lo, extent = self.visit(s.min), self.visit(s.extent)
        rm, re = self.an.bounds.range(s.min), self.an.bounds.range(s.extent)
        top = dtype_range(s.loop_var.dtype)[1]
        loop = _Loop(s.loop_var, s.min, s.extent, re[0] >= 1, s.kind == ForKind.VECTORIZED)
        facts = []
        if not (isinstance(s.min, IntImm) and isinstance(s.extent, IntImm)):
            one = IntImm(1, s.loop_var.dtype)
            facts = [
                E.Sub(s.loop_var, s.min),
                E.Sub(E.Sub(E.Add(s.min, s.extent), one), s.loop_var),
            ]
        loop.range = (rm[0], min(top, rm[1] + re[1] - 1))
        old = self.an.bounds.push(s.loop_var, (rm[0], max(rm[0], loop.range[1])))
        self.loops.append(loop)
        self.facts.extend(facts)
        try:
            body = self.visit(s.body)
        finally:
            del self.facts[len(self.facts) - len(facts) :]
            self.loops.pop()
            self.an.bounds.pop(s.loop_var, old)
        kind = ForKind.SERIAL if loop.serialize else s.kind
        if lo is s.min and extent is s.extent and body is s.body and kind == s.kind:
            return s
        return s.replace(min=lo, extent=extent, body=body, kind=kind)

    def visit_LetStmt(self, s: LetStmt) -> Stmt:
        with self._stage_of(s):
            value = self.visit(s.value)
        with self._bound(s.var, s.value):
            body = self.visit(s.body)
        if value is s.value and body is s.body:
            return s
        return s.replace(value=value, body=body)

    def visit_IfThenElse(self, s: IfThenElse) -> Stmt:
        with self._stage_of(s):
            cond = self.visit(s.condition)
        with self._under(s.condition):
            then_case = self.visit(s.then_case)
        else_case = s.else_case
        if else_case is not None:
            with self._under(_negate(s.condition)):
                else_case = self.visit(else_case)
        if cond is s.condition and then_case is s.then_case and else_case is s.else_case:
            return s
        return IfThenElse(cond, then_case, else_case)

    def visit_AssertStmt(self, s: AssertStmt) -> Stmt:
        with self._stage_of(s):
            cond = self.visit(s.condition)
        with self._under(s.condition):
            body = self.visit(s.body)
        if cond is s.condition and body is s.body:
            return s
        return s.replace(condition=cond, body=body)

    def visit_Evaluate(self, s: Evaluate) -> Stmt:
        with self._stage_of(s):
            return self.generic_mutate(s)

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        with self._stage_of(s.buffer.name):
            s2 = self.generic_mutate(s)
            indices = self._checked(s.buffer, s.indices, s2.indices, s.predicate, "writes")
        return s2 if indices is s2.indices else s2.replace(indices=indices)

    # -- expressions -------------------------------------------------------------------------
    def visit_BufferLoad(self, e: E.BufferLoad) -> PrimExpr:
        e2 = self.generic_mutate(e)
        indices = self._checked(e.buffer, e.indices, e2.indices, e.predicate, "reads")
        return e2 if indices is e2.indices else e2.replace(indices=indices)

    def visit_Let(self, e: E.Let) -> PrimExpr:
        value = self.visit(e.value)
        with self._bound(e.var, e.value):
            body = self.visit(e.body)
        if value is e.value and body is e.body:
            return e
        return E.Let(e.var, value, body)

    def visit_Call(self, e: E.Call) -> PrimExpr:
        if e.kind != E.CallKind.INTRINSIC:
            return self.generic_mutate(e)
        if e.op == "address_of":  # an address, not an access: check what its indices read
            load = e.args[0]
            indices = self._mutate_tuple(load.indices)
            return (
                e if indices is load.indices else e.replace(args=(load.replace(indices=indices),))
            )
        if e.op in ("if_then_else", "require"):  # lazy: the later arguments run under the first
            cond = self.visit(e.args[0])
            with self._under(e.args[0]):
                taken = self.visit(e.args[1])
            rest = e.args[2]
            if e.op == "if_then_else":
                with self._under(_negate(e.args[0])):
                    rest = self.visit(rest)
            args = (cond, taken, rest)
            return e if all(a is b for a, b in zip(args, e.args)) else e.replace(args=args)
        return self.generic_mutate(e)

    # -- one access ------------------------------------------------------------------------
    def _checked(
        self,
        buf: Buffer,
        original: tuple[PrimExpr, ...],
        indices: tuple[PrimExpr, ...],
        predicate: PrimExpr | None,
        verb: str,
    ) -> tuple[PrimExpr, ...]:
        """`indices` (the access's indices with their own loads checked), each wrapped in a
        runtime check where `original` is not known to be in range."""
        new = list(indices)
        for d, (e, extent) in enumerate(zip(original, buf.shape)):
            lanes = max(e.dtype.lanes, 1 if predicate is None else predicate.dtype.lanes)
            if lanes == 1:
                verdict = self._verdict(e, extent)
            else:
                verdict = self._vector_verdict(e, extent, predicate, lanes)
            low, high, outside = verdict
            if outside is not None:
                self._error(buf, original, d, verb, outside, extent.value)
            elif (low or high) and self.runtime_checks:
                new[d] = self._runtime_check(
                    buf, original, d, new[d], extent, low, high, verb, predicate
                )
        return indices if all(a is b for a, b in zip(new, indices)) else tuple(new)

    def _verdict(self, e: PrimExpr, extent: PrimExpr) -> tuple[bool, bool, tuple[int, int] | None]:
        """For a scalar index: whether `0 <= e` and `e < extent` are unproven, and the range of
        its values if it provably leaves the buffer."""
        x, n = _same_type(e, extent)
        low = not (e.dtype.is_uint or self._prove_nonneg(x))
        high = not self._prove_nonneg(E.Sub(E.Sub(n, x), IntImm(1, x.dtype)))
        if (low or high) and isinstance(extent, IntImm):
            decided = self._decide(e, extent.value)
            if decided is not None:
                return False, False, decided[1] if decided[0] else None
        return low, high, None

    def _vector_verdict(self, e, extent, predicate, lanes):
        """For a vector access: one lane `l` in [0, lanes) stands for all of them (a ramp's
        lane is `base + l * stride`), under the predicate; if the index has no such form,
        only the constant bounds of all its lanes count."""
        lane = Var("lane")
        scalar = _lane_form(e, lane)
        enabled = None if predicate is None else _lane_form(predicate, lane)
        if scalar is None or (predicate is not None and enabled is None):
            x, n = _same_type(e, extent)
            if x.dtype.lanes == 1:
                x, n = E.Broadcast(x, lanes), E.Broadcast(n, lanes)
            low = not (e.dtype.is_uint or self._prove_vector(E.GE(x, _zero(x)), predicate))
            return low, not self._prove_vector(E.LT(x, n), predicate), None
        loop = _Loop(lane, IntImm(0), IntImm(lanes), True, False)
        loop.range = (0, lanes - 1)
        old = self.an.bounds.push(lane, loop.range)
        self.loops.append(loop)
        try:
            if enabled is None:
                return self._verdict(scalar, extent)
            with self._under(enabled):
                return self._verdict(scalar, extent)
        finally:
            self.loops.pop()
            self.an.bounds.pop(lane, old)

    def _prove_vector(self, cond: PrimExpr, predicate: PrimExpr | None) -> bool:
        if predicate is not None:
            cond = E.Or(E.Not(predicate), cond)
        return self.an.can_prove(cond)

    def _prove_nonneg(self, g: PrimExpr) -> bool:
        """True if `g >= 0` follows from the bounds, or from one fact `f >= 0` with
        `g - f >= 0` provable."""
        zero = IntImm(0, g.dtype)
        if self.an.can_prove(E.GE(g, zero)):
            return True
        return any(
            f.dtype == g.dtype and self.an.can_prove(E.GE(E.Sub(g, f), zero))
            for f in reversed(self.facts)
        )

    def _decide(self, e: PrimExpr, extent: int) -> tuple[bool, tuple[int, int]] | None:
        """Evaluate `e` at every point that reaches the access: (outside somewhere, (min, max)
        over those points); None if that cannot be done exactly. A dead access is in range.

        The points: each loop variable the index or a condition uses ranges over its constant
        bounds; a loop whose min or extent is an expression (of outer loops) adds
        `min <= var < min + extent` to the conditions."""
        lets: dict[Var, PrimExpr] = {}
        for var, value in self.lets:
            lets[var] = substitute(value, lets)
        index = substitute(e, lets)
        conds = [substitute(c, lets) for c in self.conds]
        loops = {loop.var: loop for loop in self.loops}
        needed: list[Var] = []
        todo = [*free_vars(index), *(v for c in conds for v in free_vars(c))]
        while todo:
            var = todo.pop()
            if var in needed:
                continue
            loop = loops.get(var)
            if loop is None:
                return None  # a parameter or a variable bound elsewhere
            needed.append(var)
            if not (isinstance(loop.min, IntImm) and isinstance(loop.extent, IntImm)):
                lo, n = substitute(loop.min, lets), substitute(loop.extent, lets)
                conds += [E.GE(var, lo), E.LT(var, E.Add(lo, n))]
                todo += [*free_vars(lo), *free_vars(n)]
        shape = tuple(max(0, loops[v].range[1] - loops[v].range[0] + 1) for v in needed)
        if math.prod(shape) > MAX_POINTS:
            return None
        grid = {}
        for k, var in enumerate(needed):
            view = [1] * len(needed)
            view[k] = shape[k]
            lo = loops[var].range[0]
            grid[var] = np.arange(lo, lo + shape[k], dtype=np.int64).reshape(view)
        points = _Points(grid)
        try:
            values = np.broadcast_to(points(index), shape)
            reached = np.ones(shape, dtype=bool)
            for c in conds:
                reached &= np.broadcast_to(points(c), shape)
        except _Unknown:
            return None
        values = values[reached]
        if values.size == 0:
            return False, (0, 0)
        lo, hi = int(values.min()), int(values.max())
        outside = lo < 0 or hi >= extent
        if outside and not all(loop.runs for loop in self.loops if loop.var not in needed):
            return None  # a loop around may run no iteration: check at run time
        return outside, (lo, hi)

    def _where(self) -> str:
        stage = self._stage()
        return f"{self.func}: stage {stage}" if stage else self.func

    def _error(self, buf, original, d, verb, rng, extent) -> None:
        access = _text(E.BufferLoad(buf, tuple(original)))
        self.errors.append(
            f"{self._where()} {verb} {access} out of bounds: index {_text(original[d])} "
            f"(dimension {d} of {buf.name}, extent {extent}) takes the values "
            f"[{rng[0]}, {rng[1]}], not all in [0, {extent - 1}]"
        )

    def _runtime_check(self, buf, original, d, index, extent, low, high, verb, predicate):
        """`let v = index in require(0 <= v && v < extent, v, message)` (only the unproven
        sides; lanes a predicate turns off pass)."""
        access = _text(E.BufferLoad(buf, tuple(original)))
        message = (
            f"{self._where()} {verb} {access}: index {_text(original[d])} of dimension {d} is "
            f"outside [0, {_text(extent)})"
        )
        trivial = isinstance(index, Var | IntImm)
        v = index if trivial else Var("index", index.dtype)
        x, n = _same_type(v, extent)
        parts = []
        if low:
            parts.append(E.GE(x, _zero(x)))
        if high:
            parts.append(E.LT(x, n))
        cond = parts[0] if len(parts) == 1 else E.And(parts[0], parts[1])
        if predicate is not None:
            cond = E.Or(E.Not(predicate), cond)
        check = E.Call(v.dtype, "require", (cond, v, E.StringImm(message)))
        for loop in self.loops:
            if loop.vectorized:
                loop.serialize = True
        return check if trivial else E.Let(v, index, check)


def _lane_form(e: PrimExpr, lane: Var) -> PrimExpr | None:
    """Lane `lane` of vector expression `e` as a scalar expression (a scalar is the same in
    every lane); None if some part of `e` has no such form."""
    if e.dtype.lanes == 1:
        return e
    t = type(e)
    if t is E.Ramp:
        k = lane if e.base.dtype == lane.dtype else E.Cast(e.base.dtype, lane)
        return E.Add(e.base, E.Mul(e.stride, k))
    if t is E.Broadcast:
        return e.value
    if t is E.Not:
        a = _lane_form(e.a, lane)
        return None if a is None else E.Not(a)
    if isinstance(e, E.BinaryOp | E.CompareOp | E.LogicalOp):
        a, b = _lane_form(e.a, lane), _lane_form(e.b, lane)
        return None if a is None or b is None else t(a, b)
    if t is E.Select:
        parts = [_lane_form(x, lane) for x in (e.condition, e.true_value, e.false_value)]
        return None if any(x is None for x in parts) else E.Select(*parts)
    if t is E.Cast:
        v = _lane_form(e.value, lane)
        return None if v is None else E.Cast(e.dtype.element, v)
    if t is E.Call and e.kind == E.CallKind.INTRINSIC and e.op in ("likely", "if_then_else"):
        args = [_lane_form(x, lane) for x in e.args]
        return None if any(x is None for x in args) else E.Call(e.dtype.element, e.op, tuple(args))
    if t is E.BufferLoad:  # a value (data): its lane reads the lane's element
        indices = [_lane_form(x, lane) for x in e.indices]
        return None if any(x is None for x in indices) else E.BufferLoad(e.buffer, tuple(indices))
    return None


def _zero(e: PrimExpr) -> PrimExpr:
    z = IntImm(0, e.dtype.element)
    return z if e.dtype.lanes == 1 else E.Broadcast(z, e.dtype.lanes)


def _same_type(e: PrimExpr, extent: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
    """The index and the extent in one integer dtype (the index's, unless only a wider one
    holds the extent), the extent broadcast to the index's lanes."""
    dt = e.dtype.element
    if isinstance(extent, IntImm) and extent.value in IntBound.of_dtype(dt):
        n: PrimExpr = IntImm(extent.value, dt)
    elif extent.dtype == dt or extent.dtype.bits < dt.bits:
        n = extent if extent.dtype == dt else E.Cast(dt, extent)
    else:  # a wider extent: compare in its dtype
        wide = extent.dtype.with_lanes(e.dtype.lanes)
        e, n = E.Cast(wide, e), extent
    if e.dtype.lanes > 1:
        n = E.Broadcast(n, e.dtype.lanes)
    return e, n


def check_bounds_func(func: PrimFunc, runtime_checks: bool = True) -> PrimFunc:
    """`func` with each access proven in range or checked at run time (`runtime_checks`);
    raises LoweringError for accesses that go out of range."""
    checker = _BoundChecker(func, runtime_checks)
    body = checker.visit(func.body)
    if checker.errors:
        shown = checker.errors[:10]
        more = len(checker.errors) - len(shown)
        raise LoweringError(
            f"check_bounds: out-of-bounds access in {func.name}:\n  "
            + "\n  ".join(shown)
            + (f"\n  ... and {more} more" if more > 0 else "")
        )
    return func if body is func.body else func.with_body(body)


def _run(mod: IRModule) -> IRModule:
    runtime_checks = not PassContext.current().get_config(CONFIG, False)
    return mod.map_functions(lambda f: check_bounds_func(f, runtime_checks))


check_bounds = register_pass(Pass("check_bounds", _run))
