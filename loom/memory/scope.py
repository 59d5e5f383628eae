"""Memory scopes: where a buffer lives and how it is allocated (docs/architecture.md, decision 2).

A `MemoryScope` names its capacity, alignment, address space, which devices may read or write
it, and its allocation strategy:
- `Stack`: a stack-like buffer of the function (`local`, `shared`);
- `RuntimeAllocator(alloc, free)`: a pair of runtime symbols, called with (bytes, alignment)
  and (pointer), e.g. the host heap (`global`) or Hexagon's VTCM;
- `FixedAddress(base, size, unit_bits, address_space)`: a fixed address range of an
  accelerator's memory (a scratchpad); buffers are placed at offsets inside it at build time.
The pass `lower_memory_scopes` turns every allocation into what its scope says.
"""

from __future__ import annotations

import dataclasses

from loom.registry import Registry


@dataclasses.dataclass(frozen=True)
class Stack:
    """Allocated in the function's stack frame."""


@dataclasses.dataclass(frozen=True)
class RuntimeAllocator:
    """`alloc(bytes, alignment) -> pointer` (NULL on failure) and `free(pointer)`, symbols of a
    declared runtime library (loom.abi)."""

    alloc: str
    free: str


@dataclasses.dataclass(frozen=True)
class FixedAddress:
    """The address range [base, base + size) (in bytes) of an accelerator's memory, addressed
    in units of `unit_bits` bits, in the address space `address_space`."""

    base: int
    size: int
    unit_bits: int = 8
    address_space: str = "device"

    def __post_init__(self) -> None:
        if self.base < 0 or self.size <= 0:
            raise ValueError(
                f"FixedAddress needs base >= 0 and size > 0, got base={self.base}, size={self.size}"
            )
        if self.unit_bits <= 0 or self.unit_bits % 8:
            raise ValueError(
                f"FixedAddress unit_bits must be a positive multiple of 8, got {self.unit_bits}"
            )


Strategy = Stack | RuntimeAllocator | FixedAddress


@dataclasses.dataclass(frozen=True)
class MemoryScope:
    """A named memory: how buffers in it are allocated and who may access them.

    `capacity` (bytes, None: no static limit) bounds every allocation at build time;
    `accessible_from` lists the devices (a target's `device`: "cpu", "hexagon", ...) whose code
    may load and store buffers of this scope directly.
    """

    name: str
    strategy: Strategy
    alignment: int = 64
    capacity: int | None = None
    address_space: str = "host"
    accessible_from: tuple[str, ...] = ("cpu",)
    doc: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"memory scope name must be a non-empty str, got {self.name!r}")
        if not isinstance(self.strategy, Stack | RuntimeAllocator | FixedAddress):
            raise TypeError(
                f"scope {self.name}: strategy must be Stack, RuntimeAllocator or "
                f"FixedAddress, got {self.strategy!r}"
            )
        if self.alignment <= 0 or self.alignment & (self.alignment - 1):
            raise ValueError(
                f"scope {self.name}: alignment must be a power of two, got {self.alignment}"
            )
        object.__setattr__(self, "accessible_from", tuple(self.accessible_from))
        if isinstance(self.strategy, FixedAddress):
            cap = self.strategy.size if self.capacity is None else self.capacity
            if cap > self.strategy.size:
                raise ValueError(
                    f"scope {self.name}: capacity {cap} exceeds its address range "
                    f"of {self.strategy.size} bytes"
                )
            object.__setattr__(self, "capacity", cap)
            object.__setattr__(self, "address_space", self.strategy.address_space)

    def accessible(self, device: str) -> bool:
        return device in self.accessible_from


def _check(scope) -> None:
    if not isinstance(scope, MemoryScope):
        raise TypeError(f"register takes a MemoryScope, got {scope!r}")


SCOPES: Registry[MemoryScope] = Registry(
    "memory scope",
    check=_check,
    builtins=("loom.target",),  # the targets' memories
)
register = SCOPES.register
unregister = SCOPES.unregister
get = SCOPES.get
list_scopes = SCOPES.items


HOST_DEVICES = ("cpu", "hexagon", "npu")
"""The devices whose code runs with a stack and this memory: the CPU, Hexagon (its own), and the
reference NPU, whose kernels are control code (loops, padding) run by a core sharing host memory
while its array reads and writes that memory only through mvin/mvout."""

register(
    MemoryScope(
        "global",
        RuntimeAllocator("loom_alloc", "loom_free"),
        alignment=64,
        accessible_from=HOST_DEVICES,
        doc="the host heap (loom_alloc / loom_free of the host runtime)",
    )
)
register(
    MemoryScope(
        "local",
        Stack(),
        alignment=64,
        accessible_from=HOST_DEVICES,
        doc="the function's stack frame",
    )
)
register(
    MemoryScope(
        "shared",
        Stack(),
        alignment=64,
        accessible_from=HOST_DEVICES,
        doc="the function's stack frame (a name kept for TVM schedules)",
    )
)
