"""The greedy planners of TVM's USMP (tir/usmp/algo): buffers sorted by a key, each placed at
the lowest offset where it clears the buffers placed before it that it meets in time."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from loom.memory.planner import native
from loom.memory.planner.buffer import Buffer


def conflict_counts(arrays: native.Arrays) -> np.ndarray:
    """For each buffer, how many others it meets in time (nonzero-sized ones), by binary
    search over the sorted starts and ends instead of comparing every pair."""
    live = arrays.size > 0
    starts = np.sort(arrays.start[live])
    ends = np.sort(arrays.end[live])
    # others alive at some point of [s, e): started before e, minus those that ended by s
    began = np.searchsorted(starts, arrays.end, "left")
    ended = np.searchsorted(ends, arrays.start, "right")
    return began - ended - live.astype(np.int64)


def _place(
    buffers: Sequence[Buffer], arrays: native.Arrays, keys: list[tuple], seconds: float
) -> list[int] | None:
    """First fit in the order of `keys` (ascending), pinned buffers first; None when `seconds`
    run out first."""
    pinned = [i for i, b in enumerate(buffers) if b.offset is not None]
    free = sorted((i for i, b in enumerate(buffers) if b.offset is None), key=keys.__getitem__)
    offsets = native.first_fit(arrays, pinned + free, seconds)
    return None if offsets is None else [int(o) for o in offsets]


def greedy_by_size(
    buffers: Sequence[Buffer], arrays: native.Arrays, seconds: float = math.inf
) -> list[int] | None:
    """Largest first; ties go to the buffer with more conflicts, then to the larger name (as
    TVM's greedy_by_size orders them). None when `seconds` run out first."""
    conflicts = conflict_counts(arrays)
    keys = [(-b.size, -int(c), _descending(b.name)) for b, c in zip(buffers, conflicts)]
    return _place(buffers, arrays, keys, seconds)


def greedy_by_conflicts(
    buffers: Sequence[Buffer], arrays: native.Arrays, seconds: float = math.inf
) -> list[int] | None:
    """Most conflicts first; ties go to the larger buffer, then to the larger name (as TVM's
    greedy_by_conflicts orders them). None when `seconds` run out first."""
    conflicts = conflict_counts(arrays)
    keys = [(-int(c), -b.size, _descending(b.name)) for b, c in zip(buffers, conflicts)]
    return _place(buffers, arrays, keys, seconds)


class _descending(str):
    """A name that sorts in reverse, for descending ties in an ascending sort key."""

    __slots__ = ()

    def __lt__(self, other: str) -> bool:
        return str.__gt__(self, other)

    def __gt__(self, other: str) -> bool:
        return str.__lt__(self, other)


GREEDY = {"greedy_by_size": greedy_by_size, "greedy_by_conflicts": greedy_by_conflicts}
