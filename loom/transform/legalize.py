"""legalize: the IR's semantics (loom/ir/semantics.py, docs/ir.md "Semantics") become primitive
operations that every code generator renders as they are, without re-deriving any meaning.

Runs in `pipeline.BUILD` (for a target), never in `loom.lower` without one: the interpreter runs
the high-level IR. Afterwards the function is *primitive IR*:

- no `FloorDiv` or `FloorMod` is left (integer: truncating `Div`/`Mod` and selects, a shift or a
  mask for a power-of-two divisor, plain `Div`/`Mod` when the operands' bounds make floor and
  truncation agree; float: `floor` of the quotient in float64, the infinite divisor rule of
  `semantics.float_floormod` as a select);
- integer `Div` and `Mod` are C's `/ %` and LLVM's sdiv/udiv/srem/urem: their divisor is never 0,
  and (signed) never -1 when the dividend may be the minimum, so they neither trap nor have
  undefined behaviour. A divisor that may be zero is checked first, by the intrinsic
  `require(b != 0, b, "integer division by zero in <function>")`: the generated function fails
  with that message when (and only when) the division is evaluated, so a division in the
  untaken side of `if_then_else` does not fail. `INT_MIN / -1` wraps to `INT_MIN`, `% -1` is 0;
- float `Div` is IEEE division and float `Mod` is C's fmod (LLVM's frem);
- `Min` and `Max` only on integers (a compare and a select, signed or unsigned as the dtype);
  on floats they have become `Select`s with the IR's NaN rule (`b` if `b < a` or `b` is NaN).
  `NE` on floats is unordered (true for NaN) and the other comparisons ordered, in every back end;
- a shift amount lies in 0..bits-1: one that may not is masked with bits-1 (the IR leaves larger
  amounts undefined; native code shifts by the amount modulo the width);
- no arithmetic on bool: `Add Sub Mul Div Mod Min Max` and shifts of bools are computed in uint8
  and cast back (bools keep only `BitAnd BitOr BitXor`, logic, comparisons, `Select`, `Cast`);
- no `sigmoid` call: `1/(1+e)` for x >= 0, `e/(1+e)` below, with `e = exp(-|x|)` (float16 in
  float32), as the interpreter computes it, so sigmoid(-100) is not flushed to 0;
- for a target whose device has no libm (Hexagon's runtime), no `floor ceil trunc round` call
  either: they are computed through the integer conversion (`_integral`), also the floor the
  float floor division needs. The other math functions need libm: building them for such a
  target fails with the missing symbols.

`Let` expressions hold values the primitive form uses twice, so each operand is still evaluated
once, in the IR's order. Running the pass again keeps the meaning (it may add redundant checks).
A code generator meeting something this pass removes raises `not_legalized`.
"""

from __future__ import annotations

import math

from loom import abi
from loom.abi.dtype import BOOL, DataType
from loom.errors import LoomError
from loom.ir import expr as E
from loom.ir.bound import ConstIntBoundAnalyzer, dtype_range
from loom.ir.expr import PrimExpr, Var
from loom.ir.function import IRModule, PrimFunc
from loom.ir.printer import to_text
from loom.ir.visitor import Mutator
from loom.transform.lower_parallel import PARALLEL_TASK_ATTR
from loom.transform.pass_infra import Pass, register_pass

_BOOL_ARITHMETIC = (E.Add, E.Sub, E.Mul, E.Div, E.Mod, E.FloorDiv, E.FloorMod, E.Min, E.Max)
_SHIFTS = (E.ShiftLeft, E.ShiftRight)


def not_legalized(e: PrimExpr, generator: str) -> LoomError:
    """The error of a code generator that meets IR the legalize pass would have rewritten."""
    return LoomError(
        f"{generator} code generator: {type(e).__name__} on {e.dtype} ({to_text(e)}) has no "
        "primitive form; the legalize pass must run first (it is in "
        "loom.transform.pipeline.BUILD, which loom.build runs)"
    )


