"""`plan`: choose an algorithm, run it, check what it returns."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence

from loom.errors import LoomError
from loom.memory.planner import bottom_up, native, search
from loom.memory.planner.bounds import lower_bound
from loom.memory.planner.buffer import Buffer, Plan, peak_of, validate
from loom.memory.planner.checker import check
from loom.memory.planner.greedy import FIRST_FIT, GREEDY

ALGORITHMS = ("auto", *GREEDY, *FIRST_FIT, "bottom_up", "search")
PLACERS = GREEDY | FIRST_FIT


def plan(
    buffers: Iterable[Buffer],
    capacity: int | None = None,
    algorithm: str = "auto",
    time_limit: float | None = None,
) -> Plan:
    """Offsets for `buffers` such that buffers alive at the same time never share a byte.

    Without `capacity` the peak is minimized; with it, the goal is a plan within it (`fits`
    says whether one was found). "greedy_by_size" and "greedy_by_conflicts" are TVM USMP's
    greedy planners, faithful (no gap filling) but for also aligning each offset to the
    buffer's own alignment; "first_fit_by_size" and "first_fit_by_conflicts" place in the same
    orders at the lowest fit (greedy.py); "bottom_up" places the buffers in the search's
    canonical order without backtracking, under several ranks in turn within `time_limit`
    (the first always finishes), and keeps the best; "search" is an exact branch-and-bound
    (canonical packings, MiniMalloc style) that returns the best plan found within
    `time_limit` seconds (default search.DEFAULT_TIME_LIMIT) and whether it is proven optimal.
    "auto" runs both first-fit planners, then, while the plan neither fits nor reaches the
    lower bound, the bottom-up placement and the search; it keeps to `time_limit` throughout
    (past it come only the preparation and the final check, n log n in the buffers), falling
    back to buffers stacked one above the other if not even first_fit_by_size finishes in
    time. A problem with more than search.MAX_PAIRS pairs of buffers alive together is not
    searched, nor by "auto" one of more than search.AUTO_MAX_BUFFERS buffers: it keeps the
    better plan, and `algorithm` names that planner."""
    started = time.perf_counter()
    buffers = validate(buffers)
    if algorithm not in ALGORITHMS:
        raise LoomError(f"unknown planning algorithm {algorithm!r}; known: {', '.join(ALGORITHMS)}")
    if capacity is not None and (not isinstance(capacity, int) or capacity < 0):
        raise LoomError(f"capacity must be an int >= 0 or None, got {capacity!r}")
    if time_limit is not None and not time_limit >= 0:
        raise LoomError(f"time_limit must be >= 0 seconds or None, got {time_limit!r}")
    seconds = search.DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    deadline = started + seconds
    arrays = native.Arrays(buffers)
    bound = lower_bound(buffers)
    if algorithm in PLACERS:
        offsets = PLACERS[algorithm](buffers, arrays)
        result, name = search.Best(offsets, peak_of(buffers, offsets), bound), algorithm
    elif algorithm == "bottom_up":
        result, name = _bottom_up(buffers, arrays, None, bound, capacity, deadline), algorithm
    else:
        result, name = _improved(buffers, arrays, bound, capacity, algorithm, deadline)
        if algorithm == "auto":
            name = f"auto:{name}"
    done = Plan(
        offsets={b.name: o for b, o in zip(buffers, result.offsets)},
        peak=result.peak,
        lower_bound=bound,
        algorithm=name,
        optimal=result.optimal,
        fits=None if capacity is None else result.peak <= capacity,
        seconds=time.perf_counter() - started,
    )
    check(buffers, done, capacity if done.fits else None)
    return done


def _improved(
    buffers: Sequence[Buffer],
    arrays: native.Arrays,
    bound: int,
    capacity: int | None,
    algorithm: str,
    deadline: float,
) -> tuple[search.Best, str]:
    """For "auto" and "search": the first-fit planners, then while the plan is not good enough
    the bottom-up placement and the search. Only "auto" holds the first-fit planners to the
    deadline (the search's time limit has always been the search's own)."""
    greedy_deadline = deadline if algorithm == "auto" else math.inf
    result, name = _best_greedy(buffers, arrays, bound, greedy_deadline)
    if not _good_enough(result, capacity):
        improved = _bottom_up(buffers, arrays, result, bound, capacity, deadline)
        if improved.peak < result.peak:
            result, name = improved, "bottom_up"
    wanted = algorithm == "search" or not _good_enough(result, capacity)
    small = algorithm == "search" or arrays.n <= search.AUTO_MAX_BUFFERS
    if wanted and small and search.searchable(arrays):
        result, name = _search(buffers, arrays, result, capacity, deadline), "search"
    return result, name


def _best_greedy(
    buffers: Sequence[Buffer], arrays: native.Arrays, bound: int, deadline: float
) -> tuple[search.Best, str]:
    """The lower-peak plan of the first-fit planners that finish by `deadline`, and its
    planner's name; buffers stacked one above the other ("stacked") if none does."""
    results = []
    for name, place in FIRST_FIT.items():
        offsets = place(buffers, arrays, deadline - time.perf_counter())
        if offsets is None:
            break
        results.append((peak_of(buffers, offsets), name, offsets))
    if not results:
        offsets = _stacked(buffers)
        results.append((peak_of(buffers, offsets), "stacked", offsets))
    peak, name, offsets = min(results, key=lambda r: r[0])
    return search.Best(offsets, peak, bound), name


