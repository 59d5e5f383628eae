"""loom.memory.planner: the checker, the reader, the lower bound, TVM's greedy planners, the
bottom-up placement and the exact search, on the benchmark instances (bench/memplan_data),
random small ones checked against an exhaustive search, and generated ones that pack exactly."""

import csv
import dataclasses
import pathlib
import random

import pytest

from loom import LoomError
from loom.memory.planner import Buffer, Plan, check, lower_bound, plan, read_csv, usmp

DATA = pathlib.Path(__file__).resolve().parents[2] / "bench" / "memplan_data"
SMALL = sorted(DATA.glob("small/*.csv"))
CAPACITY = 1048576


def _plan_of(buffers, offsets, peak=None):
    offsets = dict(zip((b.name for b in buffers), offsets))
    top = max(offsets[b.name] + b.size for b in buffers)
    return Plan(offsets, top if peak is None else peak, 0, "by hand", False, None, 0.0)


# ------------------------------------------------------------------ data types and bad input


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(size=-1), "size must be >= 0"),
        (dict(start=3, end=3), "end (3) must be > start (3)"),
        (dict(alignment=3), "alignment must be a power of two"),
        (dict(alignment=0), "alignment must be a power of two"),
        (dict(alignment=8, offset=12), "pinned offset 12 is not aligned to 8"),
        (dict(offset=-4), "pinned offset must be >= 0"),
        (dict(size=2.5), "size must be an int"),
    ],
)
def test_bad_buffer_is_named(fields, message):
    args = dict(name="weights", size=8, start=0, end=2) | fields
    with pytest.raises(LoomError, match="buffer 'weights'") as info:
        Buffer(**args)
    assert message in str(info.value)


def test_duplicate_names_and_bad_arguments():
    a = Buffer("a", 4, 0, 2)
    with pytest.raises(LoomError, match="buffer 'a': duplicate name"):
        plan([a, Buffer("a", 8, 1, 3)])
    with pytest.raises(LoomError, match="unknown planning algorithm 'best'"):
        plan([a], algorithm="best")
    with pytest.raises(LoomError, match="capacity must be"):
        plan([a], capacity=-1)
    with pytest.raises(LoomError, match="must be a Buffer"):
        plan([a, (1, 2, 3)])


def test_lower_bound():
    assert lower_bound([]) == 0
    buffers = [Buffer("a", 4, 0, 2), Buffer("b", 3, 1, 3), Buffer("c", 5, 2, 4)]
    assert lower_bound(buffers) == 8  # b and c at time 2; a has ended (half-open)
    assert lower_bound([*buffers, Buffer("p", 1, 9, 10, offset=20)]) == 21


# ------------------------------------------------------------------ the checker


def test_checker_accepts_a_valid_plan():
    buffers = [Buffer("a", 4, 0, 2), Buffer("b", 4, 1, 3), Buffer("c", 4, 2, 4, alignment=4)]
    check(buffers, _plan_of(buffers, [0, 4, 0]), capacity=8)


def test_checker_catches_overlap_and_names_both():
    buffers = [Buffer("a", 4, 0, 2), Buffer("b", 4, 1, 3), Buffer("c", 4, 5, 6)]
    with pytest.raises(LoomError, match=r"buffers 'b' .* and 'a' .* overlap") as info:
        check(buffers, _plan_of(buffers, [0, 2, 0]))
    assert "lifetimes [1, 3) and [0, 2)" in str(info.value)


def test_checker_catches_overlap_far_from_neighbours():
    # a wide buffer placed across several live ones: the sweep must still find it
    buffers = [Buffer(f"x{i}", 2, 0, 10) for i in range(5)]
    late = Buffer("late", 5, 5, 6)
    offsets = [0, 2, 4, 6, 8, 3]
    with pytest.raises(LoomError, match="'late'"):
        check([*buffers, late], _plan_of([*buffers, late], offsets))