def needs_legalize(e: PrimExpr) -> bool:
    """True for an expression the legalize pass rewrites (so no code generator renders it)."""
    if isinstance(e, E.FloorDiv | E.FloorMod):
        return True
    if isinstance(e, E.Min | E.Max) and e.dtype.is_float:
        return True
    if isinstance(e, _BOOL_ARITHMETIC + _SHIFTS) and e.dtype.is_bool:
        return True
    return isinstance(e, E.Call) and e.kind == E.CallKind.INTRINSIC and e.op == "sigmoid"


# -- building blocks ------------------------------------------------------------------------------
def const(value, dt: DataType) -> PrimExpr:
    """A constant of `dt` (broadcast for a vector dtype)."""
    scalar = dt.element
    c = E.FloatImm(value, scalar) if scalar.is_float else E.IntImm(value, scalar)
    return c if dt.lanes == 1 else E.Broadcast(c, dt.lanes)


def _const_value(e: PrimExpr):
    """The value of a constant (or a broadcast of one), else None."""
    if isinstance(e, E.Broadcast):
        e = e.value
    return e.value if isinstance(e, E.IntImm | E.FloatImm) else None


def _trivial(e: PrimExpr) -> bool:
    """Cheap to evaluate twice, and evaluating it reads nothing: a variable or a constant."""
    if isinstance(e, E.Broadcast):
        return _trivial(e.value)
    if isinstance(e, E.Ramp):
        return _trivial(e.base) and _trivial(e.stride)
    return isinstance(e, Var | E.IntImm | E.FloatImm)


class _Lets:
    """Values bound to fresh variables, in evaluation order, so that an expression can use a
    value twice and still evaluate it once."""

    def __init__(self) -> None:
        self.bindings: list[tuple[Var, PrimExpr]] = []

    def __call__(self, value: PrimExpr, name: str, force: bool = False) -> PrimExpr:
        if _trivial(value) and not force:
            return value
        var = Var(name, value.dtype)
        self.bindings.append((var, value))
        return var

    def wrap(self, body: PrimExpr) -> PrimExpr:
        for var, value in reversed(self.bindings):
            body = E.Let(var, value, body)
        return body


def _widen(e: PrimExpr, dt: DataType) -> PrimExpr:
    return e if e.dtype == dt else E.Cast(dt, e)


def _call(dt: DataType, name: str, *args: PrimExpr) -> PrimExpr:
    return E.Call(dt, name, args)


def require(condition: PrimExpr, value: PrimExpr, message: str) -> PrimExpr:
    """`value`, once `condition` holds in every lane; else the function fails with `message`."""
    return E.Call(value.dtype, "require", (condition, value, E.StringImm(message)))


