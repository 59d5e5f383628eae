"""The base of every IR value: a frozen dataclass with structural equality and a cached hash.

IR values never change after construction; a pass builds new ones. `@node` turns a class into such
a dataclass. Fields marked `derived()` (like an expression's dtype) are computed in `__post_init__`
from the other fields and take no part in equality.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def derived(default: Any = None) -> Any:
    """A field computed from the others: not a constructor argument, not part of equality."""
    return dataclasses.field(default=default, init=False, compare=False, repr=False)


def node(cls):
    """Make `cls` a frozen dataclass whose hash is computed once."""
    cls = dataclasses.dataclass(frozen=True, repr=False)(cls)
    field_hash = cls.__hash__

    def __hash__(self) -> int:
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = field_hash(self)
            object.__setattr__(self, "_hash", cached)
        return cached

    cls.__hash__ = __hash__
    cls._child_fields = tuple(f.name for f in dataclasses.fields(cls) if f.compare)
    return cls


class Node:
    """Common base of expressions, statements, buffers and functions."""

    _child_fields: tuple[str, ...] = ()

    def _set(self, name: str, value: Any) -> None:
        """Set a derived field during `__post_init__` (the dataclass is frozen)."""
        object.__setattr__(self, name, value)

    def replace(self, **changes: Any):
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        from loom.ir.printer import to_text

        return to_text(self)

    __str__ = __repr__
