"""LLVM's loop vectorizer on and off (target option -llvm-loop-vectorize=1/0), same process.

Each kernel is built twice, once per setting; the two builds are timed in alternating rounds
(on, off, then off, on, ...), as wall time and as process CPU time (all threads). Prints the
median process CPU time per call (ms; all threads) and per build (ms; lowering and LLVM, not
the linker, which runs in a child process), and the on/off ratios of CPU and of wall time (above
1: slower with LLVM's loop vectorizer). On a busy machine trust the CPU
columns: wall time counts the time other processes hold the cores.
The kernels: bench/matmul.py's and bench/elementwise.py's schedules, and the schedules of
tests/cases.py's conv2d, softmax, reduction and matmul cases at larger shapes.

    python bench/llvm_vectorizer.py [--repeat 7] [--only conv2d] [--threads N]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import common

import loom
from loom import te
from loom.backend.cpu import strategies as cpu
from loom.ops import conv2d_nchw, pool2d, softmax

ON, OFF = "llvm -llvm-loop-vectorize=1", "llvm -llvm-loop-vectorize=0"


def _rand(rng, *shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


# Each kernel: () -> (schedule, args, inputs(rng) -> arrays, check(arrays)).
def k_matmul_strategy(n=512):
    sch, args = cpu.matmul(n, n, n)

    def check(a):
        np.testing.assert_allclose(a[2], a[0].astype(np.float64) @ a[1], rtol=1e-3, atol=1e-2)

    return (
        sch,
        args,
        lambda rng: [_rand(rng, n, n), _rand(rng, n, n), np.zeros((n, n), "f4")],
        check,
    )


def k_elementwise_strategy(n=1 << 22):
    sch, args = cpu.elementwise_kernel(lambda x, y: x + y, (n,), 2)

    def check(a):
        np.testing.assert_array_equal(a[2], a[0] + a[1])

    return sch, args, lambda rng: [_rand(rng, n), _rand(rng, n), np.zeros(n, "f4")], check


def _conv(schedule, c=32, hw=28, f=32):
    data = te.placeholder((1, c, hw, hw), name="data")
    kernel = te.placeholder((f, c, 3, 3), name="kernel")
    out = conv2d_nchw(data, kernel, stride=1, padding=1, name="conv")
    s = te.create_schedule(out.op)
    schedule(s, out)

    def check(a):
        x, w, y = a
        xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        ref = sum(
            np.einsum("nchw,fc->nfhw", xp[:, :, ry : ry + hw, rx : rx + hw], w[:, :, ry, rx])
            for ry in range(3)
            for rx in range(3)
        )
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)

    def inputs(rng):
        return [_rand(rng, 1, c, hw, hw), _rand(rng, f, c, 3, 3), np.zeros((1, f, hw, hw), "f4")]

    return s, [data, kernel, out], inputs, check


def _conv_tiled_cache_write(s, out):  # tests/cases.py conv2d/s1p1-tile-cache_write
    pad = out.op.input_tensors[0]
    OL = s.cache_write(out, "local")
    n, f, y, x = out.op.axis
    yo, xo, yi, xi = s[out].tile(y, x, 2, 4)
    s[OL].compute_at(s[out], xo)
    s[pad].compute_inline()
    s[out].parallel(f)


def _conv_inline_vectorize(s, out):  # tests/cases.py conv2d/s1p1-inline-vectorize
    s[out.op.input_tensors[0]].compute_inline()
    n, f, y, x = out.op.axis
    xo, xi = s[out].split(x, factor=4)
    s[out].vectorize(xi)


def _softmax(fused, rows=256, cols=1024):
    X = te.placeholder((rows, cols), name="X")
    Y = softmax(X, name="sm")
    s = te.create_schedule(Y.op)
    if fused:  # tests/cases.py softmax/row-fused
        exp, total = Y.op.input_tensors
        row_max = exp.op.input_tensors[1]
        s[exp].compute_inline()
        i, j = Y.op.axis
        s[row_max].compute_at(s[Y], i)
        s[total].compute_at(s[Y], i)
        jo, ji = s[Y].split(j, factor=4)
        s[Y].vectorize(ji)

    def check(a):
        e = np.exp(a[0].astype(np.float64) - a[0].max(1, keepdims=True))
        np.testing.assert_allclose(a[1], e / e.sum(1, keepdims=True), rtol=1e-4, atol=1e-6)

    return s, [X, Y], lambda rng: [_rand(rng, rows, cols) * 3, np.zeros((rows, cols), "f4")], check


def _reduce(reducer, ref, lanes, dtype="float32", rows=1024, cols=1024):
    X = te.placeholder((rows, cols), name="X", dtype=dtype)
    k = te.reduce_axis(cols, name="k")
    R = te.compute((rows,), lambda i: reducer(X[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    if lanes:  # tests/cases.py reduce/max-reduce-outside-vectorized
        (i,) = R.op.axis
        io, ii = s[R].split(i, factor=lanes)
        s[R].reorder(io, k, ii)
        s[R].vectorize(ii)

    def inputs(rng):
        if dtype == "float32":
            return [_rand(rng, rows, cols), np.zeros(rows, dtype)]
        return [rng.integers(-100, 100, (rows, cols)).astype(dtype), np.zeros(rows, dtype)]

    def check(a):
        want = ref(a[0].astype(np.float64)).astype(dtype)
        np.testing.assert_allclose(a[1], want, rtol=1e-4, atol=1e-3)

    return s, [X, R], inputs, check


def _row_sum_partial(lanes=16, rows=1024, cols=1024):
    """An int32 row sum vectorized from the schedule: a stage of `lanes` partial sums per row,
    computed at the row with its lanes vectorized, then their sum."""
    X = te.placeholder((rows, cols), name="X", dtype="int32")
    ko = te.reduce_axis(cols // lanes, name="ko")
    P = te.compute((rows, lanes), lambda i, v: te.sum(X[i, ko * lanes + v], axis=ko), name="P")
    v = te.reduce_axis(lanes, name="v")
    R = te.compute((rows,), lambda i: te.sum(P[i, v], axis=v), name="R")
    s = te.create_schedule(R.op)
    s[P].compute_at(s[R], R.op.axis[0])
    s[P].reorder(P.op.axis[0], ko, P.op.axis[1])
    s[P].vectorize(P.op.axis[1])

    def inputs(rng):
        return [rng.integers(-100, 100, (rows, cols)).astype(np.int32), np.zeros(rows, np.int32)]

    def check(a):
        np.testing.assert_array_equal(a[1], a[0].sum(1, dtype=np.int32))

    return s, [X, R], inputs, check


def _matmul_default(n=256):  # tests/cases.py matmul/default
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis(n, name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")

    def check(a):
        np.testing.assert_allclose(a[2], a[0].astype(np.float64) @ a[1], rtol=1e-3, atol=1e-3)

    inputs = lambda rng: [_rand(rng, n, n), _rand(rng, n, n), np.zeros((n, n), "f4")]  # noqa: E731
    return te.create_schedule(C.op), [A, B, C], inputs, check


def _elementwise(dtype, fn, ref, lanes=0, shape=(1024, 1024)):  # tests/cases.py add/default
    A = te.placeholder(shape, name="A", dtype=dtype)
    B = te.placeholder(shape, name="B", dtype=dtype)
    C = te.compute(shape, lambda i, j: fn(A[i, j], B[i, j]), name="C")
    s = te.create_schedule(C.op)
    if lanes:  # vectorized from the schedule instead
        jo, ji = s[C].split(C.op.axis[1], factor=lanes)
        s[C].vectorize(ji)

    def inputs(rng):
        if dtype == "float32":
            return [_rand(rng, *shape), _rand(rng, *shape), np.zeros(shape, dtype)]
        ints = [rng.integers(-128, 128, shape).astype(dtype) for _ in range(2)]
        return [*ints, np.zeros(shape, dtype)]

    def check(a):
        np.testing.assert_allclose(a[2], ref(a[0], a[1]), rtol=1e-6)

    return s, [A, B, C], inputs, check


def _pool(lanes=0, c=64, hw=112):  # tests/cases.py pool/max2x2s2
    data = te.placeholder((1, c, hw, hw), name="data")
    y = pool2d(data, 2, 2, 0, kind="max", name="pool")
    s = te.create_schedule(y.op)
    if lanes:
        xo, xi = s[y].split(y.op.axis[3], factor=lanes)
        s[y].vectorize(xi)

    def check(a):
        x = a[0].reshape(1, c, hw // 2, 2, hw // 2, 2)
        np.testing.assert_array_equal(a[1], x.max(axis=(3, 5)))

    def inputs(rng):
        return [_rand(rng, 1, c, hw, hw), np.zeros((1, c, hw // 2, hw // 2), "f4")]

    return s, [data, y], inputs, check


def _axpy(a, b):
    return a * 2.0 + b


def _mul_add(a, b):
    return a * b + a


KERNELS = {
    "matmul 512 (bench/matmul.py)": k_matmul_strategy,
    "add 4M (bench/elementwise.py)": k_elementwise_strategy,
    "conv2d 32x28x28 default": lambda: _conv(lambda s, out: None),
    "conv2d tile-cache_write": lambda: _conv(_conv_tiled_cache_write),
    "conv2d inline-vectorize": lambda: _conv(_conv_inline_vectorize),
    "softmax 256x1024 default": lambda: _softmax(False),
    "softmax row-fused": lambda: _softmax(True),
    "sum 1024x1024 default": lambda: _reduce(te.sum, lambda x: x.sum(1), 0),
    "int32 sum default": lambda: _reduce(te.sum, lambda x: x.sum(1), 0, dtype="int32"),
    "int32 sum outside-vectorized": lambda: _reduce(te.sum, lambda x: x.sum(1), 16, "int32"),
    "int32 sum partial sums vectorized": _row_sum_partial,
    "max outside-vectorized": lambda: _reduce(te.max, lambda x: x.max(1), 4),
    "matmul 256 default": _matmul_default,
    "add 1024x1024 default": lambda: _elementwise("float32", _axpy, _axpy),
    "add 1024x1024 vectorized": lambda: _elementwise("float32", _axpy, _axpy, lanes=16),
    "int8 mul-add default": lambda: _elementwise("int8", _mul_add, _mul_add),
    "int8 mul-add vectorized": lambda: _elementwise("int8", _mul_add, _mul_add, lanes=64),
    "maxpool 2x2 default": _pool,
    "maxpool 2x2 vectorized": lambda: _pool(lanes=8),
}


def _build(make, target):
    sch, args, inputs, check = make()
    wall, cpu_s = time.perf_counter(), time.process_time()
    mod = loom.build(sch, args, target=target, name="k")
    return mod["k"], time.perf_counter() - wall, time.process_time() - cpu_s, inputs, check


def _round(fn, arrays, number):
    wall, cpu_s = time.perf_counter(), time.process_time()
    for _ in range(number):
        fn(*arrays)
    return (time.perf_counter() - wall) / number, (time.process_time() - cpu_s) / number


def measure(name, make, repeat):
    """{setting: (build wall, build cpu, run wall, run cpu)} for one kernel."""
    built = {t: _build(make, t) for t in (ON, OFF)}
    rng = np.random.default_rng(0)
    arrays = [loom.nd.array(a) for a in built[ON][3](rng)]
    for t in (ON, OFF):
        built[t][0](*arrays)
        built[t][4](arrays)  # both builds compute the right thing
    once = _round(built[ON][0], arrays, 1)[0]
    number = max(1, int(0.05 / max(once, 1e-7)))
    runs = {ON: [], OFF: []}
    for r in range(repeat):
        for t in (ON, OFF) if r % 2 == 0 else (OFF, ON):
            runs[t].append(_round(built[t][0], arrays, number))
    return {
        t: (
            built[t][1],
            built[t][2],
            statistics.median(w for w, _ in runs[t]),
            statistics.median(c for _, c in runs[t]),
        )
        for t in (ON, OFF)
    }


def _time(s: float) -> str:
    return f"{s * 1e3:.3f}" if s < 10 else f"{s * 1e3:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", default="", help="run the kernels whose name contains this")
    parser.add_argument("--threads", type=int, default=common.machine_threads())
    opts = parser.parse_args()
    loom.runtime.set_num_threads(opts.threads)
    print(
        f"LLVM's loop vectorizer on (-llvm-loop-vectorize=1) / off (=0); target "
        f"{loom.target.Target('llvm')}; {opts.threads} threads; medians of {opts.repeat} "
        "alternating rounds; times in ms per call (build: ms per build)\n"
    )
    chosen = common.only(parser, opts.only, list(KERNELS), "kernel")
    rows = []
    for name, make in KERNELS.items():
        if name not in chosen:
            continue
        m = measure(name, make, opts.repeat)
        (bw1, bc1, rw1, rc1), (bw0, bc0, rw0, rc0) = m[ON], m[OFF]
        rows.append(
            [
                name,
                _time(rc1),
                _time(rc0),
                f"{rc1 / rc0:.2f}",
                f"{rw1 / rw0:.2f}",
                _time(bc1),
                _time(bc0),
                f"{bc1 / bc0:.2f}",
                f"{bw1 / bw0:.2f}",
            ]
        )
        print(f"  measured {name}", file=sys.stderr, flush=True)
    common.print_table(
        [
            "kernel",
            "run cpu on",
            "off",
            "on/off",
            "on/off wall",
            "build cpu on",
            "off",
            "on/off",
            "on/off wall",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
