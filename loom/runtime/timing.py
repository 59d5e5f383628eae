"""What timing a function returns, and TVM's `time_evaluator` over a function's timer."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable


@dataclasses.dataclass(frozen=True)
class TimeResult:
    """Seconds per call, one figure per repeat (each the mean of `number` calls)."""

    results: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        return statistics.median(self.results)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.results)

    def __repr__(self) -> str:
        return (
            f"TimeResult(mean={self.mean * 1e3:.4f} ms, median={self.median * 1e3:.4f} ms, "
            f"std={self.std * 1e3:.4f} ms, repeats={len(self.results)})"
        )


def evaluator(
    time: Callable[[tuple, int, int], TimeResult],
    number: int,
    repeat: int,
    min_repeat_ms: float,
) -> Callable[..., TimeResult]:
    """TVM's `time_evaluator` around `time(args, number, repeat)`: `f(*args) -> TimeResult`.
    With `min_repeat_ms`, `number` grows until one repeat lasts that long (as TVM does), so that
    short kernels are timed over enough calls."""
    for name, value in (("number", number), ("repeat", repeat)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"time_evaluator: {name} must be an int >= 1, got {value!r}")
    if isinstance(min_repeat_ms, bool) or not isinstance(min_repeat_ms, int | float):
        raise TypeError(f"time_evaluator: min_repeat_ms must be a number, got {min_repeat_ms!r}")
    if not math.isfinite(min_repeat_ms) or min_repeat_ms < 0:
        raise ValueError(
            f"time_evaluator: min_repeat_ms must be a finite number >= 0, got {min_repeat_ms!r}"
        )

    def run(*args) -> TimeResult:
        calls = number
        while min_repeat_ms > 0 and calls < MAX_CALLS:
            seconds = time(args, calls, 1).results[0] * calls
            if seconds * 1e3 >= min_repeat_ms:
                break
            wanted = min_repeat_ms / 1e3 / max(seconds / calls, 1e-9)
            calls = min(MAX_CALLS, max(calls * 2, math.ceil(wanted * 1.1)))
        return time(args, calls, repeat)

    return run


MAX_CALLS = 1 << 24
"""The most calls `min_repeat_ms` makes one repeat take."""