# -- the pass ------------------------------------------------------------------------------------
class _Legalizer(Mutator):
    """Rewrites bottom-up; integer bounds (of loop variables and lets) let it skip checks that
    cannot fail. Bounds are taken of the original operands, which the analyzer understands."""

    def __init__(self, func_name: str, libm: bool) -> None:
        self.message = f"integer division by zero in {func_name}"
        self.libm = libm
        self.bounds = ConstIntBoundAnalyzer()

    def _range(self, e: PrimExpr) -> tuple[int, int]:
        r = self.bounds.range(e)
        assert r is not None, e
        return r

    # -- scopes with known bounds ----------------------------------------------------------------
    def visit_For(self, s):
        lo, hi = self._range(s.min)
        _, extent = self._range(s.extent)
        top = dtype_range(s.loop_var.dtype)[1]
        old = self.bounds.push(s.loop_var, (lo, max(lo, min(top, hi + extent - 1))))
        try:
            return self.generic_mutate(s)
        finally:
            self.bounds.pop(s.loop_var, old)

    def visit_LetStmt(self, s):
        rng = self.bounds.range(s.value)
        value = self.visit(s.value)
        old = self.bounds.push(s.var, rng) if rng is not None else None
        try:
            body = self.visit(s.body)
        finally:
            if rng is not None:
                self.bounds.pop(s.var, old)
        if value is s.value and body is s.body:
            return s
        return s.replace(value=value, body=body)

    def visit_Let(self, e: E.Let):
        rng = self.bounds.range(e.value)
        value = self.visit(e.value)
        old = self.bounds.push(e.var, rng) if rng is not None else None
        try:
            body = self.visit(e.body)
        finally:
            if rng is not None:
                self.bounds.pop(e.var, old)
        if value is e.value and body is e.body:
            return e
        return E.Let(e.var, value, body)

    # -- arithmetic --------------------------------------------------------------------------------
    def _bool_arithmetic(self, e: E.BinaryOp) -> PrimExpr:
        """Arithmetic on bools, in uint8 (0 and 1) and cast back (non-zero is true). A shift's
        amount is masked to the bool's width: 0."""
        u8 = DataType("uint", 8, e.dtype.lanes)
        a, b = E.Cast(u8, e.a), E.Cast(u8, e.b)
        if isinstance(e, _SHIFTS):
            b = E.BitAnd(b, const(0, u8))
        return E.Cast(e.dtype, self.visit(type(e)(a, b)))

    def visit_Add(self, e):
        return self._bool_arithmetic(e) if e.dtype.is_bool else self.generic_mutate(e)

    visit_Sub = visit_Mul = visit_Add

    def visit_Div(self, e):
        if e.dtype.is_bool:
            return self._bool_arithmetic(e)
        if e.dtype.is_float:
            a, b = self.visit(e.a), self.visit(e.b)
            if isinstance(e, E.FloorDiv):
                return self._float_floordiv(a, b, e.dtype)
            if isinstance(e, E.FloorMod):
                return self._float_floormod(a, b, e.dtype)
            return e if a is e.a and b is e.b else type(e)(a, b)
        return self._int_division(e)

    visit_Mod = visit_FloorDiv = visit_FloorMod = visit_Div

    def visit_Min(self, e):
        if e.dtype.is_bool:
            return self._bool_arithmetic(e)
        if not e.dtype.is_float:
            return self.generic_mutate(e)
        # semantics.binary: b if (b < a or b is NaN) else a; `b != b` is true only for NaN
        lets = _Lets()
        a = lets(self.visit(e.a), "a")
        b = lets(self.visit(e.b), "b")
        beats = E.LT(b, a) if isinstance(e, E.Min) else E.GT(b, a)
        return lets.wrap(E.Select(E.Or(beats, E.NE(b, b)), b, a))

    visit_Max = visit_Min

    def visit_ShiftLeft(self, e):
        if e.dtype.is_bool:
            return self._bool_arithmetic(e)
        lo, hi = self._range(e.b)
        a, b = self.visit(e.a), self.visit(e.b)
        bits = e.dtype.bits
        if not (0 <= lo and hi < bits):
            c = _const_value(b)
            mask = bits - 1
            b = const(c & mask, b.dtype) if c is not None else E.BitAnd(b, const(mask, b.dtype))
        return e if a is e.a and b is e.b else type(e)(a, b)

    visit_ShiftRight = visit_ShiftLeft

    # -- integer division ------------------------------------------------------------------------
    def _int_division(self, e: E.BinaryOp) -> PrimExpr:
        """Div, Mod (truncating) and FloorDiv, FloorMod of integers as primitive Div and Mod
        (divisor checked against 0, never -1 with a minimum dividend) and selects."""
        dt = e.dtype
        a_lo, _ = self._range(e.a)
        b_lo, b_hi = self._range(e.b)
        a, b = self.visit(e.a), self.visit(e.b)
        floor = isinstance(e, E.FloorDiv | E.FloorMod)
        quotient = isinstance(e, E.Div | E.FloorDiv)
        c = _const_value(b)
        if c == 0:  # always fails when evaluated (a / 0 itself is never emitted)
            return require(const(False, BOOL), a, self.message)
        if floor and c is not None and c > 0 and c & (c - 1) == 0:  # a power of two
            shift = c.bit_length() - 1
            return E.ShiftRight(a, const(shift, dt)) if quotient else E.BitAnd(a, const(c - 1, dt))
        wraps = dt.is_int and b_lo <= -1 <= b_hi and a_lo <= dt.min_value()  # INT_MIN / -1
        if wraps and c == -1:
            return E.Sub(const(0, dt), a) if quotient else E.Mod(a, const(1, dt))
        floor = floor and dt.is_int and not (a_lo >= 0 and b_lo > 0)  # else floor is trunc
        checked = b_lo <= 0 <= b_hi
        if not (checked or wraps or floor):
            plain = E.Div if quotient else E.Mod
            return e if type(e) is plain and a is e.a and b is e.b else plain(a, b)
        lets = _Lets()
        a = lets(a, "a")
        b = lets(b, "b")
        if checked:
            b = lets(require(E.NE(b, const(0, dt)), b, self.message), "b", force=True)
        minus_one = E.EQ(b, const(-1, dt)) if wraps else None
        divisor = b
        if wraps:  # a % 1 is a % -1 (0); the quotient is selected below
            divisor = lets(E.Select(minus_one, const(1, dt), b), "d")
        if not floor:
            result = E.Div(a, divisor) if quotient else E.Mod(a, divisor)
        else:
            r = lets(E.Mod(a, divisor), "r", force=True)
            zero = const(0, dt)
            if c is not None:  # the remainder must take the sign of the constant divisor
                adjust = E.LT(r, zero) if c > 0 else E.GT(r, zero)
            else:
                adjust = E.And(E.NE(r, zero), E.LT(E.BitXor(r, b), zero))
            if quotient:
                result = E.Sub(E.Div(a, divisor), E.Cast(dt, adjust))
            else:
                result = E.Select(adjust, E.Add(r, b), r)
        if wraps and quotient:
            result = E.Select(minus_one, E.Sub(const(0, dt), a), result)
        return lets.wrap(result)

    # -- float floor division --------------------------------------------------------------------
    def _floor(self, q: PrimExpr) -> PrimExpr:
        if self.libm:
            return _call(q.dtype, "floor", q)
        return _integral("floor", q)

    def _float_floordiv(self, a: PrimExpr, b: PrimExpr, dt: DataType) -> PrimExpr:
        """floor(a / b) of the float64 quotient (a float32 quotient could round up to the next
        integer); `+ 0.0` because the semantics' floor of -0.0 is +0.0."""
        wide = DataType("float", 64, dt.lanes)
        q = E.Div(_widen(a, wide), _widen(b, wide))
        return _widen(E.Add(self._floor(q), const(0.0, wide)), dt)

    def _float_floormod(self, a: PrimExpr, b: PrimExpr, dt: DataType) -> PrimExpr:
        """semantics.float_floormod in float64: a - floor(a / b) * b, which IEEE arithmetic makes
        NaN for a zero divisor, a NaN operand and an infinite dividend; a finite dividend and an
        infinite divisor give the dividend if their signs agree (or it is zero), else the
        divisor."""
        wide = DataType("float", 64, dt.lanes)
        lets = _Lets()
        x = lets(_widen(a, wide), "x")
        y = lets(_widen(b, wide), "y")
        zero = const(0.0, wide)
        floor_q = E.Add(self._floor(E.Div(x, y)), zero)
        # every rounding of the semantics: a fused multiply-subtract would leave a remainder
        # outside [0, y) for a large quotient
        general = E.Sub(x, _call(wide, "arithmetic_fence", E.Mul(floor_q, y)))
        by_infinity = E.And(_is_infinite(y), _is_finite(x))
        keeps_x = E.Select(E.GT(y, zero), E.GE(x, zero), E.LE(x, zero))
        result = E.Select(by_infinity, E.Select(keeps_x, x, y), general)
        return _widen(lets.wrap(result), dt)

    # -- intrinsics --------------------------------------------------------------------------
    def visit_Call(self, e: E.Call):
        e = self.generic_mutate(e)
        if e.kind != E.CallKind.INTRINSIC:
            return e
        if e.op == "sigmoid":
            return _sigmoid(e.args[0], e.dtype)
        if e.op in _INTEGRAL and not self.libm:
            return _integral(e.op, e.args[0])
        return e


