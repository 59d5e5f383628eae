"""An independent check of a plan, written without the planner's code: a sweep over time keeps
the live buffers ordered by offset, so a collision is found against a neighbour only."""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from loom.errors import LoomError
from loom.memory.planner.buffer import Buffer, Plan, validate


def check(buffers: Iterable[Buffer], plan: Plan, capacity: int | None = None) -> None:
    """Raise LoomError unless every buffer is placed at an aligned offset >= 0 (a pinned one at
    its offset), within `capacity` and below `plan.peak`, and no two buffers alive at the same
    time share a byte. The message names the buffer(s)."""
    buffers = validate(buffers)
    offsets = plan.offsets
    extra = set(offsets) - {b.name for b in buffers}
    if extra:
        raise LoomError(f"plan places unknown buffer(s) {sorted(extra)[:5]}")
    for b in buffers:
        _check_one(b, offsets.get(b.name), plan.peak, capacity)
    _check_overlaps(buffers, offsets)


def _check_one(b: Buffer, offset: int | None, peak: int, capacity: int | None) -> None:
    if offset is None:
        raise LoomError(f"buffer {b.name!r} is not placed")
    if offset < 0:
        raise LoomError(f"buffer {b.name!r} is at a negative offset {offset}")
    if offset % b.alignment:
        raise LoomError(f"buffer {b.name!r} at {offset} is not aligned to {b.alignment}")
    if b.offset is not None and offset != b.offset:
        raise LoomError(f"buffer {b.name!r} is pinned at {b.offset} but placed at {offset}")
    if offset + b.size > peak:
        raise LoomError(f"buffer {b.name!r} ends at {offset + b.size}, above the peak {peak}")
    if capacity is not None and offset + b.size > capacity:
        raise LoomError(
            f"buffer {b.name!r} ends at {offset + b.size}, above the capacity {capacity}"
        )


def _check_overlaps(buffers: tuple[Buffer, ...], offsets: dict[str, int]) -> None:
    # ends (kind 0) before starts (kind 1) at one time: lifetimes are half-open
    events = []
    for i, b in enumerate(buffers):
        if b.size:
            events.append((b.start, 1, i))
            events.append((b.end, 0, i))
    events.sort()
    live: list[tuple[int, int]] = []  # (offset, index), pairwise disjoint in memory
    for _, kind, i in events:
        key = (offsets[buffers[i].name], i)
        if kind == 0:
            del live[bisect.bisect_left(live, key)]
            continue
        at = bisect.bisect_left(live, key)
        for j in (at - 1, at):
            if 0 <= j < len(live):
                _collide(buffers[i], key[0], buffers[live[j][1]], live[j][0])
        live.insert(at, key)


def _collide(a: Buffer, a_offset: int, b: Buffer, b_offset: int) -> None:
    if a_offset < b_offset + b.size and b_offset < a_offset + a.size:
        raise LoomError(
            f"buffers {a.name!r} [{a_offset}, {a_offset + a.size}) and {b.name!r} "
            f"[{b_offset}, {b_offset + b.size}) overlap in memory while both alive "
            f"(lifetimes [{a.start}, {a.end}) and [{b.start}, {b.end}))"
        )
