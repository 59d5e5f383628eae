"""cache_read and cache_write rewrite the dataflow transitively: when several stages get new
operations, a stage reading any of them reads the newest one, and the stage list, the outputs and
the compute_at attach points name only current operations. Each schedule is lowered and run by
the reference interpreter and built with LLVM, against numpy."""

import numpy as np
import pytest

import loom
from loom import te
from loom.te.tensor import PlaceholderOp

N, M = 6, 10


def _inputs(*names, seed=0):
    rng = np.random.default_rng(seed)
    return {n: rng.uniform(-2, 2, (N, M)).astype(np.float32) for n in names}


def _check_dataflow(s):
    """Every read, every output and every attach point names a current stage operation."""
    current = {id(st.op) for st in s.stages}
    for st in s.stages:
        for t in st.op.input_tensors:
            assert id(t.op) in current, f"{st.name} reads a replaced operation of {t.op.name}"
        if st.attach_stage is not None:
            assert st.attach_stage in s.stages
            assert st.attach_ivar in st.attach_stage.leaf_iter_vars
    for out in s.outputs:
        assert id(out) in current, f"output {out.name} is a replaced operation"
        assert s[out].is_output


def _run(s, args, arrays, expected):
    """Lower and interpret, then build with LLVM and run; compare the outputs with numpy."""
    _check_dataflow(s)
    for how in ("interpreter", "llvm"):
        got = [a.copy() if a is not None else None for a in arrays]
        got = [np.zeros((N, M), np.float32) if a is None else a for a in got]
        if how == "interpreter":
            loom.ir.interpret(loom.lower(s, args, name="f"), *got)
        else:
            loom.build(s, args, target="llvm", name="f")["f"](*got)
        for k, want in expected.items():
            np.testing.assert_allclose(got[k], want, rtol=1e-5, atol=1e-5, err_msg=how)


def _chain(length):
    """A -> T1 -> ... -> T<length>, where T<k> = T<k-1> * 0.5 + A * k (so each also reads A)."""
    A = te.placeholder((N, M), name="A")
    ts = []
    prev = None
    for k in range(1, length + 1):
        if prev is None:
            t = te.compute((N, M), lambda i, j: A[i, j] + 1.0, name="T1")
        else:
            t = te.compute((N, M), _step(A, prev, k), name=f"T{k}")
        ts.append(t)
        prev = t
    return A, ts


def _step(A, prev, k):
    def rule(i, j):
        return prev[i, j] * 0.5 + A[i, j] * float(k)

    return rule


def _chain_ref(a, length):
    out, prev = [], None
    for k in range(1, length + 1):
        prev = a + 1.0 if prev is None else prev * 0.5 + a * float(k)
        out.append(prev)
    return out


def test_reported_chain_reader_reads_another_reader():
    """A -> T1 -> T2 -> T3, T2 also reads A: cache_read(A, [T1, T2]) (refused before)."""
    A = te.placeholder((N, M), name="A")
    T1 = te.compute((N, M), lambda i, j: A[i, j] + 1.0, name="T1")
    T2 = te.compute((N, M), lambda i, j: T1[i, j] * A[i, j], name="T2")
    T3 = te.compute((N, M), lambda i, j: T2[i, j] - 1.0, name="T3")
    s = te.create_schedule(T3.op)
    AL = s.cache_read(A, "local", [T1, T2])
    # T2 reads the new T1 and the cache; T3 reads the new T2
    assert {t.op for t in s[T2].op.input_tensors} == {s[T1].op, AL.op}
    assert [t.op for t in s[T3].op.input_tensors] == [s[T2].op]
    assert [t.op for t in s[AL].op.input_tensors] == [A.op]
    a = _inputs("A")["A"]
    _run(s, [A, T3], [a, None], {1: (a + 1.0) * a - 1.0})


@pytest.mark.parametrize("length", [3, 5, 8])
@pytest.mark.parametrize("which", ["all", "odd", "last_two"])
def test_longer_chains(length, which):
    A, ts = _chain(length)
    s = te.create_schedule(ts[-1].op)
    readers = {
        "all": ts[1:],
        "odd": ts[1::2],
        "last_two": ts[-2:],
    }[which]
    AL = s.cache_read(A, "local", readers)
    for t in readers:
        assert AL.op in {x.op for x in s[t].op.input_tensors}
    for k in range(1, length):  # each stage reads the current version of the one before
        assert s[ts[k - 1]].op in {x.op for x in s[ts[k]].op.input_tensors}
    a = _inputs("A")["A"]
    _run(s, [A, ts[-1]], [a, None], {1: _chain_ref(a, length)[-1]})


