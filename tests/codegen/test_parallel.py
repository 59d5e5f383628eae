"""Parallel loops: the thread pool, nested parallel loops, LOOM_NUM_THREADS, and the tasks the
lower_parallel pass makes of them on both code generators (captured values of every dtype, a
failing task, what the module lists)."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import loom
from loom import LoomError, te
from loom.ir import (
    AssertStmt,
    Cast,
    For,
    IntImm,
    IRModule,
    LetStmt,
    PrimFunc,
    Var,
    decl_buffer,
    op,
)
from loom.runtime import host_runtime
from loom.target import Target
from tests.thread_sanitizer import assert_race_free

BACKENDS = ["llvm", "c"]


def test_nested_parallel_loops_give_right_results():
    A = te.placeholder((64, 48), name="A")
    B = te.compute((64, 48), lambda i, j: A[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    i, j = B.op.axis
    s[B].parallel(i)
    jo, ji = s[B].split(j, factor=8)
    s[B].parallel(jo)  # a parallel loop inside a parallel loop runs serially in its task
    mod = loom.build(s, [A, B], name="scale")
    a = np.random.default_rng(0).standard_normal((64, 48)).astype(np.float32)
    b = np.zeros_like(a)
    for _ in range(20):
        mod["scale"](a, b)
        np.testing.assert_array_equal(b, a * 2)


def test_parallel_reduction_over_rows_and_thread_count():
    A = te.placeholder((100, 37), name="A")
    k = te.reduce_axis(37, "k")
    R = te.compute((100,), lambda i: te.sum(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    s[R].parallel(R.op.axis[0])
    mod = loom.build(s, [A, R], name="rowsum")
    a = np.random.default_rng(1).standard_normal((100, 37)).astype(np.float32)
    for threads in (1, 2, 64):
        used = loom.runtime.set_num_threads(threads)
        assert 1 <= used <= max(threads, 1)
        r = np.zeros(100, np.float32)
        mod["rowsum"](a, r)
        np.testing.assert_allclose(r, a.sum(1), rtol=1e-5, atol=1e-5)
    loom.runtime.set_num_threads(os.cpu_count() or 1)


def test_loom_num_threads_environment_variable():
    code = "import loom; print(loom.runtime.num_threads())"
    env = dict(os.environ, LOOM_NUM_THREADS="3")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "3"


def test_thread_pool_under_thread_sanitizer(tmp_path):
    """Regression: a pool thread that woke late used to run a finished launch's job, which
    lives on the launcher's stack, and wrote into whatever frame was there (a crash under load)."""
    sources = [pathlib.Path(__file__).with_name("thread_pool_stress.c"), *host_runtime.SOURCES[:1]]
    assert_race_free(tmp_path / "stress", sources, [{"LOOM_NUM_THREADS": n} for n in ("2", "4")])


def captures_every_dtype() -> PrimFunc:
    """B[i] for i in [4, 4 + m) (an int64 loop) from values of every kind the task captures:
    float16, bool, int8, uint64 and float64 scalars, a pointer into A (no noalias then)."""
    A, B = decl_buffer((32,), "float32", "A"), decl_buffer((32,), "float32", "B")
    x, n, d, m = Var("x", "float32"), Var("n"), Var("d", "float64"), Var("m")
    h, flag, q, u = Var("h", "float16"), Var("flag", "bool"), Var("q", "int8"), Var("u", "uint64")
    p = Var("p", "handle")
    P = decl_buffer((24,), "float32", "P").replace(data=p)  # A[8:32]
    i = Var("i", "int64")
    f32 = "float32"
    value = (
        Cast(f32, h)
        + op.select(flag, op.const(1.0, f32), op.const(2.0, f32))
        + Cast(f32, q)
        + Cast(f32, op.truncmod(u, op.const(7, "uint64")))
        + Cast(f32, d)
        + P.load([i - op.const(4, "int64")])
    )
    loop = For(i, op.const(4, "int64"), Cast("int64", m), "parallel", B.store(value, (i,)))
    body = loop
    for var, val in reversed(
        [
            (h, Cast("float16", x)),
            (flag, x > op.const(0.0, f32)),
            (q, Cast("int8", n)),
            (u, Cast("uint64", n)),
            (p, op.call_intrin("handle", "address_of", A.load([IntImm(8)]))),
        ]
    ):
        body = LetStmt(var, val, body)
    return PrimFunc("every", (A, x, n, d, m, B), body)


