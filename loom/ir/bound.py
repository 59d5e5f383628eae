"""Integer bound analysis: constant bounds of expressions (symbolic intervals are in
loom.ir.interval, which simplifies with the analyzer built on this).

`const_int_bound` is sound under the IR's wraparound: every integer value an expression can take
(as the IR evaluates it, wrapping to its width) lies in the bound it returns. Whenever the
mathematical range of a sub-expression may leave its dtype's range, that sub-expression's bound is
the whole dtype range.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping

from loom.abi.dtype import DataType
from loom.ir import expr as E
from loom.ir.expr import PrimExpr, Var
from loom.ir.semantics import truncdiv

Range = tuple[int, int]


@dataclasses.dataclass(frozen=True)
class IntBound:
    """An inclusive integer interval; `None` ends are infinite. `lo > hi` is the empty set."""

    lo: int | None
    hi: int | None

    @staticmethod
    def point(value: int) -> IntBound:
        return IntBound(value, value)

    @staticmethod
    def everything() -> IntBound:
        return IntBound(None, None)

    @staticmethod
    def of_dtype(dt: DataType) -> IntBound:
        """The values of an integer or bool dtype; everything for other dtypes."""
        r = dtype_range(dt)
        return IntBound.everything() if r is None else IntBound(*r)

    @staticmethod
    def from_range(min_value: int, extent: int) -> IntBound:
        """The values of a loop `[min_value, min_value + extent)`."""
        return IntBound(min_value, min_value + extent - 1)

    @property
    def is_point(self) -> bool:
        return self.lo is not None and self.lo == self.hi

    @property
    def is_everything(self) -> bool:
        return self.lo is None and self.hi is None

    @property
    def is_empty(self) -> bool:
        return self.lo is not None and self.hi is not None and self.lo > self.hi

    def union(self, other: IntBound) -> IntBound:
        lo = None if self.lo is None or other.lo is None else min(self.lo, other.lo)
        hi = None if self.hi is None or other.hi is None else max(self.hi, other.hi)
        return IntBound(lo, hi)

    def intersect(self, other: IntBound) -> IntBound:
        los = [x for x in (self.lo, other.lo) if x is not None]
        his = [x for x in (self.hi, other.hi) if x is not None]
        return IntBound(max(los) if los else None, min(his) if his else None)

    def __contains__(self, value: object) -> bool:
        if not isinstance(value, int):
            return False
        return (self.lo is None or self.lo <= value) and (self.hi is None or value <= self.hi)

    def __str__(self) -> str:
        lo = "-inf" if self.lo is None else str(self.lo)
        hi = "+inf" if self.hi is None else str(self.hi)
        return f"[{lo}, {hi}]"


@functools.cache  # asked for nearly every bound
def dtype_range(dt: DataType) -> Range | None:
    """(min, max) of one lane of an integer or bool dtype; None for floats and handles."""
    if dt.kind in ("int", "uint", "bool"):
        return dt.min_value(), dt.max_value()
    return None


def _as_range(bound: IntBound | tuple[int | None, int | None], full: Range) -> Range:
    if isinstance(bound, IntBound):
        lo, hi = bound.lo, bound.hi
    else:
        lo, hi = bound
    lo = full[0] if lo is None else max(lo, full[0])
    hi = full[1] if hi is None else min(hi, full[1])
    return lo, hi


def _corners(fn: Callable[[int, int], int], a: Range, b: Range) -> Range:
    values = (fn(a[0], b[0]), fn(a[0], b[1]), fn(a[1], b[0]), fn(a[1], b[1]))
    return min(values), max(values)


def decide(op: type, a: Range, b: Range) -> bool | None:
    """The value of comparison `op` for all a in `a`, b in `b`, or None if it varies."""
    a0, a1 = a
    b0, b1 = b
    if op is E.LT or op is E.GT:
        if op is E.GT:
            a0, a1, b0, b1 = b0, b1, a0, a1
        return True if a1 < b0 else False if a0 >= b1 else None
    if op is E.LE or op is E.GE:
        if op is E.GE:
            a0, a1, b0, b1 = b0, b1, a0, a1
        return True if a1 <= b0 else False if a0 > b1 else None
    if a0 == a1 == b0 == b1:
        equal: bool | None = True
    elif a1 < b0 or b1 < a0:
        equal = False
    else:
        return None
    return equal if op is E.EQ else not equal


class ConstIntBoundAnalyzer:
    """Constant bounds of expressions under bounds of variables, with a cache.

    Bounds are kept as (lo, hi) tuples of Python ints; they are always finite for integer and
    bool dtypes. Changing the bound of a variable clears the cache (and bumps `generation`, which
    caches built on top of this one watch).
    """

    def __init__(
        self, var_bounds: Mapping[Var, IntBound] | None = None, exact: bool = False
    ) -> None:
        self._vars: dict[Var, Range] = {}
        self._cache: dict[PrimExpr, Range] = {}
        self.generation = 0
        self._snapshot: frozenset = frozenset()
        self._snapshot_generation = 0
        # exact=True: bounds of the values over Z (no wrapping), for checking that some
        # sub-expression always leaves its dtype (then `always_wraps` becomes True).
        self.exact = exact
        self.always_wraps = False
        for var, bound in (var_bounds or {}).items():
            self.bind(var, bound)

    # -- variable bounds ------------------------------------------------------------------------
    def bind(self, var: Var, bound: IntBound | tuple[int | None, int | None] | None) -> None:
        """Set the bound of `var` (None: its dtype's range)."""
        full = dtype_range(var.dtype)
        if full is not None:
            self._set(var, full if bound is None else _as_range(bound, full))

    def _set(self, var: Var, rng: Range | None) -> None:
        if self._vars.get(var) != rng:
            # cached answers may have used the old bound of `var`
            self._cache.clear()
            self.generation += 1
        if rng is None:
            self._vars.pop(var, None)
        else:
            self._vars[var] = rng

    def var_range(self, var: Var) -> Range | None:
        return self._vars.get(var)

    def snapshot(self) -> frozenset:
        """Every variable's bound now, as a value that compares equal exactly when the bounds
        are the same (kept until they change: it is asked once per simplified expression)."""
        if self._snapshot_generation != self.generation:
            self._snapshot = frozenset(self._vars.items())
            self._snapshot_generation = self.generation
        return self._snapshot

    def push(self, var: Var, rng: Range) -> Range | None:
        """Bind `var` to `rng` for a scope; returns what `pop` needs to restore."""
        old = self._vars.get(var)
        self._set(var, rng)
        return old

    def pop(self, var: Var, old: Range | None) -> None:
        self._set(var, old)

    # -- queries --------------------------------------------------------------------------------
    def bound(self, e: PrimExpr) -> IntBound:
        r = self.range(e)
        return IntBound.everything() if r is None else IntBound(*r)

    def range(self, e: PrimExpr) -> Range | None:
        """The bound of `e` (over all lanes), or None if `e` is not integer or bool."""
        full = dtype_range(e.dtype)
        if full is None:
            return None
        t = type(e)
        if t is E.IntImm:
            return e.value, e.value
        if t is E.Var:
            return self._vars.get(e, full)
        r = self._cache.get(e)
        if r is None:
            rule = _RULES.get(t)
            r = full if rule is None else rule(self, e, full)
            self._cache[e] = r
        return r

    def _int_range(self, e: PrimExpr) -> Range:
        r = self.range(e)
        assert r is not None
        return r

    def _fit(self, lo: int, hi: int, full: Range) -> Range:
        """(lo, hi) if the values cannot wrap; otherwise the whole dtype (or, when exact, the
        unwrapped range)."""
        if full[0] <= lo and hi <= full[1]:
            return lo, hi
        if not self.exact:
            return full
        if hi < full[0] or full[1] < lo:
            self.always_wraps = True
        return lo, hi

    # -- rules (one per node class, registered in _RULES) -------------------------------------
    def _add(self, e: E.Add, full: Range) -> Range:
        a, b = self._int_range(e.a), self._int_range(e.b)
        return self._fit(a[0] + b[0], a[1] + b[1], full)

    def _sub(self, e: E.Sub, full: Range) -> Range:
        a, b = self._int_range(e.a), self._int_range(e.b)
        return self._fit(a[0] - b[1], a[1] - b[0], full)

    def _mul(self, e: E.Mul, full: Range) -> Range:
        a, b = self._int_range(e.a), self._int_range(e.b)
        return self._fit(*_corners(lambda x, y: x * y, a, b), full)

    def _div(self, e: E.Div, full: Range) -> Range:
        a, b = self._int_range(e.a), self._int_range(e.b)
        if b[0] <= 0 <= b[1]:
            return full
        return self._fit(*_corners(truncdiv, a, b), full)

    def _floordiv(self, e: E.FloorDiv, full: Range) -> Range:
        a, b = self._int_range(e.a), self._int_range(e.b)
        if b[0] <= 0 <= b[1]:
            return full
        return self._fit(*_corners(lambda x, y: x // y, a, b), full)

    def _mod(self, e: E.Mod, full: Range) -> Range:
        (a0, a1), (b0, b1) = self._int_range(e.a), self._int_range(e.b)
        if b0 <= 0 <= b1:
            return full
        small = min(abs(b0), abs(b1))  # |a| below every divisor: a % b == a
        m = max(abs(b0), abs(b1)) - 1  # |a % b| <= m
        if -small < a0 and a1 < small:
            return a0, a1
        if a0 >= 0:
            return 0, min(a1, m)
        if a1 <= 0:
            return max(a0, -m), 0
        return max(a0, -m), min(a1, m)

    def _floormod(self, e: E.FloorMod, full: Range) -> Range:
        (a0, a1), (b0, b1) = self._int_range(e.a), self._int_range(e.b)
        if b0 > 0:
            if b0 == b1 and a0 // b0 == a1 // b0:
                k = a0 // b0
                return a0 - k * b0, a1 - k * b0
            if a0 >= 0:
                return 0, min(a1, b1 - 1)
            return 0, b1 - 1
        if b1 < 0:
            if b0 == b1 and a0 // b0 == a1 // b0:
                k = a0 // b0
                return a0 - k * b0, a1 - k * b0
            return b0 + 1, 0
        return full

    def _min(self, e: E.Min, full: Range) -> Range:
        a, b = self._int_range(e.a), self._int_range(e.b)
        return min(a[0], b[0]), min(a[1], b[1])

    def _max(self, e: E.Max, full: Range) -> Range:
        a, b = self._int_range(e.a), self._int_range(e.b)
        return max(a[0], b[0]), max(a[1], b[1])

    def _bitand(self, e: E.BitAnd, full: Range) -> Range:
        a, b = self._int_range(e.a), self._int_range(e.b)
        if a[0] >= 0 and b[0] >= 0:
            return 0, min(a[1], b[1])
        if a[0] >= 0:
            return 0, a[1]
        if b[0] >= 0:
            return 0, b[1]
        return full

    def _bitor_xor(self, e: E.BitOr | E.BitXor, full: Range) -> Range:
        a, b = self._int_range(e.a), self._int_range(e.b)
        if a[0] >= 0 and b[0] >= 0:
            return 0, min((1 << max(a[1], b[1]).bit_length()) - 1, full[1])
        return full

    def _shift(self, e: E.ShiftLeft | E.ShiftRight, full: Range) -> Range:
        a, b = self._int_range(e.a), self._int_range(e.b)
        if b[0] < 0 or b[1] >= e.dtype.bits:
            return full
        if type(e) is E.ShiftRight:
            return self._fit(*_corners(lambda x, y: x >> y, a, b), full)
        return self._fit(*_corners(lambda x, y: x << y, a, b), full)

    def _compare(self, e: E.CompareOp, full: Range) -> Range:
        a, b = self.range(e.a), self.range(e.b)
        if a is None or b is None:
            return 0, 1
        verdict = decide(type(e), a, b)
        return (0, 1) if verdict is None else (int(verdict), int(verdict))

    def _and(self, e: E.And, full: Range) -> Range:
        a, b = self._int_range(e.a), self._int_range(e.b)
        return min(a[0], b[0]), min(a[1], b[1])

    def _or(self, e: E.Or, full: Range) -> Range:
        a, b = self._int_range(e.a), self._int_range(e.b)
        return max(a[0], b[0]), max(a[1], b[1])

    def _not(self, e: E.Not, full: Range) -> Range:
        a = self._int_range(e.a)
        return 1 - a[1], 1 - a[0]

    def _choice(self, cond: PrimExpr, t: PrimExpr, f: PrimExpr) -> Range:
        c = self._int_range(cond)
        if c == (1, 1):
            return self._int_range(t)
        if c == (0, 0):
            return self._int_range(f)
        rt, rf = self._int_range(t), self._int_range(f)
        return min(rt[0], rf[0]), max(rt[1], rf[1])

    def _select(self, e: E.Select, full: Range) -> Range:
        return self._choice(e.condition, e.true_value, e.false_value)

    def _call(self, e: E.Call, full: Range) -> Range:
        if e.kind == E.CallKind.INTRINSIC:
            if e.op == "if_then_else":
                return self._choice(*e.args)
            if e.op == "likely":
                return self._int_range(e.args[0])
        return full

    def _cast(self, e: E.Cast, full: Range) -> Range:
        src = self.range(e.value)
        if e.dtype.is_bool:
            if src is None or src[0] <= 0 <= src[1]:
                return 0, 1
            return 1, 1
        if src is None:
            return full
        return self._fit(src[0], src[1], full)

    def _ramp(self, e: E.Ramp, full: Range) -> Range:
        base, stride = self._int_range(e.base), self._int_range(e.stride)
        n = e.lanes - 1
        return self._fit(base[0] + min(0, stride[0] * n), base[1] + max(0, stride[1] * n), full)

    def _broadcast(self, e: E.Broadcast, full: Range) -> Range:
        return self._int_range(e.value)

    def _let(self, e: E.Let, full: Range) -> Range:
        value = self.range(e.value)
        if value is None:
            return self._int_range(e.body)
        old = self.push(e.var, value)
        try:
            return self._int_range(e.body)
        finally:
            self.pop(e.var, old)


_RULES: dict[type, Callable] = {
    E.Add: ConstIntBoundAnalyzer._add,
    E.Sub: ConstIntBoundAnalyzer._sub,
    E.Mul: ConstIntBoundAnalyzer._mul,
    E.Div: ConstIntBoundAnalyzer._div,
    E.Mod: ConstIntBoundAnalyzer._mod,
    E.FloorDiv: ConstIntBoundAnalyzer._floordiv,
    E.FloorMod: ConstIntBoundAnalyzer._floormod,
    E.Min: ConstIntBoundAnalyzer._min,
    E.Max: ConstIntBoundAnalyzer._max,
    E.BitAnd: ConstIntBoundAnalyzer._bitand,
    E.BitOr: ConstIntBoundAnalyzer._bitor_xor,
    E.BitXor: ConstIntBoundAnalyzer._bitor_xor,
    E.ShiftLeft: ConstIntBoundAnalyzer._shift,
    E.ShiftRight: ConstIntBoundAnalyzer._shift,
    E.EQ: ConstIntBoundAnalyzer._compare,
    E.NE: ConstIntBoundAnalyzer._compare,
    E.LT: ConstIntBoundAnalyzer._compare,
    E.LE: ConstIntBoundAnalyzer._compare,
    E.GT: ConstIntBoundAnalyzer._compare,
    E.GE: ConstIntBoundAnalyzer._compare,
    E.And: ConstIntBoundAnalyzer._and,
    E.Or: ConstIntBoundAnalyzer._or,
    E.Not: ConstIntBoundAnalyzer._not,
    E.Select: ConstIntBoundAnalyzer._select,
    E.Call: ConstIntBoundAnalyzer._call,
    E.Cast: ConstIntBoundAnalyzer._cast,
    E.Ramp: ConstIntBoundAnalyzer._ramp,
    E.Broadcast: ConstIntBoundAnalyzer._broadcast,
    E.Let: ConstIntBoundAnalyzer._let,
}


def const_int_bound(e: PrimExpr, var_bounds: Mapping[Var, IntBound] | None = None) -> IntBound:
    """A sound constant bound of an integer or bool expression (bool: within [0, 1]).

    Every value `e` takes (each lane, for vectors) when each variable lies in its bound in
    `var_bounds` (variables without one: their dtype's range) lies in the result. Non-integer
    expressions give `IntBound.everything()`.
    """
    return ConstIntBoundAnalyzer(var_bounds).bound(e)
