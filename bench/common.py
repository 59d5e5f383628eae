"""Shared helpers of the benchmarks: timing numpy and loom the same way, printing a table."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable


def median_seconds(fn: Callable[[], object], number: int, repeat: int) -> float:
    """Median over `repeat` rounds of the mean time of `number` calls (after one warm-up)."""
    fn()
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        rounds.append((time.perf_counter() - start) / number)
    return statistics.median(rounds)


def machine_threads() -> int:
    return len(os.sched_getaffinity(0))


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(headers)]
    print("  ".join(h.rjust(w) for h, w in zip(headers, widths)))
    for r in rows:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
