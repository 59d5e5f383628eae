"""vectorize_loop: what becomes vector code, what falls back to a serial loop, and that both
give the same results."""

import numpy as np

import loom
from loom import te
from loom.ir import (
    LT,
    Add,
    Broadcast,
    BufferLoad,
    BufferStore,
    Call,
    FloatImm,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IRModule,
    Mul,
    PrimFunc,
    Ramp,
    SeqStmt,
    Var,
    assert_structural_equal,
    decl_buffer,
    post_order_visit,
)
from loom.target import Target
from loom.transform import PassContext
from loom.transform.vectorize_loop import vectorize_func, vectorize_loop


def nodes(mod, cls):
    found = []
    for f in mod:
        post_order_visit(f.body, lambda n: found.append(n) if isinstance(n, cls) else None)
    return found


def test_inner_loop_becomes_ramp_store():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    o, i = s[B].split(B.op.axis[0], factor=16)
    s[B].vectorize(i)
    mod = loom.lower(s, [A, B])
    stores = nodes(mod, BufferStore)
    assert len(stores) == 1 and isinstance(stores[0].indices[0], Ramp)
    assert stores[0].value.dtype.lanes == 16 and stores[0].predicate is None


def test_vectorizing_a_reduction_axis_falls_back_to_serial():
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis(8, "k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(k)
    mod = loom.lower(s, [A, B])
    assert not nodes(mod, Ramp)
    assert all(loop.kind == ForKind.SERIAL for loop in nodes(mod, For))
    a = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    b = np.zeros(4, np.float32)
    loom.ir.interpret(mod, a, b)
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5)


def test_vectorized_padding_reads_are_masked():
    A = te.placeholder((10,), name="A")
    P = te.compute(
        (12,), lambda i: te.if_then_else(te.all(i >= 1, i < 11), A[i - 1], 0.0), name="P"
    )
    s = te.create_schedule(P.op)
    o, i = s[P].split(P.op.axis[0], factor=4)
    s[P].vectorize(i)
    mod = loom.lower(s, [A, P])
    loads = [ld for ld in nodes(mod, BufferLoad) if ld.buffer.name == "A"]
    assert loads and all(ld.predicate is not None for ld in loads)
    a = np.arange(1, 11, dtype=np.float32)
    p = np.zeros(12, np.float32)
    loom.ir.interpret(mod, a, p)  # raises if a masked-off lane were read out of bounds
    np.testing.assert_array_equal(p, np.pad(a, 1))


