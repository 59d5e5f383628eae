"""Memory pools: where the buffers of a whole program go (docs/memory-planning.md).

A `Pool` is a region of memory that the planner (loom/transform/plan_memory.py) fills with
buffers at offsets, so that buffers alive at the same time never overlap. It says who may touch
it (`accessible_from`: devices, as a target's `device` or a kernel's backend: "cpu", "npu",
"hexagon") and how it exists at run time (`placement`):
- "caller": the application passes it in for every run (a buffer it owns; nothing is allocated
  inside the run): an argument of the model's `main` and a field of `<name>_pools` in C;
- "static": an array of the library itself (constants: read-only, embedded with their values;
  a workspace: zero-filled, shared by every call, so calls must not overlap);
- "fixed": the address range of a fixed-address memory scope (an accelerator's SRAM), named by
  `scope`; the buffers allocated in that scope are planned into it.

`kind="constant"` pools hold the program's constants (a model's weights); a workspace pool holds
its intermediate tensors. `Pin` asks for one buffer to go to a pool (and optionally an offset);
a pass at the phase "memory" adds pins with `pin(mod, ...)`.
"""

from __future__ import annotations

import dataclasses

from loom.errors import LoomError
from loom.memory.scope import FixedAddress

KINDS = ("workspace", "constant")
PLACEMENTS = ("caller", "static", "fixed")
POOLS_ATTR = "memory.pools"
"""IRModule attribute: the pools the program's buffers go to (loom.build(..., pools=))."""
PINS_ATTR = "memory.pins"
"""IRModule attribute: the pins passes asked for (`pin`)."""


@dataclasses.dataclass(frozen=True)
class Pool:
    """A memory pool. `size` in bytes (None: as large as the plan needs; a "fixed" pool defaults
    to its scope's capacity); `alignment` of every buffer in it, in bytes; `placement` defaults
    to "fixed" when `scope` is given, else "static" for constants and "caller" for a
    workspace."""

    name: str
    size: int | None = None
    accessible_from: tuple[str, ...] = ("cpu",)
    alignment: int = 64
    kind: str = "workspace"
    placement: str | None = None
    scope: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"Pool name must be a C identifier, got {self.name!r}")
        if self.kind not in KINDS:
            raise ValueError(f"pool {self.name}: kind must be one of {KINDS}, got {self.kind!r}")
        if isinstance(self.accessible_from, str):
            object.__setattr__(self, "accessible_from", (self.accessible_from,))
        devices = tuple(self.accessible_from)
        if not devices or not all(isinstance(d, str) and d for d in devices):
            raise ValueError(
                f"pool {self.name}: accessible_from must name at least one device (as 'cpu', "
                f"'npu'), got {self.accessible_from!r}"
            )
        object.__setattr__(self, "accessible_from", devices)
        if self.size is not None and (not _is_int(self.size) or self.size <= 0):
            raise ValueError(f"pool {self.name}: size must be a positive int, got {self.size!r}")
        a = self.alignment
        if not _is_int(a) or a < 1 or a & (a - 1):
            raise ValueError(f"pool {self.name}: alignment must be a power of two, got {a!r}")
        placement = self.placement
        if placement is None:
            placement = "fixed" if self.scope else "static" if self.kind == "constant" else "caller"
            object.__setattr__(self, "placement", placement)
        if placement not in PLACEMENTS:
            raise ValueError(
                f"pool {self.name}: placement must be one of {PLACEMENTS}, got {placement!r}"
            )
        if (placement == "fixed") != (self.scope is not None):
            raise ValueError(
                f"pool {self.name}: a fixed pool names its fixed-address memory scope "
                "(scope=...), and only a fixed pool does"
            )
        if self.kind == "constant" and placement != "static":
            raise ValueError(
                f"pool {self.name}: a constant pool is embedded in the library "
                f"(placement 'static'), got {placement!r}"
            )

    def check_scope(self, scope) -> None:
        """A fixed pool's scope must be a fixed-address one at least as large as the pool."""
        strategy = scope.strategy
        if not isinstance(strategy, FixedAddress):
            raise LoomError(
                f"pool {self.name}: scope {scope.name} is not a fixed-address memory scope"
            )
        if self.size is not None and self.size > strategy.size:
            raise LoomError(
                f"pool {self.name} has {self.size} bytes but its scope {scope.name} only "
                f"{strategy.size}"
            )

    def accessible(self, device: str) -> bool:
        return device in self.accessible_from


@dataclasses.dataclass(frozen=True)
class Pin:
    """Buffer `buffer` of function `function` (a model's tensor is a buffer of `main`) goes to
    pool `pool`, at byte `offset` if given."""

    function: str
    buffer: str
    pool: str
    offset: int | None = None

    def __post_init__(self) -> None:
        for field in ("function", "buffer", "pool"):
            if not isinstance(getattr(self, field), str):
                raise TypeError(f"Pin {field} must be a str, got {getattr(self, field)!r}")
        if self.offset is not None and (not _is_int(self.offset) or self.offset < 0):
            raise ValueError(f"Pin offset must be an int >= 0 or None, got {self.offset!r}")


def pin(mod, function: str, buffer: str, pool: str, offset: int | None = None):
    """`mod` with buffer `buffer` of `function` pinned to `pool` (at `offset`): for a pass at
    the phase "memory" (PassContext config "tir.add_lower_pass", or a backend's passes).
    plan_memory respects the pin or fails the build saying why."""
    return mod.with_attr(PINS_ATTR, (*mod.attr(PINS_ATTR, ()), Pin(function, buffer, pool, offset)))


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_pools(pools) -> tuple[Pool, ...]:
    """`pools` as a tuple of Pools with distinct names; a clear error for anything else."""
    if isinstance(pools, Pool):
        pools = (pools,)
    try:
        result = tuple(pools)
    except TypeError:
        raise TypeError(f"pools must be a sequence of loom.memory.Pool, got {pools!r}") from None
    names: set[str] = set()
    for k, p in enumerate(result):
        if not isinstance(p, Pool):
            raise TypeError(f"pools[{k}] must be a loom.memory.Pool, got {type(p).__name__}")
        if p.name in names:
            raise ValueError(f"pools: two pools are named {p.name!r}")
        names.add(p.name)
    return result


__all__ = ["KINDS", "PINS_ATTR", "PLACEMENTS", "POOLS_ATTR", "Pin", "Pool", "check_pools", "pin"]
