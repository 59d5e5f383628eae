"""Tests of the constant bound analysis and of symbolic intervals (the property-based checks of
both against an independent evaluator are in test_simplify.py)."""

from __future__ import annotations

import itertools

import pytest

from loom.abi.dtype import BOOL, dtype
from loom.ir import op
from loom.ir.bound import IntBound, const_int_bound
from loom.ir.buffer import decl_buffer
from loom.ir.expr import (
    Broadcast,
    Call,
    Cast,
    FloatImm,
    IntImm,
    Let,
    PrimExpr,
    Ramp,
    Select,
    Var,
)
from loom.ir.interval import symbolic_interval
from loom.ir.printer import to_text
from loom.ir.simplify import simplify
from loom.ir.visitor import substitute

INT8 = dtype("int8")
UINT8 = dtype("uint8")
fdiv, fmod, tdiv, tmod = op.floordiv, op.floormod, op.truncdiv, op.truncmod

i, j, k, x, n = (Var(name) for name in ("i", "j", "k", "x", "n"))
BOUNDS = {i: IntBound(0, 99), j: IntBound(0, 63), k: IntBound(0, 3), x: IntBound(-100, 100)}


def bound(e: PrimExpr, bounds=BOUNDS) -> tuple[int | None, int | None]:
    b = const_int_bound(e, bounds)
    return b.lo, b.hi


def value_at(e: PrimExpr, env: dict[Var, int]) -> int:
    """The value of e at a point, by substitution and constant folding."""
    folded = simplify(substitute(e, {v: IntImm(val, v.dtype) for v, val in env.items()}))
    assert isinstance(folded, IntImm), to_text(folded)
    return folded.value


# -- IntBound -----------------------------------------------------------------------------------


def test_int_bound_helpers():
    assert IntBound.point(3) == IntBound(3, 3) and IntBound.point(3).is_point
    assert IntBound.everything() == IntBound(None, None)
    assert IntBound.everything().is_everything and not IntBound(0, None).is_everything
    assert IntBound.of_dtype(INT8) == IntBound(-128, 127)
    assert IntBound.of_dtype(BOOL) == IntBound(0, 1)
    assert IntBound.of_dtype(dtype("float32")) == IntBound.everything()
    assert IntBound.from_range(2, 5) == IntBound(2, 6)
    assert IntBound.from_range(2, 0).is_empty
    assert IntBound(0, 5).union(IntBound(3, 9)) == IntBound(0, 9)
    assert IntBound(0, 5).union(IntBound(None, 2)) == IntBound(None, 5)
    assert IntBound(0, 5).intersect(IntBound(3, None)) == IntBound(3, 5)
    assert IntBound(None, None).intersect(IntBound(None, 4)) == IntBound(None, 4)
    assert 3 in IntBound(0, 5) and 6 not in IntBound(0, 5) and 10**30 in IntBound(0, None)
    assert str(IntBound(None, 4)) == "[-inf, 4]"


