"""Parallel loops: the thread pool, nested parallel loops, LOOM_NUM_THREADS."""

import os
import pathlib
import subprocess
import sys

import numpy as np

import loom
from loom import te
from loom.runtime import host_runtime
from tests.thread_sanitizer import assert_race_free


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