def test_diamond():
    """A feeds B and C; D reads B, C and A; all three readers read the cache."""
    A = te.placeholder((N, M), name="A")
    B = te.compute((N, M), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((N, M), lambda i, j: A[i, j] + B[i, j], name="C")
    D = te.compute((N, M), lambda i, j: B[i, j] - C[i, j] + A[i, j], name="D")
    E = te.compute((N, M), lambda i, j: D[i, j] * C[i, j], name="E")
    s = te.create_schedule(E.op)
    s.cache_read(A, "local", [B, C, D])
    a = _inputs("A")["A"]
    b = a * 2.0
    c = a + b
    d = b - c + a
    _run(s, [A, E], [a, None], {1: d * c})


def test_readers_that_are_outputs():
    """Outputs among the rewritten readers (and an output reading another) stay outputs, under
    their new operations."""
    A = te.placeholder((N, M), name="A")
    T1 = te.compute((N, M), lambda i, j: A[i, j] + 1.0, name="T1")
    T2 = te.compute((N, M), lambda i, j: T1[i, j] * A[i, j], name="T2")
    T3 = te.compute((N, M), lambda i, j: T2[i, j] - A[i, j], name="T3")
    s = te.create_schedule([T2.op, T3.op])
    s.cache_read(A, "shared", [T1, T2, T3])
    assert s.outputs == [s[T2].op, s[T3].op]
    a = _inputs("A")["A"]
    t2 = (a + 1.0) * a
    _run(s, [A, T2, T3], [a, None, None], {1: t2, 2: t2 - a})


def test_cache_read_after_compute_at():
    A = te.placeholder((N, M), name="A")
    T1 = te.compute((N, M), lambda i, j: A[i, j] + 1.0, name="T1")
    T2 = te.compute((N, M), lambda i, j: T1[i, j] * A[i, j], name="T2")
    T3 = te.compute((N, M), lambda i, j: T2[i, j] - 1.0, name="T3")
    s = te.create_schedule(T3.op)
    s[T2].compute_at(s[T3], T3.op.axis[0])
    s[T1].compute_at(s[T2], T2.op.axis[1])
    s.cache_read(A, "local", [T1, T2])
    assert s[T1].attach_stage is s[T2] and s[T2].attach_stage is s[T3]
    a = _inputs("A")["A"]
    _run(s, [A, T3], [a, None], {1: (a + 1.0) * a - 1.0})


def test_compute_at_after_cache_read():
    """compute_at checks that the target consumes the stage: through the rewritten readers."""
    A = te.placeholder((N, M), name="A")
    T1 = te.compute((N, M), lambda i, j: A[i, j] + 1.0, name="T1")
    T2 = te.compute((N, M), lambda i, j: T1[i, j] * A[i, j], name="T2")
    T3 = te.compute((N, M), lambda i, j: T2[i, j] - 1.0, name="T3")
    s = te.create_schedule(T3.op)
    AL = s.cache_read(A, "local", [T1, T2])
    io, ii = s[T3].split(T3.op.axis[0], factor=4)
    s[T1].compute_at(s[T3], io)  # T1 reaches T3 only through the new T2
    s[T2].compute_at(s[T3], io)
    s[AL].compute_at(s[T3], io)
    a = _inputs("A")["A"]
    _run(s, [A, T3], [a, None], {1: (a + 1.0) * a - 1.0})


def test_cache_write_then_cache_read_of_a_chain():
    A = te.placeholder((N, M), name="A")
    T1 = te.compute((N, M), lambda i, j: A[i, j] + 1.0, name="T1")
    T2 = te.compute((N, M), lambda i, j: T1[i, j] * A[i, j], name="T2")
    T3 = te.compute((N, M), lambda i, j: T2[i, j] - A[i, j], name="T3")
    s = te.create_schedule(T3.op)
    T1L = s.cache_write(T1, "local")
    T2L = s.cache_write(T2, "local")
    s.cache_read(A, "shared", [T1L, T2L, T3])
    s.cache_read(T1, "local", [T2L])
    s[T2L].compute_at(s[T2], T2.op.axis[0])
    a = _inputs("A")["A"]
    _run(s, [A, T3], [a, None], {1: (a + 1.0) * a - a})


def test_cache_read_then_cache_write_of_a_reader():
    """cache_write on a stage whose readers were rewritten by cache_read: they read its copy."""
    A = te.placeholder((N, M), name="A")
    T1 = te.compute((N, M), lambda i, j: A[i, j] + 1.0, name="T1")
    T2 = te.compute((N, M), lambda i, j: T1[i, j] * A[i, j], name="T2")
    T3 = te.compute((N, M), lambda i, j: T2[i, j] + T1[i, j], name="T3")
    s = te.create_schedule(T3.op)
    s.cache_read(A, "local", [T1, T2])
    s.cache_write(T1, "local")
    assert s[T1].op in {t.op for t in s[T3].op.input_tensors}
    a = _inputs("A")["A"]
    _run(s, [A, T3], [a, None], {1: (a + 1.0) * a + a + 1.0})


def test_two_cache_reads_of_one_tensor_and_of_a_reader():
    A = te.placeholder((N, M), name="A")
    T1 = te.compute((N, M), lambda i, j: A[i, j] + 1.0, name="T1")
    T2 = te.compute((N, M), lambda i, j: T1[i, j] * A[i, j], name="T2")
    T3 = te.compute((N, M), lambda i, j: T2[i, j] - A[i, j] + T1[i, j], name="T3")
    s = te.create_schedule(T3.op)
    s.cache_read(A, "local", [T1, T2])
    s.cache_read(A, "shared", [T3])
    s.cache_read(T1, "local", [T2, T3])
    a = _inputs("A")["A"]
    t1 = a + 1.0
    _run(s, [A, T3], [a, None], {1: t1 * a - a + t1})


def test_inlined_reader_of_a_rewritten_reader():
    A = te.placeholder((N, M), name="A")
    T1 = te.compute((N, M), lambda i, j: A[i, j] + 1.0, name="T1")
    T2 = te.compute((N, M), lambda i, j: T1[i, j] * A[i, j], name="T2")
    T3 = te.compute((N, M), lambda i, j: T2[i, j] - 1.0, name="T3")
    s = te.create_schedule(T3.op)
    s.cache_read(A, "local", [T1, T2])
    s[T1].compute_inline()
    s[T2].compute_inline()
    mod = loom.lower(s, [A, T3], name="f")
    assert "T2" not in str(mod) and "T1" not in str(mod)
    a = _inputs("A")["A"]
    _run(s, [A, T3], [a, None], {1: (a + 1.0) * a - 1.0})


def test_placeholders_stay_placeholders():
    A, ts = _chain(4)
    s = te.create_schedule(ts[-1].op)
    s.cache_read(A, "local", ts[1:])
    assert isinstance(s[A].op, PlaceholderOp) and s[A].op is A.op
