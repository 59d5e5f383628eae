"""The reference NPU's figures (docs/npu.md, "Cycle model") for int8 matmuls and convolutions
built with the NPU back end's strategies and run on its simulator: decoupled `cycles` beside
the serialized count, the array's utilization (the macs counter, and the problem's own MACs),
the DRAM bytes read against the minimum (each operand once), each queue's busy cycles, and
whether the result is bit-exact against a numpy integer reference.

    python bench/npu.py [--only NAME]

These are simulated cycles, not host time: they do not depend on the machine's load. The
host seconds the simulation took are printed for information only.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import pathlib
import sys
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import common

import loom
from loom.backend import npu
from loom.backend.npu import simulator as npu_sim

PES = npu_sim.DIM * npu_sim.DIM


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    kind: str  # "matmul", "conv2d" or "depthwise"
    shape: tuple[int, ...]  # matmul: (m, n, k); conv: (h, w, channels, filters, kernel, pad)


CASES = [
    Case("matmul 256^3", "matmul", (256, 256, 256)),
    Case("matmul 512^3", "matmul", (512, 512, 512)),
    Case("matmul 40x72x56", "matmul", (40, 72, 56)),  # m x n x k, none a multiple of 16
    Case("resnet18 3x3 64->64 @56", "conv2d", (56, 56, 64, 64, 3, 1)),
    Case("mobilenet dw 3x3 32ch @112", "depthwise", (112, 112, 32, 32, 3, 1)),
    Case("pointwise 1x1 32->64 @112", "conv2d", (112, 112, 32, 64, 1, 0)),
]


@dataclasses.dataclass
class Result:
    case: Case
    macs: int  # the problem's own multiply-accumulates
    min_bytes: int  # every operand read once: inputs, weights, int32 bias
    counters: dict[str, int]
    exact: bool
    seconds: float  # host time of the simulated call


# -- numpy references (docs/npu.md: int32 accumulation, mvout's requantization) ------------------


def requantize(acc: np.ndarray, multiplier: int, shift: int, relu: bool) -> np.ndarray:
    x = acc.astype(np.int64).astype(np.int32).astype(np.int64)  # the accumulator is int32
    y = np.clip((x * multiplier + ((1 << (shift - 1)) if shift else 0)) >> shift, -128, 127)
    return (np.maximum(y, 0) if relu else y).astype(np.int8)


def exact_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b of int8 matrices, exact: float64 holds every partial sum (< 2^53)."""
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.int64)


