"""vectorize_loop: what becomes vector code, what falls back to a serial loop, and that both
give the same results."""

import numpy as np

import loom
from loom import te
from loom.ir import BufferLoad, BufferStore, For, ForKind, Ramp, post_order_visit


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
