"""A program's memory plan and what the planning pass reads and writes (docs/memory-planning.md).

The attributes plan_memory (loom/transform/plan_memory.py) reads — a model's tensors and
constants, as lower_graph records them on `main` — and writes — the library's arrays, which the
code generators emit, and the plan — and the plan itself: `MemoryPlan`, a `PoolPlan` per pool
with where each buffer went (`Placed`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from loom.memory.planner import Buffer as Block
from loom.memory.planner import Plan
from loom.memory.pool import Pool

TENSORS_ATTR = "model.tensors"
"""PrimFunc attribute: the buffers its body passes to calls without binding them (a model's
intermediate values); plan_memory places them in pools."""
CONSTANTS_ATTR = "model.constants"
"""PrimFunc attribute: (buffer, ConstantData) of each constant its body passes to calls."""
GLOBALS_ATTR = "globals"
"""IRModule attribute: the arrays of the library (GlobalArray), emitted by the code generators
and addressed by the intrinsic `global_address`."""
PLAN_ATTR = "memory.plan"
"""IRModule attribute: the MemoryPlan plan_memory made."""


@dataclasses.dataclass(frozen=True, eq=False)
class ConstantData:
    """The value of a constant buffer (compared by identity: it can be large)."""

    name: str
    array: np.ndarray

    def __repr__(self) -> str:
        return f"<constant {self.name}: {self.array.dtype}{list(self.array.shape)}>"


@dataclasses.dataclass(frozen=True, eq=False)
class GlobalArray:
    """An array the library holds: `nbytes` bytes aligned to `alignment`, with `data` (read-only
    constants) or zero-filled (data None)."""

    symbol: str
    nbytes: int
    alignment: int
    data: bytes | None = None

    def __repr__(self) -> str:
        what = "constant" if self.data is not None else "zero-filled"
        return f"<global {self.symbol}: {self.nbytes} bytes, {what}>"


@dataclasses.dataclass(frozen=True)
class Placed:
    """One planned buffer: where it came from and where it went."""

    function: str
    buffer: str
    pool: str
    offset: int
    size: int
    start: int
    end: int
    touched_by: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class PoolPlan:
    pool: Pool
    blocks: tuple[Block, ...]
    plan: Plan
    placed: tuple[Placed, ...]

    @property
    def size(self) -> int:
        """The bytes the pool needs: its planned peak (a fixed pool's whole size is its own)."""
        return self.plan.peak


@dataclasses.dataclass(frozen=True, eq=False)
class MemoryPlan:
    """The plan of every pool, in the pools' order."""

    pools: tuple[PoolPlan, ...]

    def __getitem__(self, name: str) -> PoolPlan:
        for p in self.pools:
            if p.pool.name == name:
                return p
        raise KeyError(f"no pool {name!r}; the pools are {[p.pool.name for p in self.pools]}")

    def where(self, buffer: str, function: str | None = None) -> Placed:
        """Where buffer `buffer` (of `function`) went."""
        for p in self.pools:
            for b in p.placed:
                if b.buffer == buffer and function in (None, b.function):
                    return b
        raise KeyError(f"no planned buffer {buffer!r}")

    def __repr__(self) -> str:
        return "<MemoryPlan " + ", ".join(f"{p.pool.name}: {p.size}" for p in self.pools) + ">"


def describe_pools(memory_plan: MemoryPlan) -> list[dict]:
    """Each pool as plain data (a compiled model's interface, `loom inspect`)."""
    return [
        {
            "name": p.pool.name,
            "kind": p.pool.kind,
            "placement": p.pool.placement,
            "scope": p.pool.scope,
            "accessible_from": list(p.pool.accessible_from),
            "alignment": p.pool.alignment,
            "capacity": p.pool.size,
            "size": max(p.size, 1),
            "peak": p.plan.peak,
            "lower_bound": p.plan.lower_bound,
            "algorithm": p.plan.algorithm,
            "optimal": p.plan.optimal,
            "buffers": len(p.placed),
        }
        for p in memory_plan.pools
    ]


__all__ = [
    "CONSTANTS_ATTR",
    "GLOBALS_ATTR",
    "PLAN_ATTR",
    "TENSORS_ATTR",
    "ConstantData",
    "GlobalArray",
    "MemoryPlan",
    "Placed",
    "PoolPlan",
    "describe_pools",
]
