"""TVM USMP's greedy planners on a conflict graph with several pools (tir/usmp/algo/greedy.cc).

TVM plans buffers that each list the pools they may go to (in order of preference) and the
buffers they conflict with (are alive together with); a pool may have a size hint. The buffers
are sorted (greedy_by_size: larger first, then more conflicts, then the larger name;
greedy_by_conflicts: more conflicts, then larger, then the larger name), then each is placed in
turn (PostSortAllocation):

1. every candidate pool where the buffer fits at offset 0 under the pool's size hint starts
   with offset 0;
2. for each conflicting buffer already placed, in the order of the buffer's conflict list, its
   end rounded up to its own alignment raises its pool's offset if the buffer fits there under
   the hint, and drops the pool if not;
3. the first of the buffer's pools still there wins, at its offset.

No gap is filled. A pool's size is the highest end of a buffer placed in it. As in TVM (its
map's operator[] inserts a missing key), a pool dropped in step 2 comes back if a later
conflicting buffer in it leaves room, at that buffer's end only: the placement can then overlap
the buffer that dropped it. Kept for fidelity; it takes a size hint and an order of conflicts
that shows it, which the TVM tests reproduced here (bench/memplan_data/usmp) do not have.
loom's own planner (plan.py) works on lifetimes and one pool, where the same rule is greedy.py's
greedy_by_size and greedy_by_conflicts.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from loom.errors import LoomError
from loom.memory.planner.greedy import DescendingName


@dataclass(frozen=True)
class Pool:
    """A memory pool; `size_hint` bytes at most (None: unbounded)."""

    name: str
    size_hint: int | None = None


@dataclass(frozen=True)
class PoolBuffer:
    """A buffer of `size` bytes whose offset is a multiple of `alignment`, to go to the first
    pool of `pools` (names, in order of preference) where it fits."""

    name: str
    size: int
    pools: tuple[str, ...]
    alignment: int = 1


@dataclass(frozen=True)
class Allocation:
    pool: str
    offset: int


@dataclass(frozen=True)
class UsmpCase:
    """A USMP test case read from JSON: the problem and the per-pool sizes TVM's test expects
    for each algorithm."""

    buffers: tuple[PoolBuffer, ...]
    conflicts: dict[str, tuple[str, ...]]
    pools: tuple[Pool, ...]
    expected: dict[str, dict[str, int]]


ALGORITHMS = ("greedy_by_size", "greedy_by_conflicts")


def usmp_greedy(
    buffers: Sequence[PoolBuffer],
    conflicts: Mapping[str, Sequence[str]],
    pools: Sequence[Pool],
    algorithm: str = "greedy_by_size",
) -> dict[str, Allocation]:
    """Each buffer's pool and offset by TVM's `algorithm` ("greedy_by_size" or
    "greedy_by_conflicts"). `conflicts` gives each buffer's conflict list as TVM holds it (the
    buffers it is alive with, in the order step 2 visits them; conflict_lists makes them from
    pairs); a buffer without an entry conflicts with none. A LoomError when a buffer fits in
    none of its pools (TVM's "space available in the provided pools exceeded") or the input is
    malformed."""
    if algorithm not in ALGORITHMS:
        raise LoomError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    by_name = {b.name: b for b in buffers}
    hints = {p.name: p.size_hint for p in pools}
    _validate(buffers, by_name, hints, conflicts)
    lists = {name: tuple(conflicts.get(name, ())) for name in by_name}
    placed: dict[str, Allocation] = {}
    for buffer in sorted(buffers, key=_order_key(algorithm, lists)):
        placed[buffer.name] = _allocate(buffer, lists[buffer.name], by_name, hints, placed)
    return placed


def conflict_lists(pairs: Iterable[tuple[str, str]]) -> dict[str, tuple[str, ...]]:
    """Conflict lists from pairs of names (either order, repeats ignored): each name's partners
    in the order the pairs give them."""
    lists: dict[str, list[str]] = {}
    for a, b in pairs:
        if a == b:
            continue
        for name, other in ((a, b), (b, a)):
            partners = lists.setdefault(name, [])
            if other not in partners:
                partners.append(other)
    return {name: tuple(partners) for name, partners in lists.items()}


def _order_key(algorithm: str, neighbours: Mapping[str, Sequence[str]]):
    """Ascending sort keys for TVM's descending orders (the name breaks ties, larger first)."""
    if algorithm == "greedy_by_size":
        return lambda b: (-b.size, -len(neighbours[b.name]), DescendingName(b.name))
    return lambda b: (-len(neighbours[b.name]), -b.size, DescendingName(b.name))


def _allocate(
    buffer: PoolBuffer,
    conflicting: Sequence[str],
    by_name: Mapping[str, PoolBuffer],
    hints: Mapping[str, int | None],
    placed: Mapping[str, Allocation],
) -> Allocation:
    """TVM's PostSortAllocation step for one buffer (see the module docstring)."""
    offsets = {p: 0 for p in buffer.pools if _fits(hints[p], 0, buffer.size)}
    for name in conflicting:
        if name not in placed:
            continue
        other, where = by_name[name], placed[name]
        end = _align_up(where.offset + other.size, other.alignment)
        if _fits(hints[where.pool], end, buffer.size):
            # TVM's `if (end > offsets[pool])` inserts a missing pool (as 0): a dropped one too
            offsets[where.pool] = max(offsets.get(where.pool, 0), end)
        else:
            offsets.pop(where.pool, None)
    for pool in buffer.pools:
        if pool in offsets:
            return Allocation(pool, offsets[pool])
    raise LoomError(
        f"buffer {buffer.name!r} ({buffer.size} bytes) fits in none of its pools "
        f"{', '.join(buffer.pools)}: increase their size hints"
    )


def pool_sizes(
    buffers: Sequence[PoolBuffer], allocations: Mapping[str, Allocation]
) -> dict[str, int]:
    """Bytes each pool needs: the highest end of a buffer placed in it."""
    sizes: dict[str, int] = {}
    for b in buffers:
        where = allocations[b.name]
        sizes[where.pool] = max(sizes.get(where.pool, 0), where.offset + b.size)
    return sizes


def read_usmp_case(path: str | os.PathLike) -> UsmpCase:
    """A case of bench/memplan_data/usmp: `pools` (name, size_hint_bytes), `buffers` (id, size,
    optional pool_candidates: all pools when absent), `alignment_bytes` for every buffer,
    conflicts as `conflicts` (pairs, made into lists by conflict_lists) or `conflict_lists`
    (name -> names, as given), and
    `expected_in_tvm_test` (per algorithm: pool -> bytes, or bytes when there is one pool)."""
    with open(path) as f:
        data = json.load(f)
    try:
        pools = tuple(Pool(p["name"], p["size_hint_bytes"]) for p in data["pools"])
        names = tuple(p.name for p in pools)
        alignment = int(data.get("alignment_bytes", 1))
        buffers = tuple(
            PoolBuffer(b["id"], int(b["size"]), tuple(b.get("pool_candidates", names)), alignment)
            for b in data["buffers"]
        )
        conflicts = conflict_lists(tuple(c) for c in data.get("conflicts", []))
        for name, others in data.get("conflict_lists", {}).items():
            conflicts[name] = tuple(others)
        expected = {
            algorithm: sizes if isinstance(sizes, dict) else {names[0]: sizes}
            for algorithm, sizes in data["expected_in_tvm_test"].items()
        }
    except (KeyError, TypeError, ValueError) as e:
        raise LoomError(f"{path}: not a USMP case ({type(e).__name__}: {e})") from None
    return UsmpCase(buffers, conflicts, pools, expected)


def _validate(
    buffers: Sequence[PoolBuffer],
    by_name: Mapping[str, PoolBuffer],
    hints: Mapping[str, int | None],
    conflicts: Mapping[str, Sequence[str]],
) -> None:
    if len(by_name) != len(buffers):
        raise LoomError("buffers: names must be unique")
    for b in buffers:
        if b.size < 0 or b.alignment < 1:
            raise LoomError(f"buffer {b.name!r}: size must be >= 0 and alignment >= 1")
        if not b.pools:
            raise LoomError(f"buffer {b.name!r}: no pool candidates")
        unknown = [p for p in b.pools if p not in hints]
        if unknown:
            raise LoomError(f"buffer {b.name!r}: unknown pool(s) {', '.join(unknown)}")
    for name, others in conflicts.items():
        unknown = [n for n in (name, *others) if n not in by_name]
        if unknown:
            raise LoomError(f"conflicts of {name!r}: unknown buffer(s) {', '.join(unknown)}")


def _fits(hint: int | None, offset: int, size: int) -> bool:
    return hint is None or offset + size <= hint


def _align_up(x: int, alignment: int) -> int:
    return -(-x // alignment) * alignment
