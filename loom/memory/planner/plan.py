"""`plan`: choose an algorithm, run it, check what it returns."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

from loom.errors import LoomError
from loom.memory.planner import native, search
from loom.memory.planner.bounds import lower_bound
from loom.memory.planner.buffer import Buffer, Plan, peak_of, validate
from loom.memory.planner.checker import check
from loom.memory.planner.greedy import GREEDY

ALGORITHMS = ("auto", *GREEDY, "search")


def plan(
    buffers: Iterable[Buffer],
    capacity: int | None = None,
    algorithm: str = "auto",
    time_limit: float | None = None,
) -> Plan:
    """Offsets for `buffers` such that buffers alive at the same time never share a byte.

    Without `capacity` the peak is minimized; with it, the goal is a plan within it (`fits`
    says whether one was found). "greedy_by_size" and "greedy_by_conflicts" are TVM USMP's
    greedy planners; "search" is an exact branch-and-bound (canonical packings, MiniMalloc
    style) that returns the best plan found within `time_limit` seconds (default
    search.DEFAULT_TIME_LIMIT) and whether it is proven optimal; "auto" runs both greedy
    planners and searches only when neither fits or reaches the lower bound. A problem with
    more than search.MAX_PAIRS pairs of buffers alive together is not searched: it keeps the
    better greedy plan, and `algorithm` names that planner."""
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
    if algorithm in GREEDY:
        offsets = GREEDY[algorithm](buffers, arrays)
        result, name = search.Best(offsets, peak_of(buffers, offsets), bound), algorithm
    else:
        result, name = _best_greedy(buffers, arrays, bound)
        wanted = algorithm == "search" or not _good_enough(result, capacity)
        if wanted and search.searchable(arrays):
            result, name = _search(buffers, arrays, result, capacity, deadline), "search"
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


def _best_greedy(
    buffers: Sequence[Buffer], arrays: native.Arrays, bound: int
) -> tuple[search.Best, str]:
    """The lower-peak plan of the greedy planners, and its planner's name."""
    results = []
    for name, place in GREEDY.items():
        offsets = place(buffers, arrays)
        results.append((peak_of(buffers, offsets), name, offsets))
    peak, name, offsets = min(results, key=lambda r: r[0])
    return search.Best(offsets, peak, bound), name


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
