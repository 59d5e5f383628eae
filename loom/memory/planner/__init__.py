"""Static memory planning: an offset for each buffer so that buffers alive at the same time
never share a byte, within the least memory (the peak) or a given capacity.

    from loom.memory.planner import Buffer, plan
    p = plan([Buffer("a", 64, 0, 2), Buffer("b", 32, 1, 3, alignment=16)])
    p.offsets, p.peak, p.lower_bound, p.optimal

Algorithms: TVM USMP's greedy_by_size and greedy_by_conflicts (faithful baselines) and their
first-fit variants, which fill gaps (greedy.py); bottom_up, the exact search's canonical order
without backtracking (bottom_up.py), within 1 % of the lower bound on large real problems where
the first-fit planners are 3 % above it; and an exact search over canonical
packings (after MiniMalloc, Moffitt, ASPLOS 2023). All run in C (native/planner.c), built on
first use with the system compiler. `check` verifies any plan independently of them.
usmp.py reproduces TVM's multi-pool greedy planners on a conflict graph (TVM's unit tests).
"""

from loom.memory.planner.bounds import lower_bound
from loom.memory.planner.buffer import Buffer, Plan
from loom.memory.planner.checker import check
from loom.memory.planner.plan import ALGORITHMS, plan
from loom.memory.planner.reader import read_csv
from loom.memory.planner.search import DEFAULT_TIME_LIMIT

__all__ = [
    "ALGORITHMS",
    "DEFAULT_TIME_LIMIT",
    "Buffer",
    "Plan",
    "check",
    "lower_bound",
    "plan",
    "read_csv",
]
