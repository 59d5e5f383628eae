"""unroll_loop: hand-built IR before the pass and the IR expected after it (TVM's before/expected
style). An unrolled loop becomes one copy of its body per iteration, its variable replaced by
`min + k`; other loops stay; a non-constant extent is an error."""

import pytest

from loom import LoomError
from loom.ir import (
    NOP,
    Add,
    AttrStmt,
    For,
    IntImm,
    IRModule,
    Mul,
    PrimFunc,
    Var,
    assert_structural_equal,
    decl_buffer,
    seq,
)
from loom.ir.stmt import UNROLL_FULL
from loom.transform.unroll_loop import unroll_loop


def loop(i, extent, body, kind="unrolled", start=None):
    return For(i, IntImm(0) if start is None else start, IntImm(extent), kind, body)


def func(build):
    A, n = decl_buffer((16,), "int32", "A"), Var("n")
    return IRModule((PrimFunc("main", (A, n), build(A, n)),))


def check(before, expected):
    assert_structural_equal(unroll_loop(func(before)), func(expected))


def test_constant_loop_becomes_copies():
    def before(A, n):
        i = Var("i")
        return loop(i, 3, A.store(i, (i,)))

    def expected(A, n):
        return seq(*[A.store(IntImm(k), (IntImm(k),)) for k in range(3)])

    check(before, expected)


def test_loop_with_symbolic_start_inside_a_serial_loop():
    def before(A, n):
        o, i = Var("o"), Var("i")
        return loop(o, 4, loop(i, 2, A.store(i * 2, (i,)), start=o * 4), kind="serial")

    def expected(A, n):
        o = Var("o")
        first, second = o * 4, Add(o * 4, IntImm(1))  # min + 0 folds to min
        copies = seq(A.store(first * 2, (first,)), A.store(second * 2, (second,)))
        return loop(o, 4, copies, kind="serial")

    check(before, expected)


def test_nested_unrolled_loops_substitute_without_folding():
    def before(A, n):
        o, i = Var("o"), Var("i")
        return loop(o, 2, loop(i, 2, A.store(Add(o, i), (Add(Mul(o, IntImm(2)), i),))))

    def expected(A, n):
        # the copies keep the arithmetic (0*2 + 1): the simplify pass that follows folds it
        return seq(
            *[
                A.store(Add(IntImm(a), IntImm(b)), (Add(Mul(IntImm(a), IntImm(2)), IntImm(b)),))
                for a in range(2)
                for b in range(2)
            ]
        )

    check(before, expected)


def test_extent_zero_leaves_nothing():
    def before(A, n):
        i = Var("i")
        return loop(i, 0, A.store(i, (i,)))

    def expected(A, n):
        return NOP

    check(before, expected)


def test_other_loop_kinds_are_left_alone():
    def build(A, n):
        i, j, k = Var("i"), Var("j"), Var("k")
        return seq(
            loop(i, 3, A.store(i, (i,)), kind="serial"),
            loop(j, 4, A.store(j, (j,)), kind="vectorized"),
            loop(k, 4, A.store(k, (k,)), kind="parallel"),
        )

    check(build, build)


def test_non_constant_extent_is_an_error():
    def before(A, n):
        i = Var("i")
        return For(i, IntImm(0), n, "unrolled", A.store(i, (i,)))

    with pytest.raises(LoomError, match=r"loop i is marked unrolled but its extent n"):
        unroll_loop(func(before))


def explicit(i, value, body):
    return AttrStmt("pragma_unroll_explicit", IntImm(value), body, i)


def test_unroll_explicit_false_keeps_the_loop_for_the_back_end():
    def before(A, n):
        i = Var("i")
        return explicit(i, 0, loop(i, 4, A.store(i, (i,))))

    def expected(A, n):
        i = Var("i")
        return For(i, IntImm(0), IntImm(4), "serial", A.store(i, (i,)), ((UNROLL_FULL, True),))

    check(before, expected)


def test_unroll_explicit_false_still_unrolls_the_loops_inside():
    def before(A, n):
        i, j = Var("i"), Var("j")
        return explicit(i, 0, loop(i, 4, loop(j, 2, A.store(i + j, (j,)))))

    def expected(A, n):
        i = Var("i")
        body = seq(
            A.store(Add(i, IntImm(0)), (IntImm(0),)), A.store(Add(i, IntImm(1)), (IntImm(1),))
        )
        return For(i, IntImm(0), IntImm(4), "serial", body, ((UNROLL_FULL, True),))

    check(before, expected)


def test_unroll_explicit_true_unrolls_here():
    def before(A, n):
        i = Var("i")
        return explicit(i, 1, loop(i, 2, A.store(i, (i,))))

    def expected(A, n):
        return seq(A.store(IntImm(0), (IntImm(0),)), A.store(IntImm(1), (IntImm(1),)))

    check(before, expected)


def test_unroll_explicit_on_a_loop_that_is_not_unrolled_is_an_error():
    def before(A, n):
        i = Var("i")
        return explicit(i, 0, loop(i, 4, A.store(i, (i,)), kind="serial"))

    with pytest.raises(LoomError, match=r"unroll_explicit on loop i, which is serial, not "):
        unroll_loop(func(before))


def test_unroll_explicit_looks_through_the_loops_other_pragmas():
    def before(A, n):
        i = Var("i")
        other = AttrStmt("pragma_other", IntImm(1), loop(i, 4, A.store(i, (i,))), i)
        return explicit(i, 0, other)

    def expected(A, n):
        i = Var("i")
        kept = For(i, IntImm(0), IntImm(4), "serial", A.store(i, (i,)), ((UNROLL_FULL, True),))
        return AttrStmt("pragma_other", IntImm(1), kept, i)

    check(before, expected)


def test_unroll_explicit_false_keeps_the_checks_of_unrolling():
    def symbolic(A, n):
        i = Var("i")
        return explicit(i, 0, For(i, IntImm(0), n, "unrolled", A.store(i, (i,))))

    with pytest.raises(LoomError, match=r"loop i is marked unrolled but its extent n"):
        unroll_loop(func(symbolic))

    def long(A, n):
        i = Var("i")
        return explicit(i, 0, loop(i, 2000, A.store(i, (i,))))

    with pytest.raises(LoomError, match=r"makes 2000 copies of its body, more than the limit"):
        unroll_loop(func(long))