@pytest.mark.parametrize("target", BACKENDS)
def test_a_task_gets_captured_values_of_every_dtype(target):
    mod = loom.build(captures_every_dtype(), target=target)
    a = np.arange(32, dtype=np.float32)
    x, n, d, m = 1.5, -3, 0.25, 20
    b = np.zeros(32, np.float32)
    mod["every"](a, x, n, d, m, b)
    u = np.uint64(2**64 - 3) % np.uint64(7)
    expected = np.float32(1.5 + 1.0 - 3.0 + float(u) + 0.25) + a[8:28]
    np.testing.assert_array_equal(b[4:24], expected)
    assert not b[:4].any() and not b[24:].any()
    assert list(mod.signatures) == ["every"]  # the task has no entry point
    # A's address escapes into p (so it may be written), B is written by the task
    assert [p.written for p in mod.signatures["every"].params] == [True] + [False] * 4 + [True]


def failing_task() -> PrimFunc:
    """B[i] = A[i] for i in parallel, failing on a negative A[i]."""
    A, B = decl_buffer((64,), "int32", "A"), decl_buffer((64,), "int32", "B")
    i = Var("i")
    check = AssertStmt(A[i] >= IntImm(0), "negative input in a task", B.store(A[i], (i,)))
    return PrimFunc("copy", (A, B), For(i, IntImm(0), IntImm(64), "parallel", check))


@pytest.mark.parametrize("target", BACKENDS)
def test_a_failing_task_fails_the_caller_with_its_message(target):
    mod = loom.build(failing_task(), target=target)
    a, b = np.arange(64, dtype=np.int32), np.zeros(64, np.int32)
    mod["copy"](a, b)
    np.testing.assert_array_equal(b, a)
    a[45] = -1
    with pytest.raises(LoomError, match=r"copy failed \(status -1\): negative input in a task"):
        mod["copy"](a, b)
    assert "copy_task_0" not in mod.build_report()
    # what the task writes (B) and only reads (A) is what its caller does
    assert [p.written for p in mod.signatures["copy"].params] == [False, True]


@pytest.mark.parametrize("target", BACKENDS)
def test_a_code_generator_refuses_a_parallel_loop(target):
    from loom.codegen.c import generate_c
    from loom.codegen.llvm.module import generate
    from loom.codegen.signature import module_signatures

    func = failing_task()
    t = Target(target)
    signatures = module_signatures(IRModule((func,)), t.alignment)
    emit = generate_c if target == "c" else generate
    with pytest.raises(LoomError, match=r"parallel loop i .*lower_parallel pass must run first"):
        emit(IRModule((func,)), t, signatures)


@pytest.mark.parametrize("target", BACKENDS)
def test_stack_limit_applies_to_each_task(target):
    A = te.placeholder((8, 300), name="A")
    T = te.compute((8, 300), lambda i, j: A[i, j] + 1.0, name="T")
    C = te.compute((8, 300), lambda i, j: T[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[T].set_scope("local")
    s[T].compute_at(s[C], C.op.axis[0])
    s[C].parallel(C.op.axis[0])
    with pytest.raises(
        LoomError, match=r"function big_task_0 \(parallel loop i of big\) allocates 1200 bytes"
    ):
        loom.build(s, [A, C], target=f"{target} -stack-limit=1024", name="big")
    mod = loom.build(s, [A, C], target=target, name="big")
    a, c = np.ones((8, 300), np.float32), np.zeros((8, 300), np.float32)
    mod["big"](a, c)
    np.testing.assert_array_equal(c, 4.0)
