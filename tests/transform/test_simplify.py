"""simplify: hand-built IR before the pass and the IR expected after it (TVM's before/expected
style). Constant folding, canonical indices, provably true guards and assertions, loops of
extent 0 and 1, unused lets; what it must leave alone."""

from loom.ir import (
    GE,
    LT,
    NOP,
    Add,
    AssertStmt,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    IfThenElse,
    IntImm,
    IRModule,
    LetStmt,
    Mul,
    PrimFunc,
    Sub,
    Var,
    assert_structural_equal,
    decl_buffer,
    seq,
)
from loom.transform.simplify import simplify


def loop(i, extent, body, kind="serial", start=0):
    return For(i, IntImm(start), IntImm(extent), kind, body)


def func(build):
    """main(A: int32[8], B: int32[8], F: float32[8], n: int32, x: float32) with `build`'s body."""
    A, B = decl_buffer((8,), "int32", "A"), decl_buffer((8,), "int32", "B")
    F, n, x = decl_buffer((8,), "float32", "F"), Var("n"), Var("x", "float32")
    return IRModule((PrimFunc("main", (A, B, F, n, x), build(A, B, F, n, x)),))


def check(before, expected):
    assert_structural_equal(simplify(func(before)), func(expected))


def test_folds_constants_and_canonicalizes_indices():
    def before(A, B, F, n, x):
        i = Var("i")
        index = Add(Mul(i, IntImm(1)), IntImm(0))  # i*1 + 0
        return loop(i, 8, A.store(Add(IntImm(2), IntImm(3)), (index,)))

    def expected(A, B, F, n, x):
        i = Var("i")
        return loop(i, 8, A.store(IntImm(5), (i,)))

    check(before, expected)


def test_merges_floordiv_and_floormod():
    def before(A, B, F, n, x):
        i = Var("i")
        value = Add(FloorMod(i, IntImm(4)), Mul(FloorDiv(i, IntImm(4)), IntImm(4)))
        index = FloorMod(i, IntImm(8))  # i is in [0, 8)
        return loop(i, 8, A.store(value, (index,)))

    def expected(A, B, F, n, x):
        i = Var("i")
        return loop(i, 8, A.store(i, (i,)))

    check(before, expected)


def test_removes_provably_true_guard():
    def before(A, B, F, n, x):
        i = Var("i")
        copy = A.store(B[Sub(Add(i, IntImm(2)), IntImm(2))], (i,))
        return loop(i, 8, IfThenElse(LT(i, IntImm(8)), copy))

    def expected(A, B, F, n, x):
        i = Var("i")
        return loop(i, 8, A.store(B[i], (i,)))

    check(before, expected)


def test_provably_false_guard_removes_the_loop():
    def before(A, B, F, n, x):
        i = Var("i")
        store = A.store(IntImm(1), (i,))
        return seq(loop(i, 8, IfThenElse(GE(i, IntImm(8)), store)), B.store(IntImm(0), (0,)))

    def expected(A, B, F, n, x):
        return B.store(IntImm(0), (0,))

    check(before, expected)


def test_loops_of_extent_zero_and_one():
    def before(A, B, F, n, x):
        i, j = Var("i"), Var("j")
        return seq(
            For(i, IntImm(0), IntImm(0), "serial", A.store(i, (i,))),  # never runs
            loop(j, 1, A.store(j, (j,)), start=2),  # runs once with j = 2
        )

    def expected(A, B, F, n, x):
        return A.store(IntImm(2), (IntImm(2),))

    check(before, expected)


def test_whole_body_can_vanish():
    def before(A, B, F, n, x):
        i = Var("i")
        return For(i, IntImm(0), IntImm(0), "serial", A.store(i, (i,)))

    def expected(A, B, F, n, x):
        return NOP

    check(before, expected)


def test_removes_proven_assertion_keeps_unproven_one():
    def before(A, B, F, n, x):
        i = Var("i")
        store = A.store(i, (i,))
        inner = AssertStmt(LT(i, n), "i < n", store)
        return loop(i, 8, AssertStmt(LT(i, IntImm(8)), "in bounds", inner))

    def expected(A, B, F, n, x):
        i = Var("i")
        return loop(i, 8, AssertStmt(LT(i, n), "i < n", A.store(i, (i,))))

    check(before, expected)


def test_removes_unused_let_keeps_used_one():
    def before(A, B, F, n, x):
        unused, used = Var("unused"), Var("used")
        store = A.store(used, (0,))
        return LetStmt(unused, IntImm(3), LetStmt(used, n + 1, store))

    def expected(A, B, F, n, x):
        used = Var("used")
        return LetStmt(used, n + 1, A.store(used, (0,)))

    check(before, expected)


def test_folds_float_constants_only():
    def before(A, B, F, n, x):
        i, j = Var("i"), Var("j")
        return seq(
            loop(i, 8, F.store(Add(FloatImm(1.0), FloatImm(2.0)), (i,))),
            loop(j, 8, F.store(Add(Add(x, FloatImm(1.0)), FloatImm(2.0)), (j,))),
        )

    def expected(A, B, F, n, x):
        i, j = Var("i"), Var("j")
        return seq(
            loop(i, 8, F.store(FloatImm(3.0), (i,))),
            loop(j, 8, F.store(Add(Add(x, FloatImm(1.0)), FloatImm(2.0)), (j,))),  # no reassoc.
        )

    check(before, expected)


def test_leaves_undecidable_guards_and_loop_kinds_alone():
    def build(A, B, F, n, x):
        i, j = Var("i"), Var("j")
        guarded = loop(i, 8, IfThenElse(LT(i, n), A.store(i, (i,))))
        return seq(guarded, loop(j, 4, B.store(j, (j,)), kind="vectorized"))

    check(build, build)
