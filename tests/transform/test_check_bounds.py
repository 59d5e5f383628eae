"""check_bounds: hand-built IR before the pass and the IR expected after it (TVM's
before/expected style). An access proven in range (by the loop ranges, the guards around it, or
by evaluating every point) stays as it is; one that provably leaves its buffer is a
LoweringError naming the stage, the access, the index with its range and the extent; any other
gets `let index = e in require(0 <= index && index < n, index, message)`, unless PassContext
config "tir.disable_bound_checks" is set."""

import pytest

from loom import LoweringError
from loom.ir import (
    GE,
    LT,
    And,
    Broadcast,
    Call,
    FloatImm,
    For,
    IfThenElse,
    IntImm,
    IRModule,
    Let,
    Max,
    PrimFunc,
    Ramp,
    StringImm,
    Var,
    assert_structural_equal,
    decl_buffer,
    op,
    seq,
)
from loom.transform import PassContext
from loom.transform.check_bounds import check_bounds


def loop(i, extent, body, kind="serial"):
    return For(i, IntImm(0), extent if isinstance(extent, Var) else IntImm(extent), kind, body)


def params():
    """A: float32[16], B: int32[8], C: float32[8], m: int32"""
    return (
        decl_buffer((16,), "float32", "A"),
        decl_buffer((8,), "int32", "B"),
        decl_buffer((8,), "float32", "C"),
        Var("m"),
    )


def module(build):
    ps = params()
    return IRModule((PrimFunc("main", ps, build(*ps)),))


def run(build, **config):
    with PassContext(config=config):
        return check_bounds(module(build))


def same(build, **config):
    """The pass leaves the program as it is."""
    assert_structural_equal(run(build, **config), module(build))


def checked(index, lower, upper, message, name="index"):
    """The runtime check the pass makes of `index` (let-bound unless a variable)."""
    v = index if isinstance(index, Var) else Var(name)
    parts = [GE(v, IntImm(0))] if lower else []
    parts += [LT(v, IntImm(upper))] if upper is not None else []
    cond = parts[0] if len(parts) == 1 else And(*parts)
    check = Call(v.dtype, "require", (cond, v, StringImm(message)))
    return check if v is index else Let(v, index, check)


# -- proven in range: unchanged -------------------------------------------------------------
def test_loop_ranges_prove_plain_accesses():
    def body(A, B, C, m):
        i = Var("i")
        return loop(i, 8, C.store(A[i * 2 + 1], (i,)))

    same(body)


def test_a_split_tail_guard_proves_the_access_it_guards():
    """for io, ii: if likely(io*8 + ii < 16): A[io*8 + ii] (the guard's `a < b` and the
    index's bound differ by a provable constant)."""

    def body(A, B, C, m):
        io, ii = Var("i.outer"), Var("i.inner")
        x = io * 8 + ii
        guard = op.likely(x < 16)
        return loop(io, 3, loop(ii, 8, IfThenElse(guard, A.store(A[x] * 2.0, (x,)))))

    same(body)


def test_padding_if_then_else_and_the_else_branch_are_guards():
    """if_then_else(i >= 1, A[i - 1], 0) reads only where i >= 1; an if's else branch runs
    under the negated condition."""

    def body(A, B, C, m):
        i, j = Var("i"), Var("j")
        pad = op.if_then_else(j >= 1, A[j - 1], op.const(0.0, "float32"))
        other = IfThenElse(i < 8, C.store(A[i + 8], (i,)), C.store(A[i], (i - 8,)))
        return seq(loop(i, 16, other), loop(j, 8, C.store(pad, (j,))))

    same(body)


def test_symbolic_loop_ranges_are_facts():
    """for i in 0..m reading D[i] of a buffer of extent m: `i < 0 + m` proves it."""

    def build(n):
        D = decl_buffer((n,), "float32", "D")
        i = Var("i")
        return D, loop(i, n, D.store(D[i] + 1.0, (i,)))

    n = Var("n")
    D, body = build(n)
    mod = IRModule((PrimFunc("main", (n, D), body),))
    assert_structural_equal(check_bounds(mod), mod)


def test_predicated_ramp_is_proven_lane_by_lane():
    """A[ramp(io*8, 1, 8)] under predicate ramp < 12: each enabled lane is below 12 < 16."""

    def body(A, B, C, m):
        io = Var("io")
        ramp = Ramp(io * 8, IntImm(1), 8)
        pred = op.likely(ramp < Broadcast(IntImm(12), 8))
        return loop(io, 2, A.store(A.load([ramp], pred) * 2.0, (ramp,), pred))

    same(body)


def test_a_dead_access_needs_nothing():
    """Under a condition no iteration meets, an access that would be outside never runs."""

    def body(A, B, C, m):
        i = Var("i")
        return loop(i, 8, IfThenElse(i > 9, C.store(A[i + 100], (i,))))

    same(body)


def test_address_of_is_not_an_access():
    def body(A, B, C, m):
        i = Var("i")
        address = op.call_intrin("handle", "address_of", A[i + 16])
        return loop(
            i, 8, C.store(op.cast(op.call_intrin("bool", "isnullptr", address), "float32"), (i,))
        )

    same(body)


# -- runtime checks --------------------------------------------------------------------------
GATHER = "main: stage C reads A[B[i]]: index B[i] of dimension 0 is outside [0, 16)"


