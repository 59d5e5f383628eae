"""What timing a function returns."""

from __future__ import annotations

import dataclasses
import statistics


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