# -- const_int_bound ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: IntImm(7), (7, 7)),
        (lambda: i, (0, 99)),
        (lambda: n, (-(2**31), 2**31 - 1)),
        (lambda: i * 4 + j, (0, 459)),
        (lambda: i - j, (-63, 99)),
        (lambda: x * x, (-10000, 10000)),
        (lambda: x * -3, (-300, 300)),
        (lambda: tdiv(x, 4), (-25, 25)),
        (lambda: tdiv(x, -4), (-25, 25)),
        (lambda: tmod(x, 7), (-6, 6)),
        (lambda: tmod(i, 7), (0, 6)),
        (lambda: tmod(k, 7), (0, 3)),
        (lambda: fdiv(x, 4), (-25, 25)),
        (lambda: fdiv(i, j + 1), (0, 99)),
        (lambda: fmod(x, 7), (0, 6)),
        (lambda: fmod(x, -7), (-6, 0)),
        (lambda: fmod(i + 8, 4), (0, 3)),
        (lambda: fmod(k + 8, 16), (8, 11)),
        (lambda: fmod(i, j + 1), (0, 63)),
        (lambda: op.min_(i, j), (0, 63)),
        (lambda: op.max_(x, i), (0, 100)),
        (lambda: Select(op.less(i, j), x, i), (-100, 100)),
        (lambda: Select(op.less(i, 100), x, i * 1000), (-100, 100)),
        (lambda: op.if_then_else(op.less(i, j), k, j + 100), (0, 163)),
        (lambda: Cast(INT8, i), (0, 99)),
        (lambda: Cast(INT8, i * 3), (-128, 127)),
        (lambda: Cast(dtype("int32"), op.less(i, j)), (0, 1)),
        (lambda: Cast(dtype("int32"), Var("f", "float32")), (-(2**31), 2**31 - 1)),
        (lambda: Cast(BOOL, i + 1), (1, 1)),
        (lambda: i & 255, (0, 99)),
        (lambda: x & 15, (0, 15)),
        (lambda: i >> 2, (0, 24)),
        (lambda: x >> 1, (-50, 50)),
        (lambda: i << 2, (0, 396)),
        (lambda: op.less(i, j), (0, 1)),
        (lambda: op.less(i, 100), (1, 1)),
        (lambda: op.equal(i, -1), (0, 0)),
        (lambda: op.logical_and(op.less(i, j), op.less(i, 100)), (0, 1)),
        (lambda: op.logical_not(op.less(i, 100)), (0, 0)),
        (lambda: Let(Var("t"), i * 2, Var("t") + 1), (-(2**31), 2**31 - 1)),
        (lambda: Ramp(i, IntImm(2), 4), (0, 105)),
        (lambda: Ramp(i, IntImm(-2), 4), (-6, 99)),
        (lambda: Broadcast(x, 8), (-100, 100)),
        (lambda: Var("b", "bool"), (0, 1)),
        (lambda: Var("f", "float32") + FloatImm(1.0), (None, None)),
    ],
)
def test_const_int_bound(build, expected):
    assert bound(build()) == expected


def test_let_binds_its_variable():
    t = Var("t")
    assert bound(Let(t, i * 2, t + 1)) == (1, 199)


def test_bound_of_wrapping_expressions_is_the_dtype_range():
    a = Var("a", INT8)
    small = {a: IntBound(0, 100)}
    assert bound(a + a, small) == (-128, 127)
    assert bound(a * 2, small) == (-128, 127)
    assert bound(a + IntImm(27, INT8), small) == (27, 127)
    # int8 -128 / -1 wraps back to -128
    assert bound(tdiv(a, IntImm(-1, INT8)), {}) == (-128, 127)
    assert bound(fdiv(a, IntImm(-1, INT8)), {a: IntBound(-100, 100)}) == (-100, 100)
    u = Var("u", UINT8)
    assert bound(u - IntImm(1, UINT8), {}) == (0, 255)
    assert bound(u - IntImm(1, UINT8), {u: IntBound(1, 9)}) == (0, 8)
    assert bound(n + 1, {}) == (-(2**31), 2**31 - 1)
    assert bound(Cast(UINT8, x), BOUNDS) == (0, 255)


def test_division_by_a_divisor_that_may_be_zero():
    full = (-(2**31), 2**31 - 1)
    assert bound(fdiv(i, j), BOUNDS) == full
    assert bound(fmod(i, j), BOUNDS) == full
    assert bound(tdiv(i, x), BOUNDS) == full
    assert bound(tmod(i, x), BOUNDS) == full


def test_unknown_values_take_their_dtype_range():
    buf = decl_buffer((16,), "int8", "buf")
    assert bound(buf[i], BOUNDS) == (-128, 127)
    ext = op.call_extern("int32", "get", i)
    assert bound(ext, BOUNDS) == (-(2**31), 2**31 - 1)
    assert bound(Call(BOOL, "likely", (op.less(i, j),)), BOUNDS) == (0, 1)


def test_var_bound_is_clipped_to_its_dtype():
    a = Var("a", INT8)
    assert bound(a, {a: IntBound(None, 1000)}) == (-128, 127)
    assert bound(a, {a: IntBound(-5, None)}) == (-5, 127)


