"""The lower bound every plan's peak is at least: the most bytes alive at one time."""

from __future__ import annotations

from collections.abc import Iterable

from loom.memory.planner.buffer import Buffer


def lower_bound(buffers: Iterable[Buffer]) -> int:
    """The maximum over time of the summed sizes of live buffers (pinned ones count, and so
    does the top of a pinned buffer, which no plan can move below)."""
    events: list[tuple[int, int]] = []
    pinned_top = 0
    for b in buffers:
        events.append((b.start, b.size))
        events.append((b.end, -b.size))
        if b.offset is not None:
            pinned_top = max(pinned_top, b.offset + b.size)
    # ends sort before starts at the same time: lifetimes are half-open
    events.sort()
    live = best = 0
    for _, delta in events:
        live += delta
        best = max(best, live)
    return max(best, pinned_top)
