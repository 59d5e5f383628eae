"""The simplifier marks a node it knows to be its own simplification under the current bounds
(`loom.ir.simplify._FIXPOINT`), so that the round of `simplify` that confirms nothing changes
any more, and later passes, find it at once. These tests check that such a mark is only set when
it is true, and only trusted under the bounds it was set under."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loom.abi.dtype import dtype
from loom.ir.bound import IntBound
from loom.ir.buffer import decl_buffer
from loom.ir.expr import (
    EQ,
    GE,
    LT,
    NE,
    Add,
    Broadcast,
    BufferLoad,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mod,
    Mul,
    PrimExpr,
    Ramp,
    Select,
    Sub,
    Var,
    same_value,
)
from loom.ir.printer import to_text
from loom.ir.simplify import _FIXPOINT, Analyzer, simplify
from loom.ir.visitor import Mutator, post_order_visit

INT32 = dtype("int32")
INT8 = dtype("int8")
i, x, y = Var("i"), Var("x"), Var("y")
F = decl_buffer((1024,), "float32", "F")
G = decl_buffer((1024,), "int32", "G")
BOUNDS = {i: IntBound(-515, 99769), x: IntBound(0, 99), y: IntBound(0, 99)}


class _Fresh(Mutator):
    """Rebuilds every node (variables stay): a copy that carries no marks."""

    def visit(self, node):
        new = super().visit(node)
        if isinstance(new, PrimExpr) and not isinstance(new, Var):
            return new.replace()
        return new


def fresh(e: PrimExpr) -> PrimExpr:
    return _Fresh().visit(e)


def marked(root) -> list[PrimExpr]:
    found: list[PrimExpr] = []
    post_order_visit(root, lambda n: found.append(n) if _FIXPOINT in n.__dict__ else None)
    return found


def check_marks(*roots) -> None:
    """Each marked node, rebuilt without marks and simplified under the bounds of its mark,
    gives itself back."""
    for root in roots:
        for n in marked(root):
            if isinstance(n, Var):
                continue
            bounds = dict(n.__dict__[_FIXPOINT])
            again = Analyzer(bounds).simplify(fresh(n))
            assert same_value(again, n), f"{to_text(n)} marked, but simplifies to {to_text(again)}"


# `i + INT_MAX == 16` becomes `i == -2147483631` first; only the next round decides it. A node
# built from it must not be marked after the first round.
LATE = Select(EQ(IntImm(16), Add(i, IntImm(2147483647))), x, y)


def test_a_result_that_changes_in_a_second_round_is_simplified_to_the_end():
    cases = [
        (Add(LATE, IntImm(1)), Add(y, IntImm(1))),
        (Add(Mul(x, LATE), IntImm(3)), Add(Mul(x, y), IntImm(3))),
        (Ramp(LATE, IntImm(1), 4), Ramp(y, IntImm(1), 4)),
        (Ramp(x, LATE, 4), Ramp(x, y, 4)),
        (Broadcast(LATE, 4), Broadcast(y, 4)),
        (BufferLoad(F, (LATE,)), BufferLoad(F, (y,))),
        (Add(BufferLoad(F, (LATE,)), FloatImm(1.0)), Add(BufferLoad(F, (y,)), FloatImm(1.0))),
        (Min(LATE, IntImm(200)), y),
    ]
    for e, expected in cases:
        got = simplify(e, BOUNDS)
        assert same_value(got, expected), f"{to_text(e)} -> {to_text(got)}"
        check_marks(e, got)


def test_a_mark_holds_only_under_the_bounds_it_was_set_under():
    e = Add(Mul(i, IntImm(4)), x)
    r = simplify(e, BOUNDS)
    assert _FIXPOINT in r.__dict__
    assert simplify(r, BOUNDS) is r
    three = {**BOUNDS, x: IntBound(3, 3)}
    assert same_value(simplify(r, three), Add(Mul(i, IntImm(4)), IntImm(3)))
    an = Analyzer(BOUNDS)
    assert an.simplify(r) is r
    with an.scope(x, (3, 3)):
        assert same_value(an.simplify(r), Add(Mul(i, IntImm(4)), IntImm(3)))
    assert an.simplify(r) is r
    # a load and a ramp built from it
    load = simplify(BufferLoad(G, (Add(e, IntImm(0)),)), BOUNDS)
    assert _FIXPOINT in load.__dict__
    assert same_value(simplify(load, three), BufferLoad(G, (Add(Mul(i, IntImm(4)), IntImm(3)),)))
    ramp = simplify(Ramp(Sub(e, IntImm(0)), IntImm(1), 4), BOUNDS)
    two = {**BOUNDS, i: IntBound(2, 2)}
    assert same_value(simplify(ramp, two), Ramp(Add(x, IntImm(8)), IntImm(1), 4))


def test_a_mark_of_other_bounds_does_not_count():
    r = simplify(Add(Mul(i, IntImm(4)), x), BOUNDS)
    assert Analyzer(BOUNDS)._settled(r)
    assert not Analyzer({**BOUNDS, x: IntBound(3, 3)})._settled(r)
    an = Analyzer(BOUNDS)
    with an.scope(y, (5, 5)):
        assert not an._settled(r)
    assert an._settled(r)


def test_a_let_body_is_not_marked_for_the_enclosing_bounds():
    t = Var("t")
    e = Add(Let(t, IntImm(5), Add(FloorDiv(Add(t, x), IntImm(128)), x)), IntImm(1))
    got = simplify(e, BOUNDS)
    assert same_value(got, Add(x, IntImm(1)))
    check_marks(e, got)
    # the body alone, outside the let, where t is unbounded
    body = e.a.body
    assert same_value(simplify(body, BOUNDS), body)


# -- property: marks are true for random expressions ---------------------------------------------

_CMPS = (EQ, NE, LT, GE)
_ARITH = (Add, Sub, Mul, Min, Max)
_DIVS = (FloorDiv, FloorMod, Div, Mod)


def _exprs(vs: list[Var], dt) -> st.SearchStrategy[PrimExpr]:
    lo, hi = dt.min_value(), dt.max_value()
    values = [0, 1, 2, 3, 4, 16, -1, -4, lo, hi, hi - 1]
    const = st.sampled_from(values).map(lambda v: IntImm(v, dt))
    leaf = st.one_of(st.sampled_from(vs), const)

    def extend(sub):
        cmp = st.builds(lambda c, a, b: c(a, b), st.sampled_from(_CMPS), sub, sub)
        divisor = st.sampled_from([2, 3, 4, 8, -3]).map(lambda v: IntImm(v, dt))
        options = [
            st.builds(lambda c, a, b: c(a, b), st.sampled_from(_ARITH), sub, sub),
            st.builds(Mul, sub, const),
            st.builds(lambda c, a, d: c(a, d), st.sampled_from(_DIVS), sub, divisor),
            st.builds(Select, cmp, sub, sub),
        ]
        if dt == INT32:
            options.append(st.builds(lambda a: BufferLoad(G, (a,)), sub))
        return st.one_of(*options)

    return st.recursive(leaf, extend, max_leaves=10)


@st.composite
def _cases(draw):
    dt = draw(st.sampled_from([INT32, INT8]))
    vs = [Var(name, dt) for name in ("a", "b", "c")]
    bounds = {}
    for v in vs:
        lo = draw(st.integers(max(dt.min_value(), -600), 100))
        bounds[v] = IntBound(lo, lo + draw(st.sampled_from([0, 1, 7, 63, 1000, 10**6])))
        bounds[v] = bounds[v].intersect(IntBound.of_dtype(dt))
    e = draw(_exprs(vs, dt))
    shape = draw(st.sampled_from(["scalar", "ramp", "broadcast"]))
    if shape == "ramp":
        e = Ramp(e, draw(_exprs(vs, dt)), 4)
    elif shape == "broadcast":
        e = Broadcast(e, 4)
    return e, bounds


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_every_mark_is_true_and_marks_do_not_change_results(case):
    e, bounds = case
    expected = to_text(Analyzer(bounds).simplify(fresh(e)))
    got = simplify(e, bounds)
    assert to_text(got) == expected
    assert to_text(simplify(e, bounds)) == expected  # again, with the marks now in place
    an = Analyzer(bounds)
    assert to_text(an.simplify(fresh(e))) == expected
    assert to_text(an.simplify(e)) == expected
    check_marks(e, got)
