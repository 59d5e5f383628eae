"""HVX against scalar code on Hexagon under qemu-hexagon: int8 and int16 matmul (int32
accumulation) and elementwise `x * y + x`, built for v66 and for v73, each in a session that
emulates that core (`-cpu`; v73 needs QEMU 10, which `make setup` installs). loom's HVX
schedule and a scalar schedule of the same kernel are checked against numpy, then timed by the
device's own clock (a monotonic wall clock), interleaved round by round; beside it the CPU time
of the qemu-hexagon process over the same calls (its on-CPU nanoseconds, /proc/PID/schedstat).
Medians of `--repeat` rounds, and the ratio. QEMU emulates HVX, so the times are the
emulator's, not a real DSP's.

    python bench/hexagon.py [--m 32] [--n 128] [--k 128] [--length 4096] [--repeat 3]
                            [--versions v66,v73]
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
from loom.backend.hexagon import strategies as hx

SCHEDULES = (("scalar", False), ("HVX", True))
ROUND_SECONDS = 0.05  # in-device time one timed round aims at, per kernel and schedule


def kernels(opts, target, rng):
    """(name, build args for a vectorize flag, inputs, expected, work) of each kernel."""
    m, n, k, length = opts.m, opts.n, opts.k, opts.length
    out = []
    for dt in ("int8", "int16"):
        info = np.iinfo(dt)
        a = rng.integers(info.min, info.max, (m, k), endpoint=True).astype(dt)
        b = rng.integers(info.min, info.max, (k, n), endpoint=True).astype(dt)
        out.append(
            (
                f"matmul {dt} {m}x{n}x{k}",
                lambda v, dt=dt: hx.matmul(m, n, k, dt, "int32", target, vectorize=v),
                [a, b],
                a.astype(np.int32) @ b.astype(np.int32),
                m * n * k,
            )
        )
        x = rng.integers(info.min, info.max, length, endpoint=True).astype(dt)
        y = rng.integers(info.min, info.max, length, endpoint=True).astype(dt)
        with np.errstate(over="ignore"):
            expected = x * y + x
        out.append(
            (
                f"x*y+x {dt} {length}",
                lambda v, dt=dt: hx.elementwise(
                    lambda p, q: p * q + p, (length,), 2, dt, target, vectorize=v
                ),
                [x, y],
                expected,
                length,
            )
        )
    return out


def qemu_cpu_seconds(dev) -> float:
    """Seconds the session's qemu-hexagon process has run on a CPU."""
    pid = dev.transport.proc.pid
    return int(pathlib.Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def prepare(dev, opts, version, rng):
    """Build, load and check every kernel of `version`: [(label, schedule, timer)]."""
    target = loom.target.hexagon(version)
    runs = []
    for label, build_args, inputs, expected, _work in kernels(opts, target, rng):
        args = [loom.nd.array(a, device=dev) for a in inputs]
        args.append(loom.nd.empty(expected.shape, str(expected.dtype), device=dev))
        for schedule, vectorize in SCHEDULES:
            mod = loom.build(*build_args(vectorize), target=target, name="k")
            loaded = mod.to_device(dev)
            loaded["k"](*args)
            np.testing.assert_array_equal(args[-1].numpy(), expected, err_msg=label)
            once = loaded.time_evaluator("k", number=1, repeat=1)(*args).median
            number = max(1, round(ROUND_SECONDS / max(once, 1e-9)))
            evaluator = loaded.time_evaluator("k", number=number, repeat=1)
            runs.append((label, schedule, lambda e=evaluator, a=args: e(*a).median, number))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=32)
    parser.add_argument("--n", type=int, default=128)
    parser.add_argument("--k", type=int, default=128)
    parser.add_argument("--length", type=int, default=4096, help="elements of x*y+x")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds (the median)")
    parser.add_argument("--versions", default="v66,v73")
    opts = parser.parse_args()
    rng = np.random.default_rng(0)
    wall: dict[tuple, list[float]] = {}
    cpu: dict[tuple, list[float]] = {}
    skipped = []
    sessions = []
    start = time.perf_counter()
    try:
        prepared = []
        for version in opts.versions.split(","):
            try:
                dev = loom.device("hexagon-sim", cpu=version, timeout=600)
            except loom.LoomError as e:
                skipped.append(f"{version}: not run: {e}")
                continue
            sessions.append(dev)
            prepared += [(version, dev, run) for run in prepare(dev, opts, version, rng)]
        build_s = time.perf_counter() - start
        if sessions:
            print(
                f"under {sessions[0].emulation.describe()}; in-device time per call, median of "
                f"{opts.repeat} interleaved rounds (building and checking took {build_s:.1f} s)\n"
            )
        for _ in range(opts.repeat):
            for version, dev, (label, schedule, timer, _number) in prepared:
                before = qemu_cpu_seconds(dev)
                seconds = timer()
                key = (version, label, schedule)
                wall.setdefault(key, []).append(seconds)
                cpu.setdefault(key, []).append((qemu_cpu_seconds(dev) - before) / _number)
    finally:
        for dev in sessions:
            dev.close()
    rows = []
    for version, label in dict.fromkeys((v, lab) for v, lab, _ in wall):
        w = {s: statistics.median(wall[(version, label, s)]) for s, _ in SCHEDULES}
        c = {s: statistics.median(cpu[(version, label, s)]) for s, _ in SCHEDULES}
        rows.append(
            [
                version,
                label,
                f"{w['scalar'] * 1e3:.3f}",
                f"{w['HVX'] * 1e3:.3f}",
                f"{w['scalar'] / w['HVX']:.1f}x",
                f"{c['scalar'] * 1e3:.3f}",
                f"{c['HVX'] * 1e3:.3f}",
                f"{c['scalar'] / c['HVX']:.1f}x",
            ]
        )
    headers = ["cpu", "kernel", "scalar ms", "HVX ms", "HVX vs scalar"]
    headers += ["scalar CPU ms", "HVX CPU ms", "CPU ratio"]
    if rows:
        common.print_table(headers, rows)
    for line in skipped:
        print(line)


if __name__ == "__main__":
    main()