def test_integer_division_in_a_masked_tail_divides_by_one_in_masked_off_lanes():
    # 8 lanes over 5 elements: the masked-off lanes read 0 from B, which must not be divided by
    A = te.placeholder((5,), "int32", name="A")
    B = te.placeholder((5,), "int32", name="B")
    C = te.compute((5,), lambda i: A[i] // B[i] + A[i] % B[i], name="C")
    s = te.create_schedule(C.op)
    _, inner = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(inner)
    f = loom.build(s, [A, B, C], target="llvm")
    a, b = np.arange(5, dtype="int32") - 2, np.array([2, -3, 1, 4, -2], "int32")
    c = np.empty(5, "int32")
    f(a, b, c)
    np.testing.assert_array_equal(c, a // b + a % b)


def test_loop_carried_dependency_is_not_vectorized():
    from loom.ir import IntImm, PrimFunc, Var, decl_buffer
    from loom.ir.stmt import For as ForStmt

    buf = decl_buffer((9,), "int32", "X")
    i = Var("i")
    body = buf.store(buf[i] + 1, (i + 1,))  # X[i+1] = X[i] + 1: each lane needs the previous
    func = PrimFunc("prefix", (buf,), ForStmt(i, IntImm(0), IntImm(8), "vectorized", body))
    mod = loom.lower(func)
    assert not nodes(mod, Ramp)
    x = np.zeros(9, np.int32)
    loom.ir.interpret(mod, x)
    np.testing.assert_array_equal(x, np.arange(9))


# -- before/expected: hand-built IR before the pass and the IR expected after it -----------------


def _func(build, target=None):
    A, B, C = (decl_buffer((n,), "float32", name) for n, name in ((16, "A"), (16, "B"), (10, "C")))
    mod = IRModule((PrimFunc("main", (A, B, C), build(A, B, C)),))
    return mod if target is None else mod.with_attr("target", target)


def _loop(i, extent, body, kind="vectorized"):
    return For(i, IntImm(0), IntImm(extent), kind, body)


def _ramp(base, lanes=4):
    return Ramp(base if not isinstance(base, int) else IntImm(base), IntImm(1), lanes)


def _check(before, expected, target=None):

    assert_structural_equal(vectorize_loop(_func(before, target)), _func(expected, target))


def test_before_expected_loop_becomes_ramp_and_broadcast():
    def before(A, B, C):
        i = Var("i")
        return _loop(i, 4, B.store(A[i] * FloatImm(2.0), (i,)))

    def expected(A, B, C):
        value = A.load([_ramp(0)]) * Broadcast(FloatImm(2.0), 4)
        return B.store(value, (_ramp(0),))

    _check(before, expected)


def test_before_expected_inner_loop_of_a_split():
    def before(A, B, C):
        o, i = Var("o"), Var("i")
        return _loop(o, 4, _loop(i, 4, B.store(A[o * 4 + i] + 1.0, (o * 4 + i,))), "serial")

    def expected(A, B, C):
        o = Var("o")
        value = A.load([_ramp(o * 4)]) + Broadcast(FloatImm(1.0), 4)
        return _loop(o, 4, B.store(value, (_ramp(o * 4),)), "serial")

    _check(before, expected)


def test_before_expected_guarded_tail_becomes_masked_store_and_load():
    def before(A, B, C):
        o, i = Var("o"), Var("i")
        index = o * 4 + i
        guarded = IfThenElse(LT(index, IntImm(10)), C.store(C[index] + 1.0, (index,)))
        return _loop(o, 3, _loop(i, 4, guarded), "serial")

    def expected(A, B, C):
        o = Var("o")
        mask = LT(_ramp(o * 4), Broadcast(IntImm(10), 4))
        value = C.load([_ramp(o * 4)], mask) + Broadcast(FloatImm(1.0), 4)
        return _loop(o, 3, C.store(value, (_ramp(o * 4),), mask), "serial")

    _check(before, expected)


def _likely(cond):
    return Call(cond.dtype, "likely", (cond,))


def _guarded_split(C, index):
    """C[index] += 1 under `likely(index < 10)`: the guard of a split of 10 by 4."""
    return IfThenElse(_likely(LT(index, IntImm(10))), C.store(C[index] + 1.0, (index,)))


def _ragged_split(A, B, C):
    o, i = Var("o"), Var("i")
    return _loop(o, 3, _loop(i, 4, _guarded_split(C, o * 4 + i)), "serial")


def test_before_expected_likely_guarded_tail_is_peeled_into_one_masked_vector():
    def expected(A, B, C):
        o = Var("o")
        whole = C.load([_ramp(o * 4)]) + Broadcast(FloatImm(1.0), 4)
        mask = _likely(LT(_ramp(8), Broadcast(IntImm(10), 4)))
        last = C.load([_ramp(8)], mask) + Broadcast(FloatImm(1.0), 4)
        head = _loop(o, 2, C.store(whole, (_ramp(o * 4),)), "serial")
        return SeqStmt((head, C.store(last, (_ramp(8),), mask)))

    _check(_ragged_split, expected)


def test_before_expected_likely_guarded_tail_is_peeled_when_loops_run_serially():
    """Scalar code (C, or vectorization disabled) is peeled too: the whole vectors' iterations
    run without the guard, the last one (the vector loop, serially) with it."""

    def expected(A, B, C):
        o, i = Var("o"), Var("i")
        index = o * 4 + i
        whole = _loop(o, 2, _loop(i, 4, C.store(C[index] + 1.0, (index,)), "serial"), "serial")
        last = Add(Mul(IntImm(2), IntImm(4)), i)
        return SeqStmt((whole, _loop(i, 4, _guarded_split(C, last), "serial")))

    with PassContext(config={"tir.disable_vectorize": True}):
        _check(_ragged_split, expected)
    _check(_ragged_split, expected, target=Target("c"))


def test_before_expected_lane_invariant_load_is_broadcast():
    def before(A, B, C):
        i = Var("i")
        return _loop(i, 4, B.store(A[IntImm(0)], (i,)))

    def expected(A, B, C):
        return B.store(Broadcast(A[IntImm(0)], 4), (_ramp(0),))

    _check(before, expected)


def _serial_fallback(body_of):
    """A vectorized loop whose body the pass must not vectorize, and the serial loop it becomes."""

    def before(A, B, C):
        i = Var("i")
        return _loop(i, 4, body_of(i, A, B))

    def expected(A, B, C):
        i = Var("i")
        return _loop(i, 4, body_of(i, A, B), "serial")

    return before, expected


def test_before_expected_store_independent_of_the_lane_stays_serial():
    _check(*_serial_fallback(lambda i, A, B: B.store(A[i], (IntImm(0),))))


def test_before_expected_read_at_another_index_than_written_stays_serial():
    _check(*_serial_fallback(lambda i, A, B: B.store(B[i + 1], (i,))))


def test_before_expected_extern_call_stays_serial():
    _check(
        *_serial_fallback(lambda i, A, B: B.store(Call("float32", "expf", (A[i],), "extern"), (i,)))
    )


def test_before_expected_disabled_by_config_or_scalar_target():

    before, expected = _serial_fallback(lambda i, A, B: B.store(A[i], (i,)))
    with PassContext(config={"tir.disable_vectorize": True}):
        _check(before, expected)
    _check(before, expected, target=Target("c"))  # C's code generator takes scalar IR


def test_before_expected_other_loops_are_left_alone():
    def build(A, B, C):
        i = Var("i")
        return _loop(i, 4, B.store(A[i], (i,)), "serial")

    _check(build, build)


def _vectorize_with(problem, before):
    func = _func(before)["main"]
    return vectorize_func(func, vector_problem=problem)


def test_before_expected_vectors_the_target_cannot_emit_become_power_of_two_pieces():
    def before(A, B, C):
        i = Var("i")
        return _loop(i, 7, B.store(A[i] * FloatImm(2.0), (i,)))

    def piece(A, B, start, lanes):
        return B.store(
            A.load([_ramp(start, lanes)]) * Broadcast(FloatImm(2.0), lanes), (_ramp(start, lanes),)
        )

    def expected(A, B, C):
        last = B.store(A[IntImm(6)] * FloatImm(2.0), (IntImm(6),))
        return SeqStmt((piece(A, B, 0, 4), piece(A, B, 4, 2), last))

    def odd_lanes(node):
        dt = getattr(node, "dtype", None)
        return "not a power of two" if dt is not None and dt.lanes & (dt.lanes - 1) else None

    assert_structural_equal(_vectorize_with(odd_lanes, before), _func(expected)["main"])


def test_before_expected_vector_code_the_target_cannot_emit_runs_serially():
    def before(A, B, C):
        i = Var("i")
        return _loop(i, 4, B.store(A[i] * FloatImm(2.0), (i,)))

    def expected(A, B, C):
        i = Var("i")
        return _loop(i, 4, B.store(A[i] * FloatImm(2.0), (i,)), "serial")

    def no_vector_loads(node):
        return "a vector load" if isinstance(node, BufferLoad) and node.dtype.lanes > 1 else None

    assert_structural_equal(_vectorize_with(no_vector_loads, before), _func(expected)["main"])
    assert_structural_equal(
        _vectorize_with(lambda node: None, before), vectorize_func(_func(before)["main"])
    )