_INTEGRAL = ("floor", "ceil", "trunc", "round")


def _is_infinite(x: PrimExpr) -> PrimExpr:
    inf = const(math.inf, x.dtype)
    return E.Or(E.EQ(x, inf), E.EQ(x, const(-math.inf, x.dtype)))


def _is_finite(x: PrimExpr) -> PrimExpr:  # false for NaN
    inf = const(math.inf, x.dtype)
    return E.And(E.LT(x, inf), E.GT(x, const(-math.inf, x.dtype)))


def _integral(kind: str, x: PrimExpr) -> PrimExpr:
    """floor, ceil, trunc or round (half to even) of a float without libm, for targets that have
    none: a value of magnitude below 2^mantissa goes through the integer conversion (`t`, toward
    zero) and is adjusted; larger values, infinities and NaN are their own value. A zero result
    keeps the sign of x (x * 0.0), as IEEE's roundToIntegral. float16 is computed in float32."""
    dt = x.dtype
    work = dt if dt.bits >= 32 else DataType("float", 32, dt.lanes)
    whole = DataType("int", work.bits, dt.lanes)
    big = const(2.0 ** (52 if work.bits == 64 else 23), work)
    zero, one, half = const(0.0, work), const(1.0, work), const(0.5, work)
    lets = _Lets()
    v = lets(_widen(x, work), "x")
    small = lets(E.And(E.LT(v, big), E.GT(v, E.Sub(zero, big))), "small", force=True)
    n = lets(E.Cast(whole, E.Select(small, v, zero)), "n", force=True)  # never out of range
    t = lets(E.Cast(work, n), "t", force=True)
    if kind == "floor":
        r = E.Select(E.GT(t, v), E.Sub(t, one), t)
    elif kind == "ceil":
        r = E.Select(E.LT(t, v), E.Add(t, one), t)
    elif kind == "trunc":
        r = t
    else:  # the fraction d = v - t is exact; a tie goes to the even neighbour
        d = lets(E.Sub(v, t), "d", force=True)
        beyond_half = E.Or(E.GT(d, half), E.LT(d, E.Sub(zero, half)))
        tie = E.Or(E.EQ(d, half), E.EQ(d, E.Sub(zero, half)))
        odd = E.NE(E.BitAnd(n, const(1, whole)), const(0, whole))
        away = E.Or(beyond_half, E.And(tie, odd))
        step = E.Select(E.GT(d, zero), one, E.Sub(zero, one))
        r = E.Select(away, E.Add(t, step), t)
    r = lets(r, "r", force=True)
    result = E.Select(small, E.Select(E.EQ(r, zero), E.Mul(v, zero), r), v)
    return _widen(lets.wrap(result), dt)


