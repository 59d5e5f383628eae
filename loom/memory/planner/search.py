"""The exact search (native/planner.c decides whether the buffers fit a capacity) driven to a
minimal peak: probe the lower bound first, then bisect between what is proven impossible and
the best packing found, each probe within a share of the time left."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from loom.memory.planner import native
from loom.memory.planner.buffer import Buffer, peak_of
from loom.memory.planner.greedy import conflict_counts

DEFAULT_TIME_LIMIT = 10.0
"""Seconds the search may take when the caller gives no time limit."""

MAX_PAIRS = 20_000_000
"""The most pairs of buffers alive together the search takes on: it keeps a list of them
(4 bytes each, twice), and its nodes grow with them. Larger problems keep the greedy plan."""


AUTO_MAX_BUFFERS = 4096
"""The most buffers "auto" searches: a node of a larger problem takes milliseconds (it scans
the unplaced buffers and their sections), too slow to improve on the bottom-up placement
(on idealloc/pangu_2.6B, 18,692 buffers, 30 s searched nothing better)."""


def searchable(arrays: native.Arrays) -> bool:
    return int(conflict_counts(arrays).sum()) <= 2 * MAX_PAIRS


@dataclass
class Best:
    """The best packing known, and the lowest peak not yet proven impossible."""

    offsets: list[int]
    peak: int
    proven: int

    @property
    def optimal(self) -> bool:
        return self.proven >= self.peak


def complete(buffers: Sequence[Buffer], found: Sequence[int]) -> list[int]:
    """The search's offsets for free buffers; pinned buffers at their offset, empty ones at 0."""
    return [
        b.offset if b.offset is not None else (int(o) if b.size else 0)
        for b, o in zip(buffers, found)
    ]


def fit(
    buffers: Sequence[Buffer], arrays: native.Arrays, capacity: int, seconds: float
) -> tuple[native.Outcome, list[int] | None]:
    """Whether the buffers fit in `capacity` bytes, and a packing that does."""
    pinned_top = max((b.offset + b.size for b in buffers if b.offset is not None), default=0)
    if capacity < pinned_top:
        return native.Outcome.NOT_FOUND, None
    outcome, offsets, _ = native.decide(arrays, capacity, seconds)
    if outcome is not native.Outcome.FOUND:
        return outcome, None
    return outcome, complete(buffers, offsets)


def minimize(buffers: Sequence[Buffer], arrays: native.Arrays, best: Best, deadline: float) -> Best:
    """Lowers `best.peak` toward `best.proven` until they meet (proven optimal) or time is out."""
    low = best.proven  # lowest capacity worth probing (proven or given up on below it)
    first = True
    while low < best.peak:
        left = deadline - time.perf_counter()
        if left <= 0:
            break
        target = low if first else (low + best.peak - 1) // 2
        # the lower bound often fits (then the plan is optimal): it gets half the time, and
        # each later probe a third of what is left
        share = left / 2 if first else left / 3
        first = False
        outcome, offsets = fit(buffers, arrays, target, share)
        if offsets is not None:
            best = Best(offsets, peak_of(buffers, offsets), best.proven)
        elif outcome is native.Outcome.NOT_FOUND:
            best = Best(best.offsets, best.peak, max(best.proven, target + 1))
            low = target + 1
        else:
            low = target + 1
    return best
