"""The planner's C core (native/planner.c), built with the system compiler on first use into
loom's cache (loom.runtime.native_lib) and called through ctypes."""

from __future__ import annotations

import ctypes
import enum
import functools
import math
import pathlib
from collections.abc import Sequence

import numpy as np

from loom.errors import LoomError
from loom.memory.planner.buffer import Buffer
from loom.runtime.native_lib import build_library

_SOURCE = pathlib.Path(__file__).parent / "native" / "planner.c"
_I64 = np.ctypeslib.ndpointer(np.int64, flags="C_CONTIGUOUS")
_I32 = np.ctypeslib.ndpointer(np.int32, flags="C_CONTIGUOUS")


class Outcome(enum.IntEnum):
    """What loom_planner_decide answers (its enum in planner.c)."""

    NOT_FOUND = 0
    FOUND = 1
    ABORTED = 2
    TIMED_OUT = 3
    NO_MEMORY = 4


@functools.cache
def library() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(build_library("libloom_planner", [_SOURCE], ["-O2"])))
    n, i64 = ctypes.c_int, ctypes.c_int64
    seconds = ctypes.c_double
    lib.loom_planner_first_fit.argtypes = [n, _I64, _I64, _I64, _I64, _I64, _I32, _I64, seconds]
    lib.loom_planner_first_fit.restype = i64
    lib.loom_planner_tvm_greedy.argtypes = lib.loom_planner_first_fit.argtypes
    lib.loom_planner_tvm_greedy.restype = i64
    lib.loom_planner_bottom_up.argtypes = [n, _I64, _I64, _I64, _I64, _I64, _I64, _I64, seconds]
    lib.loom_planner_bottom_up.restype = i64
    lib.loom_planner_decide.argtypes = [
        *(n, _I64, _I64, _I64, _I64, _I64),
        i64,
        ctypes.c_double,
        ctypes.c_longlong,
        _I64,
        ctypes.POINTER(ctypes.c_longlong),
    ]
    lib.loom_planner_decide.restype = ctypes.c_int
    return lib


class Arrays:
    """A problem's columns as int64 arrays, in the order of `buffers` (pinned: -1 when free)."""

    def __init__(self, buffers: Sequence[Buffer]):
        self.n = len(buffers)
        self.size = np.array([b.size for b in buffers], dtype=np.int64)
        self.start = np.array([b.start for b in buffers], dtype=np.int64)
        self.end = np.array([b.end for b in buffers], dtype=np.int64)
        self.align = np.array([b.alignment for b in buffers], dtype=np.int64)
        self.pinned = np.array(
            [-1 if b.offset is None else b.offset for b in buffers], dtype=np.int64
        )

    def columns(self) -> tuple:
        return (self.n, self.size, self.start, self.end, self.align, self.pinned)


_NO_MEMORY, _TIMED_OUT = -1, -2  # what the placements return instead of a peak


def first_fit(arrays: Arrays, order: Sequence[int], seconds: float = math.inf) -> np.ndarray | None:
    """Offsets placing buffers in `order` (pinned ones first), each at its lowest fit; None
    when `seconds` run out first."""
    offsets = np.zeros(arrays.n, dtype=np.int64)
    order_array = np.ascontiguousarray(order, dtype=np.int32)
    peak = library().loom_planner_first_fit(
        *arrays.columns(), order_array, offsets, _seconds(seconds)
    )
    return _placed(peak, offsets, "first fit")


def tvm_greedy(
    arrays: Arrays, order: Sequence[int], seconds: float = math.inf
) -> np.ndarray | None:
    """Offsets placing buffers in `order` (pinned ones first) by TVM USMP's rule: each at the
    highest aligned end of the earlier buffers it meets in time, gaps below left unfilled
    (planner.c, loom_planner_tvm_greedy); None when `seconds` run out first."""
    offsets = np.zeros(arrays.n, dtype=np.int64)
    order_array = np.ascontiguousarray(order, dtype=np.int32)
    peak = library().loom_planner_tvm_greedy(
        *arrays.columns(), order_array, offsets, _seconds(seconds)
    )
    return _placed(peak, offsets, "TVM's greedy placement")


def bottom_up(arrays: Arrays, rank: np.ndarray, seconds: float = math.inf) -> np.ndarray | None:
    """Offsets placing the free buffers bottom-up: the one that can sit lowest next, the lower
    `rank` first among equals (planner.c, loom_planner_bottom_up); None when `seconds` run out
    first."""
    offsets = np.zeros(arrays.n, dtype=np.int64)
    rank = np.ascontiguousarray(rank, dtype=np.int64)
    peak = library().loom_planner_bottom_up(*arrays.columns(), rank, offsets, _seconds(seconds))
    return _placed(peak, offsets, "bottom-up placement")


def _seconds(seconds: float) -> float:
    """A time limit for C: at least 0, and finite (a year stands for no limit)."""
    return min(max(seconds, 0.0), 3.15e7)


def _placed(peak: int, offsets: np.ndarray, what: str) -> np.ndarray | None:
    if peak == _NO_MEMORY:
        raise LoomError(f"memory planner: out of memory in {what}")
    return None if peak == _TIMED_OUT else offsets


def decide(
    arrays: Arrays, capacity: int, seconds: float, node_limit: int = 0
) -> tuple[Outcome, np.ndarray, int]:
    """Whether the buffers fit in `capacity` bytes: the outcome, the offsets (valid when
    FOUND) and the nodes searched."""
    offsets = np.zeros(arrays.n, dtype=np.int64)
    nodes = ctypes.c_longlong(0)
    status = library().loom_planner_decide(
        *arrays.columns(), capacity, max(seconds, 0.0), node_limit, offsets, ctypes.byref(nodes)
    )
    outcome = Outcome(status)
    if outcome is Outcome.NO_MEMORY:
        raise LoomError("memory planner: out of memory in the search")
    return outcome, offsets, nodes.value