def test_checker_catches_misalignment_capacity_pinning_and_missing():
    buffers = [Buffer("a", 4, 0, 2, alignment=8), Buffer("b", 4, 1, 3)]
    with pytest.raises(LoomError, match="'a' at 4 is not aligned to 8"):
        check(buffers, _plan_of(buffers, [4, 0]))
    with pytest.raises(LoomError, match="'b' ends at 12, above the capacity 10"):
        check(buffers, _plan_of(buffers, [0, 8]), capacity=10)
    with pytest.raises(LoomError, match="above the peak 6"):
        check(buffers, _plan_of(buffers, [0, 8], peak=6))
    pinned = [Buffer("a", 4, 0, 2, offset=16), Buffer("b", 4, 1, 3)]
    with pytest.raises(LoomError, match="'a' is pinned at 16 but placed at 0"):
        check(pinned, _plan_of(pinned, [0, 4]))
    with pytest.raises(LoomError, match="'b' is not placed"):
        check(buffers, Plan({"a": 0}, 4, 0, "x", False, None, 0.0))
    with pytest.raises(LoomError, match="negative offset"):
        check(buffers, _plan_of(buffers, [0, -4]))


def test_checker_on_a_large_plan_is_a_sweep():
    # 20,000 buffers all alive together: quadratic pair checks would take minutes
    buffers = [Buffer(f"t{i}", 1, 0, 2) for i in range(20000)]
    check(buffers, _plan_of(buffers, range(20000)))


# ------------------------------------------------------------------ reading CSV


