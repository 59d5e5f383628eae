"""16M-element float32 add: loom's streaming schedule vs numpy's np.add(out=), same run.
Prints GB/s (two arrays read, one written) and the ratio.

    python bench/elementwise.py [--elements 16777216] [--repeat 5]
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import common

import loom
from loom.backend.cpu import strategies as cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=16 * 1024 * 1024)
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()
    n = opts.elements
    rng = np.random.default_rng(0)
    a = loom.nd.array(rng.standard_normal(n).astype(np.float32))
    b = loom.nd.array(rng.standard_normal(n).astype(np.float32))
    c = loom.nd.empty(n)
    moved = 3 * 4 * n

    start = time.perf_counter()
    sch, args = cpu.elementwise_kernel(lambda x, y: x + y, (n,), 2)
    mod = loom.build(sch, args, name="add")
    compile_s = time.perf_counter() - start
    mod["add"](a, b, c)
    np.testing.assert_array_equal(c, a + b)

    print(f"add of {n} float32 elements; target {loom.target.Target('llvm')}")
    print(f"loom compile time: {compile_s:.2f} s (lower + LLVM + link)\n")
    numpy_s = common.median_seconds(lambda: np.add(a, b, out=c), 10, opts.repeat)
    rows = []
    for threads in sorted({1, common.machine_threads()}):
        loom.runtime.set_num_threads(threads)
        loom_s = mod.time_evaluator("add", number=10, repeat=opts.repeat)(a, b, c).median
        rows.append(
            [
                str(threads),
                f"{moved / loom_s / 1e9:.1f}",
                f"{moved / numpy_s / 1e9:.1f}",
                f"{numpy_s / loom_s:.2f}",
            ]
        )
    common.print_table(["loom threads", "loom GB/s", "numpy GB/s (1 thread)", "loom/numpy"], rows)


if __name__ == "__main__":
    main()