def conv_reference(data, kernel, bias, pad, multiplier, shift, relu):
    """NHWC data, (KH, KW, C, F) kernel, stride 1, zero padding: an im2col product."""
    n, h, w, c = data.shape
    kh, kw, _, f = kernel.shape
    padded = np.pad(data, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    oh, ow = h + 2 * pad - kh + 1, w + 2 * pad - kw + 1
    cols = [padded[:, y : y + oh, x : x + ow, :] for y in range(kh) for x in range(kw)]
    patches = np.concatenate(cols, axis=-1).reshape(n * oh * ow, kh * kw * c)
    acc = exact_product(patches, kernel.reshape(kh * kw * c, f)) + bias
    return requantize(acc, multiplier, shift, relu).reshape(n, oh, ow, f)


def scale_shift(depth: int) -> tuple[int, int]:
    """A requantization that keeps typical outputs of a `depth`-term int8 dot product inside
    int8 (a sum of uniform int8 products has a standard deviation near 5500 * sqrt(depth))."""
    return 1, max(0, round(math.log2(5500 * math.sqrt(depth) / 48)))


# -- the cases ----------------------------------------------------------------------------------


def simulate(fn: Callable[[], None]) -> tuple[dict[str, int], float]:
    npu_sim.reset()
    start = time.perf_counter()
    fn()
    return npu_sim.counters(), time.perf_counter() - start


def run_matmul(case: Case, rng: np.random.Generator) -> Result:
    m, n, k = case.shape
    multiplier, shift = scale_shift(k)
    sch, args = npu.BACKEND.strategy("matmul", m, n, k, multiplier=multiplier, shift=shift)
    mod = loom.build(sch, args, target="npu", name="mm")
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    bias = rng.integers(-20000, 20000, n, dtype=np.int32)
    c = np.zeros((m, n), np.int8)
    counters, seconds = simulate(lambda: mod["mm"](a, b, bias, c))
    exact = np.array_equal(c, requantize(exact_product(a, b) + bias, multiplier, shift, False))
    return Result(case, m * n * k, m * k + k * n + 4 * n, counters, exact, seconds)


def run_conv2d(case: Case, rng: np.random.Generator) -> Result:
    h, w, c, f, ksize, pad = case.shape
    multiplier, shift = scale_shift(ksize * ksize * c)
    data_shape, kernel_shape = (1, h, w, c), (ksize, ksize, c, f)
    sch, args = npu.BACKEND.strategy(
        "conv2d", data_shape, kernel_shape, padding=pad, multiplier=multiplier, shift=shift
    )
    mod = loom.build(sch, args, target="npu", name="conv")
    data = rng.integers(-128, 128, data_shape, dtype=np.int8)
    kernel = rng.integers(-128, 128, kernel_shape, dtype=np.int8)
    bias = rng.integers(-20000, 20000, f, dtype=np.int32)
    out_shape = (1, h + 2 * pad - ksize + 1, w + 2 * pad - ksize + 1, f)
    out = np.zeros(out_shape, np.int8)
    counters, seconds = simulate(lambda: mod["conv"](data, kernel, bias, out))
    expected = conv_reference(data, kernel, bias, pad, multiplier, shift, False)
    macs = out.size * ksize * ksize * c
    min_bytes = data.size + kernel.size + 4 * f
    return Result(case, macs, min_bytes, counters, np.array_equal(out, expected), seconds)


def depthwise_strategy() -> str | None:
    """The NPU back end's depthwise strategy, if it has one."""
    return next((name for name in npu.BACKEND.strategies() if "depthwise" in name), None)


WHY_NO_DEPTHWISE = (
    "the NPU back end has no depthwise strategy: a depthwise 3x3 convolution has one output "
    "channel per input channel, so a weight tile would hold one useful column of its 16 (at "
    "most 1/16 of the array busy); it runs on the host"
)


def run_depthwise(case: Case, rng: np.random.Generator) -> Result | str:
    name = depthwise_strategy()
    if name is None:
        return WHY_NO_DEPTHWISE
    h, w, c, _, ksize, pad = case.shape
    multiplier, shift = scale_shift(ksize * ksize)
    data_shape, kernel_shape = (1, h, w, c), (ksize, ksize, c, 1)
    sch, args = npu.BACKEND.strategy(
        name, data_shape, kernel_shape, padding=pad, multiplier=multiplier, shift=shift
    )
    mod = loom.build(sch, args, target="npu", name="dw")
    data = rng.integers(-128, 128, data_shape, dtype=np.int8)
    kernel = rng.integers(-128, 128, kernel_shape, dtype=np.int8)
    bias = rng.integers(-20000, 20000, c, dtype=np.int32)
    out = np.zeros((1, h + 2 * pad - ksize + 1, w + 2 * pad - ksize + 1, c), np.int8)
    counters, seconds = simulate(lambda: mod["dw"](data, kernel, bias, out))
    padded = np.pad(data.astype(np.int64), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    acc = sum(
        padded[:, y : y + out.shape[1], x : x + out.shape[2], :] * kernel[y, x, :, 0]
        for y in range(ksize)
        for x in range(ksize)
    )
    expected = requantize(acc + bias, multiplier, shift, False)
    macs = out.size * ksize * ksize
    min_bytes = data.size + kernel.size + 4 * c
    return Result(case, macs, min_bytes, counters, np.array_equal(out, expected), seconds)


RUNNERS = {"matmul": run_matmul, "conv2d": run_conv2d, "depthwise": run_depthwise}


# -- printing -----------------------------------------------------------------------------------


def row(r: Result) -> list[str]:
    c = r.counters
    cycles = c["cycles"]

    def share(busy: str) -> str:
        return f"{c[busy]} ({c[busy] / cycles:.0%})" if cycles else str(c[busy])

    return [
        r.case.name,
        f"{r.macs}",
        f"{cycles}",
        f"{c['serial_cycles']}",
        f"{c['serial_cycles'] / cycles:.2f}x" if cycles else "-",
        f"{npu_sim.utilization(c):.1%}",
        f"{npu_sim.utilization(c, macs=r.macs):.1%}",
        f"{c['bytes_in']}",
        f"{r.min_bytes}",
        f"{c['bytes_in'] / r.min_bytes:.2f}x",
        share("load_busy"),
        share("execute_busy"),
        share("store_busy"),
        "yes" if r.exact else "NO",
        f"{r.seconds:.2f}",
    ]


HEADERS = [
    "case",
    "MACs",
    "cycles",
    "serial",
    "overlap",
    "util",
    "useful util",
    "bytes_in",
    "min bytes",
    "ratio",
    "load busy",
    "execute busy",
    "store busy",
    "exact",
    "sim s",
]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="run only the cases whose name contains this")
    args = parser.parse_args(argv)
    chosen = common.only(parser, args.only, [c.name for c in CASES], "case")
    cases = [c for c in CASES if c.name in chosen]
    rng = np.random.default_rng(17)
    results, notes = [], []
    for case in cases:
        try:
            outcome = RUNNERS[case.kind](case, rng)
        except (loom.LoomError, TypeError, ValueError) as e:  # a strategy that cannot take it
            outcome = f"does not build: {type(e).__name__}: {str(e).splitlines()[0]}"
        if isinstance(outcome, str):
            notes.append(f"{case.name}: {outcome}")
        else:
            results.append(outcome)
    print(
        f"reference NPU, {npu_sim.DIM}x{npu_sim.DIM} int8 array, simulated. cycles: decoupled "
        "load/execute/store queues; serial: the same instructions one after another; util: "
        "macs counter / (cycles * 256); useful util: the problem's MACs / (cycles * 256); "
        "busy: cycles each queue works (execute: rows streamed), % of cycles\n"
    )
    if results:
        common.print_table(HEADERS, [row(r) for r in results])
    for note in notes:
        print(f"\n{note}")
    return 0 if all(r.exact for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
