"""int8 matmul with bias, requantization and ReLU on the reference NPU (docs/npu.md), run on
its simulator: the NPU backend's strategy, the generated C (constant scratchpad and accumulator
addresses, one instruction call per step), the result against a numpy integer reference, and
the simulator's counters: cycles with the load, execute and store queues overlapping beside
the serialized count, the array's utilization, the bytes read against the minimum, and how
busy each queue is. (bench/npu.py prints the same for several matmuls and convolutions.)

Run: python examples/npu_matmul.py [M N K]   (default 256 256 256)
"""

from __future__ import annotations

import sys
import time

import numpy as np

import loom
from loom.backend import npu
from loom.backend.npu import simulator as npu_sim

TITLE = "int8 matmul on the reference NPU (scratchpad, mvin/mvout, tensorize), simulated"
MULTIPLIER, SHIFT, RELU = 5, 11, True


def reference(a, b, bias, multiplier, shift, relu):
    """docs/npu.md: int32 accumulation, then (x * M + 2^(S-1)) >> S, saturated to int8."""
    acc = a.astype(np.int64) @ b.astype(np.int64) + bias
    acc = acc.astype(np.int32).astype(np.int64)  # the accumulator is int32
    rounding = 1 << (shift - 1) if shift else 0
    y = np.clip((acc * multiplier + rounding) >> shift, -128, 127)
    return (np.maximum(y, 0) if relu else y).astype(np.int8)


def kernel_source(mod: loom.runtime.Module) -> str:
    """The NPU kernel's function from the generated C (the rest is declarations)."""
    source = mod.imports[0].get_source("c")
    start = source.index("static int32_t")
    return source[start : source.index("\n}\n", start) + 2]


def run(m: int = 256, n: int = 256, k: int = 256, show_source: bool = True) -> bool:
    """Build, run and check one matmul; print the counters. True if it matches numpy."""
    print(f"=== {TITLE}: {m}x{k} @ {k}x{n}")
    sch, args = npu.BACKEND.strategy(
        "matmul", m, n, k, multiplier=MULTIPLIER, shift=SHIFT, relu=RELU
    )
    start = time.perf_counter()
    mod = loom.build(sch, args, target="npu", name="npu_matmul")
    print(f"built in {time.perf_counter() - start:.2f} s")
    print(mod.build_report())
    if show_source:
        print(kernel_source(mod))

    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    bias = rng.integers(-20000, 20000, n, dtype=np.int32)
    c = np.zeros((m, n), np.int8)
    npu_sim.reset()
    mod["npu_matmul"](a, b, bias, c)
    counters = npu_sim.counters()
    ok = np.array_equal(c, reference(a, b, bias, MULTIPLIER, SHIFT, RELU))
    print(f"--- simulator: {'matches' if ok else 'DOES NOT MATCH'} the numpy integer reference")
    print("counters: " + ", ".join(f"{name} {value}" for name, value in counters.items()))
    print_figures(counters, macs=m * n * k, min_bytes=m * k + k * n + 4 * n)
    return ok


def print_figures(counters: dict[str, int], macs: int, min_bytes: int) -> None:
    """The timing model's figures (docs/npu.md, "Cycle model") for a problem of `macs`
    multiply-accumulates whose operands are `min_bytes` bytes."""
    cycles, serial = counters["cycles"], counters["serial_cycles"]
    print(
        f"cycles {cycles} with the load, execute and store queues overlapping; "
        f"{serial} serialized ({serial / max(cycles, 1):.2f}x)"
    )
    print(
        f"array utilization {npu_sim.utilization(counters):.1%} "
        f"({counters['macs']} MACs in {cycles} cycles on {npu_sim.DIM}x{npu_sim.DIM} PEs); "
        f"useful {npu_sim.utilization(counters, macs=macs):.1%} (the problem's {macs} MACs)"
    )
    print(
        f"bytes read {counters['bytes_in']}, minimum {min_bytes} (each operand once): "
        f"{counters['bytes_in'] / min_bytes:.2f}x"
    )
    busy = ", ".join(
        f"{queue} {counters[queue + '_busy']} ({counters[queue + '_busy'] / max(cycles, 1):.0%})"
        for queue in ("load", "execute", "store")
    )
    print(f"busy cycles per queue: {busy}\n")


def main(argv: list[str]) -> int:
    if argv and len(argv) != 3:
        print("usage: python examples/npu_matmul.py [M N K]", file=sys.stderr)
        return 2
    return 0 if run(*map(int, argv)) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