def _sigmoid(x: PrimExpr, dt: DataType) -> PrimExpr:
    """semantics._sigmoid: 1/(1+exp(-x)) for x >= 0, exp(x)/(1+exp(x)) below (no flush to 0 for
    large negative x); one exp, of -|x|. float16 is computed in float32."""
    work = dt if dt.bits >= 32 else DataType("float", 32, dt.lanes)
    lets = _Lets()
    v = lets(_widen(x, work), "x")
    one = const(1.0, work)
    exp = lets(_call(work, "exp", E.Sub(const(0.0, work), _call(work, "fabs", v))), "e")
    result = E.Select(
        E.GE(v, const(0.0, work)),
        E.Div(one, E.Add(one, exp)),
        E.Div(exp, E.Add(one, exp)),
    )
    return _widen(lets.wrap(result), dt)


def legalize_func(func: PrimFunc, libm: bool = True) -> PrimFunc:
    """`func` as primitive IR (see the module docstring); `libm`: the target has the C math
    library (else floor, ceil, trunc and round are computed without it). Errors name the
    function, or for a parallel task (lower_parallel) the function its loop was written in."""
    name = func.attr(PARALLEL_TASK_ATTR, func.name)
    return func.with_body(_Legalizer(name, libm).visit(func.body))


def _legalize(mod: IRModule) -> IRModule:
    target = mod.attr("target")
    libm = target is None or abi.provider("floor", target.device) is not None
    return mod.map_functions(lambda func: legalize_func(func, libm))


legalize = register_pass(Pass("legalize", _legalize))
