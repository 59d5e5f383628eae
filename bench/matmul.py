"""float32 matrix products: loom against numpy (its BLAS), in one process, runs interleaved, at
1 and 2 threads (numpy's BLAS threads set with threadpoolctl to the same count). Prints GFLOP/s,
the medians of wall time and of process CPU time per call, the ratio (numpy time / loom time:
above 1, loom is faster), the compile time, and the machine's measured FMA peak (bench/common.py).

    python bench/matmul.py [--repeat 7] [--only 1024x1024x1024]

The cases (M x N x K):
- 1024x1024x1024, 512x512x512, 64x1024x1024: `loom.backend.cpu.strategies.matmul` (B packed into
  panels inside the kernel from 256 rows of A on, PACK_MIN_ROWS, or from 4 row tiles when
  the panels are a cache line wide or the rows of B 4 KB apart: NARROW_PACK_MIN_TILES);
- 1x1024x1024 model: `loom.compile` of a one-node ONNX MatMul whose B is an initializer (a
  batch-1 dense layer with constant weights: no repacking per call), timed by calling the
  model's `main` with preallocated arrays;
- 1x1024x1024 prepacked, 512x512x512 prepacked: the strategy with `prepacked=True`, B packed
  once by `pack_weights` (for 512^3, what the packing inside the kernel costs: the difference to
  the 512x512x512 row).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import statistics
import sys
import time
from collections.abc import Callable

# OpenBLAS's idle threads spin for about 2^28 cycles after each call (its default
# OPENBLAS_THREAD_TIMEOUT): interleaved with numpy, loom's second thread would share its core
# with a spinning BLAS thread. Idle threads that sleep, as onnxruntime's with allow_spinning=0
# in the other benchmarks; numpy's own times do not change (measured: 200 GFLOP/s either way).
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import numpy as np
import onnx
from onnx import helper, numpy_helper
from threadpoolctl import threadpool_info, threadpool_limits

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import common

import loom
from loom.backend.cpu import strategies as cpu


@dataclasses.dataclass
class Case:
    label: str
    m: int
    n: int
    k: int
    run: Callable[[int, int], float]  # (number, ...) -> seconds per call
    compile_s: float
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray


def _loom_timer(fn, args) -> Callable[[int], float]:
    """Seconds per call of a built function over `number` calls, its arguments checked once."""

    def run(number: int) -> float:
        return fn.time(args, number, 1).results[0]

    return run


def strategy_case(m: int, n: int, k: int, rng, prepacked: bool = False) -> Case:
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    start = time.perf_counter()
    sch, args = cpu.matmul(m, n, k, prepacked=prepacked)
    mod = loom.build(sch, args, name="matmul")
    compile_s = time.perf_counter() - start
    b_arg = cpu.pack_weights(b, int(args[1].shape[2])) if prepacked else b
    la, lb, lc = loom.nd.array(a), loom.nd.array(b_arg), loom.nd.zeros((m, n))
    fn = mod["matmul"]
    fn(la, lb, lc)
    np.testing.assert_allclose(lc, a.astype(np.float64) @ b, rtol=1e-3, atol=1e-3)
    label = f"{m}x{n}x{k}" + (" prepacked" if prepacked else "")
    return Case(label, m, n, k, _loom_timer(fn, (la, lb, lc)), compile_s, a, b, c)


def model_case(m: int, n: int, k: int, rng) -> Case:
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["c"])],
        "dense",
        [helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, (m, k))],
        [helper.make_tensor_value_info("c", onnx.TensorProto.FLOAT, (m, n))],
        [numpy_helper.from_array(b, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    start = time.perf_counter()
    compiled = loom.compile(model, target="llvm")
    compile_s = time.perf_counter() - start
    np.testing.assert_allclose(compiled(a=a)["c"], a.astype(np.float64) @ b, rtol=1e-3, atol=1e-3)
    info = compiled.info
    pools = [loom.nd.empty((p["size"],), "uint8", p["alignment"]) for p in info.caller_pools]
    args = (loom.nd.array(a), loom.nd.zeros((m, n)), *pools)
    fn = compiled.module[info.main]
    return Case(f"{m}x{n}x{k} model", m, n, k, _loom_timer(fn, args), compile_s, a, b, c)


def measure(case: Case, threads: int, repeat: int) -> list[str]:
    """Interleaved rounds of loom and numpy at `threads` threads: medians per call."""
    flops = 2 * case.m * case.n * case.k
    number = max(1, int(0.1 / (flops / 50e9 / threads)))
    loom.runtime.set_num_threads(threads)
    walls: dict[str, list[float]] = {"loom": [], "numpy": []}
    cpus: dict[str, list[float]] = {"loom": [], "numpy": []}
    with threadpool_limits(threads):
        np.matmul(case.a, case.b, out=case.c)
        for _ in range(repeat):
            cpu0 = time.process_time()
            walls["loom"].append(case.run(number))
            cpus["loom"].append((time.process_time() - cpu0) / (number + 1))
            cpu0, wall0 = time.process_time(), time.perf_counter()
            for _ in range(number):
                np.matmul(case.a, case.b, out=case.c)
            walls["numpy"].append((time.perf_counter() - wall0) / number)
            cpus["numpy"].append((time.process_time() - cpu0) / number)
    wall = {k: statistics.median(v) for k, v in walls.items()}
    cpu_s = {k: statistics.median(v) for k, v in cpus.items()}
    return [
        case.label,
        str(threads),
        f"{flops / wall['loom'] / 1e9:.1f}",
        f"{flops / wall['numpy'] / 1e9:.1f}",
        f"{wall['loom'] * 1e3:.3f}",
        f"{wall['numpy'] * 1e3:.3f}",
        f"{cpu_s['loom'] * 1e3:.3f}",
        f"{cpu_s['numpy'] * 1e3:.3f}",
        f"{wall['numpy'] / wall['loom']:.2f}",
        f"{cpu_s['numpy'] / cpu_s['loom']:.2f}",
        f"{case.compile_s:.2f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--only", help="run only the cases whose label starts with this")
    opts = parser.parse_args()
    rng = np.random.default_rng(0)
    makers = [
        ("1024x1024x1024", lambda: strategy_case(1024, 1024, 1024, rng)),
        ("512x512x512", lambda: strategy_case(512, 512, 512, rng)),
        ("512x512x512 prepacked", lambda: strategy_case(512, 512, 512, rng, prepacked=True)),
        ("64x1024x1024", lambda: strategy_case(64, 1024, 1024, rng)),
        ("1x1024x1024 model", lambda: model_case(1, 1024, 1024, rng)),
        ("1x1024x1024 prepacked", lambda: strategy_case(1, 1024, 1024, rng, prepacked=True)),
    ]
    chosen = common.only(parser, opts.only, [label for label, _ in makers], "case", prefix=True)
    cases = [make() for label, make in makers if label in chosen]
    blas = ", ".join(
        f"{i['internal_api']} ({i.get('architecture', '?')})" for i in threadpool_info()
    )
    print(f"float32 matmul; target {loom.target.Target('llvm')}; numpy BLAS: {blas}")
    print(f"FMA peak of one core: {common.fma_peak_gflops():.1f} GFLOP/s")
    print("ratio = numpy time / loom time (above 1: loom faster); times in ms per call\n")
    rows = []
    for threads in sorted({1, min(2, common.machine_threads())}):
        for case in cases:
            rows.append(measure(case, threads, opts.repeat))
    common.print_table(
        [
            "M x N x K",
            "threads",
            "loom GFLOP/s",
            "numpy GFLOP/s",
            "loom wall",
            "numpy wall",
            "loom cpu",
            "numpy cpu",
            "ratio wall",
            "ratio cpu",
            "compile s",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
