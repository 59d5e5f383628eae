"""The greedy planners: TVM USMP's two (tir/usmp/algo/greedy.cc) and first-fit variants of them.

Both families sort the buffers by a key (TVM's greedy_by_size: largest first, then most
conflicts, then the larger name; greedy_by_conflicts: most conflicts first, then largest, then
the larger name) and place them one by one, never moving one placed earlier. They differ in
where a buffer goes:

- TVM's rule (greedy_by_size, greedy_by_conflicts): above every earlier buffer it meets in
  time, at the highest of their ends, each rounded up to that earlier buffer's alignment. A gap
  below is never filled. loom also rounds the offset up to the buffer's own alignment (its plans
  require it; TVM does not); with one alignment for all buffers that changes nothing. These are
  the faithful baselines the benchmark compares against.
- First fit (first_fit_by_size, first_fit_by_conflicts): the lowest aligned offset clear of the
  earlier buffers it meets, filling gaps. Far better as a start (challenging/: 1.29-1.96 x the
  lower bound where TVM's rule gives 1.61-3.72; idealloc/S_1: 1.03 against 2.00); "auto"
  starts from the better of these two.

Pinned buffers are placed first, at their offsets. A conflict is two nonempty buffers alive at
the same time."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from loom.memory.planner import native
from loom.memory.planner.buffer import Buffer

Placer = Callable[[native.Arrays, Sequence[int], float], np.ndarray | None]
"""A placement in C over an order of buffers (native.tvm_greedy or native.first_fit)."""


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


def by_size_keys(buffers: Sequence[Buffer], arrays: native.Arrays) -> list[tuple]:
    """TVM's greedy_by_size order as ascending sort keys: larger, more conflicts, larger name."""
    conflicts = conflict_counts(arrays)
    return [(-b.size, -int(c), DescendingName(b.name)) for b, c in zip(buffers, conflicts)]


def by_conflicts_keys(buffers: Sequence[Buffer], arrays: native.Arrays) -> list[tuple]:
    """TVM's greedy_by_conflicts order as ascending sort keys: more conflicts, larger, larger
    name."""
    conflicts = conflict_counts(arrays)
    return [(-int(c), -b.size, DescendingName(b.name)) for b, c in zip(buffers, conflicts)]


def _place(
    buffers: Sequence[Buffer],
    keys: list[tuple],
    placer: Placer,
    arrays: native.Arrays,
    seconds: float,
) -> list[int] | None:
    """`placer` over the pinned buffers, then the free ones in the order of `keys` (ascending);
    None when `seconds` run out first."""
    pinned = [i for i, b in enumerate(buffers) if b.offset is not None]
    free = sorted((i for i, b in enumerate(buffers) if b.offset is None), key=keys.__getitem__)
    offsets = placer(arrays, pinned + free, seconds)
    return None if offsets is None else [int(o) for o in offsets]


def greedy_by_size(
    buffers: Sequence[Buffer], arrays: native.Arrays, seconds: float = math.inf
) -> list[int] | None:
    """TVM's greedy_by_size: largest first, each above the earlier buffers it meets (no gap
    filling; offsets also rounded up to the buffer's own alignment). None when `seconds` run
    out first."""
    keys = by_size_keys(buffers, arrays)
    return _place(buffers, keys, native.tvm_greedy, arrays, seconds)


def greedy_by_conflicts(
    buffers: Sequence[Buffer], arrays: native.Arrays, seconds: float = math.inf
) -> list[int] | None:
    """TVM's greedy_by_conflicts: most conflicts first, each above the earlier buffers it
    meets (no gap filling; offsets also rounded up to the buffer's own alignment). None when
    `seconds` run out first."""
    keys = by_conflicts_keys(buffers, arrays)
    return _place(buffers, keys, native.tvm_greedy, arrays, seconds)


def first_fit_by_size(
    buffers: Sequence[Buffer], arrays: native.Arrays, seconds: float = math.inf
) -> list[int] | None:
    """greedy_by_size's order, each buffer at its lowest fit (gaps filled). None when
    `seconds` run out first."""
    keys = by_size_keys(buffers, arrays)
    return _place(buffers, keys, native.first_fit, arrays, seconds)


def first_fit_by_conflicts(
    buffers: Sequence[Buffer], arrays: native.Arrays, seconds: float = math.inf
) -> list[int] | None:
    """greedy_by_conflicts' order, each buffer at its lowest fit (gaps filled). None when
    `seconds` run out first."""
    keys = by_conflicts_keys(buffers, arrays)
    return _place(buffers, keys, native.first_fit, arrays, seconds)


class DescendingName(str):
    """A name that sorts in reverse, for descending ties in an ascending sort key."""

    __slots__ = ()

    def __lt__(self, other: str) -> bool:
        return str.__gt__(self, other)

    def __gt__(self, other: str) -> bool:
        return str.__lt__(self, other)


GREEDY = {"greedy_by_size": greedy_by_size, "greedy_by_conflicts": greedy_by_conflicts}
"""TVM USMP's planners, as explicit algorithms (the baselines)."""

FIRST_FIT = {
    "first_fit_by_size": first_fit_by_size,
    "first_fit_by_conflicts": first_fit_by_conflicts,
}
"""The first-fit planners "auto" starts from; explicit algorithms too."""
