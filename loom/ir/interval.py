"""Symbolic intervals: the interval of an index expression while some variables range over
intervals. It serves bound inference between schedule stages and, like TVM's, assumes that the
index arithmetic does not overflow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from loom.abi.dtype import DataType
from loom.ir import expr as E
from loom.ir.bound import ConstIntBoundAnalyzer, IntBound, Range, dtype_range
from loom.ir.expr import PrimExpr, Var
from loom.ir.linear import Linear, linearize, to_expr
from loom.ir.op import cast
from loom.ir.simplify import Analyzer
from loom.ir.visitor import child_vars, free_vars, substitute

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
    evaluator = _IntervalEvaluator.create(relax, var_bounds)
    result = evaluator.interval_of(e)
    if result is None or not var_bounds:
        return result
    for end in result:
        if free_vars(end) <= var_bounds.keys():
            b = evaluator.fixed.const_int_bound(end)  # an analyzer with exactly var_bounds
            lo, hi = dtype_range(end.dtype)
            if b.lo is None or b.hi is None or (b.lo <= lo and b.hi >= hi):
                return None  # the end may wrap around: no sound interval
    return result


def _end(value: PrimExpr | int, var: Var) -> PrimExpr:
    """An end of a relax range in the dtype of its variable (integer ends of another width
    are cast, as the loop variable would be)."""
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
            known = not child_vars(e).isdisjoint(self.relax)  # kept on each node
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