INT8_EXPRS = [
    lambda a: a * 3 + 7,
    lambda a: fdiv(a * 4, 3) - a,
    lambda a: tmod(a * a, 10),
    lambda a: op.max_(a, 100) + 30,
    lambda a: a >> 3,
    lambda a: a & 7,
    lambda a: fmod(a, 5) * 30,
    lambda a: Cast(dtype("int16"), a) * 200,
]


@pytest.mark.parametrize("build", INT8_EXPRS)
@pytest.mark.parametrize("lo_hi", [(-128, 127), (0, 10), (-20, -3), (120, 127)])
def test_bound_contains_every_int8_value(build, lo_hi):
    a = Var("a", INT8)
    e = build(a)
    b = const_int_bound(e, {a: IntBound(*lo_hi)})
    values = {value_at(e, {a: v}) for v in range(lo_hi[0], lo_hi[1] + 1)}
    assert all(v in b for v in values), (to_text(e), b, sorted(values))


# -- symbolic_interval --------------------------------------------------------------------------


def interval_text(e, relax, bounds=None) -> tuple[str, str] | None:
    r = symbolic_interval(e, relax, bounds)
    return None if r is None else (to_text(r[0]), to_text(r[1]))


yo, yi, ry = (Var(name) for name in ("yo", "yi", "ry"))


def test_interval_of_the_example_in_the_spec():
    e = yo * 4 + yi + ry - 1
    relax = {yi: (IntImm(0), IntImm(3)), ry: (IntImm(0), IntImm(2))}
    assert interval_text(e, relax) == ("((yo * 4) - 1)", "((yo * 4) + 4)")


@pytest.mark.parametrize(
    ("build", "relax", "expected"),
    [
        (lambda: yi - yi + yo, {yi: (0, 3)}, ("yo", "yo")),
        (lambda: yo * 4 - yi * 2, {yi: (0, 3)}, ("((yo * 4) - 6)", "(yo * 4)")),
        (lambda: yi * 2, {yi: (yo, yo + 3)}, ("(yo * 2)", "((yo * 2) + 6)")),
        (lambda: yo, {yi: (0, 3)}, ("yo", "yo")),
        (lambda: yi, {yi: (5, 5)}, ("5", "5")),
        (
            lambda: fdiv(yo * 4 + yi, 8),
            {yi: (0, 3)},
            ("floordiv((yo * 4), 8)", "floordiv(((yo * 4) + 3), 8)"),
        ),
        # yo * 8 may wrap for an unbounded yo: see test_interval_uses_var_bounds_to_simplify_ends
        (
            lambda: fdiv(yo * 8 + yi, 8),
            {yi: (0, 7)},
            ("floordiv((yo * 8), 8)", "floordiv(((yo * 8) + 7), 8)"),
        ),
        (lambda: tdiv(yi, 2), {yi: (0, 7)}, ("0", "3")),
        (lambda: fdiv(yi, -2), {yi: (0, 7)}, ("-4", "0")),
        (lambda: fmod(yi, 4), {yi: (0, 3)}, ("0", "3")),
        (lambda: fmod(yi, 8), {yi: (9, 12)}, ("1", "4")),
        (
            lambda: fmod(yo * 4 + yi, 8),
            {yi: (0, 3)},
            ("floormod((yo * 4), 8)", "(floormod((yo * 4), 8) + 3)"),
        ),
        (lambda: fmod(yo + yi, 8), {yi: (0, 3)}, ("0", "7")),
        (lambda: fmod(yo * 4 + yi, 8), {yi: (0, 4)}, ("0", "7")),
        (lambda: op.min_(yi, 2), {yi: (0, 3)}, ("0", "2")),
        (lambda: op.max_(yi + yo, yo), {yi: (0, 3)}, ("yo", "max((yo + 3), yo)")),
        (lambda: Select(op.less(yo, yi), yi, yi + 10), {yi: (0, 3)}, ("0", "13")),
        (
            lambda: op.if_then_else(op.less(yo, 2), yi * 2, yo),
            {yi: (0, 3)},
            ("min(0, yo)", "max(6, yo)"),
        ),
        (lambda: yi * ry, {yi: (0, 3), ry: (1, 2)}, ("0", "6")),
        (lambda: yi * ry, {yi: (-3, -1), ry: (1, 2)}, ("-6", "-1")),
        (lambda: Cast(dtype("int64"), yi), {yi: (0, 3)}, ("int64(0)", "int64(3)")),
    ],
)
def test_interval(build, relax, expected):
    relax = {v: (IntImm(lo) if isinstance(lo, int) else lo, hi) for v, (lo, hi) in relax.items()}
    assert interval_text(build(), relax) == expected