def test_gather_gets_a_runtime_check():
    def before(A, B, C, m):
        i = Var("i")
        return loop(i, 8, C.store(A[B[i]], (i,)))

    def expected(A, B, C, m):
        i = Var("i")
        return loop(i, 8, C.store(A.load([checked(B[i], True, 16, GATHER)]), (i,)))

    assert_structural_equal(run(before), module(expected))


def test_disable_bound_checks_adds_no_check():
    def before(A, B, C, m):
        i = Var("i")
        return loop(i, 8, C.store(A[B[i]], (i,)))

    same(before, **{"tir.disable_bound_checks": True})


def test_only_the_unproven_side_is_checked_and_writes_are_checked():
    """A[max(B[i], 0)] can only be too large; C[B[i]] = ... is a write."""
    message_a = (
        "main: stage C reads A[max(B[i], 0)]: index max(B[i], 0) of dimension 0 is outside [0, 16)"
    )
    message_c = "main: stage C writes C[B[i]]: index B[i] of dimension 0 is outside [0, 8)"

    def before(A, B, C, m):
        i = Var("i")
        return loop(i, 8, C.store(A[Max(B[i], IntImm(0))], (B[i],)))

    def expected(A, B, C, m):
        i = Var("i")
        read = A.load([checked(Max(B[i], IntImm(0)), False, 16, message_a)])
        return loop(i, 8, C.store(read, (checked(B[i], True, 8, message_c),)))

    assert_structural_equal(run(before), module(expected))


def test_symbolic_extent_is_checked_at_run_time():
    """for i in 0..m: C[i]: m is only known when the function runs (i >= 0 is proven)."""
    message = "main: stage C writes C[i]: index i of dimension 0 is outside [0, 8)"

    def before(A, B, C, m):
        i = Var("i")
        return loop(i, m, C.store(FloatImm(0.0), (i,)))

    def expected(A, B, C, m):
        i = Var("i")
        return loop(i, m, C.store(FloatImm(0.0), (checked(i, False, 8, message),)))

    assert_structural_equal(run(before), module(expected))


def test_a_loop_that_may_not_run_turns_an_error_into_a_check():
    """A[j + 13] is outside for j = 3, but only if the loop over m runs at all."""
    message = "main: stage C reads A[(j + 13)]: index (j + 13) of dimension 0 is outside [0, 16)"

    def before(A, B, C, m):
        i, j = Var("i"), Var("j")
        return loop(i, m, loop(j, 4, C.store(A[j + 13], (j,))))

    def expected(A, B, C, m):
        i, j = Var("i"), Var("j")
        return loop(i, m, loop(j, 4, C.store(A.load([checked(j + 13, False, 16, message)]), (j,))))

    assert_structural_equal(run(before), module(expected))


def test_a_vectorized_loop_with_a_check_becomes_serial():
    def before(A, B, C, m):
        i = Var("i")
        return loop(i, 8, C.store(A[B[i]], (i,)), kind="vectorized")

    def expected(A, B, C, m):
        i = Var("i")
        return loop(i, 8, C.store(A.load([checked(B[i], True, 16, GATHER)]), (i,)), kind="serial")

    assert_structural_equal(run(before), module(expected))


def test_a_condition_belongs_to_the_stage_its_statement_stores():
    message = "main: stage C reads A[B[i]]: index B[i] of dimension 0 is outside [0, 16)"

    def before(A, B, C, m):
        i = Var("i")
        return loop(i, 8, IfThenElse(A[B[i]] > 0.0, C.store(FloatImm(1.0), (i,))))

    def expected(A, B, C, m):
        i = Var("i")
        cond = A.load([checked(B[i], True, 16, message)]) > 0.0
        return loop(i, 8, IfThenElse(cond, C.store(FloatImm(1.0), (i,))))

    assert_structural_equal(run(before), module(expected))


# -- build errors ----------------------------------------------------------------------------
def test_provably_out_of_range_read_is_a_build_error():
    def body(A, B, C, m):
        i = Var("i")
        return loop(i, 8, C.store(A[i + 10], (i,)))

    with pytest.raises(
        LoweringError,
        match=r"main: stage C reads A\[\(i \+ 10\)\] out of bounds: index \(i \+ 10\) "
        r"\(dimension 0 of A, extent 16\) takes the values \[10, 17\], not all in \[0, 15\]",
    ):
        run(body)


def test_out_of_range_under_a_split_guard_is_found_at_the_points_the_guard_lets_through():
    """The guard lets io*8 + ii run up to 11, so A[io*8 + ii + 5] reaches 16."""

    def body(A, B, C, m):
        io, ii = Var("i.outer"), Var("i.inner")
        x = io * 8 + ii
        store = A.store(A[x + 5], (x,))
        return loop(io, 2, loop(ii, 8, IfThenElse(op.likely(x < 12), store)))

    with pytest.raises(LoweringError, match=r"takes the values \[5, 16\], not all in \[0, 15\]"):
        run(body)


def test_out_of_range_lanes_of_a_vector_access_are_a_build_error():
    def body(A, B, C, m):
        ramp = Ramp(IntImm(12), IntImm(1), 8)
        return A.store(A.load([ramp]), (Ramp(IntImm(0), IntImm(1), 8),))

    with pytest.raises(LoweringError, match=r"reads A\[ramp\(12, 1, 8\)\] .* \[12, 19\]"):
        run(body)


def test_the_build_error_stays_with_runtime_checks_disabled():
    def body(A, B, C, m):
        i = Var("i")
        return loop(i, 8, C.store(A[i - 1], (i,)))

    with pytest.raises(LoweringError, match=r"takes the values \[-1, 6\]"):
        run(body, **{"tir.disable_bound_checks": True})
