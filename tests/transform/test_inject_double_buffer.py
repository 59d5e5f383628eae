"""inject_double_buffer: hand-built IR before the pass and the IR expected after it (TVM's
before/expected style), then `Stage.double_buffer()` schedules run by the interpreter and by
LLVM. A double-buffered buffer is allocated once around its loop with two copies, span
elements apart (its size rounded up to its scope's alignment); iteration i uses copy i % 2."""

import numpy as np
import pytest

import loom
from loom import te
from loom.backend.npu.arch import SPAD
from loom.ir import (
    AttrStmt,
    For,
    IntImm,
    IRModule,
    PrimFunc,
    StringImm,
    Var,
    assert_structural_equal,
    decl_buffer,
    op,
    seq,
)
from loom.ir.stmt import Allocate
from loom.transform.inject_double_buffer import PRAGMA_KEY, copy_span, inject_double_buffer

N = 4  # iterations of the loop the buffer is double-buffered in
T = 16  # elements of the buffer


def loop(v, extent, body, kind="serial"):
    return For(v, IntImm(0), IntImm(extent), kind, body)


def staged(A, B, T_buf, i, index):
    """T[j] = A[i*T + j]; B[i*T + j] = T[j] + 1, with T's accesses at `index(j)`."""
    j, j2 = Var("j"), Var("j2")
    fill = loop(j, T, T_buf.store(A[i * T + j], (index(j),)))
    use = loop(j2, T, B.store(T_buf[index(j2)] + 1, (i * T + j2,)))
    return seq(fill, use)


def func(body_of, scope="global", dtype="int32"):
    A = decl_buffer((N * T,), dtype, "A")
    B = decl_buffer((N * T,), dtype, "B")
    return IRModule((PrimFunc("f", (A, B), body_of(A, B, scope, dtype)),))


def test_the_buffer_gets_two_copies_around_its_loop():
    i = Var("i")

    def before(A, B, scope, dtype):
        t = decl_buffer((T,), dtype, "T", scope=scope)
        body = Allocate(t, staged(A, B, t, i, lambda j: j))
        return AttrStmt(PRAGMA_KEY, StringImm("T"), loop(i, N, body), i)

    def expected(A, B, scope, dtype):
        t2 = decl_buffer((2 * T,), dtype, "T", scope=scope)
        parity = op.floormod(i, IntImm(2))
        return Allocate(t2, loop(i, N, staged(A, B, t2, i, lambda j: j + parity * IntImm(T))))

    assert_structural_equal(inject_double_buffer(func(before)), func(expected))


def test_a_copy_starts_where_the_scope_aligns_and_other_pragmas_stay_on_the_loop():
    """13 int32 are 52 bytes: one copy spans 64 (global memory aligns to 64 bytes)."""
    i = Var("i")
    hint = ("pragma_hint", IntImm(1))

    def before(A, B, scope, dtype):
        t = decl_buffer((13,), dtype, "T", scope=scope)
        body = Allocate(t, staged(A, B, t, i, lambda j: j))
        inner = AttrStmt(hint[0], hint[1], loop(i, N, body), i)
        return AttrStmt(PRAGMA_KEY, StringImm("T"), inner, i)

    def expected(A, B, scope, dtype):
        t2 = decl_buffer((32,), dtype, "T", scope=scope)
        shifted = staged(A, B, t2, i, lambda j: j + op.floormod(i, IntImm(2)) * IntImm(16))
        return Allocate(t2, AttrStmt(hint[0], hint[1], loop(i, N, shifted), i))

    assert copy_span(decl_buffer((13,), "int32", "T")) == 16
    assert_structural_equal(inject_double_buffer(func(before)), func(expected))


@pytest.mark.parametrize("kind", ["parallel", "vectorized", None])
def test_a_parallel_loop_or_a_removed_loop_keeps_one_copy(kind):
    """A parallel or vectorized loop's iterations run at once (each keeps its own buffer); a
    loop of one iteration that simplify removed has nothing to alternate."""
    i = Var("i")

    def before(A, B, scope, dtype):
        t = decl_buffer((T,), dtype, "T", scope=scope)
        body = Allocate(t, staged(A, B, t, i, lambda j: j))
        return AttrStmt(PRAGMA_KEY, StringImm("T"), loop(i, N, body, kind) if kind else body, i)

    def expected(A, B, scope, dtype):
        t = decl_buffer((T,), dtype, "T", scope=scope)
        body = Allocate(t, staged(A, B, t, i, lambda j: j))
        return loop(i, N, body, kind) if kind else body

    got = inject_double_buffer(func(before))
    # the same buffer object in both: compare with free variables mapped
    assert_structural_equal(got, func(expected), map_free_vars=True)


