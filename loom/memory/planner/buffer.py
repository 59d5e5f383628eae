"""The planner's input and output: buffers with lifetimes, and a plan of their offsets."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from loom.errors import LoomError


@dataclass(frozen=True)
class Buffer:
    """A block of `size` bytes alive during [start, end) (half-open), at an offset that is a
    multiple of `alignment`; `offset`, if given, pins it there."""

    name: str
    size: int
    start: int
    end: int
    alignment: int = 1
    offset: int | None = None

    def __post_init__(self) -> None:
        problem = _problem(self)
        if problem is not None:
            raise LoomError(f"buffer {self.name!r}: {problem}")

    def overlaps_in_time(self, other: Buffer) -> bool:
        return self.start < other.end and other.start < self.end


def _problem(buffer: Buffer) -> str | None:
    """What is wrong with a buffer's fields, or None."""
    for field in ("size", "start", "end", "alignment"):
        value = getattr(buffer, field)
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{field} must be an int, got {value!r}"
    if buffer.size < 0:
        return f"size must be >= 0, got {buffer.size}"
    if buffer.end <= buffer.start:
        return f"end ({buffer.end}) must be > start ({buffer.start})"
    if buffer.alignment < 1 or buffer.alignment & (buffer.alignment - 1):
        return f"alignment must be a power of two, got {buffer.alignment}"
    if buffer.offset is not None:
        if not isinstance(buffer.offset, int) or isinstance(buffer.offset, bool):
            return f"offset must be an int or None, got {buffer.offset!r}"
        if buffer.offset < 0:
            return f"pinned offset must be >= 0, got {buffer.offset}"
        if buffer.offset % buffer.alignment:
            return f"pinned offset {buffer.offset} is not aligned to {buffer.alignment}"
    return None


def validate(buffers: Iterable[Buffer]) -> tuple[Buffer, ...]:
    """The buffers as a tuple; a LoomError for anything that is not a Buffer or a repeated name."""
    result = tuple(buffers)
    seen: set[str] = set()
    for index, buffer in enumerate(result):
        if not isinstance(buffer, Buffer):
            raise LoomError(f"buffers[{index}] must be a Buffer, got {type(buffer).__name__}")
        if buffer.name in seen:
            raise LoomError(f"buffer {buffer.name!r}: duplicate name")
        seen.add(buffer.name)
    return result


@dataclass(frozen=True)
class Plan:
    """Where each buffer goes. `peak` is the pool size the plan needs, `lower_bound` the most
    bytes alive at once (no plan needs less); `optimal` says the peak is proven minimal, `fits`
    whether it is within the capacity asked for (None when none was)."""

    offsets: dict[str, int]
    peak: int
    lower_bound: int
    algorithm: str
    optimal: bool
    fits: bool | None
    seconds: float

    @property
    def ratio(self) -> float:
        """peak / lower bound (1.0 for an empty problem)."""
        return self.peak / self.lower_bound if self.lower_bound else 1.0


def peak_of(buffers: Sequence[Buffer], offsets: Sequence[int]) -> int:
    """The pool size a placement needs: the highest end of a buffer."""
    return max((o + b.size for b, o in zip(buffers, offsets)), default=0)
