"""Integer bound analysis: constant bounds of expressions and symbolic intervals.

`const_int_bound` is sound under the IR's wraparound: every integer value an expression can take
(as the IR evaluates it, wrapping to its width) lies in the bound it returns. Whenever the
mathematical range of a sub-expression may leave its dtype's range, that sub-expression's bound is
the whole dtype range.

`symbolic_interval` gives the interval of an index expression while some variables range over
intervals; it serves bound inference between schedule stages and, like TVM's, assumes that the
index arithmetic does not overflow.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping

from loom.ir import expr as E
from loom.ir.dtype import DataType
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


# -- symbolic intervals -------------------------------------------------------------------------

Interval = tuple[PrimExpr, PrimExpr]


def symbolic_interval(
    e: PrimExpr,
    relax: Mapping[Var, tuple[PrimExpr | int, PrimExpr | int]],
    var_bounds: Mapping[Var, IntBound] | None = None,
) -> Interval | None:
    """The interval `(lo, hi)` (inclusive, simplified) of the integer expression `e` when each
    variable of `relax` ranges over its own `[lo_v, hi_v]` and the other variables stay symbols.

    Exact for linear expressions (after simplification); sound, possibly wider, through
    floordiv/floormod/div/mod, min/max, select/if_then_else, multiplication and widening casts.
    None when `e` cannot be bounded (a load or call that depends on a relaxed variable, a product
    of operands of unknown sign, ...): the caller then uses the whole domain. Like TVM's bound
    inference, it assumes that the index arithmetic does not overflow its dtype; it returns None
    when a constant or coefficient of an end is not representable. `var_bounds` gives constant
    bounds of the other variables and is used to simplify the ends. When every variable of an
    end has a bound there and the end can still overflow, the result is None: the assumption is
    only made where nothing can check it.
    """
    result = _IntervalEvaluator.create(relax, var_bounds).interval_of(e)
    if result is None or not var_bounds:
        return result
    from loom.ir.visitor import free_vars

    for end in result:
        if free_vars(end) <= var_bounds.keys():
            b = const_int_bound(end, var_bounds)
            lo, hi = dtype_range(end.dtype)
            if b.lo is None or b.hi is None or (b.lo <= lo and b.hi >= hi):
                return None  # the end may wrap around: no sound interval
    return result


def _end(value: PrimExpr | int, var: Var) -> PrimExpr:
    """An end of a relax range in the dtype of its variable (integer ends of another width
    are cast, as the loop variable would be)."""
    from loom.ir.op import cast

    if not isinstance(value, PrimExpr):
        return E.IntImm(value, var.dtype)
    if value.dtype == var.dtype:
        return value
    if not (value.dtype.is_integer and value.dtype.lanes == 1):
        raise TypeError(f"relax range of {var.name}: {var.dtype} has an end {value}: {value.dtype}")
    return cast(value, var.dtype)


def _representable(coeffs: list[int], dt: DataType) -> bool:
    lo, hi = dtype_range(dt)
    if dt.is_uint:
        lo = -hi  # a negative coefficient is printed as a subtraction
    return all(lo <= c <= hi for c in coeffs)


class _IntervalEvaluator:
    """Computes symbolic intervals. `full` knows the constant bounds of the relaxed variables
    (to simplify `e` and to decide signs); `fixed` does not and simplifies the ends."""

    def __init__(self, relax: dict[Var, Interval], fixed, full, var_bounds) -> None:
        self.relax = relax
        self.fixed = fixed
        self.full = full
        self.var_bounds = var_bounds
        self._deps: dict[PrimExpr, bool] = {}

    @staticmethod
    def create(relax, var_bounds) -> _IntervalEvaluator:
        from loom.ir.simplify import Analyzer

        ends = {v: (_end(lo, v), _end(hi, v)) for v, (lo, hi) in relax.items()}
        fixed, full = Analyzer(var_bounds), Analyzer(var_bounds)
        for v, (lo, hi) in ends.items():
            rlo, rhi = fixed.bounds.range(lo), fixed.bounds.range(hi)
            full.bind(v, (rlo[0], rhi[1]) if rlo[0] <= rhi[1] else None)
        return _IntervalEvaluator(ends, fixed, full, var_bounds)

    def without(self, var: Var) -> _IntervalEvaluator:
        relax = {v: r for v, r in self.relax.items() if v is not var and v != var}
        return _IntervalEvaluator(relax, self.fixed, self.full, self.var_bounds)

    def interval_of(self, e: PrimExpr) -> Interval | None:
        r = self.interval(e)
        if r is None or self.always_wraps(r):
            return None
        lo, hi = self.fixed.simplify(r[0]), self.fixed.simplify(r[1])
        if self.depends(lo) or self.depends(hi):
            return None  # relax ranges that refer to each other in a cycle
        return lo, hi

    # -- helpers --------------------------------------------------------------------------------
    def depends(self, e: PrimExpr) -> bool:
        """True if `e` uses a relaxed variable."""
        if not self.relax:
            return False
        known = self._deps.get(e)
        if known is None:
            from loom.ir.visitor import free_vars

            known = not free_vars(e).isdisjoint(self.relax)
            self._deps[e] = known
        return known

    def always_wraps(self, r: Interval) -> bool:
        """True if a sub-expression of an end leaves its dtype for every value of the fixed
        variables: such an end would be silently wrong once simplified (folded and wrapped)."""
        exact = ConstIntBoundAnalyzer(self.var_bounds, exact=True)
        exact.range(r[0])
        exact.range(r[1])
        return exact.always_wraps

    def _range(self, e: PrimExpr) -> Range:
        r = self.full.bounds.range(e)
        assert r is not None
        return r

    # -- intervals ------------------------------------------------------------------------------
    def interval(self, e: PrimExpr) -> Interval | None:
        if not self.depends(e):
            return e, e
        dt = e.dtype
        if type(e) is E.Broadcast:
            return self.interval(e.value)
        if dt.lanes > 1:
            return None
        if dt.is_bool:
            return E.IntImm(0, dt), E.IntImm(1, dt)
        if not dt.is_integer:
            return None
        from loom.ir.linear import Linear, linearize, to_expr

        s = self.full.simplify(e)
        if not self.depends(s):
            return s, s
        lin = linearize(s)
        lo = Linear(dt, const=lin.const, modular=False)
        hi = Linear(dt, const=lin.const, modular=False)
        for atom, c in lin.terms.items():
            r = self.atom(atom)
            if r is None:
                return None
            low, high = r if c > 0 else (r[1], r[0])
            lo.add(linearize(low, modular=False), c)
            hi.add(linearize(high, modular=False), c)
        for end in (lo, hi):
            if not _representable([end.const, *end.terms.values()], dt):
                return None
        return to_expr(lo), to_expr(hi)

    def atom(self, a: PrimExpr) -> Interval | None:
        if not self.depends(a):
            return a, a
        t = type(a)
        if t is Var:
            return self.var_interval(a)
        if t is E.FloorDiv or t is E.Div:
            return self.div_interval(a)
        if t is E.FloorMod or t is E.Mod:
            return self.mod_interval(a)
        if t is E.Min or t is E.Max:
            ra, rb = self.interval(a.a), self.interval(a.b)
            if ra is None or rb is None:
                return None
            return t(ra[0], rb[0]), t(ra[1], rb[1])
        if t is E.Select:
            return self.union(a.true_value, a.false_value)
        if t is E.Call and a.kind == E.CallKind.INTRINSIC and a.op == "if_then_else":
            return self.union(a.args[1], a.args[2])
        if t is E.Mul:
            return self.product(a.a, a.b)
        if t is E.Cast:
            return self.cast_interval(a)
        if t is E.Let:
            from loom.ir.visitor import substitute

            return self.interval(substitute(a.body, {a.var: a.value}))
        return None

    def var_interval(self, v: Var) -> Interval | None:
        lo, hi = self.relax[v]
        if not (self.depends(lo) or self.depends(hi)):
            return lo, hi
        inner = self.without(v)
        rlo, rhi = inner.interval(lo), inner.interval(hi)
        if rlo is None or rhi is None:
            return None
        return rlo[0], rhi[1]

    def union(self, t: PrimExpr, f: PrimExpr) -> Interval | None:
        rt, rf = self.interval(t), self.interval(f)
        if rt is None or rf is None:
            return None
        return E.Min(rt[0], rf[0]), E.Max(rt[1], rf[1])

    def div_interval(self, a: E.FloorDiv | E.Div) -> Interval | None:
        # Both divisions are monotone in the dividend for a divisor of fixed sign.
        if self.depends(a.b):
            return None
        r = self.interval(a.a)
        if r is None:
            return None
        cls = type(a)
        rd = self._range(a.b)
        if rd[0] > 0:
            return cls(r[0], a.b), cls(r[1], a.b)
        if rd[1] < 0:
            return cls(r[1], a.b), cls(r[0], a.b)
        return None

    def mod_interval(self, a: E.FloorMod | E.Mod) -> Interval | None:
        x, d = a.a, a.b
        if self.depends(d):
            return None
        dt = a.dtype
        rd = self._range(d)
        nonneg = type(a) is E.FloorMod or self._range(x)[0] >= 0
        if type(d) is E.IntImm and d.value > 0:
            c = d.value
            if nonneg:
                return self.floormod_const(x, c)
            # truncating remainder of a possibly negative dividend: its sign follows x
            upper = 0 if self._range(x)[1] <= 0 else c - 1
            return E.IntImm(1 - c, dt), E.IntImm(upper, dt)
        if rd[0] > 0 and nonneg:
            return E.IntImm(0, dt), E.Sub(d, E.IntImm(1, dt))
        if rd[1] < 0 and type(a) is E.FloorMod:
            return E.Add(d, E.IntImm(1, dt)), E.IntImm(0, dt)
        return None

    def floormod_const(self, x: PrimExpr, c: int) -> Interval:
        """floormod(x, c), c > 0: the shifted interval of x when it lies within one period."""
        from loom.ir.linear import linearize, to_expr

        dt = x.dtype
        whole = E.IntImm(0, dt), E.IntImm(c - 1, dt)
        r = self.interval(x)
        if r is None or self.always_wraps(r):
            return whole
        lo, hi = self.fixed.simplify(r[0]), self.fixed.simplify(r[1])
        rlo, rhi = self.fixed.bounds.range(lo), self.fixed.bounds.range(hi)
        k = rlo[0] // c
        if rhi[1] // c == k:
            lin_lo, lin_hi = linearize(lo), linearize(hi)
            lin_lo.add_const(-k * c)
            lin_hi.add_const(-k * c)
            return to_expr(lin_lo), to_expr(lin_hi)
        # lo = g*m + lo.const with g | c, so floormod(lo, c) <= c - g + (lo.const mod g): the
        # interval stays in one period if the width leaves room below the next multiple of g.
        width = self.fixed.simplify(E.Sub(hi, lo))
        rw = self.fixed.bounds.range(width)
        lin = linearize(lo)
        g = c
        for coeff in lin.terms.values():
            g = math.gcd(g, coeff)
        if rw[1] >= 0 and lin.const % g + rw[1] <= g - 1:
            base = E.FloorMod(lo, E.IntImm(c, dt))
            return base, E.Add(base, width)
        return whole

    def product(self, a: PrimExpr, b: PrimExpr) -> Interval | None:
        ra, rb = self.interval(a), self.interval(b)
        if ra is None or rb is None:
            return None
        if not self.depends(a):
            return self.scale(a, rb)
        if not self.depends(b):
            return self.scale(b, ra)
        (la, ha), (lb, hb) = ra, rb
        nonneg = [self._range(x)[0] >= 0 for x in (la, lb)]
        nonpos = [self._range(x)[1] <= 0 for x in (ha, hb)]
        if nonneg[0] and nonneg[1]:
            return E.Mul(la, lb), E.Mul(ha, hb)
        if nonpos[0] and nonpos[1]:
            return E.Mul(ha, hb), E.Mul(la, lb)
        if nonneg[0] and nonpos[1]:
            return E.Mul(ha, lb), E.Mul(la, hb)
        if nonpos[0] and nonneg[1]:
            return E.Mul(la, hb), E.Mul(ha, lb)
        return None

    def scale(self, p: PrimExpr, r: Interval) -> Interval | None:
        rp = self._range(p)
        if rp[0] >= 0:
            return E.Mul(p, r[0]), E.Mul(p, r[1])
        if rp[1] <= 0:
            return E.Mul(p, r[1]), E.Mul(p, r[0])
        return None

    def cast_interval(self, a: E.Cast) -> Interval | None:
        src, dst = a.value.dtype, a.dtype
        if src.is_bool and dst.is_integer:
            return E.IntImm(0, dst), E.IntImm(1, dst)
        rs, rd = dtype_range(src), dtype_range(dst)
        if src.is_integer and dst.is_integer and rd[0] <= rs[0] and rs[1] <= rd[1]:
            r = self.interval(a.value)
            if r is not None:
                return E.Cast(dst, r[0]), E.Cast(dst, r[1])
        return None
