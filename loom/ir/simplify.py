"""The simplifier of the loop IR.

Guarantee: the result has the dtype of the input and the same value for every assignment of the
variables within their bounds (variables without a bound range over their dtype), under the IR's
semantics (integers wrap to their width, `Div`/`Mod` truncate, `FloorDiv`/`FloorMod` floor).

- Constants fold through `loom.ir.semantics`, so folding matches the interpreter exactly. Float
  operations are only folded when all operands are constants; they are never reassociated.
- Scalar integer `+ - *` become the canonical linear form of `loom.ir.linear` (a ring identity,
  valid under wraparound), with `floordiv(x, c)*c + floormod(x, c)` merged back into `x`.
- Rules that are only true over the mathematical integers (division rules, moving constants
  across a comparison, removing a min/max) are applied only when the bound analysis shows that
  the expressions involved cannot wrap.
- Statements: loops bind their variable's bound for their body; loops of extent 0 vanish, loops
  of extent 1 become their body; decided conditions and proven assertions disappear.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from loom.abi.dtype import BOOL, DataType
from loom.errors import InterpreterError
from loom.ir import expr as E
from loom.ir import op, semantics
from loom.ir.bound import ConstIntBoundAnalyzer, IntBound, Range, decide, dtype_range
from loom.ir.expr import (
    Broadcast,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    PrimExpr,
    Ramp,
    StringImm,
    Var,
    same_value,
)
from loom.ir.function import IRModule, PrimFunc
from loom.ir.linear import Linear, linear_range, linearize, to_expr
from loom.ir.stmt import (
    NOP,
    AssertStmt,
    AttrStmt,
    BufferStore,
    For,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
    is_nop,
    seq,
)
from loom.ir.visitor import Mutator, children, substitute, uses_var, visit_each_once

_LEAVES = (IntImm, FloatImm, StringImm)
_FIXPOINT = "_simplified_under"
"""Attribute of an IR node known to be its own simplification (a round of the rules gives it
back): the variables' bounds under which that holds (ConstIntBoundAnalyzer.snapshot). Set on
what `Analyzer.simplify` returns unchanged, and on the nodes the rules build that are (see
`Analyzer._settled`)."""
_LINEAR_NODES = (E.Add, E.Sub, E.Mul)
_DIVISIONS = (E.Div, E.Mod, FloorDiv, FloorMod)
_ORDERED = (E.LT, E.LE, E.GT, E.GE)
# not(a OP b) == (b' OP' a'): the inverse class and whether its operands are swapped
_INVERSE: dict[type, tuple[type, bool]] = {
    E.LT: (E.LE, True),
    E.LE: (E.LT, True),
    E.GT: (E.LE, False),
    E.GE: (E.LT, False),
    E.EQ: (E.NE, False),
    E.NE: (E.EQ, False),
}


def _is_scalar_int(dt: DataType) -> bool:
    return dt.is_integer and dt.lanes == 1


def _bool_const(e: PrimExpr) -> bool | None:
    """The value of a constant condition (scalar or broadcast), else None."""
    if type(e) is Broadcast:
        e = e.value
    return bool(e.value) if type(e) is IntImm else None


def _fits(r: Range, dt: DataType) -> bool:
    full = dtype_range(dt)
    return full is not None and full[0] <= r[0] and r[1] <= full[1]


def _fold(cls: type, a: PrimExpr, b: PrimExpr) -> PrimExpr | None:
    """The constant `cls(a, b)` when both are scalar constants and the result is defined."""
    ta, tb = type(a), type(b)
    if ta is IntImm and tb is IntImm:
        if a.dtype.is_bool:
            return None
        if cls in _DIVISIONS and b.value == 0:
            return None
        if cls in (E.ShiftLeft, E.ShiftRight) and not 0 <= b.value < a.dtype.bits:
            return None
        return IntImm(semantics.binary(cls.__name__, a.value, b.value, a.dtype), a.dtype)
    if ta is FloatImm and tb is FloatImm:
        return FloatImm(semantics.binary(cls.__name__, a.value, b.value, a.dtype), a.dtype)
    return None


def _rebuild2(e, a: PrimExpr, b: PrimExpr):
    return e if a is e.a and b is e.b else type(e)(a, b)


def _gcd_of(lin: Linear, c: int) -> int:
    g = math.gcd(c, lin.const)
    for k in lin.terms.values():
        g = math.gcd(g, k)
    return g


def _divided(lin: Linear, g: int) -> Linear:
    out = Linear(lin.dtype)
    for atom, k in lin.terms.items():
        out.add_term(atom, k // g)
    out.add_const(lin.const // g)
    return out


def _has_extern_call(e: PrimExpr) -> bool:
    found = False

    def check(n) -> None:
        nonlocal found
        if isinstance(n, E.Call) and n.kind == E.CallKind.EXTERN:
            found = True

    visit_each_once(e, check)
    return found


def _lossless(src: DataType, dst: DataType) -> bool:
    """True if casting any `src` value to `dst` keeps it (so casting back restores it)."""
    rs, rd = dtype_range(src), dtype_range(dst)
    if rs is None or rd is None or dst.is_bool:
        return False
    return rd[0] <= rs[0] and rs[1] <= rd[1]


class Analyzer:
    """Bounds of variables plus the simplifier and prover that use them.

    Results are cached per expression; binding a variable to a different bound clears the caches.
    """

    def __init__(self, var_bounds: Mapping[Var, IntBound] | None = None) -> None:
        self.bounds = ConstIntBoundAnalyzer(var_bounds)
        self._cache: dict[PrimExpr, PrimExpr] = {}
        self._generation = self.bounds.generation

    # -- public API -----------------------------------------------------------------------------
    def bind(self, var: Var, bound: IntBound | tuple[int | None, int | None] | None) -> None:
        """Give `var` a bound for all later queries."""
        self.bounds.bind(var, bound)

    @contextmanager
    def scope(self, var: Var, rng: Range) -> Iterator[None]:
        """Bind `var` to the range `(lo, hi)` inside a `with` block."""
        old = self.bounds.push(var, rng)
        try:
            yield
        finally:
            self.bounds.pop(var, old)

    def const_int_bound(self, e: PrimExpr) -> IntBound:
        return self.bounds.bound(e)

    def simplify(self, e: PrimExpr) -> PrimExpr:
        """An equivalent expression of the same dtype (see the module docstring). A rewrite can
        expose another (a comparison turned into one the bounds decide), so the rules run again
        until the expression stops changing (three rounds at most).

        An expression found to be its own simplification keeps the variables' bounds of that
        moment (`_FIXPOINT`): the result depends on nothing else, so asked again under the same
        bounds (a later pass, another Analyzer) it is returned as is, without a round."""
        d = getattr(e, "__dict__", None)
        if d is not None and self._marked(d):
            return e
        for _ in range(3):
            new = self._expr(e)
            if new is e or same_value(new, e):
                d = getattr(e, "__dict__", None)
                if d is not None:
                    d[_FIXPOINT] = self.bounds.snapshot()
                break
            e = new
        return e

    def can_prove(self, cond: PrimExpr) -> bool:
        """True only if `cond` (bool, every lane) holds for all values within the bounds."""
        if not cond.dtype.is_bool:
            raise TypeError(f"can_prove needs a bool condition, got {cond.dtype}: {cond}")
        return _bool_const(self._expr(cond)) is True

    def simplify_stmt(self, s: Stmt) -> Stmt:
        return _StmtSimplifier(self).visit(s)

    # -- dispatch -------------------------------------------------------------------------------
    def _expr(self, e: PrimExpr) -> PrimExpr:
        t = type(e)
        if t in _LEAVES:
            return e
        if t is Var:
            return self._var(e)
        if self._generation != self.bounds.generation:
            self._cache.clear()
            self._generation = self.bounds.generation
        # A node known to be its own simplification under these bounds is returned before its
        # hash (a walk of the whole tree, for a node just built) is computed for the cache.
        d = e.__dict__
        if self._marked(d):
            return e
        r = self._cache.get(e)
        if r is None:
            r = _DISPATCH.get(t, Analyzer._generic)(self, e)
            self._cache[e] = r
            if r is e:
                d[_FIXPOINT] = self.bounds.snapshot()
        return r

    # -- fixpoints ------------------------------------------------------------------------------
    # A rule whose result depends only on the node's class, its other fields and its simplified
    # children gives back the node it rebuilt from those children when it is simplified again,
    # if they are fixpoints: such results are marked (`_FIXPOINT`), so that the next round of
    # `simplify` (which confirms that nothing changes any more) finds them at once.
    def _settled(self, x: PrimExpr) -> bool:
        """True if `x` is known to be its own simplification under the current bounds."""
        t = type(x)
        if t in _LEAVES:
            return True
        if t is Var:
            r = self.bounds.var_range(x)
            return r is None or r[0] != r[1]
        return self._marked(x.__dict__)

    def _marked(self, d: dict) -> bool:
        """Whether a node's `__dict__` `d` marks it as its own simplification under the current
        bounds. A mark of equal bounds (another Analyzer's, an earlier scope's) is replaced by
        this snapshot, so that the next check is an identity test."""
        mark = d.get(_FIXPOINT)
        if mark is None:
            return False
        snap = self.bounds.snapshot()
        if mark is snap:
            return True
        if mark == snap:
            d[_FIXPOINT] = snap
            return True
        return False

    def _settle(self, x: PrimExpr) -> PrimExpr:
        """Mark `x` as its own simplification under the current bounds; returns it."""
        x.__dict__[_FIXPOINT] = self.bounds.snapshot()
        return x

    def _generic(self, e: PrimExpr) -> PrimExpr:
        r = _ExprChildren(self).generic_mutate(e)
        if r is not e and all(self._settled(c) for c in children(r)):
            self._settle(r)  # simplifying it again only simplifies its children again
        return r

    def _range(self, e: PrimExpr) -> Range:
        r = self.bounds.range(e)
        assert r is not None, f"no integer bound for {e}"
        return r

    def _var(self, v: Var) -> PrimExpr:
        r = self.bounds.var_range(v)
        if r is not None and r[0] == r[1]:
            return IntImm(r[0], v.dtype)
        return v

    # -- linear forms ---------------------------------------------------------------------------
    def _lin_range(self, lin: Linear) -> Range:
        return linear_range(lin, self._range)

    def _exact(self, lin: Linear) -> bool:
        """True if the combination never wraps, so the expression equals its value over Z."""
        return _fits(self._lin_range(lin), lin.dtype)

    def _lin(self, e: PrimExpr) -> Linear:
        """The linear form of a scalar integer expression, with simplified atoms."""
        out = Linear(e.dtype)
        stack: list[tuple[PrimExpr, int]] = [(e, 1)]
        while stack:
            x, k = stack.pop()
            t = type(x)
            if t is E.Add:
                stack.append((x.b, k))
                stack.append((x.a, k))
            elif t is E.Sub:
                stack.append((x.b, -k))
                stack.append((x.a, k))
            elif t is IntImm:
                out.add_const(k * x.value)
            elif t is E.Mul:
                # By a constant: the other side's form, scaled. Adding it with the product of
                # the factors is the same as scaling it first (coefficients live modulo 2**bits).
                if type(x.b) is IntImm:
                    y, c = x.a, x.b.value
                elif type(x.a) is IntImm:
                    y, c = x.b, x.a.value
                else:
                    out.add(self._lin_mul(x), k)
                    continue
                if type(y) is Var or type(y) is IntImm:
                    stack.append((y, k * c))  # its form is itself: no Linear of its own
                else:
                    out.add(self._lin(y), k * c)
            else:
                r = self._var(x) if t is Var else self._expr(x)
                tr = type(r)
                if tr is Var:
                    out.add_term(r, k)  # what adding linearize(r) does
                elif tr is IntImm:
                    out.add_const(k * r.value)
                else:
                    out.add(linearize(r), k)
        self._merge_divmod(out)
        return out

    def _lin_mul(self, x: E.Mul) -> Linear:
        la, lb = self._lin(x.a), self._lin(x.b)
        if la.is_const:
            return lb.scaled(la.const)
        if lb.is_const:
            return la.scaled(lb.const)
        # A product of non-constants is an atom; sums inside it are not expanded (no blow-up).
        if la.const == 0 and lb.const == 0 and len(la.terms) == 1 and len(lb.terms) == 1:
            ((ta, ca),) = la.terms.items()
            ((tb, cb),) = lb.terms.items()
            return Linear(x.dtype, {E.Mul(ta, tb): ca * cb})
        return Linear(x.dtype, {E.Mul(to_expr(la), to_expr(lb)): 1})

    def _merge_divmod(self, lin: Linear) -> None:
        """Rewrite `k*c*floordiv(x, c) + k*floormod(x, c)` (also Div/Mod) into `k*x`.

        This is exact for every integer x (it is how the remainder is defined), so it needs no
        bound check; it undoes the split of a fused loop index.
        """
        for atom in lin.terms:
            if type(atom) is FloorMod or type(atom) is E.Mod:
                break
        else:
            return  # no remainder to merge
        changed = True
        while changed:
            changed = False
            for atom, k in list(lin.terms.items()):
                t = type(atom)
                if t not in (FloorMod, E.Mod) or type(atom.b) is not IntImm or not atom.b.value:
                    continue
                quotient = (FloorDiv if t is FloorMod else E.Div)(atom.a, atom.b)
                kq = lin.terms.get(quotient)
                if kq is None or atom not in lin.terms or kq != lin._norm(k * atom.b.value):
                    continue
                lin.terms.pop(atom)
                lin.terms.pop(quotient)
                lin.add(linearize(atom.a), k)
                changed = True

    def _arith(self, e: E.Add | E.Sub | E.Mul) -> PrimExpr:
        dt = e.dtype
        if dt.lanes == 1 and dt.kind in ("int", "uint"):  # _is_scalar_int
            lin = self._lin(e)
            r = to_expr(lin)
            # Linearizing the canonical form again gives back the same terms in the order it
            # prints them when each atom is its own simplification and stays one term (not a
            # product of non-constants, which `_lin_mul` takes apart): r is then a fixpoint.
            if type(r) in _LINEAR_NODES and all(
                type(a) is not E.Mul and self._settled(a) for a in lin.terms
            ):
                self._settle(r)
            return r
        return self._binary(e)

    # -- generic binary operations and vectors --------------------------------------------------
    def _binary(self, e) -> PrimExpr:
        return self._finish_binary(e, self._expr(e.a), self._expr(e.b))

    def _finish_binary(self, e, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        folded = _fold(type(e), a, b)
        if folded is not None:
            return folded
        if a.dtype.lanes > 1:
            vector = self._vector_binary(type(e), a, b)
            if vector is not None:
                return vector
        r = _rebuild2(e, a, b)
        if r is not e and self._settled(a) and self._settled(b):
            self._settle(r)  # the same rules see the same operands again
        return r

    def _vector_binary(self, cls: type, a: PrimExpr, b: PrimExpr) -> PrimExpr | None:
        lanes = a.dtype.lanes
        if type(a) is Broadcast and type(b) is Broadcast:
            return Broadcast(self._expr(cls(a.value, b.value)), lanes)
        if not a.dtype.is_integer:
            return None  # float lanes: reassociating would change rounding
        if cls in (E.Add, E.Sub) and (type(a) is Ramp or type(b) is Ramp):
            ba, sa = _ramp_parts(a)
            bb, sb = _ramp_parts(b)
            if ba is not None and bb is not None:
                return self._ramp(cls(ba, bb), cls(sa, sb), lanes)
        if cls is E.Mul:
            for x, y in ((a, b), (b, a)):
                if type(x) is Ramp and type(y) is Broadcast:
                    return self._ramp(E.Mul(x.base, y.value), E.Mul(x.stride, y.value), lanes)
        if cls in (FloorDiv, FloorMod) and type(a) is Ramp and type(b) is Broadcast:
            return self._ramp_divmod(cls, a, b.value)
        return None

    def _ramp(self, base: PrimExpr, stride: PrimExpr, lanes: int) -> PrimExpr:
        base, stride = self._expr(base), self._expr(stride)
        if type(stride) is IntImm and stride.value == 0:
            r = Broadcast(base, lanes)
        else:
            r = Ramp(base, stride, lanes)
        # simplifying a ramp or a broadcast again only simplifies its parts again
        if self._settled(base) and self._settled(stride):
            self._settle(r)
        return r

    def _ramp_divmod(self, cls: type, a: Ramp, divisor: PrimExpr) -> PrimExpr | None:
        """floordiv/floormod of a ramp by a positive constant, when no lane wraps."""
        if type(divisor) is not IntImm or divisor.value <= 0 or type(a.stride) is not IntImm:
            return None
        c, s, n = divisor.value, a.stride.value, a.lanes
        rb = self._range(a.base)
        span = (rb[0] + min(0, s * (n - 1)), rb[1] + max(0, s * (n - 1)))
        if not _fits(span, a.base.dtype):
            return None
        dt = a.base.dtype
        if s % c == 0:
            if cls is FloorDiv:
                return self._ramp(FloorDiv(a.base, divisor), IntImm(s // c, dt), n)
            return Broadcast(self._expr(FloorMod(a.base, divisor)), n)
        if s > 0:
            rem = self._expr(FloorMod(a.base, divisor))
            if self._range(rem)[1] + s * (n - 1) < c:
                if cls is FloorDiv:
                    return Broadcast(self._expr(FloorDiv(a.base, divisor)), n)
                return self._ramp(rem, a.stride, n)
        return None

    # -- division -------------------------------------------------------------------------------
    def _floordiv(self, e: FloorDiv) -> PrimExpr:
        a, b = self._expr(e.a), self._expr(e.b)
        if not _is_scalar_int(e.dtype):
            return self._finish_binary(e, a, b)
        if type(b) is IntImm and b.value > 0:
            return self._floordiv_const(a, b.value)
        return self._divmod_by_expr(e, a, b)

    def _floormod(self, e: FloorMod) -> PrimExpr:
        a, b = self._expr(e.a), self._expr(e.b)
        if not _is_scalar_int(e.dtype):
            return self._finish_binary(e, a, b)
        if type(b) is IntImm and b.value > 0:
            return self._floormod_const(a, b.value)
        return self._divmod_by_expr(e, a, b)

    def _truncdiv(self, e: E.Div) -> PrimExpr:
        a, b = self._expr(e.a), self._expr(e.b)
        if not _is_scalar_int(e.dtype):
            return self._finish_binary(e, a, b)
        if type(b) is IntImm and b.value == 1:
            return a
        if self._nonneg_by_positive(a, b):
            # Truncation and flooring agree for a >= 0, b > 0.
            if type(b) is IntImm:
                return self._floordiv_const(a, b.value)
            return self._divmod_by_expr(FloorDiv(a, b), a, b)
        return self._divmod_by_expr(e, a, b)

    def _truncmod(self, e: E.Mod) -> PrimExpr:
        a, b = self._expr(e.a), self._expr(e.b)
        if not _is_scalar_int(e.dtype):
            return self._finish_binary(e, a, b)
        if type(b) is IntImm and b.value in (1, -1):
            return IntImm(0, e.dtype)
        if self._nonneg_by_positive(a, b):
            if type(b) is IntImm:
                return self._floormod_const(a, b.value)
            return self._divmod_by_expr(FloorMod(a, b), a, b)
        return self._divmod_by_expr(e, a, b)

    def _nonneg_by_positive(self, a: PrimExpr, b: PrimExpr) -> bool:
        return self._range(a)[0] >= 0 and self._range(b)[0] > 0

    def _divmod_by_expr(self, e, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        """Division by a non-constant (or non-positive constant) divisor: fold, or use bounds."""
        folded = _fold(type(e), a, b)
        if folded is not None:
            return folded
        ra, rb = self._range(a), self._range(b)
        if rb[0] > 0 and 0 <= ra[0] and ra[1] < rb[0]:
            return IntImm(0, e.dtype) if type(e) in (FloorDiv, E.Div) else a
        return _rebuild2(e, a, b)

    def _split(self, lin: Linear, c: int) -> tuple[Linear, Linear] | None:
        """`lin = c*q + r` with `q` the terms divisible by c; None unless lin and r never wrap."""
        if not self._exact(lin):
            return None
        q, r = Linear(lin.dtype), Linear(lin.dtype)
        for atom, k in lin.terms.items():
            if k % c == 0:
                q.add_term(atom, k // c)
            else:
                r.add_term(atom, k)
        if not r.terms:
            q.add_const(lin.const // c)
            r.add_const(lin.const % c)
            return q, r
        moved = r.copy()
        moved.add_const(lin.const % c)
        if self._exact(moved):
            q.add_const(lin.const // c)
            return q, moved
        r.add_const(lin.const)
        return (q, r) if self._exact(r) else None

    def _floordiv_const(self, x: PrimExpr, c: int) -> PrimExpr:
        dt = x.dtype
        if c == 1:
            return x
        if type(x) is IntImm:
            return IntImm(semantics.binary("FloorDiv", x.value, c, dt), dt)
        rx = self._range(x)
        if rx[0] // c == rx[1] // c:
            return IntImm(rx[0] // c, dt)
        if type(x) is FloorDiv and type(x.b) is IntImm and x.b.value > 0:
            if x.b.value * c <= dtype_range(dt)[1]:
                return self._floordiv_const(x.a, x.b.value * c)
        parts = self._split(linearize(x), c)
        if parts is None:
            return FloorDiv(x, IntImm(c, dt))
        q, r = parts
        g = _gcd_of(r, c)
        r, c = _divided(r, g), c // g
        rr = self._lin_range(r)
        if rr[0] // c == rr[1] // c:
            q.add_const(rr[0] // c)
        elif c == 1:
            q.add(r)
        else:
            q.add_term(FloorDiv(to_expr(r), IntImm(c, dt)), 1)
        return to_expr(q)

    def _floormod_const(self, x: PrimExpr, c: int) -> PrimExpr:
        dt = x.dtype
        if c == 1:
            return IntImm(0, dt)
        if type(x) is IntImm:
            return IntImm(semantics.binary("FloorMod", x.value, c, dt), dt)
        rx = self._range(x)
        if rx[0] // c == rx[1] // c:
            k = rx[0] // c
            if k == 0:
                return x
            shifted = linearize(x)
            shifted.add_const(-k * c)
            return to_expr(shifted)
        if type(x) is FloorMod and type(x.b) is IntImm and x.b.value > 0 and x.b.value % c == 0:
            return self._floormod_const(x.a, c)
        parts = self._split(linearize(x), c)
        if parts is None:
            return FloorMod(x, IntImm(c, dt))
        _, r = parts
        g = _gcd_of(r, c)
        r, c2 = _divided(r, g), c // g
        rr = self._lin_range(r)
        if rr[0] // c2 == rr[1] // c2:
            r.add_const(-(rr[0] // c2) * c2)
            out = r
        else:
            out = Linear(dt, {FloorMod(to_expr(r), IntImm(c2, dt)): 1})
        return to_expr(out.scaled(g))

    # -- min / max ------------------------------------------------------------------------------
    def _minmax(self, e: E.Min | E.Max) -> PrimExpr:
        a, b = self._expr(e.a), self._expr(e.b)
        if not _is_scalar_int(e.dtype):
            return self._finish_binary(e, a, b)
        folded = _fold(type(e), a, b)
        if folded is not None:
            return folded
        if a == b:
            return a
        is_min = type(e) is E.Min
        if self._prove_le(a, b):
            return a if is_min else b
        if self._prove_le(b, a):
            return b if is_min else a
        return _rebuild2(e, a, b)

    def _prove_le(self, a: PrimExpr, b: PrimExpr) -> bool:
        """True if a <= b for all values (by bounds, or by the bound of b - a over Z)."""
        ra, rb = self._range(a), self._range(b)
        if ra[1] <= rb[0]:
            return True
        diff = self._exact_diff(linearize(b), linearize(a))
        return diff is not None and self._lin_range(diff)[0] >= 0

    def _exact_diff(self, la: Linear, lb: Linear) -> Linear | None:
        """la - lb over Z, if neither side ever wraps (so it equals the difference of values)."""
        if not (self._exact(la) and self._exact(lb)):
            return None
        diff = la.copy(modular=False)
        diff.add(lb, -1)
        return diff

    # -- comparisons and logic ------------------------------------------------------------------
    def _compare(self, e: E.CompareOp) -> PrimExpr:
        cls = type(e)
        a, b = self._expr(e.a), self._expr(e.b)
        if type(a) in (IntImm, FloatImm) and type(b) in (IntImm, FloatImm):
            return IntImm(int(semantics.compare(cls.__name__, a.value, b.value)), BOOL)
        elem = a.dtype.element
        if a.dtype.lanes > 1:
            if type(a) is Broadcast and type(b) is Broadcast:
                return Broadcast(self._expr(cls(a.value, b.value)), a.dtype.lanes)
            if elem.is_integer:
                verdict = decide(cls, self._range(a), self._range(b))
                if verdict is not None:
                    return Broadcast(IntImm(int(verdict), BOOL), a.dtype.lanes)
            return _rebuild2(e, a, b)
        if elem.is_bool:
            verdict = decide(cls, self._range(a), self._range(b))
            return _rebuild2(e, a, b) if verdict is None else IntImm(int(verdict), BOOL)
        if not elem.is_integer:
            return _rebuild2(e, a, b)
        return self._compare_int(e, a, b)

    def _compare_int(self, e: E.CompareOp, a: PrimExpr, b: PrimExpr) -> PrimExpr:
        cls = type(e)
        verdict = decide(cls, self._range(a), self._range(b))
        if verdict is not None:
            return IntImm(int(verdict), BOOL)
        la, lb = linearize(a), linearize(b)
        if cls in _ORDERED:
            diff = self._exact_diff(la, lb)
            if diff is None:
                return _rebuild2(e, a, b)
            verdict = decide(cls, self._lin_range(diff), (0, 0))
        else:
            # a == b iff a - b == 0 in the ring: no bound needed.
            diff = la.copy()
            diff.add(lb, -1)
            exact = None if diff.is_const else self._exact_diff(la, lb)
            if diff.is_const:
                verdict = (diff.const == 0) == (cls is E.EQ)
            elif exact is not None:
                verdict = decide(cls, self._lin_range(exact), (0, 0))
        if verdict is not None:
            return IntImm(int(verdict), BOOL)
        return self._canonical_compare(e, a, b, diff)

    def _canonical_compare(self, e: E.CompareOp, a: PrimExpr, b: PrimExpr, diff: Linear):
        """`lhs OP rhs` with lhs the positive terms of a - b and the constant on the right."""
        dt = a.dtype
        lhs = Linear(dt, modular=diff.modular)
        rhs = Linear(dt, modular=diff.modular)
        for atom, k in diff.terms.items():
            if k > 0:
                lhs.add_term(atom, k)
            else:
                rhs.add_term(atom, -k)
        if lhs.terms:
            rhs.add_const(-diff.const)
        else:
            lhs.add_const(diff.const)
        if type(e) in _ORDERED and not (self._exact(lhs) and self._exact(rhs)):
            return _rebuild2(e, a, b)
        return _rebuild2(e, to_expr(lhs), to_expr(rhs))

    def _and_or(self, e: E.And | E.Or) -> PrimExpr:
        a, b = self._expr(e.a), self._expr(e.b)
        is_and = type(e) is E.And
        for x, y in ((a, b), (b, a)):
            value = _bool_const(x)
            if value is not None:
                return y if value == is_and else x
        if a == b:
            return a
        return _rebuild2(e, a, b)

    def _not(self, e: E.Not) -> PrimExpr:
        a = self._expr(e.a)
        value = _bool_const(a)
        if value is not None:
            c = IntImm(int(not value), BOOL)
            return c if a.dtype.lanes == 1 else Broadcast(c, a.dtype.lanes)
        if type(a) is E.Not:
            return a.a
        inverse = _INVERSE.get(type(a))
        # For floats, not(a < b) differs from b <= a when an operand is NaN.
        if inverse is not None and (not a.a.dtype.is_float or type(a) in (E.EQ, E.NE)):
            cls, swap = inverse
            return self._expr(cls(a.b, a.a) if swap else cls(a.a, a.b))
        return e if a is e.a else E.Not(a)

    # -- other expressions ----------------------------------------------------------------------
    def _select(self, e: E.Select) -> PrimExpr:
        cond = self._expr(e.condition)
        value = _bool_const(cond)
        if value is not None:
            return self._expr(e.true_value if value else e.false_value)
        t, f = self._expr(e.true_value), self._expr(e.false_value)
        if t == f:
            return t
        if type(t) is Broadcast and type(f) is Broadcast:
            scalar = cond.value if type(cond) is Broadcast else cond
            if scalar.dtype.lanes == 1:
                return Broadcast(E.Select(scalar, t.value, f.value), t.dtype.lanes)
        if cond is e.condition and t is e.true_value and f is e.false_value:
            return e
        return E.Select(cond, t, f)

    def _call(self, e: E.Call) -> PrimExpr:
        if e.kind == E.CallKind.INTRINSIC and e.op == "if_then_else":
            cond = self._expr(e.args[0])
            value = _bool_const(cond)
            if value is not None:
                return self._expr(e.args[1] if value else e.args[2])
            t, f = self._expr(e.args[1]), self._expr(e.args[2])
            if t == f:
                return t
            args = (cond, t, f)
        else:
            args = tuple(self._expr(a) for a in e.args)
            if e.kind == E.CallKind.INTRINSIC and e.op == "likely":
                if _bool_const(args[0]) is not None:
                    return args[0]
        if all(x is y for x, y in zip(args, e.args)):
            return e
        return e.replace(args=args)

    def _cast(self, e: E.Cast) -> PrimExpr:
        v = self._expr(e.value)
        dt = e.dtype
        if v.dtype == dt:
            return v
        if type(v) in (IntImm, FloatImm) and not dt.is_handle:
            try:
                return op.cast(v, dt)
            except (InterpreterError, ValueError):
                pass
        if type(v) is Broadcast:
            return Broadcast(self._expr(E.Cast(dt.element, v.value)), dt.lanes)
        if type(v) is E.Cast and v.value.dtype == dt and _lossless(dt, v.dtype):
            return v.value
        return e if v is e.value else E.Cast(dt, v)

    def _let(self, e: E.Let) -> PrimExpr:
        value = self._expr(e.value)
        if _is_scalar_int(value.dtype) or value.dtype == BOOL:
            with self.scope(e.var, self._range(value)):
                body = self._expr(e.body)
        else:
            body = self._expr(e.body)
        if not uses_var(body, e.var) and not _has_extern_call(value):
            return body
        if value is e.value and body is e.body:
            return e
        return E.Let(e.var, value, body)

    def _ramp_node(self, e: Ramp) -> PrimExpr:
        return self._ramp(e.base, e.stride, e.lanes)

    def _buffer_load(self, e: E.BufferLoad) -> PrimExpr:
        """The generic rule (`_generic`) for the most common node, without a Mutator."""
        indices = [self._expr(i) for i in e.indices]
        pred = e.predicate
        new_pred = None if pred is None else self._expr(pred)
        if new_pred is pred and all(a is b for a, b in zip(indices, e.indices)):
            return e
        r = E.BufferLoad(e.buffer, tuple(indices), new_pred)
        if all(self._settled(i) for i in indices) and (pred is None or self._settled(new_pred)):
            self._settle(r)  # simplifying it again only simplifies its children again
        return r

    def _broadcast(self, e: Broadcast) -> PrimExpr:
        v = self._expr(e.value)
        if v is e.value:
            return e
        r = Broadcast(v, e.lanes)
        return self._settle(r) if self._settled(v) else r


def _ramp_parts(e: PrimExpr) -> tuple[PrimExpr | None, PrimExpr | None]:
    if type(e) is Ramp:
        return e.base, e.stride
    if type(e) is Broadcast:
        return e.value, IntImm(0, e.value.dtype)
    return None, None


class _ExprChildren(Mutator):
    """Rebuilds a node whose children are simplified by an Analyzer (loads, other nodes)."""

    def __init__(self, analyzer: Analyzer) -> None:
        self.analyzer = analyzer

    def visit(self, node):
        if isinstance(node, PrimExpr):
            return self.analyzer._expr(node)
        return super().visit(node)


_DISPATCH: dict[type, Callable[[Analyzer, PrimExpr], PrimExpr]] = {
    E.Add: Analyzer._arith,
    E.Sub: Analyzer._arith,
    E.Mul: Analyzer._arith,
    FloorDiv: Analyzer._floordiv,
    FloorMod: Analyzer._floormod,
    E.Div: Analyzer._truncdiv,
    E.Mod: Analyzer._truncmod,
    E.Min: Analyzer._minmax,
    E.Max: Analyzer._minmax,
    E.BitAnd: Analyzer._binary,
    E.BitOr: Analyzer._binary,
    E.BitXor: Analyzer._binary,
    E.ShiftLeft: Analyzer._binary,
    E.ShiftRight: Analyzer._binary,
    E.EQ: Analyzer._compare,
    E.NE: Analyzer._compare,
    E.LT: Analyzer._compare,
    E.LE: Analyzer._compare,
    E.GT: Analyzer._compare,
    E.GE: Analyzer._compare,
    E.And: Analyzer._and_or,
    E.Or: Analyzer._and_or,
    E.Not: Analyzer._not,
    E.Select: Analyzer._select,
    E.Call: Analyzer._call,
    E.Cast: Analyzer._cast,
    E.Let: Analyzer._let,
    Ramp: Analyzer._ramp_node,
    Broadcast: Analyzer._broadcast,
    E.BufferLoad: Analyzer._buffer_load,
}


# -- statements ---------------------------------------------------------------------------------

_MIRROR = {E.LT: E.GT, E.LE: E.GE, E.GT: E.LT, E.GE: E.LE, E.EQ: E.EQ}


class _StmtSimplifier(Mutator):
    """Simplifies every expression of a statement tree, with loop and let variables bound."""

    def __init__(self, analyzer: Analyzer) -> None:
        self.an = analyzer

    def visit(self, node):
        if isinstance(node, PrimExpr):
            return self.an.simplify(node)
        return super().visit(node)

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        """What the generic walk does, without its per-field dispatch (the most common node)."""
        simplify = self.an.simplify
        value = simplify(s.value)
        indices = tuple([simplify(i) for i in s.indices])
        if all(a is b for a, b in zip(indices, s.indices)):
            indices = s.indices
        pred = s.predicate
        new_pred = None if pred is None else simplify(pred)
        if value is s.value and indices is s.indices and new_pred is pred:
            return s
        return BufferStore(s.buffer, value, indices, new_pred)

    def visit_For(self, s: For) -> Stmt:
        mn, ext = self.an.simplify(s.min), self.an.simplify(s.extent)
        rm, re = self.an._range(mn), self.an._range(ext)
        if re[1] <= 0:
            return NOP
        if type(ext) is IntImm and ext.value == 1:
            return self.visit(substitute(s.body, {s.loop_var: mn}))
        full = dtype_range(s.loop_var.dtype)
        hi = min(rm[1] + re[1] - 1, full[1])
        with self.an.scope(s.loop_var, (rm[0], hi)):
            body = self.visit(s.body)
        if is_nop(body):
            return NOP
        if mn is s.min and ext is s.extent and body is s.body:
            return s
        return s.replace(min=mn, extent=ext, body=body)

    def visit_IfThenElse(self, s: IfThenElse) -> Stmt:
        cond = self.an.simplify(s.condition)
        value = _bool_const(cond)
        if value is not None:
            taken = s.then_case if value else s.else_case
            return NOP if taken is None else self.visit(taken)
        then_case = self._visit_with_facts(s.then_case, cond)
        else_case = None if s.else_case is None else self.visit(s.else_case)
        if else_case is not None and is_nop(else_case):
            else_case = None
        if is_nop(then_case):
            if else_case is None:
                return NOP
            return IfThenElse(self.an.simplify(E.Not(cond)), else_case)
        if cond is s.condition and then_case is s.then_case and else_case is s.else_case:
            return s
        return IfThenElse(cond, then_case, else_case)

    def _visit_with_facts(self, body: Stmt, cond: PrimExpr) -> Stmt:
        facts = self._facts(cond)
        saved = [(var, self.an.bounds.push(var, rng)) for var, rng in facts]
        try:
            return self.visit(body)
        finally:
            for var, old in reversed(saved):
                self.an.bounds.pop(var, old)

    def _facts(self, cond: PrimExpr) -> list[tuple[Var, Range]]:
        """Bounds of variables implied by `cond` (conjunctions of `var OP constant`)."""
        if type(cond) is E.And:
            return self._facts(cond.a) + self._facts(cond.b)
        cls = type(cond)
        if cls not in _MIRROR or not _is_scalar_int(cond.a.dtype):
            return []
        a, b = cond.a, cond.b
        if type(a) is IntImm and type(b) is Var:
            a, b, cls = b, a, _MIRROR[cls]
        if type(a) is not Var or type(b) is not IntImm:
            return []
        lo, hi = self.an._range(a)
        c = b.value
        if cls is E.LT:
            hi = min(hi, c - 1)
        elif cls is E.LE:
            hi = min(hi, c)
        elif cls is E.GT:
            lo = max(lo, c + 1)
        elif cls is E.GE:
            lo = max(lo, c)
        else:
            lo, hi = max(lo, c), min(hi, c)
        return [(a, (lo, hi))] if lo <= hi else []

    def visit_AssertStmt(self, s: AssertStmt) -> Stmt:
        cond = self.an.simplify(s.condition)
        if _bool_const(cond) is True:
            return self.visit(s.body)
        body = self.visit(s.body)
        if cond is s.condition and body is s.body:
            return s
        return AssertStmt(cond, s.message, body)

    def visit_LetStmt(self, s: LetStmt) -> Stmt:
        value = self.an.simplify(s.value)
        if _is_scalar_int(value.dtype) or value.dtype == BOOL:
            with self.an.scope(s.var, self.an._range(value)):
                body = self.visit(s.body)
        else:
            body = self.visit(s.body)
        if not uses_var(body, s.var) and not _has_extern_call(value):
            return body
        if value is s.value and body is s.body:
            return s
        return LetStmt(s.var, value, body)

    def visit_SeqStmt(self, s: SeqStmt) -> Stmt:
        new = [self.visit(x) for x in s.seq]
        if all(a is b and not is_nop(a) for a, b in zip(new, s.seq)):
            return s
        return seq(*new)

    def visit_AttrStmt(self, s: AttrStmt) -> Stmt:
        body = self.visit(s.body)
        return s if body is s.body else s.replace(body=body)


# -- module-level API ---------------------------------------------------------------------------


def simplify(e: PrimExpr, var_bounds: Mapping[Var, IntBound] | None = None) -> PrimExpr:
    """An equivalent, simpler expression: same dtype, same value for every assignment of the
    variables within `var_bounds` (others range over their dtype)."""
    return Analyzer(var_bounds).simplify(e)


def can_prove(cond: PrimExpr, var_bounds: Mapping[Var, IntBound] | None = None) -> bool:
    """True only if the bool condition provably holds within `var_bounds` (False: unknown)."""
    return Analyzer(var_bounds).can_prove(cond)


def simplify_stmt(s: Stmt, var_bounds: Mapping[Var, IntBound] | None = None) -> Stmt:
    """The statement with every expression simplified, loop variables bound to their ranges,
    dead loops/branches removed and loops of extent 1 inlined."""
    return Analyzer(var_bounds).simplify_stmt(s)


def simplify_func(f: PrimFunc) -> PrimFunc:
    return f.with_body(simplify_stmt(f.body))


def simplify_module(mod: IRModule) -> IRModule:
    return mod.map_functions(simplify_func)
