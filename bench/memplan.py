"""Benchmark loom's static memory planner (loom.memory.planner) on the memory-planning
instances of bench/memplan_data (README.md there: where each comes from, and its licence):

- challenging/ A..K at capacity 1,048,576: lower bound, each algorithm's peak, peak/LB, whether
  it fits and its time, next to reference_results.csv (best known peak, greedy ratios of
  TFLite Micro, XLA and TVM, MiniMalloc's time); C minimized to its lower bound; with --long,
  D and J minimized for 60 s each against the best known peaks;
- challenging/ again: TVM USMP's greedy_by_size and greedy_by_conflicts (loom's faithful
  reproduction) against the ratios reference_results.csv measured for TVM;
- usmp/: TVM's multi-pool greedy planners on the two conflict-graph cases of TVM's unit tests,
  per-pool sizes next to the ones the tests expect (loom's own planners take lifetimes, not a
  conflict graph, so they do not apply there);
- idealloc/ (816 to 62,185 buffers): peak/LB and time of `auto` within 30 s, next to
  TVM's greedy_by_size and first_fit_by_size; the goal is peak <= 1.01 x LB within the 30 s
  ("ok" or "MISSED");
- small/: the optimum in the file name against the search's peak.

    .venv/bin/python bench/memplan.py [--data DIR] [--long] [--time-limit S]
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
sys.path.insert(0, str(pathlib.Path(__file__).parent.parent))

from common import print_table

from loom.memory.planner import lower_bound, plan, read_csv
from loom.memory.planner.usmp import ALGORITHMS as USMP_ALGORITHMS
from loom.memory.planner.usmp import pool_sizes, read_usmp_case, usmp_greedy

DATA = pathlib.Path(__file__).resolve().parent / "memplan_data"  # README.md there: sources
CAPACITY = 1048576
BEST_KNOWN = {"D": 1033216, "J": 1041408}
ALGORITHMS = ("first_fit_by_size", "first_fit_by_conflicts", "bottom_up", "search", "auto")
TVM_COLUMNS = {"greedy_by_size": "tvm_gbs_over_LB", "greedy_by_conflicts": "tvm_gbc_over_LB"}


def _reference(data: pathlib.Path) -> dict[str, dict[str, str]]:
    path = data / "reference_results.csv"
    if not path.exists():
        return {}
    with open(path, newline="") as f:
        return {row["instance"]: row for row in csv.DictReader(f)}


def challenging(data: pathlib.Path, time_limit: float) -> None:
    reference = _reference(data)
    rows = []
    for path in sorted((data / "challenging").glob("*.csv")):
        name = path.name.split(".")[0]
        buffers = read_csv(path)
        bound = lower_bound(buffers)
        ref = reference.get(name, {})
        row = [name, str(len(buffers)), str(bound)]
        for algorithm in ALGORITHMS:
            result = plan(buffers, capacity=CAPACITY, algorithm=algorithm, time_limit=time_limit)
            mark = "fits" if result.fits else "over"
            row.append(f"{result.peak / bound:.4f} {mark} {result.seconds:.3f}s")
        row += [
            ref.get("best_known_peak", "?"),
            ref.get("tflm_greedy_over_LB", "?"),
            ref.get("xla_best_over_LB", "?"),
            f"{ref.get('tvm_gbs_over_LB', '?')}/{ref.get('tvm_gbc_over_LB', '?')}",
            ref.get("ours_minimalloc_s_at_cap_median3", "?"),
        ]
        rows.append(row)
    print(f"challenging instances at capacity {CAPACITY}: peak/LB, fits?, seconds")
    headers = ["inst", "n", "LB", *ALGORITHMS, "best", "tflm", "xla", "tvm gbs/gbc", "MM s"]
    print_table(headers, rows)


def tvm_greedy(data: pathlib.Path) -> None:
    reference = _reference(data)
    rows = []
    for path in sorted((data / "challenging").glob("*.csv")):
        name = path.name.split(".")[0]
        buffers = read_csv(path)
        row = [name]
        for algorithm, column in TVM_COLUMNS.items():
            result = plan(buffers, algorithm=algorithm)
            expected = reference.get(name, {}).get(column)
            same = (
                "?"
                if expected is None
                else ("same" if f"{result.ratio:.4f}" == expected else "DIFF")
            )
            row += [f"{result.ratio:.4f}", expected or "?", same]
        rows.append(row)
    print("\nTVM USMP's greedy planners (peak/LB): loom's reproduction and reference_results.csv")
    headers = ["inst", "gbs", "gbs ref", "", "gbc", "gbc ref", ""]
    print_table(headers, rows)


def usmp(data: pathlib.Path) -> None:
    rows = []
    for path in sorted((data / "usmp").glob("*.json")):
        case = read_usmp_case(path)
        for algorithm in USMP_ALGORITHMS:
            sizes = pool_sizes(
                case.buffers, usmp_greedy(case.buffers, case.conflicts, case.pools, algorithm)
            )
            expected = case.expected[algorithm]
            for pool in case.pools:
                got, want = sizes.get(pool.name, 0), expected.get(pool.name)
                ok = "ok" if got == want else "MISSED"
                hint = "-" if pool.size_hint is None else str(pool.size_hint)
                rows.append([path.stem, algorithm, pool.name, hint, str(got), str(want), ok])
    print("\nusmp/ (TVM's multi-pool greedy on a conflict graph): bytes per pool vs TVM's tests")
    print_table(["case", "algorithm", "pool", "size hint", "loom", "TVM test", ""], rows)


def minimized(data: pathlib.Path, names: str, seconds: float) -> None:
    rows = []
    for name in names:
        buffers = read_csv(data / "challenging" / f"{name}.{CAPACITY}.csv")
        result = plan(buffers, algorithm="search", time_limit=seconds)
        best = BEST_KNOWN.get(name)
        rows.append(
            [
                name,
                str(result.lower_bound),
                str(result.peak),
                f"{result.ratio:.4f}",
                "yes" if result.optimal else "no",
                str(best) if best else "= LB",
                f"{result.peak - best:+d}" if best else "",
                f"{result.seconds:.2f}",
            ]
        )
    print(f"\nminimal peak by search (time limit {seconds:g} s)")
    headers = ["inst", "LB", "peak", "peak/LB", "proven", "best known", "vs best", "seconds"]
    print_table(headers, rows)


IDEALLOC_GOAL = 1.01  # peak / LB that `auto` must reach on each idealloc instance...
IDEALLOC_SECONDS = 30.0  # ...within this time


def idealloc(data: pathlib.Path, time_limit: float) -> None:
    rows = []
    for path in sorted((data / "idealloc").glob("*/*.csv")):
        started = time.perf_counter()
        buffers = read_csv(path)
        read = time.perf_counter() - started
        tvm = plan(buffers, algorithm="greedy_by_size")
        greedy = plan(buffers, algorithm="first_fit_by_size")
        result = plan(buffers, algorithm="auto", time_limit=time_limit)
        rows.append(
            [
                f"{path.parent.name}/{path.stem}",
                str(len(buffers)),
                str(result.lower_bound),
                f"{tvm.ratio:.4f}",
                f"{greedy.ratio:.4f}",
                f"{greedy.seconds:.2f}",
                f"{result.ratio:.4f}",
                result.algorithm,
                "yes" if result.optimal else "no",
                f"{result.seconds:.2f}",
                f"{read:.2f}",
                "ok"
                if result.ratio <= IDEALLOC_GOAL and result.seconds <= time_limit
                else "MISSED",
            ]
        )
    print(f"\nidealloc instances (auto, time limit {time_limit:g} s, goal {IDEALLOC_GOAL} x LB)")
    headers = [
        *("instance", "n", "LB", "tvm gbs/LB", "ff size/LB", "ff s", "auto/LB", "by", "proven"),
        *("s", "read s"),
        "goal",
    ]
    print_table(headers, rows)


def small(data: pathlib.Path) -> None:
    rows = []
    for path in sorted((data / "small").glob("*.csv")):
        buffers = read_csv(path)
        result = plan(buffers, algorithm="search", time_limit=10)
        optimum = int(path.name.split(".")[1])
        ok = "ok" if result.peak == optimum else "MISSED"
        rows.append([path.name, str(optimum), str(result.peak), str(result.optimal), ok])
    print("\nsmall instances (optimum in the file name)")
    print_table(["instance", "optimum", "peak", "proven", ""], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=pathlib.Path, default=DATA)
    parser.add_argument("--long", action="store_true", help="minimize D and J for 60 s each")
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per plan")
    args = parser.parse_args()
    challenging(args.data, args.time_limit)
    tvm_greedy(args.data)
    usmp(args.data)
    minimized(args.data, "C", args.time_limit)
    if args.long:
        minimized(args.data, "DJ", 60.0)
    idealloc(args.data, IDEALLOC_SECONDS)
    small(args.data)


if __name__ == "__main__":
    main()
