"""The NPU's decoupled timing model, written in Python from docs/npu.md ("Cycle model"): the
tests' reference for the simulator's `cycles` and busy counters.

It is deliberately the plainest reading of the document: every earlier instruction's
footprint is kept (no pruning), and each instruction's ready time is the latest finish of the
conflicting ones in the other queues. `log` keeps every instruction's (name, start, finish).
"""

from __future__ import annotations

from dataclasses import dataclass

from loom.backend.npu import simulator as npu

LOAD, EXECUTE, STORE = 0, 1, 2
QUEUES = (LOAD, EXECUTE, STORE)


# -- each instruction's cost (its duration) ---------------------------------------------


def ceil_div(n: int, d: int) -> int:
    return -(-n // d)


def mvin_cycles(rows: int, cols: int, element_size: int, stride: int | None = None) -> int:
    """mvin's cost; with `stride` 0 (a broadcast) one DRAM row is read and written to every
    destination row, one per cycle after the first."""
    if stride == 0 and rows:
        return npu.LOAD_LATENCY + ceil_div(cols * element_size, npu.BANDWIDTH) + rows - 1
    return npu.LOAD_LATENCY + ceil_div(rows * cols * element_size, npu.BANDWIDTH)


def mvin_bytes(rows: int, cols: int, element_size: int, stride: int) -> int:
    """The DRAM bytes mvin reads: a broadcast (stride 0) reads its one row once."""
    return cols * element_size if stride == 0 and rows else rows * cols * element_size


def mvout_cycles(rows: int, cols: int) -> int:
    return npu.STORE_LATENCY + ceil_div(rows * cols, npu.BANDWIDTH)


def compute_cycles(a_rows: int) -> int:
    return a_rows + npu.DIM - 1 if a_rows else 0


# -- the queues ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rows:
    """Rows `first .. first + count - 1` of the scratchpad ("spad") or accumulator ("acc"),
    read ("r"), written ("w") or both ("rw")."""

    memory: str
    first: int
    count: int
    access: str


@dataclass(frozen=True)
class Dram:
    """DRAM bytes [lo, hi), read ("r") or written ("w")."""

    lo: int
    hi: int
    access: str


@dataclass(frozen=True)
class _Done:
    queue: int
    rows: tuple[Rows, ...]
    dram: Dram | None
    finish: int


def _overlap(a_lo: int, a_hi: int, b_lo: int, b_hi: int) -> bool:
    """Whether [a_lo, a_hi) and [b_lo, b_hi) share an element (an empty range shares none)."""
    return max(a_lo, b_lo) < min(a_hi, b_hi)


def _conflict(a: str, b: str) -> bool:
    return "w" in a or "w" in b


class Timing:
    def __init__(self) -> None:
        self.done: list[_Done] = []
        self.log: list[tuple[str, int, int]] = []
        self.queue_finish = {LOAD: 0, STORE: 0}
        self.preload_finish = 0
        self.stream_ends = [0, 0]  # stream ends of the computes C_{i-2} and C_{i-1}
        self.config_ex_finish = 0
        self.fence_time = 0
        self.latest = 0

    def ready(self, queue: int, rows: tuple[Rows, ...], dram: Dram | None) -> int:
        """The latest finish of the earlier instructions of other queues that conflict."""
        t = 0
        for d in self.done:
            if d.queue == queue:
                continue  # the queue's order alone suffices
            hit = any(
                r.memory == s.memory
                and _overlap(r.first, r.first + r.count, s.first, s.first + s.count)
                and _conflict(r.access, s.access)
                for r in rows
                for s in d.rows
            )
            if dram is not None and d.dram is not None:
                hit = hit or (
                    _overlap(dram.lo, dram.hi, d.dram.lo, d.dram.hi)
                    and _conflict(dram.access, d.dram.access)
                )
            if hit:
                t = max(t, d.finish)
        return t

    def _finish(self, name, queue, rows, dram, start, finish) -> int:
        self.done.append(_Done(queue, tuple(rows), dram, finish))
        self.log.append((name, start, finish))
        self.latest = max(self.latest, finish)
        return finish

    def transfer(self, name: str, queue: int, rows=(), dram: Dram | None = None, cost=1) -> int:
        """An instruction of the load or store queue."""
        start = max(self.ready(queue, tuple(rows), dram), self.queue_finish[queue], self.fence_time)
        self.queue_finish[queue] = start + cost
        return self._finish(name, queue, rows, dram, start, start + cost)

    def preload(self, rows=()) -> int:
        start = max(
            self.ready(EXECUTE, tuple(rows), None),
            self.preload_finish,
            self.stream_ends[0],  # C_{i-2} used the weight buffer this preload fills
            self.config_ex_finish,
            self.fence_time,
        )
        self.preload_finish = start + npu.DIM
        return self._finish("preload", EXECUTE, rows, None, start, start + npu.DIM)

    def compute(self, a_rows: int, rows=()) -> int:
        start = max(
            self.ready(EXECUTE, tuple(rows), None),
            self.preload_finish,
            self.stream_ends[1],
            self.config_ex_finish,
            self.fence_time,
        )
        stream_end = start + a_rows
        self.stream_ends = [self.stream_ends[1], stream_end]
        finish = stream_end + npu.DIM - 1 if a_rows else start
        return self._finish("compute", EXECUTE, rows, None, start, finish)

    def config_ex(self) -> int:
        start = max(
            self.preload_finish, self.stream_ends[1], self.config_ex_finish, self.fence_time
        )
        self.config_ex_finish = start + 1
        return self._finish("config_ex", EXECUTE, (), None, start, start + 1)

    def fence(self) -> int:
        self.fence_time = self.latest
        self.log.append(("fence", self.latest, self.latest))
        return self.latest


def dram_bytes(address: int, rows: int, row_bytes: int, stride: int, access: str) -> Dram | None:
    """The DRAM bytes of `rows` rows of `row_bytes`, `stride` apart (negative walks back)."""
    if rows == 0:
        return None
    last = (rows - 1) * stride
    return Dram(address + min(0, last), address + max(0, last) + row_bytes, access)
