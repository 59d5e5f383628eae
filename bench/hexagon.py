"""int8 matmul (int32 accumulation) on Hexagon v66 under qemu-hexagon: loom's HVX schedule vs
a scalar schedule of the same kernel, both timed by the device's own clock in one run, with
their ratio. QEMU emulates HVX, so the absolute times are the emulator's, not a real DSP's.

    python bench/hexagon.py [--m 32] [--n 128] [--k 128] [--repeat 3]
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
from loom.backend.hexagon import strategies as hx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=32)
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--k", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    opts = parser.parse_args()
    m, n, k = opts.m, opts.n, opts.k
    target = loom.target.hexagon("v66")
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    expected = a.astype(np.int32) @ b.astype(np.int32)
    print(f"int8 matmul {m}x{n}x{k} -> int32 on {target} under qemu-hexagon (in-device time)\n")
    rows = []
    times = {}
    with loom.device("hexagon-sim") as dev:
        A, B = loom.nd.array(a, device=dev), loom.nd.array(b, device=dev)
        C = loom.nd.empty((m, n), "int32", device=dev)
        for name, vectorize in (("scalar", False), ("HVX", True)):
            start = time.perf_counter()
            mod = loom.build(
                *hx.matmul(m, n, k, "int8", "int32", target, vectorize=vectorize),
                target=target,
                name="mm",
            )
            compile_s = time.perf_counter() - start
            loaded = mod.to_device(dev)
            loaded["mm"](A, B, C)
            np.testing.assert_array_equal(C.numpy(), expected)
            t = loaded.time_evaluator("mm", number=1, repeat=opts.repeat)(A, B, C).median
            times[name] = t
            rows.append([name, f"{t * 1e3:.2f}", f"{m * n * k / t / 1e6:.1f}", f"{compile_s:.2f}"])
    common.print_table(["schedule", "ms per call", "MMAC/s", "compile s"], rows)
    print(f"\nHVX vs scalar: {times['scalar'] / times['HVX']:.1f}x faster")


if __name__ == "__main__":
    main()