def _stacked(buffers: Sequence[Buffer]) -> list[int]:
    """Free buffers one above the other, above the pinned ones: a plan made in linear time."""
    top = max((b.offset + b.size for b in buffers if b.offset is not None), default=0)
    offsets = []
    for b in buffers:
        if b.offset is not None:
            offsets.append(b.offset)
            continue
        at = -(-top // b.alignment) * b.alignment
        offsets.append(at)
        top = at + b.size
    return offsets


def _bottom_up(
    buffers: Sequence[Buffer],
    arrays: native.Arrays,
    best: search.Best | None,
    bound: int,
    capacity: int | None,
    deadline: float,
) -> search.Best:
    """The better of `best` and the bottom-up placement found by `deadline` (its first rank
    given as long as it takes when there is no `best`)."""
    enough = bound if capacity is None else max(bound, capacity)
    ranks = tuple(bottom_up.RANKS)
    if best is None:
        offsets = native.bottom_up(arrays, bottom_up.rank_of(bottom_up.RANKS[ranks[0]](arrays)))
        offsets = search.complete(buffers, offsets)
        best = search.Best(offsets, peak_of(buffers, offsets), bound)
        ranks = ranks[1:]
    if best.peak <= enough:
        return best
    found = bottom_up.place(arrays, deadline, enough, ranks)
    if found is None or found[1] >= best.peak:
        return best
    return search.Best(search.complete(buffers, found[0]), found[1], best.proven)


def _good_enough(best: search.Best, capacity: int | None) -> bool:
    return best.optimal or (capacity is not None and best.peak <= capacity)


def _search(
    buffers: Sequence[Buffer],
    arrays: native.Arrays,
    best: search.Best,
    capacity: int | None,
    deadline: float,
) -> search.Best:
    """With a capacity: a packing within it, else (proven impossible or not found in time) the
    lowest peak found. Without: the lowest peak found."""
    if capacity is not None:
        if best.peak <= capacity:
            return best
        outcome, offsets = search.fit(buffers, arrays, capacity, deadline - time.perf_counter())
        if offsets is not None:
            return search.Best(offsets, peak_of(buffers, offsets), best.proven)
        if outcome is native.Outcome.NOT_FOUND:
            best = search.Best(best.offsets, best.peak, max(best.proven, capacity + 1))
    return search.minimize(buffers, arrays, best, deadline)