def test_interval_uses_signs_of_fixed_variables():
    relax = {yi: (0, 3)}
    assert interval_text(n * yi, relax, {n: IntBound(0, 100)}) == ("0", "(n * 3)")
    assert interval_text(n * yi, relax, {n: IntBound(-100, -1)}) == ("(n * 3)", "0")
    assert interval_text(n * yi, relax) is None  # n of unknown sign


def test_interval_is_none_when_unbounded():
    buf = decl_buffer((16,), "int32", "buf")
    relax = {yi: (0, 3), ry: (-1, 1)}
    assert symbolic_interval(buf[yi], relax) is None
    assert symbolic_interval(yi * ry, relax) is None
    assert symbolic_interval(op.call_extern("int32", "f", yi), relax) is None
    # a load that does not depend on a relaxed variable is a symbol
    assert interval_text(buf[yo] + yi, relax) == ("buf[yo]", "(buf[yo] + 3)")


def test_interval_with_dependent_relax_ranges():
    a, b = Var("a"), Var("b")
    relax = {a: (IntImm(0), IntImm(3)), b: (a, a + 2)}
    assert interval_text(b, relax) == ("0", "5")
    assert interval_text(b - a, relax) == ("-3", "5")  # sound, not exact: a and b are linked


def test_interval_uses_var_bounds_to_simplify_ends():
    relax = {yi: (0, 3)}
    bounds = {yo: IntBound(0, 15)}
    assert interval_text(fdiv(yo * 4 + yi, 64), relax, bounds) == ("0", "0")
    assert interval_text(op.min_(yo * 4 + yi, 100), relax, bounds) == ("(yo * 4)", "((yo * 4) + 3)")
    assert interval_text(fdiv(yo * 8 + yi, 8), {yi: (0, 7)}, bounds) == ("yo", "yo")
    assert interval_text(op.max_(yi + yo, yo), relax, bounds) == ("yo", "(yo + 3)")


def test_interval_refuses_ends_that_always_wrap():
    a, c = Var("a", INT8), Var("c", INT8)
    e = Select(op.equal(c, IntImm(-1, INT8)), IntImm(32, INT8), a) * IntImm(4, INT8)
    relax = {a: (IntImm(0, INT8), IntImm(0, INT8)), c: (IntImm(-1, INT8), IntImm(0, INT8))}
    assert symbolic_interval(e, relax) is None  # its maximum 128 is not an int8


def test_interval_ends_accept_ints_and_other_widths():
    relax = {yi: (0, IntImm(3, dtype("int64")))}
    assert interval_text(yi + 1, relax) == ("1", "4")


@pytest.mark.parametrize(
    "build",
    [
        lambda a, b: a * 3 - b * 2 + 5,
        lambda a, b: (a + b) * 2 - b,
        lambda a, b: a - a + b * -4,
        lambda a, b: fdiv(a * 8 + b, 8),
        lambda a, b: fmod(a * 8 + b, 8),
    ],
)
def test_linear_intervals_are_exact(build):
    a, b = Var("a"), Var("b")
    ranges = {a: (0, 4), b: (1, 3)}
    relax = {v: (IntImm(lo), IntImm(hi)) for v, (lo, hi) in ranges.items()}
    e = build(a, b)
    lo, hi = symbolic_interval(e, relax)
    points = itertools.product(range(0, 5), range(1, 4))
    values = [value_at(e, {a: av, b: bv}) for av, bv in points]
    assert (lo.value, hi.value) == (min(values), max(values))