def test_an_address_in_a_fixed_address_scope_moves_by_whole_units():
    """An intrinsic that uses the buffer's address (its data variable) gets the copy's: in the
    NPU's scratchpad (16-byte rows) a 40-byte buffer spans 3 rows per copy."""
    i = Var("i")

    def body(t, A):
        return op.call_extern("int32", "use", op.cast(t.data, "uint64"), A[i])

    def before(A, B, scope, dtype):
        t = decl_buffer((40,), "int8", "T", scope=SPAD)
        inner = Allocate(t, loom.ir.Evaluate(body(t, A)))
        return AttrStmt(PRAGMA_KEY, StringImm("T"), loop(i, N, inner), i)

    def expected(A, B, scope, dtype):
        t2 = decl_buffer((96,), "int8", "T", scope=SPAD)
        moved = op.cast(t2.data, "uint64") + op.cast(op.floormod(i, IntImm(2)), "uint64") * (
            IntImm(3, "uint64")
        )
        call = op.call_extern("int32", "use", op.cast(op.cast(moved, "handle"), "uint64"), A[i])
        return Allocate(t2, loop(i, N, loom.ir.Evaluate(call)))

    assert_structural_equal(inject_double_buffer(func(before)), func(expected))


def test_an_address_in_host_memory_is_the_copys_first_element():
    i = Var("i")

    def before(A, B, scope, dtype):
        t = decl_buffer((T,), dtype, "T", scope=scope)
        use = loom.ir.Evaluate(op.call_extern("int32", "use", t.data, A[i]))
        return AttrStmt(PRAGMA_KEY, StringImm("T"), loop(i, N, Allocate(t, use)), i)

    def expected(A, B, scope, dtype):
        t2 = decl_buffer((2 * T,), dtype, "T", scope=scope)
        first = op.call_intrin("handle", "address_of", t2[op.floormod(i, IntImm(2)) * IntImm(T)])
        use = loom.ir.Evaluate(op.call_extern("int32", "use", first, A[i]))
        return Allocate(t2, loop(i, N, use))

    assert_structural_equal(inject_double_buffer(func(before)), func(expected))


def test_a_missing_allocation_is_an_error():
    i = Var("i")

    def before(A, B, scope, dtype):
        return AttrStmt(PRAGMA_KEY, StringImm("T"), loop(i, N, B.store(A[i], (i,))), i)

    with pytest.raises(loom.LoomError, match=r"double_buffer: no allocation of T at the top of"):
        inject_double_buffer(func(before))


def staged_schedule(double_buffer=True, parallel=False, vectorize=False):
    """B = 2 * A + 1 through a staged copy of A computed per tile of 16."""
    A = te.placeholder((100,), "float32", name="A")
    B = te.compute((100,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    A_l = s.cache_read(A, "global", [B])
    xo, xi = s[B].split(B.op.axis[0], factor=16)
    s[A_l].compute_at(s[B], xo)
    if vectorize:
        s[B].vectorize(xi)
        s[A_l].vectorize(s[A_l].op.axis[0])
    if double_buffer:
        s[A_l].double_buffer()
    if parallel:
        s[B].parallel(xo)
    return s, [A, B]


@pytest.mark.parametrize("how", ["interpreter", "llvm"])
@pytest.mark.parametrize("options", [{}, {"parallel": True}, {"vectorize": True}])
def test_a_double_buffered_stage_computes_the_same(how, options):
    s, args = staged_schedule(**options)
    a = np.random.default_rng(0).random(100).astype(np.float32)
    b = np.zeros(100, np.float32)
    if how == "interpreter":
        loom.ir.interpret(loom.lower(s, args, name="f"), a, b)
    else:
        loom.build(s, args, target="llvm", name="f")(a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def test_lowered_schedule_alternates_two_copies():
    text = str(loom.lower(*staged_schedule(), name="f"))
    assert "A.global: Pointer(global float32), float32, [32]" in text  # two copies of 16
    assert text.index("allocate(A.global") < text.index("for (i.outer")  # outside the loop
    assert "(floormod(i.outer, 2) * 16)" in text
    single = str(loom.lower(*staged_schedule(double_buffer=False), name="f"))
    assert "[16]" in single and "floormod" not in single


def test_a_stage_double_buffered_at_a_vectorized_loop_keeps_its_lanes_apart():
    """Two copies at a vectorized loop would be shared by lanes i and i + 2, each overwriting
    the other's staged value: the loop keeps one buffer per lane, and the result is right."""
    A = te.placeholder((64,), "float32", name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    A_l = s.cache_read(A, "local", [B])
    _, xi = s[B].split(B.op.axis[0], factor=4)
    s[A_l].compute_at(s[B], xi)
    s[A_l].double_buffer()
    s[B].vectorize(xi)
    f = loom.build(s, [A, B], target="llvm")
    a = np.arange(64, dtype=np.float32)
    b = np.zeros(64, np.float32)
    f(a, b)
    np.testing.assert_array_equal(b, a + 1)
