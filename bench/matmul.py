"""float32 matmul: loom's packed, register-blocked schedule vs numpy (its BLAS), same run, same
thread count (numpy's BLAS threads set with threadpoolctl). Prints GFLOP/s and the ratio.

    python bench/matmul.py [--size 1024] [--repeat 5]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import common

import loom
from loom.backend.cpu import strategies as cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()
    n = opts.size
    flops = 2 * n**3
    rng = np.random.default_rng(0)
    a = loom.nd.array(rng.standard_normal((n, n)).astype(np.float32))
    b = loom.nd.array(rng.standard_normal((n, n)).astype(np.float32))
    c = loom.nd.zeros((n, n))

    start = time.perf_counter()
    sch, args = cpu.matmul(n, n, n)
    mod = loom.build(sch, args, name="matmul")
    compile_s = time.perf_counter() - start
    mod["matmul"](a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-3, atol=1e-2)

    blas = ", ".join(
        f"{i['internal_api']} ({i.get('architecture', '?')})" for i in threadpool_info()
    )
    print(f"matmul {n}x{n}x{n} float32; target {loom.target.Target('llvm')}; numpy BLAS: {blas}")
    print(f"loom compile time: {compile_s:.2f} s (lower + LLVM + link)\n")
    rows = []
    for threads in sorted({1, common.machine_threads()}):
        loom.runtime.set_num_threads(threads)
        number = max(1, int(0.2 / (flops / 50e9 / threads)))
        loom_s = mod.time_evaluator("matmul", number=number, repeat=opts.repeat)(a, b, c).median
        with threadpool_limits(threads):
            numpy_s = common.median_seconds(lambda: np.matmul(a, b, out=c), number, opts.repeat)
        rows.append(
            [
                str(threads),
                f"{flops / loom_s / 1e9:.1f}",
                f"{flops / numpy_s / 1e9:.1f}",
                f"{numpy_s / loom_s:.2f}",
            ]
        )
    common.print_table(["threads", "loom GFLOP/s", "numpy GFLOP/s", "loom/numpy"], rows)


if __name__ == "__main__":
    main()