def test_read_csv_with_optional_columns(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("id,lower,upper,size,alignment,offset\nx,0,3,8,4,\ny,1,2,4,4,16\n")
    assert read_csv(path) == (
        Buffer("x", 8, 0, 3, alignment=4),
        Buffer("y", 4, 1, 2, alignment=4, offset=16),
    )
    bad = tmp_path / "bad.csv"
    bad.write_text("id,lower,upper,size\nx,0,3,8\ny,5,2,4\n")
    with pytest.raises(LoomError, match=r"bad.csv, line 3: buffer 'y': end \(2\)"):
        read_csv(bad)
    (tmp_path / "cols.csv").write_text("id,lower,size\n")
    with pytest.raises(LoomError, match="missing column"):
        read_csv(tmp_path / "cols.csv")


# ------------------------------------------------------------------ the algorithms


@pytest.mark.parametrize("path", SMALL, ids=[p.name for p in SMALL])
def test_small_instances_reach_their_optimum(path):
    optimum = int(path.name.split(".")[1])
    buffers = read_csv(path)
    for algorithm in ("search", "auto"):
        result = plan(buffers, algorithm=algorithm, time_limit=10)
        assert result.peak == optimum and result.optimal


def test_example_instance():
    buffers = read_csv(DATA / "examples" / "input.12.csv")
    result = plan(buffers, capacity=12, algorithm="search", time_limit=10)
    assert result.fits and result.peak == 12 == result.lower_bound and result.optimal


@pytest.mark.parametrize("name", ["A", "C", "F", "G", "J", "K"])
def test_challenging_instances_fit_with_search(name):
    buffers = read_csv(DATA / "challenging" / f"{name}.{CAPACITY}.csv")
    greedy = plan(buffers, algorithm="greedy_by_size")
    assert not greedy.fits if greedy.fits is not None else greedy.peak > CAPACITY
    result = plan(buffers, capacity=CAPACITY, algorithm="search", time_limit=20)
    assert result.fits and result.peak <= CAPACITY
    check(buffers, result, CAPACITY)


def test_auto_fits_every_challenging_instance_within_a_second():
    # the compiler calls plan(..., "auto", time_limit=1.0); E was the slowest, ~0.2 s now
    for path in sorted(DATA.glob("challenging/*.csv")):
        buffers = read_csv(path)
        result = plan(buffers, capacity=CAPACITY, algorithm="auto", time_limit=1.0)
        assert result.fits, path.name


def test_search_proves_c_optimal_at_its_lower_bound():
    buffers = read_csv(DATA / "challenging" / f"C.{CAPACITY}.csv")
    result = plan(buffers, algorithm="search", time_limit=20)
    assert result.peak == result.lower_bound == 1039360 and result.optimal


GREEDY = ["greedy_by_size", "greedy_by_conflicts", "first_fit_by_size", "first_fit_by_conflicts"]


@pytest.mark.parametrize("algorithm", GREEDY)
def test_greedy_plans_are_valid_and_above_the_bound(algorithm):
    for path in [*SMALL, *sorted(DATA.glob("challenging/*.csv"))]:
        buffers = read_csv(path)
        result = plan(buffers, algorithm=algorithm)
        check(buffers, result)
        assert result.peak >= result.lower_bound == lower_bound(buffers)
        assert result.algorithm == algorithm
        assert result.optimal == (result.peak == result.lower_bound)


def test_greedy_orders_follow_tvm():
    # by size, the largest goes lowest; by conflicts, the most conflicted does. TVM puts x
    # above hub, the highest end it meets; first fit puts it into the gap below hub
    buffers = [Buffer("big", 10, 0, 1), Buffer("hub", 2, 0, 4), Buffer("x", 1, 1, 4)]
    assert plan(buffers, algorithm="greedy_by_size").offsets == {"big": 0, "hub": 10, "x": 12}
    assert plan(buffers, algorithm="first_fit_by_size").offsets == {"big": 0, "hub": 10, "x": 0}
    by_conflicts = {"hub": 0, "big": 2, "x": 2}
    assert plan(buffers, algorithm="greedy_by_conflicts").offsets == by_conflicts
    assert plan(buffers, algorithm="first_fit_by_conflicts").offsets == by_conflicts


def test_tvm_greedy_rounds_to_the_conflicting_and_to_the_own_alignment():
    # a ends at 3, rounded up to a's alignment 8 (TVM's rule); first fit puts b right at 3.
    # c meets only b, which ends at 10 with alignment 1; c's own alignment 4 makes that 12
    buffers = [
        Buffer("a", 3, 0, 2, alignment=8),
        Buffer("b", 2, 1, 4),
        Buffer("c", 1, 3, 5, alignment=4),
    ]
    assert plan(buffers, algorithm="greedy_by_size").offsets == {"a": 0, "b": 8, "c": 12}
    assert plan(buffers, algorithm="first_fit_by_size").offsets == {"a": 0, "b": 3, "c": 0}


def test_tvm_greedy_places_pinned_buffers_first_and_stays_above_them():
    buffers = [Buffer("p", 4, 0, 4, offset=8), Buffer("a", 6, 0, 2), Buffer("b", 2, 3, 6)]
    assert plan(buffers, algorithm="greedy_by_size").offsets == {"p": 8, "a": 12, "b": 12}
    assert plan(buffers, algorithm="first_fit_by_size").offsets == {"p": 8, "a": 0, "b": 0}


@pytest.mark.parametrize("path", sorted(DATA.glob("challenging/*.csv")), ids=lambda p: p.name)
def test_tvm_greedy_reaches_the_reference_ratios(path):
    with open(DATA / "reference_results.csv", newline="") as f:
        reference = {row["instance"]: row for row in csv.DictReader(f)}[path.name[0]]
    buffers = read_csv(path)
    for algorithm, column in [
        ("greedy_by_size", "tvm_gbs_over_LB"),
        ("greedy_by_conflicts", "tvm_gbc_over_LB"),
    ]:
        assert f"{plan(buffers, algorithm=algorithm).ratio:.4f}" == reference[column]


def test_auto_starts_from_first_fit_not_tvm():
    buffers = read_csv(DATA / "challenging" / f"J.{CAPACITY}.csv")
    first_fit = plan(buffers, algorithm="first_fit_by_size").peak
    assert first_fit < plan(buffers, algorithm="greedy_by_size").peak
    assert plan(buffers, time_limit=1.0).peak <= first_fit


# ------------------------------------------------------------------ TVM's multi-pool planner


USMP_CASES = sorted(DATA.glob("usmp/*.json"))


@pytest.mark.parametrize("path", USMP_CASES, ids=lambda p: p.stem)
@pytest.mark.parametrize("algorithm", usmp.ALGORITHMS)
def test_usmp_cases_reach_the_pool_sizes_of_tvm_tests(path, algorithm):
    case = usmp.read_usmp_case(path)
    placed = usmp.usmp_greedy(case.buffers, case.conflicts, case.pools, algorithm)
    assert usmp.pool_sizes(case.buffers, placed) == case.expected[algorithm]
    sizes = {b.name: b.size for b in case.buffers}
    for a, others in case.conflicts.items():  # conflicting buffers in one pool never overlap
        for b in others:
            pa, pb = placed[a], placed[b]
            if pa.pool == pb.pool:
                assert pa.offset + sizes[a] <= pb.offset or pb.offset + sizes[b] <= pa.offset


def test_usmp_pool_selection_follows_the_size_hints():
    pools = [usmp.Pool("fast", 100), usmp.Pool("slow")]
    buffers = [
        usmp.PoolBuffer("a", 60, ("fast", "slow"), 16),
        usmp.PoolBuffer("b", 50, ("fast", "slow"), 16),  # above a (at 64) it would pass 100
        usmp.PoolBuffer("c", 30, ("fast", "slow"), 16),  # meets only b, in slow: fast at 0
        usmp.PoolBuffer("d", 120, ("fast", "slow"), 16),  # never fits fast at 0
    ]
    conflicts = usmp.conflict_lists([("a", "b"), ("b", "c")])
    placed = usmp.usmp_greedy(buffers, conflicts, pools, "greedy_by_size")
    assert placed == {
        "d": usmp.Allocation("slow", 0),
        "a": usmp.Allocation("fast", 0),
        "b": usmp.Allocation("slow", 0),
        "c": usmp.Allocation("fast", 0),
    }
    with pytest.raises(LoomError, match=r"buffer 'd' .* fits in none of its pools fast"):
        usmp.usmp_greedy([usmp.PoolBuffer("d", 120, ("fast",))], {}, pools)
    with pytest.raises(LoomError, match="unknown pool"):
        usmp.usmp_greedy([usmp.PoolBuffer("e", 1, ("nvm",))], {}, pools)
    with pytest.raises(LoomError, match=r"conflicts of 'a': unknown buffer\(s\) zz"):
        usmp.usmp_greedy(buffers, {"a": ["b", "zz"]}, pools)


def test_usmp_greedy_brings_a_dropped_pool_back_as_tvm_does():
    # x and y (placed first: most conflicts) share fast at 0, apart in time. b meets both:
    # above x it would pass fast's hint, so x drops fast; then y, ending at 16, puts it back
    # (TVM's operator[] inserts it) and b lands at 16, over x. In the other order x drops it last
    pools = [usmp.Pool("fast", 100), usmp.Pool("slow")]
    both = ("fast", "slow")
    buffers = [
        usmp.PoolBuffer("x", 60, both, 16),
        usmp.PoolBuffer("y", 16, both, 16),
        usmp.PoolBuffer("b", 50, both, 16),
        *(usmp.PoolBuffer(f"d{k}", 1, ("slow",), 16) for k in range(4)),
    ]
    lists = {"x": ["b", "d0", "d1"], "y": ["b", "d2", "d3"], "b": ["x", "y"]}
    lists |= {"d0": ["x"], "d1": ["x"], "d2": ["y"], "d3": ["y"]}
    placed = usmp.usmp_greedy(buffers, lists, pools, "greedy_by_conflicts")
    assert placed["x"] == placed["y"] == usmp.Allocation("fast", 0)
    assert placed["b"] == usmp.Allocation("fast", 16)
    lists["b"] = ["y", "x"]
    placed = usmp.usmp_greedy(buffers, lists, pools, "greedy_by_conflicts")
    assert placed["b"] == usmp.Allocation("slow", 0)


def test_usmp_greedy_on_lifetimes_is_the_planners_tvm_greedy():
    # on one unbounded pool with one alignment, the conflict graph of lifetimes gives the
    # offsets of plan()'s TVM planners
    rng = random.Random(5)
    for _ in range(100):
        alignment = rng.choice([1, 4, 16])
        buffers = [
            dataclasses.replace(b, alignment=alignment)
            for b in _random_buffers(rng, rng.randint(1, 12))
        ]
        pooled = [usmp.PoolBuffer(b.name, b.size, ("pool",), alignment) for b in buffers]
        conflicts = usmp.conflict_lists(
            (a.name, b.name)
            for i, a in enumerate(buffers)
            for b in buffers[:i]
            if a.overlaps_in_time(b)
        )
        for algorithm in usmp.ALGORITHMS:
            placed = usmp.usmp_greedy(pooled, conflicts, [usmp.Pool("pool")], algorithm)
            offsets = {name: where.offset for name, where in placed.items()}
            assert plan(buffers, algorithm=algorithm).offsets == offsets, buffers


def test_pinned_zero_size_and_aligned_buffers_in_every_algorithm():
    buffers = [
        Buffer("pin", 4, 0, 10, alignment=4, offset=8),
        Buffer("a", 8, 0, 5, alignment=8),
        Buffer("b", 3, 2, 7),
        Buffer("empty", 0, 1, 2),
        Buffer("c", 5, 5, 10, alignment=2),
    ]
    for algorithm in ("greedy_by_size", "greedy_by_conflicts", "bottom_up", "search", "auto"):
        result = plan(buffers, algorithm=algorithm, time_limit=5)
        check(buffers, result)
        assert result.offsets["pin"] == 8
        assert result.peak >= result.lower_bound
    best = plan(buffers, algorithm="search", time_limit=5)
    assert best.peak == 15 and best.optimal  # a below pin, b and c above it


def test_capacity_that_cannot_fit():
    buffers = [Buffer("a", 4, 0, 2), Buffer("b", 4, 1, 3)]
    result = plan(buffers, capacity=7, algorithm="search", time_limit=5)
    assert result.fits is False and result.peak == 8 and result.optimal
    pinned = [Buffer("p", 4, 0, 1, offset=8)]
    assert plan(pinned, capacity=10).fits is False


def test_empty_problem():
    result = plan([], capacity=0)
    assert result.offsets == {} and result.peak == 0 and result.fits and result.optimal


# ------------------------------------------------------------------ random, exhaustively checked


def _optimum(buffers):
    """The least peak, by trying every aligned offset of every buffer (tiny problems only)."""
    bound = lower_bound(buffers)
    for capacity in range(bound, bound + sum(b.size + b.alignment for b in buffers) + 1):
        if _fits(buffers, capacity, []):
            return capacity
    raise AssertionError("no packing at all")


def _fits(buffers, capacity, placed):
    if len(placed) == len(buffers):
        return True
    b = buffers[len(placed)]
    choices = [b.offset] if b.offset is not None else range(0, capacity - b.size + 1, b.alignment)
    for offset in choices:
        if offset + b.size > capacity:
            continue
        if all(
            not (b.start < c.end and c.start < b.end)
            or offset + b.size <= o
            or o + c.size <= offset
            for c, o in zip(buffers, placed)
        ):
            if _fits(buffers, capacity, [*placed, offset]):
                return True
    return False


def _pinned_collide(buffers):
    pinned = [b for b in buffers if b.offset is not None]
    return any(
        a.overlaps_in_time(b) and a.offset < b.offset + b.size and b.offset < a.offset + a.size
        for i, a in enumerate(pinned)
        for b in pinned[:i]
    )


def _random_buffers(rng, count, pinned=False):
    buffers = []
    for i in range(count):
        start = rng.randint(0, 5)
        alignment = rng.choice([1, 1, 2, 4])
        buffer = Buffer(f"b{i}", rng.randint(1, 5), start, start + rng.randint(1, 4), alignment)
        if pinned and rng.random() < 0.2:
            buffer = dataclasses.replace(buffer, offset=alignment * rng.randint(0, 3))
        buffers.append(buffer)
    return buffers


def test_random_instances_search_is_optimal():
    rng = random.Random(20261125)
    for _ in range(400):
        buffers = _random_buffers(rng, rng.randint(1, 6))
        result = plan(buffers, algorithm="search", time_limit=5)
        assert result.optimal, buffers
        assert result.peak == _optimum(buffers), buffers


def test_search_restores_ranks_after_a_decomposition():
    # found by fuzzing: ranks changed inside a piece were restored to the wrong buffers, and
    # the search "proved" 16 optimal
    buffers = [
        Buffer("b0", 5, 3, 6),
        Buffer("b1", 4, 0, 1, alignment=4),
        Buffer("b2", 5, 0, 4, alignment=2),
        Buffer("b3", 4, 3, 6, alignment=4),
        Buffer("b4", 1, 4, 8),
    ]
    result = plan(buffers, algorithm="search", time_limit=5)
    assert result.peak == 14 == _optimum(buffers) and result.optimal


def test_random_instances_with_pinned_buffers():
    rng = random.Random(7)
    tried = 0
    while tried < 80:
        buffers = _random_buffers(rng, rng.randint(1, 5), pinned=True)
        if _pinned_collide(buffers):  # then no plan exists
            continue
        tried += 1
        result = plan(buffers, algorithm="search", time_limit=5)
        assert result.optimal and result.peak == _optimum(buffers), buffers
        for algorithm in ("greedy_by_size", "greedy_by_conflicts", "bottom_up"):
            assert plan(buffers, algorithm=algorithm).peak >= result.peak


def test_random_instances_fit_exactly_when_a_packing_does():
    rng = random.Random(3)
    for _ in range(60):
        buffers = _random_buffers(rng, rng.randint(2, 6))
        optimum = _optimum(buffers)
        assert plan(buffers, capacity=optimum, algorithm="search", time_limit=5).fits
        below = plan(buffers, capacity=optimum - 1, algorithm="search", time_limit=5)
        assert below.fits is False and below.peak == optimum and below.optimal


def test_search_keeps_its_time_limit_on_an_open_instance():
    buffers = read_csv(DATA / "challenging" / f"D.{CAPACITY}.csv")
    result = plan(buffers, algorithm="search", time_limit=1.0)
    assert result.seconds < 2.5
    assert not result.optimal and result.lower_bound < result.peak
    assert result.peak < plan(buffers, algorithm="greedy_by_size").peak


def test_too_large_a_problem_keeps_the_greedy_plan(monkeypatch):
    from loom.memory.planner import search

    monkeypatch.setattr(search, "MAX_PAIRS", 0)
    buffers = [Buffer("a", 4, 0, 2), Buffer("b", 4, 1, 3), Buffer("c", 2, 2, 4)]
    result = plan(buffers, algorithm="search")
    assert result.algorithm in ("first_fit_by_size", "first_fit_by_conflicts")
    check(buffers, result)


# ------------------------------------------------------------------ the bottom-up placement


def _tiled(rng, height, span, count):
    """`count` buffers cut from a full `height` x `span` rectangle (bytes x time) by guillotine
    cuts: they pack exactly into `height` bytes, their lower bound."""
    boxes = [(height, 0, span)]
    while len(boxes) < count:
        at = max(range(len(boxes)), key=lambda k: _area(boxes[k]) * rng.random())
        size, start, end = boxes.pop(at)
        if rng.random() < 0.5 and size > 1:
            cut = rng.randint(1, size - 1)
            boxes += [(cut, start, end), (size - cut, start, end)]
        elif end - start > 1:
            cut = rng.randint(start + 1, end - 1)
            boxes += [(size, start, cut), (size, cut, end)]
        else:
            boxes.append((size, start, end))
    return [Buffer(f"t{k}", size, start, end) for k, (size, start, end) in enumerate(boxes)]


def _area(box):
    size, start, end = box
    return size * (end - start)


def test_bottom_up_reaches_the_bound_where_greedy_does_not():
    buffers = _tiled(random.Random(0), 64, 16, 30)
    assert lower_bound(buffers) == 64
    assert plan(buffers, algorithm="first_fit_by_size").peak == 90
    assert plan(buffers, algorithm="first_fit_by_conflicts").peak == 99
    result = plan(buffers, algorithm="bottom_up")
    assert result.peak == 64 and result.optimal and result.algorithm == "bottom_up"
    auto = plan(buffers, time_limit=1.0)
    assert auto.peak == 64 and auto.algorithm == "auto:bottom_up" and auto.seconds < 0.5


def test_bottom_up_on_tiled_instances_is_valid_and_often_exact():
    exact = {"greedy": 0, "bottom_up": 0}
    for seed in range(60):
        buffers = _tiled(random.Random(seed), 64, 16, 30)
        greedy = min(
            plan(buffers, algorithm=a).peak for a in ("first_fit_by_size", "first_fit_by_conflicts")
        )
        result = plan(buffers, algorithm="bottom_up")  # plan() checks it
        assert result.peak >= 64
        exact["greedy"] += greedy == 64
        exact["bottom_up"] += result.peak == 64
        assert plan(buffers, time_limit=1.0).peak <= min(greedy, result.peak)
    assert exact["bottom_up"] >= exact["greedy"] + 10, exact


def test_bottom_up_with_pinned_and_aligned_buffers():
    rng = random.Random(11)
    tried = 0
    while tried < 150:
        buffers = _random_buffers(rng, rng.randint(1, 8), pinned=True)
        if _pinned_collide(buffers):
            continue
        tried += 1
        result = plan(buffers, algorithm="bottom_up")  # plan() checks it
        assert result.peak >= lower_bound(buffers)


def test_auto_keeps_its_time_limit_on_a_large_problem():
    buffers = read_csv(DATA / "idealloc" / "iopddl" / "Y_1.csv")  # 62,185 buffers
    # unbounded, the greedy planners and the bottom-up placement take 8 s or more; the bounds
    # leave room for a loaded 2-core machine (2.51 s seen beside two busy test workers)
    result = plan(buffers, time_limit=1.0)
    assert result.seconds < 4.0, result.seconds  # the rest: reading columns, the check
    check(buffers, result)
    stacked = plan(buffers, time_limit=0.0)
    assert stacked.algorithm == "auto:stacked" and stacked.seconds < 3.0, stacked.seconds
    check(buffers, stacked)


@pytest.mark.parametrize(
    "name",
    [
        "iopddl/G_1",
        "somas_tensors/resnet50",
        "somas_tensors/pangu_2.6B",
        pytest.param("iopddl/S_1", marks=pytest.mark.slow),
        pytest.param("iopddl/Y_1", marks=pytest.mark.slow),
    ],
)
def test_idealloc_instances_within_one_percent_of_the_bound(name):
    buffers = read_csv(DATA / "idealloc" / f"{name}.csv")
    result = plan(buffers, time_limit=30)
    assert result.ratio <= 1.01 and result.seconds < 30
